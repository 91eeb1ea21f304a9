"""The all-reduce cost model: predict, fit and invert the time of a ring all-reduce.

A ring all-reduce of ``S`` bytes over ``N`` ranks costs ``T = latency + 2 (N-1)/N * S / B``
(Patarasuk & Yuan, JPDC 2009), with ``B`` the "bus bandwidth" of the NCCL tests: one number
that describes a link for any ``N``.  :func:`ring_allreduce_s` predicts ``T``,
:func:`fit_allreduce` fits ``latency`` and ``B`` to measured times, :func:`bus_bandwidth_gbps`
turns one measured time into ``B``, and :func:`fit_and_predict` chains the fit and the
prediction the way the workers of notebooks 01 and 04 use them.  :func:`fit_two_regime` fits
the two terms where each one dominates — the latency on small buffers, the bandwidth on large
ones — and returns a :class:`RingFit` that also knows its crossover size.

The latency grows with N.  A ring all-reduce is ``2 (N-1)`` steps (N-1 of reduce-scatter,
N-1 of all-gather; Patarasuk & Yuan 2009), and each step sends one message that pays its
start-up cost ``α`` (Hockney's α-β model), so the fixed cost of one call is ``2 (N-1) α``.
A latency fitted on N ranks therefore says ``α = latency / (2 (N-1))`` per step;
:func:`ring_latency_s` scales it to other N, :meth:`RingFit.step_latency_s` and
:meth:`RingFit.at` do it for a fit.  Holding the fitted latency fixed while N changes
underestimates large rings by a factor up to ``(N'-1)/(N-1)``.

This module is pure arithmetic: no torch, no process group, safe to call in a notebook.
Elsewhere: *measuring* all-reduce times is a collective that runs inside workers and lives
in :mod:`accelkit.comm_bench` (:func:`accelkit.comm_bench.measure_allreduce`, and
:func:`accelkit.comm_bench.allreduce_vs_model` for measure -> fit -> predict); the memory each
strategy needs is :mod:`accelkit.memory`; compute time is :mod:`accelkit.roofline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def ring_allreduce_s(nbytes: float, world_size: int, bus_gbps: float,
                     latency_s: float = 0.0) -> float:
    """Predict the time of a ring all-reduce of ``nbytes`` over ``world_size`` ranks.

    ``T = latency_s + 2 (N-1)/N * nbytes / bandwidth``: in a ring each rank sends and
    receives ``(N-1)/N`` of the buffer twice (reduce-scatter, then all-gather) (Patarasuk &
    Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 2009).
    ``bus_gbps`` is the "bus bandwidth" of the NCCL tests (``busBw = algBw * 2(N-1)/N``),
    so one number describes the link for any N; ``latency_s`` is the fixed cost of one
    all-reduce on these ``world_size`` ranks (measure it with a tiny buffer; for another N
    scale it with :func:`ring_latency_s`: it grows as ``2 (N-1)`` steps).

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
    """Fit the latency-bandwidth model of :func:`ring_allreduce_s` to measured times.

    Least squares of ``t = latency + x / bandwidth`` with ``x = 2 (N-1)/N * size`` (the
    "alpha-beta" model of Hockney, Parallel Computing 1994, applied to the ring).  Plain
    least squares lets the largest buffers decide the slope: that is the regime of gradient
    all-reduces (megabytes), and the fitted latency is then the offset of that regime, not
    the time of an empty message (which small buffers would give).

    Args:
        sizes_bytes: buffer sizes, bytes (at least two different ones).
        seconds: measured seconds per all-reduce, one per size.
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


def bus_bandwidth_gbps(nbytes: float, world_size: int, seconds: float) -> float:
    """Return the bus bandwidth (GB/s) of an all-reduce of ``nbytes`` that took ``seconds``.

    ``busBw = 2 (N-1)/N * nbytes / seconds`` (NCCL tests' definition, PERFORMANCE.md),
    the inverse of :func:`ring_allreduce_s` without latency.

    Raises:
        ValueError: for ``world_size < 2`` (no traffic) or ``seconds <= 0``.
    """
    if world_size < 2:
        raise ValueError("bus bandwidth needs world_size >= 2 (one rank moves no bytes)")
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    return 2 * (world_size - 1) / world_size * nbytes / seconds / 1e9


def ring_latency_s(step_latency_s: float, world_size: int) -> float:
    """Return the fixed cost of one ring all-reduce over ``world_size`` ranks: ``2 (N-1) α``.

    A ring all-reduce runs ``N-1`` reduce-scatter steps and ``N-1`` all-gather steps, one
    message per rank each (Patarasuk & Yuan, JPDC 2009), each paying α (Hockney 1994).  Pass the result as
    ``latency_s`` to :func:`ring_allreduce_s`.

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
class RingPrediction:
    """The ring model fitted on some buffer sizes, and its prediction for another size.

    Attributes:
        latency_s: fitted fixed cost per all-reduce, seconds (0.0 for one rank).
        bus_gbps: fitted bus bandwidth, GB/s; None for one rank (it sends nothing, so
            there is no bandwidth to fit).
        nbytes: the buffer size predicted, bytes.
        world_size: ranks N.
        predicted_s: predicted seconds per all-reduce of ``nbytes`` (0.0 for one rank).
    """

    latency_s: float
    bus_gbps: float | None
    nbytes: float
    world_size: int
    predicted_s: float


def fit_and_predict(sizes_bytes: Sequence[float], seconds: Sequence[float], world_size: int,
                    nbytes: float) -> RingPrediction:
    """Fit the ring model on measured ``(size, seconds)`` pairs, then predict ``nbytes``.

    :func:`fit_allreduce`, then :func:`ring_allreduce_s`.  One rank moves no bytes: then
    nothing is fitted (``bus_gbps`` None) and the prediction is 0 s.

    Args:
        sizes_bytes: buffer sizes the times were measured at, bytes (>= 2 different ones).
        seconds: seconds per all-reduce, one per size (e.g. medians).
        world_size: ranks N, >= 1.
        nbytes: the buffer size to predict, bytes, >= 0 (typically the gradient's).

    Returns:
        A :class:`RingPrediction`.

    Raises:
        ValueError: as :func:`fit_allreduce` and :func:`ring_allreduce_s` (for N >= 2), or
            for ``world_size < 1``.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if world_size == 1:
        return RingPrediction(0.0, None, nbytes, 1, 0.0)
    latency, bus = fit_allreduce(sizes_bytes, seconds, world_size)
    return RingPrediction(latency, bus, nbytes, world_size,
                          ring_allreduce_s(nbytes, world_size, bus, latency))


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
        """The buffer size at which the bandwidth term equals the latency, bytes.

        Below it the fixed cost is most of the time, above it the bytes are:
        ``S* = latency * B / (2 (N-1)/N)``.
        """
        return self.latency_s * self.bus_gbps * 1e9 / (2 * (self.world_size - 1) / self.world_size)

    def time_ratio(self, nbytes: float, scale: float = 0.5) -> float:
        """``T(scale * nbytes) / T(nbytes)``: e.g. what halving the bytes does to the time."""
        return self.predict_s(scale * nbytes) / self.predict_s(nbytes)

    @property
    def step_latency_s(self) -> float:
        """α per ring step, seconds: the fitted latency over the ``2 (N-1)`` steps of a call."""
        return self.latency_s / (2 * (self.world_size - 1))

    def at(self, world_size: int) -> RingFit:
        """Return this fit on another number of ranks: the same α per step and the same B.

        The latency becomes ``2 (N'-1) α`` (:func:`ring_latency_s`); the bus bandwidth is
        per link and does not change with N (the NCCL tests' busBw).

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

    A plain least-squares fit over all sizes (:func:`fit_allreduce`) lets the large buffers
    set the intercept too, and a transport's large-message offset (chunking, a protocol
    switch) is not the cost of a small message.  Here the bandwidth is the least-squares
    slope over the sizes ``>= large_min_bytes``, and the latency the median over the sizes
    ``<= small_max_bytes`` of ``t - 2 (N-1)/N * S / B`` (their time less the little their
    bytes take at that bandwidth), clipped at 0.  Sizes in between are not used: keep some
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

    Example: ``fit = fit_two_regime(sizes, medians, 2, small_max_bytes=16384, large_min_bytes=4 << 20)``
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


__all__ = [
    "RingFit",
    "RingPrediction",
    "bus_bandwidth_gbps",
    "fit_allreduce",
    "fit_and_predict",
    "fit_two_regime",
    "ring_allreduce_s",
    "ring_latency_s",
]
