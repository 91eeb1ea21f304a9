"""Tensor parallel: one MLP block split over the ranks, column- then row-parallel.

Run: ``torchrun --standalone --nproc-per-node=2 tensor_parallel.py --out tp.json`` (notebook 01
runs :func:`run` in ``dp_grad.py``'s launch: ``dp_grad.py --tp-out tp.json``).

The first Linear is split by output columns (``ColwiseParallel``: each rank computes its
slice of the hidden units, no communication), the second by input rows (``RowwiseParallel``:
each rank multiplies its slice and an all-reduce sums the partial outputs) -- the Megatron-LM
MLP (Shoeybi et al. 2019).  The output and the gradients must equal the unsplit layer's.
"""

import argparse
import copy

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import accelkit as ak


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", required=True)
    return ap.parse_args(argv)


def main() -> None:
    args = parse_args()
    with ak.dist.session() as info:  # the group is torn down even when run() raises
        out_err, grad_err, shards = run(args, info)
        ak.dist.print0(f"TP output error {out_err:.2e}, gradient error {grad_err:.2e}; "
                       f"local shapes {shards}")


def run(args: argparse.Namespace, info: ak.dist.RankInfo) -> tuple[float, float, dict]:
    """Check the split block against the unsplit one, write the JSON to ``args.out`` and return
    (max |output error|, max |gradient error|, each parameter's local shard shape)."""
    torch.manual_seed(0)  # same weights and inputs on every rank
    ref = nn.Sequential(nn.Linear(args.dim, args.hidden), nn.ReLU(),
                        nn.Linear(args.hidden, args.dim)).to(info.device)
    x = torch.randn(args.batch, args.dim).to(info.device)                # (B, D)

    # region tp
    mesh = init_device_mesh(info.device.type, (info.world_size,))
    tp = parallelize_module(copy.deepcopy(ref), mesh,
                            {"0": ColwiseParallel(), "2": RowwiseParallel()})
    y_tp = tp(x)                       # (B, D), replicated on every rank
    # endregion
    y_ref = ref(x)
    out_err = (y_tp - y_ref).abs().max().item()

    y_tp.square().mean().backward()
    y_ref.square().mean().backward()
    grad_err = max((p.grad.full_tensor() - q.grad).abs().max().item()      # DTensor -> full
                   for p, q in zip(tp.parameters(), ref.parameters()))
    shards = {name: list(p.to_local().shape) for name, p in tp.named_parameters()}
    mem = ak.memory.measured(tp)
    ak.dist.save_json({
        "world_size": info.world_size, "out_max_abs_err": out_err, "grad_max_abs_err": grad_err,
        "local_shapes": shards, "full_shapes": {n: list(p.shape) for n, p in ref.named_parameters()},
        "params_bytes_per_rank": mem["params_bytes"],
        "params_bytes_full": sum(p.numel() * p.element_size() for p in ref.parameters()),
    }, args.out)
    return out_err, grad_err, shards


if __name__ == "__main__":
    main()
