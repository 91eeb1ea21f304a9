"""The distributed recipe blog posts print, run under torchrun: its mistakes, measured.

As posted (do not copy)::

    dist.init_process_group("nccl", rank=rank, world_size=world_size)  # module level
    model = Net()                                         # never wrapped in DDP
    loader = DataLoader(ds, batch_size=32, shuffle=True)  # no DistributedSampler

Started without a launcher it fails before anything runs (``rank`` is undefined; with
numbers typed in, ``MASTER_ADDR`` is missing): notebook 04 shows those two errors in place.
Run here as ``torchrun --standalone --nproc-per-node=2 blog_recipe.py --out r.json``, with
rank and world size read from torchrun, it tries the posted backend and records the error
a CPU gives ("nccl" needs GPUs), then trains the posted way (gloo, the model not wrapped,
no sampler) and measures what that costs: the replicas drift apart (each rank took its own
steps: nothing averaged them), and every rank trains on the whole dataset.
"""

import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import accelkit as ak


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)  # argv: None = the command line
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])  # from torchrun
    nccl_error = try_nccl(rank, world_size)
    with ak.dist.session("gloo") as info:  # the backend this machine has (gloo on a CPU)
        save(train_as_posted(args.samples, info), nccl_error, info, args.out)


def try_nccl(rank: int, world_size: int) -> str:
    """The posted backend: "" where it works (GPUs), else the error it raises."""
    if torch.cuda.is_available():
        return ""
    try:  # fails before any connection is made: a CPU build has no NCCL
        dist.init_process_group("nccl", rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=10))
    except (RuntimeError, ValueError) as err:
        return f"{type(err).__name__}: {err}"
    dist.destroy_process_group()
    return ""


# region posted
def train_as_posted(n: int, info: ak.dist.RankInfo) -> dict:
    ds = TensorDataset(torch.randn(n, 8, generator=torch.Generator().manual_seed(0)),
                       torch.arange(n))                   # the label is the sample's index
    model = nn.Linear(8, 2)                               # WRONG: never wrapped in DDP
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(ds, batch_size=32, shuffle=True)  # WRONG: no DistributedSampler
    seen = []
    for x, idx in loader:
        nn.functional.cross_entropy(model(x), idx % 2).backward()
        opt.step()
        opt.zero_grad()
        seen += idx.tolist()
    # endregion
    return {"model": model, "seen": seen, "n": n}


def save(res: dict, nccl_error: str, info: ak.dist.RankInfo, out: str) -> None:
    seen = [None] * info.world_size
    dist.all_gather_object(seen, res["seen"])
    drift = ak.dist.replica_max_abs_diff(res["model"])   # 0.0 only if every step was averaged
    common = set(seen[0]).intersection(*map(set, seen[1:]))
    ak.dist.save_json({"world_size": info.world_size, "nccl_error": nccl_error,
                       "dataset": res["n"], "samples_per_rank": [len(s) for s in seen],
                       "seen_by_every_rank": len(common), "replica_max_abs_diff": drift}, out)
    ak.dist.print0(f"replicas differ by {drift:.3f}; each rank trained on "
                   f"{[len(s) for s in seen]} samples of {res['n']}, {len(common)} seen by every rank")


if __name__ == "__main__":
    main()
