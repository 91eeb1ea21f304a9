"""Throughput of one training step: 1 process with T threads, or N DDP processes.

Run: ``python ddp_throughput.py --threads 1 2 --out single.json`` (no launcher: one process,
timed with each thread count), then
``torchrun --standalone --nproc-per-node=2 ddp_throughput.py --out ddp.json`` (DDP, one
thread per process).  Under torchrun it also measures the gradient all-reduce: the ring
model fitted on other buffer sizes predicts it, then it is timed, and the DDP step is
timed once more under ``no_sync`` (no all-reduce): the difference is the communication
time DDP could not hide behind the backward pass.
"""

import argparse
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import accelkit as ak


def build_model(width: int) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, 10))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=256, help="global batch per step")
    ap.add_argument("--threads", type=int, nargs="+", default=[1], help="single process only")
    ap.add_argument("--number", type=int, default=3, help="steps per timed block")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)  # argv: None = the command line
    with ak.dist.session() as info:  # the group is torn down even when run() raises
        run(args, info)


def run(args: argparse.Namespace, info: ak.dist.RankInfo) -> None:
    world = info.world_size
    if args.batch % world:
        raise ValueError(f"--batch {args.batch} must be divisible by {world} ranks")
    torch.manual_seed(1 + info.rank)
    x = torch.randn(args.batch // world, 64, device=info.device)          # (B/N, 64)
    y = torch.randint(0, 10, (args.batch // world,), device=info.device)   # (B/N,)
    model = build_model(args.width).to(info.device)
    if info.launched:
        model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def train_step() -> None:
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    def timed(fn: Callable[[], None], threads: int) -> float:
        torch.set_num_threads(threads)
        return ak.dist.time_collective(fn, number=args.number, repeats=args.repeats,
                                       warmup=2).median_s

    result = {"world_size": world, "global_batch": args.batch, "width": args.width}
    if not info.launched:
        step_s = {t: timed(train_step, t) for t in args.threads}
        result["samples_per_s"] = {str(t): args.batch / s for t, s in step_s.items()}
        ak.dist.save_json(result, args.out)
        for t, s in step_s.items():
            print(f"1 process x {t} thread(s): {args.batch / s:,.0f} samples/s", flush=True)
        return

    threads = torch.get_num_threads()
    step_s = timed(train_step, threads)

    def local_step() -> None:
        with model.no_sync():  # the same step without the gradient all-reduce
            nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    local_s = timed(local_step, threads)
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    cost = ak.dist.allreduce_vs_model(grad_bytes)  # 9 interleaved blocks per size
    result.update({
        "threads_per_process": threads, "samples_per_s": args.batch / step_s,
        "step_s": step_s, "step_no_sync_s": local_s, "grad_bytes": grad_bytes, **cost,
    })
    ak.dist.save_json(result, args.out)
    ak.dist.print0(f"{world} processes x {threads} thread(s): {args.batch / step_s:,.0f} "
                   f"samples/s; all-reduce of {grad_bytes / 1e6:.2f} MB: predicted "
                   f"{cost['allreduce_predicted_s'] * 1e3:.2f} ms, measured "
                   f"{cost['allreduce_measured_s'] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
