"""Uneven inputs: ranks that run different numbers of steps hang DDP; three ways to fix it.

Run: ``torchrun --standalone --nproc-per-node=2 uneven_inputs.py --split by_hand`` (hangs
until the collective timeout), then ``... --split sampler drop_last join --out r.json``.

The dataset has ``N * batch * steps + 1`` samples for N ranks: one too many to split evenly.

* ``by_hand``: rank r takes samples r, r+N, ...: rank 0 gets one sample more, so one batch
  more.  In that extra step its backward waits in DDP's gradient all-reduce for a rank that
  has already left the loop and waits in the final barrier: neither call can complete.
* ``sampler``: ``DistributedSampler`` pads the dataset (repeating a few samples) to a
  multiple of N: every rank runs the same number of batches.
* ``drop_last``: ``DistributedSampler(drop_last=True)`` drops the tail instead.
* ``join``: the by-hand split inside ``torch.distributed.algorithms.Join([model])``: a rank
  that runs out of data keeps answering the others' all-reduces (with zeros) until all are
  done, so no sample is dropped or repeated.
"""

import argparse
from contextlib import nullcontext

import torch
from torch import nn
from torch.distributed.algorithms import Join
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import accelkit as ak

SPLITS = ("by_hand", "sampler", "drop_last", "join")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", nargs="+", choices=SPLITS, default=["by_hand"])
    ap.add_argument("--batch", type=int, default=16, help="samples per rank and step")
    ap.add_argument("--steps", type=int, default=4, help="even steps per rank")
    ap.add_argument("--out", default=None)
    ap.add_argument("--blog-out", help="first run blog_recipe.py (its own group), its JSON here")
    args = ap.parse_args(argv)  # argv: None = the command line
    if args.blog_out:  # one launch, two results: each launch costs seconds of start-up
        import blog_recipe  # this script's folder is on sys.path under torchrun
        blog_recipe.main(["--out", args.blog_out])
    with ak.dist.session() as info:  # its teardown barrier is where an early rank waits
        results: dict = {"world_size": info.world_size}
        for split in args.split:
            results[split] = train(split, args, info)
            if args.out:  # after each split: a later one that hangs keeps what came before
                ak.dist.save_json(results, args.out)


# region train
def train(split: str, args: argparse.Namespace, info: ak.dist.RankInfo) -> dict:
    n = info.world_size * args.batch * args.steps + 1           # one sample too many
    torch.manual_seed(0)
    ds = TensorDataset(torch.randn(n, 8), torch.randint(0, 2, (n,)))
    if split in ("by_hand", "join"):                            # every N-th sample
        loader = DataLoader(Subset(ds, range(info.rank, n, info.world_size)), args.batch)
    else:                                                       # pads, or drops the tail
        sampler = DistributedSampler(ds, shuffle=False, drop_last=split == "drop_last")
        loader = DataLoader(ds, args.batch, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = seen = 0
    with Join([model]) if split == "join" else nullcontext():     # join: shadow the others
        for x, y in loader:
            nn.functional.cross_entropy(model(x), y).backward()  # DDP all-reduces here
            opt.step()
            opt.zero_grad()
            steps, seen = steps + 1, seen + len(x)
    # endregion
    if split == "by_hand":
        return {}  # rank 0 never gets here; rank 1 goes on, to the teardown barrier
    counts = [None] * info.world_size
    torch.distributed.all_gather_object(counts, {"steps": steps, "samples": seen})
    diff = ak.dist.replica_max_abs_diff(model)
    ak.dist.print0(f"{split}: steps per rank {[c['steps'] for c in counts]}, samples per rank "
                   f"{[c['samples'] for c in counts]} of {n}; replicas differ by {diff:.1e}")
    return {"dataset": n, "steps": [c["steps"] for c in counts],
            "samples": [c["samples"] for c in counts], "replica_max_abs_diff": diff}


if __name__ == "__main__":
    main()
