"""Pipeline parallel: consecutive layers on different ranks, a batch cut into micro-batches.

Run: ``torchrun --standalone --nproc-per-node=2 pipeline_parallel.py --out pp.json``.

Rank r holds stage r (a slice of the layers) as a ``PipelineStage``; ``ScheduleGPipe`` runs
all micro-batches forward through the stages, then all backward (GPipe, Huang et al. 2019),
sending activations and their gradients between neighbours.  Loss and gradients must
equal the unsplit model's.  Then the step is timed for several micro-batch counts m: with
p stages, a stage idles for (p-1) of the (m+p-1) slots, the bubble.  Last, the same step
under ``Schedule1F1B`` (one forward, one backward: each micro-batch's backward starts as
soon as it can), checked against the unsplit model too, with GPipe's and 1F1B's idle
fraction, step time and the most micro-batches a stage held activations for at once.

Across torch versions: torch 2.9's single-stage schedules refuse m < p (a ValueError; later
versions keep that rule for 1F1B only), so the sweep lists such m under ``"refused"`` with the
reason; and torch 2.9's first-step handshake aborts under gloo, which
:func:`match_handshake_dtypes` works around.
"""

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.distributed import pipelining
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

import accelkit as ak


class _Mark(torch.autograd.Function):
    """Identity whose backward notes when the backward pass reaches the stage's output."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, clock: "BusyClock") -> torch.Tensor:
        ctx.clock = clock
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        ctx.clock.start = ctx.clock.now()
        return grad, None


class BusyClock:
    """Add up the seconds a stage spends computing (forward and backward) in its module."""

    def __init__(self, module: nn.Module, device: torch.device) -> None:
        self.device = device
        self.busy_s, self.start = 0.0, 0.0
        self.segments: list[tuple[str, float, float]] = []  # (F/B, start, end), perf_counter
        module.register_forward_pre_hook(self._begin)
        module.register_forward_hook(self._end_forward)
        # The first layer's weight gradient is the last thing its backward computes.
        next(module.parameters()).register_post_accumulate_grad_hook(self._end_backward)

    def now(self) -> float:
        """The time once the device has finished its queued work (GPUs run asynchronously)."""
        ak.device.synchronize(self.device)
        return time.perf_counter()

    def _begin(self, *_: object) -> None:
        self.start = self.now()

    def _end_forward(self, _mod: nn.Module, _inp: object, out: torch.Tensor) -> torch.Tensor:
        self._add("F")
        return _Mark.apply(out, self)

    def _end_backward(self, _param: torch.Tensor) -> None:
        self._add("B")

    def _add(self, kind: str) -> None:
        end = self.now()
        self.busy_s += end - self.start
        self.segments.append((kind, self.start, end))


def build_model(dim: int, layers: int) -> nn.Sequential:
    torch.manual_seed(0)  # the same full model on every rank
    blocks = []
    for _ in range(layers):
        blocks += [nn.Linear(dim, dim), nn.Tanh()]
    return nn.Sequential(*blocks)


def stage_slice(model: nn.Sequential, rank: int, world: int) -> nn.Sequential:
    per = len(model) // world
    return model[rank * per:(rank + 1) * per]  # shares the parameters with `model`


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4, help="Linear+Tanh blocks, all stages")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--microbatches", type=int, default=4, help="m for the equality check")
    ap.add_argument("--sweep", type=int, nargs="+", default=[1, 2, 4, 8], help="m values timed")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=10,
                    help="interleaved GPipe/1F1B steps timed (>= 6 for a 95%% interval)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.microbatches not in args.sweep:
        raise ValueError(f"--microbatches {args.microbatches} must be one of --sweep {args.sweep}")
    match_handshake_dtypes()  # torch 2.9's handshake aborts under gloo; see the docstring
    with ak.dist.session() as info:  # the group is torn down even when run() raises
        run(args, info)


def match_handshake_dtypes() -> None:
    """Make a pipeline stage's first-step handshake send and receive one dtype, where it does not.

    From torch 2.9.0 (pytorch/pytorch#160210) a schedule's first step exchanges a dummy tensor
    with each neighbouring stage, to set up the P2P communicators: it sends
    ``torch.tensor(stage_index)`` (int64, 8 bytes) into ``torch.zeros(1)`` (float32, 4 bytes).
    NCCL does not check the size; gloo aborts the process ("op.preamble.length <= op.nbytes.
    8 vs 4 ... collective mismatch").  PyTorch fixed it by sending float32 (pytorch/pytorch#165539,
    issue #165143); torch 2.9.x on CPU (Colab's TPU runtime) still has it.

    No public API reaches the handshake, so this wraps the private
    ``_get_init_p2p_neighbors_ops``, and the wrapper changes nothing unless a send and a receive
    of the handshake disagree in dtype (so on a fixed torch it is a no-op); where the private
    method is gone (a later torch), nothing is wrapped.  The handshake's values are never read.
    """
    base = pipelining.stage._PipelineStageBase
    original = getattr(base, "_get_init_p2p_neighbors_ops", None)
    if original is None or getattr(original, "_accelkit_matched", False):
        return

    def matched(self: Any) -> list:
        ops = original(self)
        if len({op.tensor.dtype for op in ops}) > 1:  # torch 2.9: int64 sent, float32 received
            for op in ops:
                op.tensor = op.tensor.to(torch.float32).reshape(1)
        return ops

    matched._accelkit_matched = True  # type: ignore[attr-defined]
    base._get_init_p2p_neighbors_ops = matched


MakeSchedule = Callable[..., tuple[nn.Module, Any]]
Step = Callable[..., torch.Tensor | None]


def run(args: argparse.Namespace, info: ak.dist.RankInfo) -> None:
    rank, p = info.rank, info.world_size
    loss_fn = nn.MSELoss()  # mean over a micro-batch; GPipe averages over micro-batches
    torch.manual_seed(1)
    x = torch.randn(args.batch, args.dim).to(info.device)                  # (B, D)
    target = torch.randn(args.batch, args.dim).to(info.device)             # (B, D)

    def make_schedule(m: int, kind: type = ScheduleGPipe) -> tuple[nn.Module, Any]:
        # region pp
        module = stage_slice(build_model(args.dim, args.layers), rank, p).to(info.device)
        stage = PipelineStage(module, stage_index=rank, num_stages=p, device=info.device)
        schedule = kind(stage, n_microbatches=m, loss_fn=loss_fn)  # ScheduleGPipe or Schedule1F1B
        # endregion
        return module, schedule

    # region pp_step
    def step(schedule: Any, losses: list | None = None) -> torch.Tensor | None:
        inputs = (x,) if rank == 0 else ()                   # the first stage feeds the input
        if rank == p - 1:                                    # the last one computes the loss
            return schedule.step(*inputs, target=target, losses=losses)
        return schedule.step(*inputs)
    # endregion

    max_err = check_against_unsplit(args, info, make_schedule, step, x, target, loss_fn)
    sweep, timeline, refused = bubble_sweep(args, info, make_schedule, step)
    schedules = compare_schedules(args, info, make_schedule, step, x, target, loss_fn)
    ak.dist.save_json({"world_size": p, "max_abs_err": max_err, "sweep": sweep, "refused": refused,
                       "microbatches": args.microbatches, "timeline": timeline,
                       "schedules": schedules, "torch": torch.__version__}, args.out)


def check_against_unsplit(args: argparse.Namespace, info: ak.dist.RankInfo,
                          make_schedule: MakeSchedule, step: Step, x: torch.Tensor,
                          target: torch.Tensor, loss_fn: nn.Module,
                          kind: type = ScheduleGPipe) -> float:
    """Largest difference, over all stages, of output, loss and gradients from the unsplit model."""
    rank, p = info.rank, info.world_size
    module, schedule = make_schedule(args.microbatches, kind)
    losses: list = []
    out = step(schedule, losses)
    full = build_model(args.dim, args.layers).to(info.device)  # reference, unsplit
    y_ref = full(x)
    loss_ref = loss_fn(y_ref, target)
    loss_ref.backward()
    mine = stage_slice(full, rank, p)
    err = max((a.grad - b.grad).abs().max().item()
              for a, b in zip(module.parameters(), mine.parameters()))
    if rank == p - 1:
        err = max(err, (out - y_ref).abs().max().item(),
                  abs(torch.stack(losses).mean().item() - loss_ref.item()))
    errs = torch.tensor([err], device=info.device)
    torch.distributed.all_reduce(errs, op=torch.distributed.ReduceOp.MAX)
    return errs.item()


def bubble_sweep(args: argparse.Namespace, info: ak.dist.RankInfo,
                 make_schedule: MakeSchedule, step: Step) -> tuple[list[dict], list, list[dict]]:
    """Idle fraction per m in ``args.sweep``, every stage's timeline at ``args.microbatches``,
    and the m values this torch refused (``{"m", "reason"}``).

    Measured as GPipe defines the bubble: the idle share of the *schedule's span*, from the
    common start (every rank leaves a barrier together) to the end of the last computation on
    any stage; a stage idles for the span minus its own compute (forward and backward hooks).
    Averaged over the stages.  (Each rank's own wall clock would end its span at its own last
    computation and undercount the last stage's wait.)
    """
    p = info.world_size
    sweep, gathered, refused = [], [None] * p, []
    for m in args.sweep:
        try:
            module, schedule = make_schedule(m)
        except ValueError as exc:  # torch 2.9 refuses m < p in every single-stage schedule
            if m >= p:
                raise
            refused.append({"m": m, "reason": str(exc)})
            ak.dist.print0(f"m={m}: refused by torch {torch.__version__}: {exc}")
            continue
        clock = BusyClock(module, info.device)
        idle, _, _, segments = time_steps(info, clock, schedule, step, args.repeats)
        if m == args.microbatches:  # keep the last step's timeline, times relative to its start
            torch.distributed.all_gather_object(gathered, segments)
        sweep.append({"m": m, "predicted": ak.comm.bubble_fraction(p, m),
                      "measured": statistics.median(idle), "runs": idle})
        ak.dist.print0(f"m={m}: bubble predicted {sweep[-1]['predicted']:.2f}, "
                       f"measured {sweep[-1]['measured']:.2f}")
    return sweep, gathered, refused

def time_steps(info: ak.dist.RankInfo, clock: BusyClock, schedule: Any, step: Step,
               repeats: int, warmup: int = 1) -> tuple[list[float], list[float], int, list]:
    """Time ``repeats`` steps (after ``warmup`` untimed ones) of ``schedule`` on every rank.

    Returns, per step, the idle fraction (mean over the stages) and the span in seconds; the
    most micro-batches this stage held activations for (forwards done less backwards done);
    and the last step's timeline, times relative to its start.
    """
    p = info.world_size
    idle, spans, held = [], [], 0
    for i in range(repeats + warmup):     # the first `warmup` steps are not kept
        ak.dist.barrier()
        clock.busy_s, clock.segments = 0.0, []
        t0 = clock.now()
        step(schedule, [])
        span = torch.tensor([max(b for _, _, b in clock.segments) - t0], device=info.device)
        torch.distributed.all_reduce(span, op=torch.distributed.ReduceOp.MAX)  # last stage's end
        busy = torch.tensor([clock.busy_s], device=info.device)
        torch.distributed.all_reduce(busy)     # compute of all stages together
        if i >= warmup:
            idle.append(1 - busy.item() / (p * span.item()))  # mean over the stages
            spans.append(span.item())
    now = 0
    for kind, _, _ in sorted(clock.segments, key=lambda seg: seg[1]):
        now += 1 if kind == "F" else -1
        held = max(held, now)
    timeline = [(k, a - t0, b - t0) for k, a, b in clock.segments] + [("end", span.item(),
                                                                        span.item())]
    return idle, spans, held, timeline


def compare_schedules(args: argparse.Namespace, info: ak.dist.RankInfo,
                      make_schedule: MakeSchedule, step: Step, x: torch.Tensor,
                      target: torch.Tensor, loss_fn: nn.Module) -> dict[str, dict]:
    """GPipe against 1F1B at ``m = args.microbatches``, the same steps interleaved.

    Per schedule: the error against the unsplit model, each step's idle fraction and span
    (seconds), every stage's most micro-batches held at once, and one step's timeline.
    Steps alternate between the two schedules so that a busy machine slows both alike.
    """
    p = info.world_size
    out: dict[str, dict] = {}
    built = {}
    for name, kind in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
        err = check_against_unsplit(args, info, make_schedule, step, x, target, loss_fn, kind)
        module, schedule = make_schedule(args.microbatches, kind)
        built[name] = (BusyClock(module, info.device), schedule)
        out[name] = {"max_abs_err": err, "idle": [], "span_s": [], "held": [0] * p, "timeline": []}
    for r in range(args.pairs):
        for name, (clock, schedule) in built.items():
            idle, spans, held, timeline = time_steps(info, clock, schedule, step, 1,
                                                     warmup=1 if r == 0 else 0)
            out[name]["idle"] += idle
            out[name]["span_s"] += spans
            peaks: list = [None] * p
            torch.distributed.all_gather_object(peaks, held)
            out[name]["held"] = [max(a, b) for a, b in zip(out[name]["held"], peaks)]
            gathered: list = [None] * p
            torch.distributed.all_gather_object(gathered, timeline)
            out[name]["timeline"] = gathered
    for name, r in out.items():
        ak.dist.print0(f"{name}: idle {statistics.median(r['idle']):.2f}, step "
                       f"{statistics.median(r['span_s']) * 1e3:.1f} ms, micro-batches held "
                       f"per stage {r['held']}")
    return out


if __name__ == "__main__":
    main()
