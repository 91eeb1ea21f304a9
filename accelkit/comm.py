"""Parallelism cost models and collective timing: the ring all-reduce, GPipe's bubble.

**Ring all-reduce.**  ``S`` bytes over ``N`` ranks cost ``T = latency + 2 (N-1)/N * S / B``
(Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
JPDC 2009), with ``B`` the "bus bandwidth" of the NCCL tests (``busBw = algBw * 2(N-1)/N``,
their PERFORMANCE.md): one number that describes a link for any ``N``.  The latency grows
with N: a ring all-reduce is ``2 (N-1)`` steps (N-1 of reduce-scatter, N-1 of all-gather),
each sending one message that pays its start-up cost ``α`` (Hockney's α-β model, Parallel
Computing 1994), so a latency fitted on N ranks says ``α = latency / (2 (N-1))`` per step.
Holding the fitted latency fixed while N changes underestimates large rings by a factor up
to ``(N'-1)/(N-1)``; :func:`ring_latency_s` and :meth:`RingFit.at` scale it.

**GPipe** (Huang et al., "GPipe: Efficient Training of Giant Neural Networks using Pipeline
Parallelism", NeurIPS 2019, section 2.3) runs every micro-batch forward through all ``p``
stages, then every one backward.  Each stage works ``m`` of the ``m + p - 1`` slots of each
phase, so it idles the *bubble* ``(p - 1) / (m + p - 1)`` of the step (the fraction is the
same for any ratio of forward to backward time).  1F1B (PipeDream-Flush: Narayanan et al.,
ICML 2021; ``torch.distributed.pipelining.Schedule1F1B``) keeps the bubble but starts each
backward as soon as it can, so stage ``s`` holds the activations of at most ``p - s``
micro-batches instead of all ``m``.

The models are pure arithmetic (no torch, no process group: safe in a notebook).  The
timing functions (:func:`time_collective`, :func:`measure_allreduce`,
:func:`allreduce_vs_model`) are collectives: call them on every rank, after
:func:`accelkit.dist.setup`; they never import IPython or matplotlib (they run in workers).
Elsewhere: rank, backend and process groups in :mod:`accelkit.dist`; single-process timing
in :mod:`accelkit.bench`; the memory each strategy needs in :mod:`accelkit.memory`; drawing
the pipeline in :mod:`accelkit.explore`; running one in ``notebooks/workers/pipeline_parallel.py``.

Typical worker::

    with ak.dist.session():
        cost = ak.comm.allreduce_vs_model(grad_bytes)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from accelkit import dist
from accelkit.bench import Timing

# ----------------------------------------------------------------------------- ring model


def ring_allreduce_s(nbytes: float, world_size: int, bus_gbps: float,
                     latency_s: float = 0.0) -> float:
    """Predict the time of a ring all-reduce: ``latency_s + 2 (N-1)/N * nbytes / bus``.

    In a ring each rank sends and receives ``(N-1)/N`` of the buffer twice (reduce-scatter,
    then all-gather; Patarasuk & Yuan 2009).  ``latency_s`` is the fixed cost of one call on
    these ``world_size`` ranks (for another N scale it with :func:`ring_latency_s`).

    Args:
        nbytes: buffer size, bytes, >= 0.
        world_size: ranks N, >= 1 (N = 1 costs nothing).
        bus_gbps: bus bandwidth, GB/s (10**9 bytes/s), > 0.
        latency_s: fixed cost per call, seconds, >= 0.

    Returns:
        Predicted seconds per all-reduce.

    Raises:
        ValueError: for negative sizes, ``world_size < 1`` or ``bus_gbps <= 0``.
    """
    if nbytes < 0 or latency_s < 0:
        raise ValueError(f"nbytes and latency_s must be >= 0, got {nbytes}, {latency_s}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not bus_gbps > 0:
        raise ValueError(f"bus_gbps must be > 0, got {bus_gbps}")
    if world_size == 1:
        return 0.0
    return latency_s + 2 * (world_size - 1) / world_size * nbytes / (bus_gbps * 1e9)


def fit_allreduce(sizes_bytes: Sequence[float], seconds: Sequence[float],
                  world_size: int) -> tuple[float, float]:
    """Fit :func:`ring_allreduce_s` to measured times by least squares.

    ``t = latency + x / bandwidth`` with ``x = 2 (N-1)/N * size`` (Hockney's α-β model
    applied to the ring).  The largest buffers decide the slope: that is the regime of
    gradient all-reduces (megabytes), and the fitted latency is then the offset of that
    regime, not the time of an empty message (see :func:`fit_two_regime`).

    Args:
        sizes_bytes: buffer sizes, bytes (at least two different ones).
        seconds: measured seconds per all-reduce, one per size, each > 0.
        world_size: ranks N, >= 2.

    Returns:
        ``(latency_s, bus_gbps)``; the latency is clipped at 0.

    Raises:
        ValueError: for mismatched lengths, fewer than two sizes, ``world_size < 2``, or
            times that do not grow with size (no bandwidth to fit).
    """
    if len(sizes_bytes) != len(seconds) or len(set(sizes_bytes)) < 2:
        raise ValueError("need one time per size and at least two different sizes")
    if world_size < 2:
        raise ValueError("fitting needs world_size >= 2")
    if any(not t > 0 for t in seconds):
        raise ValueError("every time must be > 0 seconds")
    f = 2 * (world_size - 1) / world_size
    xs = [f * s for s in sizes_bytes]
    mx, my = sum(xs) / len(xs), sum(seconds) / len(seconds)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, seconds)) / sxx
    if not slope > 0:
        raise ValueError("the times do not grow with the size; measure larger buffers")
    return max(0.0, my - slope * mx), 1.0 / slope / 1e9


def ring_latency_s(step_latency_s: float, world_size: int) -> float:
    """Return the fixed cost of one ring all-reduce over ``world_size`` ranks: ``2 (N-1) α``.

    Pass the result as ``latency_s`` to :func:`ring_allreduce_s`.

    Args:
        step_latency_s: α, the start-up cost of one step's message, seconds, >= 0.
        world_size: ranks N, >= 1 (one rank sends nothing: 0 s).

    Returns:
        Seconds of latency per all-reduce.

    Raises:
        ValueError: for ``step_latency_s < 0`` or ``world_size < 1``.

    Example: ``ring_latency_s(5e-6, 8)  # 14 steps: 70 µs``
    """
    if step_latency_s < 0:
        raise ValueError(f"step_latency_s must be >= 0, got {step_latency_s}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    return 2 * (world_size - 1) * step_latency_s


@dataclass(frozen=True)
class RingFit:
    """A fitted ring model ``T(S) = latency + 2 (N-1)/N * S / B``, and what follows from it.

    Attributes:
        latency_s: fixed cost per all-reduce, seconds.
        bus_gbps: bus bandwidth B, GB/s.
        world_size: ranks N, >= 2.
    """

    latency_s: float
    bus_gbps: float
    world_size: int

    def predict_s(self, nbytes: float) -> float:
        """Predicted seconds per all-reduce of ``nbytes`` (:func:`ring_allreduce_s`)."""
        return ring_allreduce_s(nbytes, self.world_size, self.bus_gbps, self.latency_s)

    @property
    def crossover_bytes(self) -> float:
        """The size at which the bandwidth term equals the latency,
        ``S* = latency * B / (2 (N-1)/N)`` bytes: below it the fixed cost dominates."""
        return self.latency_s * self.bus_gbps * 1e9 / (2 * (self.world_size - 1) / self.world_size)

    def time_ratio(self, nbytes: float, scale: float = 0.5) -> float:
        """``T(scale * nbytes) / T(nbytes)``: e.g. what halving the bytes does to the time."""
        return self.predict_s(scale * nbytes) / self.predict_s(nbytes)

    @property
    def step_latency_s(self) -> float:
        """α per ring step, seconds: the fitted latency over the ``2 (N-1)`` steps of a call."""
        return self.latency_s / (2 * (self.world_size - 1))

    def at(self, world_size: int) -> RingFit:
        """Return this fit on another number of ranks: the same α per step and the same B
        (per link: the NCCL tests' busBw), the latency ``2 (N'-1) α`` (:func:`ring_latency_s`).

        Raises:
            ValueError: for ``world_size < 2``.

        Example: ``RingFit(1e-3, 1.0, 2).at(8).latency_s  # 7e-3: 14 steps of 0.5 ms``
        """
        if world_size < 2:
            raise ValueError(f"world_size must be >= 2, got {world_size}")
        return RingFit(ring_latency_s(self.step_latency_s, world_size), self.bus_gbps, world_size)


def fit_two_regime(sizes_bytes: Sequence[float], seconds: Sequence[float], world_size: int,
                   *, small_max_bytes: float, large_min_bytes: float) -> RingFit:
    """Fit the latency on small buffers and the bandwidth on large ones.

    One least-squares line (:func:`fit_allreduce`) lets the large buffers set the intercept
    too, and a transport's large-message offset (chunking, a protocol switch) is not the cost
    of a small message.  Here B is the least-squares slope over the sizes
    ``>= large_min_bytes``, and the latency the median over the sizes ``<= small_max_bytes``
    of ``t - 2 (N-1)/N * S / B``, clipped at 0.  Sizes in between are not used: keep some
    there to test the fit on.

    Args:
        sizes_bytes: buffer sizes, bytes.
        seconds: measured seconds per all-reduce, one per size (e.g. medians), each > 0.
        world_size: ranks N, >= 2.
        small_max_bytes: largest size used for the latency (at least one size at or below).
        large_min_bytes: smallest size used for the bandwidth (at least two different sizes
            at or above), > ``small_max_bytes``.

    Returns:
        A :class:`RingFit`.

    Raises:
        ValueError: for mismatched lengths, too few sizes in a regime, overlapping
            regimes, and as :func:`fit_allreduce`.

    Example: ``fit_two_regime(sizes, medians, 2, small_max_bytes=16384, large_min_bytes=4 << 20)``
    """
    if len(sizes_bytes) != len(seconds):
        raise ValueError("need one time per size")
    if not large_min_bytes > small_max_bytes:
        raise ValueError(f"large_min_bytes ({large_min_bytes}) must exceed small_max_bytes "
                         f"({small_max_bytes})")
    small = [(s, t) for s, t in zip(sizes_bytes, seconds) if s <= small_max_bytes]
    large = [(s, t) for s, t in zip(sizes_bytes, seconds) if s >= large_min_bytes]
    if not small:
        raise ValueError(f"no size <= {small_max_bytes} bytes to fit the latency on")
    _, bus = fit_allreduce([s for s, _ in large], [t for _, t in large], world_size)
    f = 2 * (world_size - 1) / world_size
    rest = sorted(t - f * s / (bus * 1e9) for s, t in small)
    mid = len(rest) // 2
    latency = rest[mid] if len(rest) % 2 else (rest[mid - 1] + rest[mid]) / 2
    return RingFit(max(0.0, latency), bus, world_size)


# ----------------------------------------------------------------------------- timing collectives
#: Buffer sizes the workers fit the ring model on: 4 KiB .. 16 MiB, bytes.
FIT_SIZES_BYTES: tuple[int, ...] = tuple(4**k for k in (6, 8, 10, 11, 12))


def time_collective(fn: Callable[[], Any], *, number: int = 10, repeats: int = 5,
                    warmup: int = 3, label: str = "", nbytes: float | None = None) -> Timing:
    """Time a collective (or any step that must run in lockstep) on every rank.

    ``ak.bench.measure`` chooses its repeat count adaptively, which a collective cannot
    allow (ranks picking different counts deadlock).  Here every rank runs exactly
    ``warmup + number * repeats`` calls (``torch.utils.benchmark.Timer.timeit(number)`` per
    block, after a barrier), and each block's time is the slowest rank's (a collective ends
    when its last rank does).

    Args:
        fn: the call to time, e.g. ``lambda: dist.all_reduce(buf)``.
        number: calls per timed block, >= 1.
        repeats: timed blocks, >= 1.
        warmup: untimed calls first, >= 0.
        label: a name for tables.
        nbytes: bytes per call (for ``Timing.gbps``).

    Returns:
        A :class:`accelkit.bench.Timing` with seconds per call, identical on every rank.

    Raises:
        ValueError: for ``number < 1``, ``repeats < 1`` or ``warmup < 0``.
    """
    import torch
    import torch.distributed as td
    from torch.utils.benchmark import Timer

    if number < 1 or repeats < 1 or warmup < 0:
        raise ValueError(f"need number >= 1, repeats >= 1, warmup >= 0; got {number}, "
                         f"{repeats}, {warmup}")
    for _ in range(warmup):
        fn()
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    times = []
    for _ in range(repeats):
        dist.barrier()
        times.append(timer.timeit(number).mean)
    t = torch.tensor(times, dtype=torch.float64)
    if dist.has_group():
        t = t.to(dist.comm_device())
        td.all_reduce(t, op=td.ReduceOp.MAX)
    return Timing(label or "collective", tuple(t.cpu().tolist()), bytes_moved=nbytes,
                  threads=torch.get_num_threads(), device=str(dist.device_for()))


def measure_allreduce(sizes_bytes: Sequence[int], *, repeats: int = 9, max_number: int = 20,
                      block_bytes: float = 32e6, warmup: int = 2) -> dict[int, Timing]:
    """Time ``all_reduce`` (sum, float32) of buffers of several sizes, interleaved.

    Each repeat times one block per size, in turn, so a slow moment of a shared machine
    hits all sizes alike (a ratio or a fit across sizes stays fair).  Calls per block:
    ``min(max_number, block_bytes / size)``, at least 1, the same on every rank.

    Args:
        sizes_bytes: buffer sizes, bytes, each >= 4 (one float32).
        repeats: timed blocks per size, >= 1.
        max_number: most calls per block, >= 1.
        block_bytes: bytes all-reduced per block, roughly, > 0.
        warmup: untimed calls per size first.

    Returns:
        ``{size: Timing}`` (seconds per all-reduce, the slowest rank's).

    Raises:
        ValueError: for a size < 4 bytes, ``repeats < 1``, ``max_number < 1`` or
            ``block_bytes <= 0``.
        RuntimeError: without a process group (run under torchrun, after
            :func:`accelkit.dist.setup`).
    """
    import torch
    import torch.distributed as td

    if any(s < 4 for s in sizes_bytes) or repeats < 1 or max_number < 1 or block_bytes <= 0:
        raise ValueError("need sizes >= 4 bytes, repeats >= 1, max_number >= 1, block_bytes > 0")
    if not dist.has_group():
        raise RuntimeError("measure_allreduce needs a process group: run the script under "
                           "torchrun and call ak.dist.setup() first")
    dev = dist.comm_device()
    bufs = {s: torch.ones(s // 4, device=dev) for s in sizes_bytes}
    times: dict[int, list[float]] = {s: [] for s in sizes_bytes}
    for _ in range(repeats):
        for s, buf in bufs.items():
            number = max(1, min(max_number, int(block_bytes // s)))
            t = time_collective(partial(td.all_reduce, buf), number=number, repeats=1,
                                warmup=warmup if not times[s] else 0)
            times[s].extend(t.times_s)
    return {s: Timing(f"all_reduce {s} B", tuple(v), bytes_moved=s, device=str(dev))
            for s, v in times.items()}


def allreduce_vs_model(nbytes: int,
                       sizes_bytes: Sequence[int] = FIT_SIZES_BYTES) -> dict[str, Any]:
    """Measure all-reduces, fit the ring model on ``sizes_bytes``, predict ``nbytes``, compare.

    The sequence of notebooks 01 and 04: :func:`measure_allreduce` of ``sizes_bytes`` and
    ``nbytes`` together (interleaved, 9 blocks per size), then :func:`fit_allreduce` on the
    medians of ``sizes_bytes`` only, so the prediction for ``nbytes`` is made without its own
    measurement.  One rank moves no bytes: nothing is fitted then.

    Args:
        nbytes: the buffer to predict and measure, bytes, >= 4 (e.g. the gradient's size).
        sizes_bytes: the sizes to fit on, bytes, >= 4 each, at least two different ones.

    Returns:
        A JSON-ready dict, the same on every rank: ``latency_s`` (s; 0.0 with one rank),
        ``bus_gbps`` (GB/s; None with one rank), ``sizes_bytes``, ``sizes_median_s`` (s, the
        points fitted), and for ``nbytes`` ``allreduce_predicted_s`` (0.0 with one rank),
        ``allreduce_measured_s`` (median) and ``allreduce_times_s`` (every block), seconds
        per all-reduce.

    Raises:
        ValueError: as :func:`measure_allreduce` and :func:`fit_allreduce`.
        RuntimeError: without a process group.
    """
    sizes = list(sizes_bytes)
    t = measure_allreduce(sizes + [nbytes])
    medians = [t[s].median_s for s in sizes]
    world, latency, predicted = dist.get_world_size(), 0.0, 0.0
    bus: float | None = None
    if world > 1:
        latency, bus = fit_allreduce(sizes, medians, world)
        predicted = ring_allreduce_s(nbytes, world, bus, latency)
    return {"latency_s": latency, "bus_gbps": bus, "sizes_bytes": sizes,
            "sizes_median_s": medians, "allreduce_predicted_s": predicted,
            "allreduce_measured_s": t[nbytes].median_s,
            "allreduce_times_s": list(t[nbytes].times_s)}


# ----------------------------------------------------------------------------- pipeline (GPipe)
def _check(stages: int, microbatches: int) -> None:
    for name, v in (("stages", stages), ("microbatches", microbatches)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")


def bubble_fraction(stages: int, microbatches: int) -> float:
    """Return the fraction of a GPipe step each stage idles: ``(p - 1) / (m + p - 1)``.

    The formula notebook 01's pipeline worker compares with the idle time it measures.

    Args:
        stages: pipeline stages p, >= 1.
        microbatches: micro-batches m per step, >= 1.

    Returns:
        The bubble, a fraction in [0, 1) (0 for one stage).

    Raises:
        TypeError: for non-int arguments.
        ValueError: for arguments < 1.

    Example: ``bubble_fraction(4, 12)  # 3 / 15 = 0.2``
    """
    _check(stages, microbatches)
    return (stages - 1) / (microbatches + stages - 1)


@dataclass(frozen=True)
class Slot:
    """One unit of work in a pipeline schedule.

    Attributes:
        stage: the stage (rank) that runs it, 0-based.
        kind: ``"F"`` (forward) or ``"B"`` (backward).
        microbatch: the micro-batch, 0-based.
        start: its time slot, 0-based (one forward or one backward of one micro-batch).
    """

    stage: int
    kind: str
    microbatch: int
    start: int


def gpipe_schedule(stages: int, microbatches: int) -> list[Slot]:
    """Return GPipe's schedule: all forwards, then all backwards (last micro-batch first).

    Forward of micro-batch ``i`` on stage ``s`` runs in slot ``s + i``; the backward phase
    starts when the last stage has run its last forward and flows back, stage ``s`` taking
    micro-batch ``m-1-i`` in slot ``(m + p - 1) + (p - 1 - s) + i``.  The step lasts
    :func:`schedule_length` slots, ``2 m`` of them busy on every stage.

    Args:
        stages: pipeline stages p, >= 1.
        microbatches: micro-batches m, >= 1.

    Returns:
        ``2 · p · m`` :class:`Slot` s, sorted by start.

    Raises:
        TypeError, ValueError: as :func:`bubble_fraction`.
    """
    _check(stages, microbatches)
    p, m = stages, microbatches
    slots = [Slot(s, "F", i, s + i) for s in range(p) for i in range(m)]
    slots += [Slot(s, "B", m - 1 - i, (m + p - 1) + (p - 1 - s) + i)
              for s in range(p) for i in range(m)]
    return sorted(slots, key=lambda x: (x.start, x.stage))


def schedule_length(stages: int, microbatches: int) -> int:
    """Return the slots one GPipe step lasts: ``2 (m + p - 1)``.

    Raises:
        TypeError, ValueError: as :func:`bubble_fraction`.
    """
    _check(stages, microbatches)
    return 2 * (microbatches + stages - 1)


__all__ = [
    "FIT_SIZES_BYTES",
    "RingFit",
    "Slot",
    "allreduce_vs_model",
    "bubble_fraction",
    "fit_allreduce",
    "fit_two_regime",
    "gpipe_schedule",
    "measure_allreduce",
    "ring_allreduce_s",
    "ring_latency_s",
    "schedule_length",
    "time_collective",
]
