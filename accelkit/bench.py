"""Timing built on ``torch.utils.benchmark``: warm-up, synchronisation, median and spread.

``measure`` times one callable; ``compare`` times two *interleaved* in the same run and
returns the speedup, which is what the notebooks' asserts check (a ratio of two
measurements taken side by side is stable on a noisy shared CPU; an absolute time is not).

GPU kernels run asynchronously: ``torch.utils.benchmark.Timer`` synchronises CUDA itself,
and for other devices (MPS, XLA) and for TensorFlow this module wraps the callable so the
clock stops only when the result exists (``sync=`` / ``measure_tf``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Timing:
    """The timing of one callable.

    Attributes:
        label: what was timed.
        times_s: seconds per call, one entry per timed block (each block runs the callable
            several times and divides).
        flops: floating-point operations per call, if given (for TFLOP/s).
        bytes_moved: bytes read + written per call, if given (for GB/s).
        samples: samples processed per call, if given (for samples/s).
        threads: torch intra-op threads used while timing.
        device: the device string the work ran on.
    """

    label: str
    times_s: tuple[float, ...]
    flops: float | None = None
    bytes_moved: float | None = None
    samples: int | None = None
    threads: int = 1
    device: str = "cpu"

    @property
    def median_s(self) -> float:
        """Median seconds per call."""
        return statistics.median(self.times_s)

    @property
    def iqr_s(self) -> float:
        """Interquartile range of seconds per call (0 with fewer than 2 blocks)."""
        if len(self.times_s) < 2:
            return 0.0
        q = statistics.quantiles(self.times_s, n=4, method="inclusive")
        return q[2] - q[0]

    @property
    def tflops(self) -> float | None:
        """Achieved TFLOP/s (10**12 FLOP/s) at the median time, or None without ``flops``."""
        return None if self.flops is None else self.flops / self.median_s / 1e12

    @property
    def gbps(self) -> float | None:
        """Achieved GB/s (10**9 bytes/s) at the median time, or None without ``bytes_moved``."""
        return None if self.bytes_moved is None else self.bytes_moved / self.median_s / 1e9

    @property
    def samples_per_s(self) -> float | None:
        """Throughput in samples/s at the median time, or None without ``samples``."""
        return None if self.samples is None else self.samples / self.median_s

    def __str__(self) -> str:
        parts = [f"{self.label}: {format_time(self.median_s)} ± {format_time(self.iqr_s)} (IQR)"]
        if self.tflops is not None:
            parts.append(f"{self.tflops:.3g} TFLOP/s")
        if self.gbps is not None:
            parts.append(f"{self.gbps:.3g} GB/s")
        if self.samples_per_s is not None:
            parts.append(f"{self.samples_per_s:,.0f} samples/s")
        return ", ".join(parts)


@dataclass(frozen=True)
class Comparison:
    """Two timings taken interleaved in the same run.

    Attributes:
        baseline: the reference timing.
        candidate: the timing of the changed version.
    """

    baseline: Timing
    candidate: Timing
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def speedup(self) -> float:
        """``baseline.median_s / candidate.median_s``: > 1 means the candidate is faster."""
        return self.baseline.median_s / self.candidate.median_s

    def __str__(self) -> str:
        text = f"{self.baseline}\n{self.candidate}\nspeedup: {self.speedup:.2f}x"
        earlier = self.extra.get("earlier_speedups")
        if earlier:
            text += (" (measured again: an earlier attempt gave "
                     + ", ".join(f"{s:.2f}x" for s in earlier) + ")")
        return text


def format_time(seconds: float) -> str:
    """Format seconds with a readable unit (s, ms, µs, ns)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _device_str(device: Any) -> str:
    return "cpu" if device is None else str(device)


def _wrap_sync(fn: Callable[[], Any], device: Any) -> Callable[[], Any]:
    """Return ``fn`` followed by a device synchronisation where the Timer does not do it."""
    if device is None:
        return fn
    import torch

    kind = torch.device(device).type
    if kind in ("cpu", "cuda", "meta"):  # Timer already synchronises CUDA
        return fn
    from accelkit.device import synchronize

    def synced() -> Any:
        out = fn()
        synchronize(device)
        return out

    return synced


def _blocks(fn: Callable[[], Any], min_run_time: float, threads: int) -> tuple[float, ...]:
    from torch.utils.benchmark import Timer

    m = Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads).blocked_autorange(
        min_run_time=min_run_time)
    return tuple(m.times)


def _check(min_run_time: float, warmup: int) -> None:
    if min_run_time <= 0:
        raise ValueError(f"min_run_time must be > 0 seconds, got {min_run_time}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")


def _threads(threads: int | None) -> int:
    import torch

    if threads is None:
        return torch.get_num_threads()
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return threads


def measure(
    fn: Callable[[], Any],
    *,
    label: str = "",
    flops: float | None = None,
    bytes_moved: float | None = None,
    samples: int | None = None,
    device: Any = None,
    threads: int | None = None,
    min_run_time: float = 0.2,
    warmup: int = 2,
) -> Timing:
    """Time ``fn()`` with ``torch.utils.benchmark.Timer.blocked_autorange``.

    Args:
        fn: a callable with no arguments (wrap arguments in a ``lambda``).
        label: a name for tables and plots.
        flops: FLOP per call, for TFLOP/s (a matmul (m,k)@(k,n) is ``2*m*k*n``).
        bytes_moved: bytes read + written per call, for GB/s.
        samples: samples per call, for samples/s.
        device: the device the work runs on; MPS/XLA are synchronised after each call
            (CUDA is synchronised by the Timer itself).
        threads: torch intra-op threads while timing; default: the current setting.
        min_run_time: seconds to spend timing, at least.
        warmup: untimed calls before timing (allocator, caches, lazy init, compilation).

    Returns:
        A :class:`Timing` with the per-block times in seconds.

    Raises:
        ValueError: for ``min_run_time <= 0``, ``warmup < 0`` or ``threads < 1``.
    """
    _check(min_run_time, warmup)
    n_threads = _threads(threads)
    call = _wrap_sync(fn, device)
    for _ in range(warmup):
        call()
    times = _blocks(call, min_run_time, n_threads)
    return Timing(label or getattr(fn, "__name__", "fn"), times, flops, bytes_moved, samples,
                  n_threads, _device_str(device))


def time_once(fn: Callable[[], Any], *, device: Any = None) -> float:
    """Return the seconds one call of ``fn()`` takes, synchronised before and after.

    For one-off costs that repeated timing averages away or warms up first: compilation on
    a first call, a cold start.  Steady-state speed belongs to :func:`measure`.

    Args:
        fn: a callable with no arguments (wrap TensorFlow callables in :func:`tf_sync`).
        device: the device the work runs on; it is synchronised (CUDA, MPS, XLA) so the
            clock stops when the work is done.  Default: the current CUDA device, if any.

    Returns:
        Wall-clock seconds of the single call.

    Example: ``compile_s = time_once(lambda: compiled(x), device=dev)``
    """
    import time

    from accelkit.device import synchronize

    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def compare(
    baseline: Callable[[], Any],
    candidate: Callable[[], Any],
    *,
    labels: Sequence[str] = ("baseline", "candidate"),
    flops: float | None = None,
    bytes_moved: float | Sequence[float | None] | None = None,
    samples: int | None = None,
    device: Any = None,
    threads: int | None = None,
    min_run_time: float = 0.4,
    rounds: int = 4,
    warmup: int = 2,
    retry_below: float | None = None,
    attempts: int = 2,
) -> Comparison:
    """Time two callables interleaved (A B B A A B ...) and return both and the speedup.

    Interleaving spreads slow drifts (another process, CPU frequency) over both, so the ratio
    is fair on a shared machine.

    Args:
        baseline: the reference callable.
        candidate: the changed callable.
        labels: names for the two.
        flops: FLOP per call (same work for both).
        bytes_moved: bytes per call, one number for both or a pair ``(baseline, candidate)``.
        samples: samples per call.
        device, threads, warmup: as in :func:`measure`.
        min_run_time: seconds spent timing *each* callable, in total over the rounds.
        rounds: how many alternations, >= 1.
        retry_below: if the speedup comes out below this (a floor), measure again, up to
            ``attempts`` times in all, and keep the last attempt.  For shared machines, where
            another process can take a core for a whole measurement; the earlier speedups are
            kept in ``extra["earlier_speedups"]`` and printed, never hidden.
        attempts: the most measurements with ``retry_below``, >= 1.

    Returns:
        A :class:`Comparison`; ``.speedup`` > 1 means ``candidate`` is faster.

    Raises:
        ValueError: for ``rounds < 1``, ``attempts < 1`` and as :func:`measure`.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    earlier: list[float] = []
    while True:
        result = _compare_once(baseline, candidate, labels=labels, flops=flops,
                               bytes_moved=bytes_moved, samples=samples, device=device,
                               threads=threads, min_run_time=min_run_time, rounds=rounds,
                               warmup=warmup)
        if retry_below is None or result.speedup >= retry_below or len(earlier) + 1 >= attempts:
            break
        earlier.append(result.speedup)
    if earlier:
        result.extra["earlier_speedups"] = earlier
    return result


def _compare_once(baseline: Callable[[], Any], candidate: Callable[[], Any], *,
                  labels: Sequence[str], flops: float | None,
                  bytes_moved: float | Sequence[float | None] | None, samples: int | None,
                  device: Any, threads: int | None, min_run_time: float, rounds: int,
                  warmup: int) -> Comparison:
    """One interleaved measurement of :func:`compare`."""
    _check(min_run_time, warmup)
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    n_threads = _threads(threads)
    fns = [_wrap_sync(baseline, device), _wrap_sync(candidate, device)]
    for f in fns:
        for _ in range(warmup):
            f()
    times: list[list[float]] = [[], []]
    for r in range(rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        for i in order:
            times[i].extend(_blocks(fns[i], min_run_time / rounds, n_threads))
    bm = bytes_moved if isinstance(bytes_moved, Sequence) else (bytes_moved, bytes_moved)
    made = [
        Timing(labels[i], tuple(times[i]), flops, bm[i], samples, n_threads, _device_str(device))
        for i in range(2)
    ]
    return Comparison(made[0], made[1])


def tf_sync(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Wrap a TensorFlow callable so each call waits for its result on the host.

    TensorFlow's GPU/TPU ops are asynchronous like CUDA's; copying the result to NumPy
    (``.numpy()``) is the synchronisation point.
    """

    def synced() -> Any:
        out = fn()
        import tensorflow as tf

        return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, out)

    return synced


def measure_tf(fn: Callable[[], Any], **kwargs: Any) -> Timing:
    """Time a TensorFlow callable; like :func:`measure`, with the result forced to the host.

    Keyword arguments are those of :func:`measure` (``device`` is not used).
    """
    kwargs.setdefault("label", getattr(fn, "__name__", "fn"))
    return measure(tf_sync(fn), **kwargs)


def compare_tf(baseline: Callable[[], Any], candidate: Callable[[], Any], **kwargs: Any) -> Comparison:
    """Like :func:`compare` for TensorFlow callables (results forced to the host)."""
    return compare(tf_sync(baseline), tf_sync(candidate), **kwargs)


def table(timings: Sequence[Timing], baseline: Timing | None = None) -> str:
    """Return a Markdown table of timings: median, IQR, TFLOP/s, GB/s, samples/s, speedup.

    Args:
        timings: the timings, one row each.
        baseline: the row to compute speedups against (default: the first).
    """
    if not timings:
        raise ValueError("table() needs at least one timing")
    base = baseline or timings[0]
    rows = ["| what | median | IQR | TFLOP/s | GB/s | samples/s | speedup |",
            "|---|---|---|---|---|---|---|"]
    for t in timings:
        cells = [t.label, format_time(t.median_s), format_time(t.iqr_s),
                 "" if t.tflops is None else f"{t.tflops:.3g}",
                 "" if t.gbps is None else f"{t.gbps:.3g}",
                 "" if t.samples_per_s is None else f"{t.samples_per_s:,.0f}",
                 f"{base.median_s / t.median_s:.2f}x"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
