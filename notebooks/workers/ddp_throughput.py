"""Throughput of one training step: 1 process with T threads, or N DDP processes.

Run: ``python ddp_throughput.py --threads 1 2 --out single.json`` (no launcher: one process,
timed with each thread count), then
``torchrun --standalone --nproc-per-node=2 ddp_throughput.py --out ddp.json`` (DDP, one
thread per process).  Under torchrun it also measures the gradient all-reduce: the ring
model fitted on other buffer sizes predicts it, then it is timed, and the DDP step is
timed under ``no_sync`` (no all-reduce): the difference is the communication time DDP could
not hide behind the backward pass.  The baseline is measured the same way: rank 0 times the
plain model on its own per-rank batch, under torchrun, while the other ranks wait
(``solo_step_s``).  The three steps are timed in interleaved rounds (``times_s``).
Finally it times a deeper model's DDP step with different
gradient buckets (``bucket_cap_mb`` tiny / default / one bucket, and
``gradient_as_bucket_view=True``), interleaved, and records the bucket sizes DDP built.
"""

import argparse
import statistics
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import accelkit as ak


def build_model(width: int, hidden: int = 1) -> nn.Sequential:
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Linear(64, width), nn.ReLU()]
    for _ in range(hidden):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


#: DDP variants of the bucket experiment: name -> DDP keyword arguments.
BUCKETS = {"tiny (0.1 MB)": {"bucket_cap_mb": 0.1}, "default (25 MB)": {},
           "one bucket": {"bucket_cap_mb": 1000},
           "default + gradient_as_bucket_view": {"gradient_as_bucket_view": True}}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=256, help="global batch per step")
    ap.add_argument("--threads", type=int, nargs="+", default=[1], help="single process only")
    ap.add_argument("--number", type=int, default=3, help="steps per timed block")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bucket-width", type=int, default=512, help="bucket experiment's width")
    ap.add_argument("--bucket-hidden", type=int, default=4, help="its hidden layers")
    ap.add_argument("--bucket-repeats", type=int, default=8, help="its interleaved rounds")
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

    def timed(fn: Callable[[], None], threads: int) -> list[float]:
        torch.set_num_threads(threads)
        return list(ak.comm.time_collective(fn, number=args.number, repeats=args.repeats,
                                            warmup=2).times_s)

    result = {"world_size": world, "global_batch": args.batch, "width": args.width}
    if not info.launched:
        step_times = {t: timed(train_step, t) for t in args.threads}
        step_s = {t: statistics.median(v) for t, v in step_times.items()}
        result["samples_per_s"] = {str(t): args.batch / s for t, s in step_s.items()}
        result["times_s"] = {str(t): v for t, v in step_times.items()}
        ak.dist.save_json(result, args.out)
        for t, s in step_s.items():
            print(f"1 process x {t} thread(s): {args.batch / s:,.0f} samples/s", flush=True)
        return

    threads = torch.get_num_threads()

    def local_step() -> None:
        with model.no_sync():  # the same step without the gradient all-reduce
            nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    times = interleaved({"step": train_step, "no_sync": local_step,
                         "solo": solo_step(args, x, y, info)}, args)
    med = {k: statistics.median(v) for k, v in times.items()}
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    cost = ak.comm.allreduce_vs_model(grad_bytes)  # 9 interleaved blocks per size
    result.update({
        "threads_per_process": threads, "samples_per_s": args.batch / med["step"],
        "step_s": med["step"], "step_no_sync_s": med["no_sync"], "solo_step_s": med["solo"],
        "times_s": times, "grad_bytes": grad_bytes, **cost,
        "buckets": bucket_experiment(args, x, y),
    })
    ak.dist.save_json(result, args.out)
    ak.dist.print0(f"{world} processes x {threads} thread(s): {args.batch / med['step']:,.0f} "
                   f"samples/s; all-reduce of {grad_bytes / 1e6:.2f} MB: predicted "
                   f"{cost['allreduce_predicted_s'] * 1e3:.2f} ms, measured "
                   f"{cost['allreduce_measured_s'] * 1e3:.2f} ms")


def interleaved(steps: dict[str, Callable[[], None]], args: argparse.Namespace) -> dict:
    """Seconds per call of each step, ``args.repeats`` rounds with every step once in turn.

    Neighbouring blocks share the machine's state (another process busy, a clock change), so
    per-round ratios cancel the drift that separate medians keep.
    """
    times: dict[str, list[float]] = {name: [] for name in steps}
    for r in range(args.repeats):
        for name, fn in steps.items():
            t = ak.comm.time_collective(fn, number=args.number, repeats=1,
                                        warmup=2 if r == 0 else 0)
            times[name] += t.times_s
    return times


def solo_step(args: argparse.Namespace, x: torch.Tensor, y: torch.Tensor,
              info: ak.dist.RankInfo) -> Callable[[], None]:
    """The plain model's step on this rank's batch, computed by rank 0 alone.

    The baseline measured the way the ranks run: same script, launcher, thread count and
    per-rank batch; the other ranks do nothing and wait in the timer's collective meanwhile.
    """
    plain = build_model(args.width).to(info.device)
    opt = torch.optim.SGD(plain.parameters(), lr=1e-3)

    def step() -> None:
        if info.rank == 0:
            nn.functional.cross_entropy(plain(x), y).backward()
            opt.step()
            opt.zero_grad()
    return step


# region buckets
def bucket_experiment(args: argparse.Namespace, x: torch.Tensor, y: torch.Tensor) -> dict:
    """Time one DDP step per bucket variant, the variants interleaved, and describe buckets."""
    models = {name: DDP(build_model(args.bucket_width, args.bucket_hidden), **kw)
              for name, kw in BUCKETS.items()}
    opts = {name: torch.optim.SGD(m.parameters(), lr=1e-3) for name, m in models.items()}

    def step(name: str) -> None:
        nn.functional.cross_entropy(models[name](x), y).backward()  # buckets all-reduce here
        opts[name].step()
        opts[name].zero_grad(set_to_none=False)  # keep .grad (a view, with bucket views)

    times: dict[str, list[float]] = {name: [] for name in models}
    for r in range(args.bucket_repeats):  # round r: every variant once, in turn
        for name in models:
            t = ak.comm.time_collective(lambda n=name: step(n), number=args.number,
                                        repeats=1, warmup=3 if r == 0 else 0)
            times[name] += t.times_s
    out = {}
    for name, m in models.items():
        buckets = [b.buffer() for b in m.reducer._get_zeros_like_grad_buckets()]
        storages = {p.grad.untyped_storage().data_ptr(): p.grad.untyped_storage().nbytes()
                    for p in m.parameters()}
        out[name] = {"times_s": times[name], "bucket_bytes": [b.numel() * b.element_size()
                                                              for b in buckets],
                     "grad_storages": len(storages), "grad_storage_bytes": sum(storages.values())}
    return out
# endregion


if __name__ == "__main__":
    main()
