"""Parallelism cost models and collective timing: the ring all-reduce, GPipe's bubble.

**Ring all-reduce**: ``T = latency + 2 (N-1)/N * S / B`` for ``S`` bytes on ``N`` ranks
(Patarasuk & Yuan, JPDC 2009), ``B`` the NCCL tests' bus bandwidth (``busBw = algBw *
2(N-1)/N``, their PERFORMANCE.md).  The latency is ``2 (N-1)`` steps of start-up cost ``α``
(Hockney's α-β model, Parallel Computing 1994).
**GPipe** (Huang et al., NeurIPS 2019, §2.3): each of ``p`` stages idles the bubble
``(p - 1) / (m + p - 1)`` of a step of ``m`` micro-batches; 1F1B (Narayanan et al., ICML
2021) keeps the bubble but holds at most ``p - s`` micro-batches' activations on stage ``s``.

The models are pure arithmetic.  The timing functions are collectives: call them on every
rank after :func:`accelkit.dist.setup` (no IPython or matplotlib: they run in workers).
Elsewhere: process groups (:mod:`accelkit.dist`), single-process timing (:mod:`accelkit.bench`),
memory per strategy (:mod:`accelkit.memory`), drawing the pipeline (:mod:`accelkit.explore`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from accelkit import dist
from accelkit.bench import Timing


def ring_allreduce_s(nbytes: float, world_size: int, bus_gbps: float,
                     latency_s: float = 0.0) -> float:
    """Predict the seconds of a ring all-reduce: ``latency_s + 2 (N-1)/N * nbytes / bus``.

    Args:
        nbytes: buffer size, bytes, >= 0.
        world_size: ranks N, >= 1 (N = 1 costs nothing).
        bus_gbps: bus bandwidth, GB/s (10**9 bytes/s), > 0.
        latency_s: fixed cost per call on these N ranks, seconds, >= 0.

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
    """Fit ``t = latency + 2 (N-1)/N * size / B`` (:func:`ring_allreduce_s`) by least squares.

    The largest buffers decide the slope, so the latency is that regime's offset, not an empty
    message's (see :func:`fit_two_regime`).  ``sizes_bytes``: at least two different sizes;
    ``seconds``: one per size, each > 0; ``world_size`` >= 2.

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


@dataclass(frozen=True)
class RingFit:
    """A fitted ring model ``T(S) = latency + 2 (N-1)/N * S / B``: ``latency_s`` (s per call),
    ``bus_gbps`` (B, GB/s) on ``world_size`` ranks (>= 2)."""

    latency_s: float
    bus_gbps: float
    world_size: int

    def predict_s(self, nbytes: float) -> float:
        """Predicted seconds per all-reduce of ``nbytes`` (:func:`ring_allreduce_s`)."""
        return ring_allreduce_s(nbytes, self.world_size, self.bus_gbps, self.latency_s)


def fit_two_regime(sizes_bytes: Sequence[float], seconds: Sequence[float], world_size: int,
                   *, small_max_bytes: float, large_min_bytes: float) -> RingFit:
    """Fit the latency on small buffers and the bandwidth on large ones.

    B is the least-squares slope over sizes ``>= large_min_bytes`` (at least two), the
    latency the median over sizes ``<= small_max_bytes`` (at least one) of ``t - 2 (N-1)/N *
    S / B``, clipped at 0 (a large-message offset, chunking or a protocol switch, is not a
    small message's cost).  Sizes in between are unused: keep some to test the fit on.

    Returns a :class:`RingFit`.  Raises ValueError for mismatched lengths, too few sizes in a
    regime, ``large_min_bytes <= small_max_bytes``, and as :func:`fit_allreduce`.
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


#: Buffer sizes the workers fit the ring model on: 4 KiB .. 16 MiB, bytes.
FIT_SIZES_BYTES: tuple[int, ...] = tuple(4**k for k in (6, 8, 10, 11, 12))


def time_collective(fn: Callable[[], Any], *, number: int = 10, repeats: int = 5,
                    warmup: int = 3, label: str = "", nbytes: float | None = None) -> Timing:
    """Time a collective (or any step that must run in lockstep) on every rank.

    Every rank runs exactly ``warmup`` untimed calls, then ``repeats`` blocks of ``number``
    calls (``Timer.timeit``, after a barrier): an adaptive count, as ``ak.bench.measure``
    picks, would deadlock.  Each block's time is the slowest rank's.  ``nbytes``: bytes per
    call, for ``Timing.gbps``.

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

    Each of ``repeats`` rounds times one block per size in turn (a slow moment hits all sizes
    alike), of ``min(max_number, block_bytes / size)`` calls, at least 1; ``warmup`` untimed
    calls per size first.  Sizes >= 4 bytes (one float32).

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

    :func:`measure_allreduce` of ``sizes_bytes`` and ``nbytes`` (>= 4 each) together, then
    :func:`fit_allreduce` on the medians of ``sizes_bytes`` only (at least two different), so
    ``nbytes`` is predicted without its own measurement; one rank fits nothing.

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


def _check(stages: int, microbatches: int) -> None:
    for name, v in (("stages", stages), ("microbatches", microbatches)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")


def bubble_fraction(stages: int, microbatches: int) -> float:
    """Return the fraction of a GPipe step each stage idles: ``(p - 1) / (m + p - 1)``.

    ``stages`` p and ``microbatches`` m per step are ints >= 1 (else TypeError, ValueError).
    Returns a fraction in [0, 1) (0 for one stage; ``bubble_fraction(4, 12)`` is 0.2).
    """
    _check(stages, microbatches)
    return (stages - 1) / (microbatches + stages - 1)


@dataclass(frozen=True)
class Slot:
    """One unit of work in a pipeline schedule: the ``stage`` (rank) running it, its ``kind``
    (``"F"`` forward, ``"B"`` backward), the ``microbatch`` and its ``start`` slot (0-based;
    a slot is one forward or one backward of one micro-batch)."""

    stage: int
    kind: str
    microbatch: int
    start: int


def gpipe_schedule(stages: int, microbatches: int) -> list[Slot]:
    """Return GPipe's schedule: all forwards, then all backwards (last micro-batch first).

    Forward of micro-batch ``i`` on stage ``s`` runs in slot ``s + i``; the backward phase
    starts when the last stage has run its last forward and flows back, stage ``s`` taking
    micro-batch ``m-1-i`` in slot ``(m + p - 1) + (p - 1 - s) + i``.  The step lasts
    :func:`schedule_length` slots, ``2 m`` of them busy on every stage.  Returns ``2 · p · m``
    :class:`Slot` s, sorted by start; raises as :func:`bubble_fraction`.
    """
    _check(stages, microbatches)
    p, m = stages, microbatches
    slots = [Slot(s, "F", i, s + i) for s in range(p) for i in range(m)]
    slots += [Slot(s, "B", m - 1 - i, (m + p - 1) + (p - 1 - s) + i)
              for s in range(p) for i in range(m)]
    return sorted(slots, key=lambda x: (x.start, x.stage))


def schedule_length(stages: int, microbatches: int) -> int:
    """Return the slots one GPipe step lasts, ``2 (m + p - 1)`` (raises as :func:`bubble_fraction`)."""
    _check(stages, microbatches)
    return 2 * (microbatches + stages - 1)


__all__ = ["FIT_SIZES_BYTES", "RingFit", "Slot", "allreduce_vs_model", "bubble_fraction",
           "fit_allreduce", "fit_two_regime", "gpipe_schedule", "measure_allreduce",
           "ring_allreduce_s", "schedule_length", "time_collective"]
