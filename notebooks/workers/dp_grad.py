"""Data parallel from scratch: split one batch over the ranks, average the gradients.

Run: ``torchrun --standalone --nproc-per-node=2 dp_grad.py --out dp.json``
(notebook 01 starts it with ``ak.launch.torchrun``).

Every rank builds the same model (same seed) and takes its slice of one global batch.  Each
computes the gradient of the mean loss over its slice; an all-reduce (sum) divided by the
number of ranks gives the mean gradient, which must equal the full-batch gradient.  Then it
measures what that all-reduce costs on this machine and compares it with the ring model:
the latency fitted on small buffers, the bandwidth on large ones, and predictions for sizes
the fit did not see (held out), the gradient's among them.  With ``--tp-out PATH`` the same
ranks then run ``tensor_parallel.py``'s check and write its JSON there; with ``--fsdp-out PATH``
they first run ``fsdp_vs_ddp.py --width W --steps 3 --peak`` (one launch, three results: each
launch costs seconds of process start-up).
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn

import accelkit as ak

SMALL_BYTES = [1 << 10, 1 << 12, 1 << 14]       # 1, 4, 16 KiB: the latency is fitted here
LARGE_BYTES = [1 << 22, 1 << 24]                # 4, 16 MiB: the bandwidth is fitted here
HELD_OUT_BYTES = [1 << 16, 1 << 18, 1 << 25]    # 64 KiB, 256 KiB, 32 MiB (+ the gradient): tests


def build_model(width: int) -> nn.Module:
    torch.manual_seed(0)  # the same initial weights on every rank
    return nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, 10))


def flat_grad(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256, help="global batch size")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tp-out", help="then run tensor_parallel.py's check, its JSON here")
    ap.add_argument("--fsdp-out", help="then run fsdp_vs_ddp.py (this width, --peak), its JSON here")
    args = ap.parse_args()
    with ak.dist.session() as info:  # the group is torn down even when run() raises
        if args.fsdp_out:  # first, in processes that have run nothing else: its peak-memory
            import fsdp_vs_ddp  # readings must not meet what the other checks left behind
            fsdp_vs_ddp.run(fsdp_vs_ddp.parse_args(["--width", str(args.width), "--steps", "3",
                                                    "--peak", "--out", args.fsdp_out]), info)
        run(args, info)
        if args.tp_out:  # this script's folder is on sys.path under torchrun
            import tensor_parallel
            tensor_parallel.run(tensor_parallel.parse_args(["--out", args.tp_out]), info)


def run(args: argparse.Namespace, info: ak.dist.RankInfo) -> None:
    rank, world = info.rank, info.world_size
    if args.batch % world:
        raise ValueError(f"--batch {args.batch} must be divisible by the {world} ranks")

    # region dp_step
    d = ak.models.digits()
    x = torch.from_numpy(d.x_train[: args.batch].reshape(args.batch, -1))  # (B, 64)
    y = torch.from_numpy(d.y_train[: args.batch])                          # (B,)
    x, y = x.to(info.device), y.to(info.device)
    x_local, y_local = x.chunk(world)[rank], y.chunk(world)[rank]           # (B/N, 64)

    model = build_model(args.width).to(info.device)
    nn.functional.cross_entropy(model(x_local), y_local).backward()
    grad = flat_grad(model)            # this rank's gradient, (P,)
    dist.all_reduce(grad)              # sum over ranks, in place
    grad /= world                      # mean of the N local means = full-batch mean
    # endregion

    full = build_model(args.width).to(info.device)  # reference: the whole batch at once
    nn.functional.cross_entropy(full(x), y).backward()
    err = (grad - flat_grad(full)).abs().max().reshape(1)
    dist.all_reduce(err, op=dist.ReduceOp.MAX)

    # Cost of that all-reduce: time buffers of many sizes (interleaved), fit the latency on
    # the small ones and the bandwidth on the large ones, predict the rest (held out).
    grad_bytes = grad.numel() * grad.element_size()
    held_out = sorted({*HELD_OUT_BYTES, grad_bytes})
    t = ak.comm.measure_allreduce(SMALL_BYTES + LARGE_BYTES + held_out)
    fit_sizes = SMALL_BYTES + LARGE_BYTES
    medians = [t[s].median_s for s in fit_sizes]
    fit = ak.comm.fit_two_regime(fit_sizes, medians, world,
                                small_max_bytes=max(SMALL_BYTES),
                                large_min_bytes=min(LARGE_BYTES))
    one_lat, one_bus = ak.comm.fit_allreduce(fit_sizes, medians, world)  # one line through all
    cost = {"latency_s": fit.latency_s, "bus_gbps": fit.bus_gbps,
            "sizes_bytes": fit_sizes, "sizes_median_s": medians,
            "small_bytes": SMALL_BYTES, "large_bytes": LARGE_BYTES,
            "single_fit": {"latency_s": one_lat, "bus_gbps": one_bus},
            "held_out": [{"bytes": s, "times_s": list(t[s].times_s),
                          "predicted_s": fit.predict_s(s)} for s in held_out],
            "allreduce_predicted_s": fit.predict_s(grad_bytes),
            "allreduce_measured_s": t[grad_bytes].median_s,
            "allreduce_times_s": list(t[grad_bytes].times_s)}
    ak.dist.save_json({
        "world_size": world, "backend": info.backend, "global_batch": args.batch,
        "n_params": grad.numel(), "grad_bytes": grad_bytes, "grad_max_abs_err": err.item(),
        **cost,
    }, args.out)
    ak.dist.print0(f"grad error {err.item():.2e}; all-reduce of {grad_bytes / 1e6:.2f} MB: "
                   f"predicted {cost['allreduce_predicted_s'] * 1e3:.2f} ms, "
                   f"measured {cost['allreduce_measured_s'] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
