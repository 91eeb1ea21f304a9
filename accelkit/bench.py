"""Timing built on ``torch.utils.benchmark``: warm-up, synchronisation, median and spread.

``measure`` times one callable; ``compare`` times two *interleaved* and returns the per-pair
speedups (a ratio of neighbours stays stable on a noisy shared CPU; an absolute time does
not), deciding a claim (``at_least=``/``at_most=``) sequentially with an error rate that holds
over all its looks (``tests/test_bench.py`` checks it on 10,000 simulated comparisons).
The Timer synchronises CUDA; MPS/XLA are synchronised here (``device=``).

Lives elsewhere: statistics and the sequential plan (:mod:`accelkit.stats`), timing TensorFlow
(:mod:`accelkit.tf`), asserting a verdict (:func:`accelkit.claims.assert_speedup`).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelkit.stats import (
    SequentialPlan,
    Verdict,
    decide,
    decide_sequentially,
    iqr,
    level_interval,
    median_interval,
    relative_iqr,
)


@dataclass(frozen=True)
class Timing:
    """The timing of one callable: ``times_s`` holds seconds per call, one per timed block;
    ``flops``, ``bytes_moved`` (read + written) and ``samples`` per call give the rates;
    ``threads`` is torch's intra-op threads while timing, ``device`` where the work ran."""

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
        return iqr(self.times_s)

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
        rates = ((self.tflops, "{:.3g} TFLOP/s"), (self.gbps, "{:.3g} GB/s"),
                 (self.samples_per_s, "{:,.0f} samples/s"))
        return ", ".join([f"{self.label}: {format_time(self.median_s)} ± "
                          f"{format_time(self.iqr_s)} (IQR)"]
                         + [form.format(v) for v, form in rates if v is not None])


@dataclass(frozen=True)
class Comparison:
    """Two callables timed in interleaved pairs (A B, B A, A B ...) in the same run.

    Attributes:
        baseline, candidate: the two timings, one sample per pair.
        ratios: ``baseline / candidate`` time per pair, > 1 where the candidate was faster
            (a ratio of neighbours cancels the drift of a shared machine).
        confidence: the coverage of :attr:`interval`; with a claim decided while measuring,
            of all its looks' intervals together.
        extra: notes: ``"extra_s"`` spent on further batches, the ``"claim"``, ``"looks"``
            (pairs in all at each look).
        level: with a claim, the coverage of the last look's own interval
            (:meth:`accelkit.stats.SequentialPlan.level`); None for one look at ``confidence``.
    """

    baseline: Timing
    candidate: Timing
    ratios: tuple[float, ...] = ()
    confidence: float = 0.95
    extra: dict[str, Any] = field(default_factory=dict)
    level: float | None = None

    def __post_init__(self) -> None:
        if not self.ratios:  # built from two timings: pair their samples in order
            object.__setattr__(self, "ratios", tuple(
                b / c for b, c in zip(self.baseline.times_s, self.candidate.times_s)))

    @property
    def speedup(self) -> float:
        """The median per-pair ratio: > 1 means the candidate is faster."""
        return statistics.median(self.ratios)

    @property
    def interval(self) -> tuple[float, float]:
        """The median ratio's interval: :func:`~accelkit.stats.median_interval` at
        :attr:`confidence`, or with a claim :func:`~accelkit.stats.level_interval` at :attr:`level`."""
        if self.level is None:
            return median_interval(self.ratios, self.confidence)
        return level_interval(self.ratios, self.level)

    @property
    def noise(self) -> float:
        """The spread of the per-pair ratios: their IQR / median (0.1 = ±5 % around it)."""
        return relative_iqr(self.ratios)

    def verdict(self, at_least: float | None = None, at_most: float | None = None) -> Verdict:
        """Decide "the candidate is at least ``at_least`` / at most ``at_most`` times faster"
        from :attr:`interval` (:func:`accelkit.stats.decide`: a Verdict; ValueError without a bound)."""
        return decide(self.interval, at_least, at_most)

    def finding(self) -> str:
        """Say in plain words what the interval shows (:meth:`summary` has the statistics):
        ``"bf16 is faster than fp32: 1.8x"`` / ``"... is slower than ...: 0.59x its speed"`` when
        all of it lies above / below 1x, else ``"no clear difference ... at this run's noise (0.97x)"``."""
        low, high = self.interval
        b, c = self.baseline.label, self.candidate.label
        if low > 1:
            return f"{c} is faster than {b}: {self.speedup:.2f}x"
        if high < 1:
            return f"{c} is slower than {b}: {self.speedup:.2f}x its speed"
        return f"no clear difference between {c} and {b} at this run's noise ({self.speedup:.2f}x)"

    def summary(self) -> str:
        """One line: the median speedup, its interval, the pairs (and looks) and the noise."""
        low, high = self.interval
        looks = len(self.extra.get("looks", ()))
        pairs = f"{len(self.ratios)} pairs" + (f" in {looks} looks" if looks > 1 else "")
        return (f"speedup {self.speedup:.2f}x ({self.confidence:.0%} interval {low:.2f}x-"
                f"{high:.2f}x, {pairs}, noise ±{self.noise / 2:.0%})")

    def __str__(self) -> str:  # the learner's view: the statistics are in summary()
        return f"{self.baseline}\n{self.candidate}\n{self.finding()}"


def format_time(seconds: float) -> str:
    """Format seconds with a readable unit (s, ms, µs, ns)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _wrap_sync(fn: Callable[[], Any], device: Any) -> Callable[[], Any]:
    """Return ``fn`` followed by a device synchronisation where the Timer does not do it."""
    import torch

    if device is None or torch.device(device).type in ("cpu", "cuda", "meta"):
        return fn  # nothing to wait for, or the Timer synchronises CUDA itself
    from accelkit.device import synchronize

    def synced() -> Any:
        out = fn()
        synchronize(device)
        return out

    return synced


def _timer(fn: Callable[[], Any], threads: int) -> Any:
    """Return a ``torch.utils.benchmark.Timer`` of ``fn()`` on ``threads`` intra-op threads."""
    from torch.utils.benchmark import Timer

    return Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)


def _checked(min_run_time: float, warmup: int, threads: int | None, pairs: int = 2) -> int:
    """Raise ValueError for a bad argument; return the intra-op threads to time on."""
    import torch

    for bad, what, got in ((pairs < 2, "pairs must be >= 2", pairs),
                           (min_run_time <= 0, "min_run_time must be > 0 seconds", min_run_time),
                           (warmup < 0, "warmup must be >= 0", warmup),
                           (threads is not None and threads < 1, "threads must be >= 1", threads)):
        if bad:
            raise ValueError(f"{what}, got {got}")
    return torch.get_num_threads() if threads is None else int(threads)


def measure(fn: Callable[[], Any], *, label: str = "", flops: float | None = None,
            bytes_moved: float | None = None, samples: int | None = None, device: Any = None,
            threads: int | None = None, min_run_time: float = 0.2, warmup: int = 2) -> Timing:
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
    n_threads = _checked(min_run_time, warmup, threads)
    call = _wrap_sync(fn, device)
    for _ in range(warmup):
        call()
    times = _timer(call, n_threads).blocked_autorange(min_run_time=min_run_time).times
    return Timing(label or getattr(fn, "__name__", "fn"), tuple(times), flops, bytes_moved, samples,
                  n_threads, "cpu" if device is None else str(device))


def time_once(fn: Callable[[], Any], *, device: Any = None) -> float:
    """Return the wall seconds of one call of ``fn()``, ``device`` synchronised before and after
    (default: the current CUDA device, if any), for one-off costs such as a first compile.
    Wrap TensorFlow callables in :func:`accelkit.tf.sync`."""
    from accelkit.device import synchronize

    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def fit_size(make: Callable[[int], Callable[[], Any]], n: int, *, max_call_s: float,
             exponent: float = 3.0, device: Any = None, smallest: int = 128) -> tuple[int, str]:
    """Choose the largest size ``<= n`` (by doubling) whose one call takes at most ``max_call_s``.

    From ``smallest`` on, one call is timed and the size doubled while the next size's
    predicted time, this one's times ``2 ** exponent`` (8 for an ``(n, n) @ (n, n)`` matmul),
    stays within ``max_call_s``.

    Args:
        make: ``make(size)`` returns the callable to time at that size.
        n: the size wanted (from the profile).
        max_call_s: the most seconds one call may take.
        exponent: how the work grows with the size.
        device: synchronised around each timed call (as :func:`time_once`).
        smallest: the first size timed, and the smallest size returned.

    Returns:
        ``(size, reason)``: ``reason`` is ``""`` when ``n`` fits, else one sentence with the
        time measured at ``size`` and the one predicted at ``n``.

    Raises:
        ValueError: for ``n < 1`` or ``max_call_s <= 0``.
    """
    if n < 1 or max_call_s <= 0:
        raise ValueError(f"need n >= 1 and max_call_s > 0, got n={n}, max_call_s={max_call_s}")

    def one_call(m: int) -> float:
        fn = make(m)
        fn()  # warm-up: allocation, lazy initialisation, kernel selection
        t = time_once(fn, device=device)
        if t <= max_call_s:  # cheap enough to repeat: the best of three (noise only adds time)
            t = min(t, *(time_once(fn, device=device) for _ in range(2)))
        return t

    size = min(n, smallest)
    t = one_call(size)
    while size < n and t * (min(2 * size, n) / size) ** exponent <= max_call_s:
        size = min(2 * size, n)
        t = one_call(size)
    if size == n and t <= max_call_s:
        return n, ""
    if t > max_call_s and size > min(n, smallest):  # the last measured size is over: step back
        size //= 2
        t /= 2**exponent
    pred = t * (n / size) ** exponent
    return size, (f"at {n} one call would take about {pred:.2g} s ({format_time(t)} at {size}); "
                  f"timed at {size} instead")


#: Pairs timed before a deadline may cut a batch short (6 give a 95 % interval narrower
#: than (min, max); see :func:`median_interval`).
MIN_PAIRS = 6
#: The most looks a claim decided while measuring takes, by default (:func:`compare`).
LOOKS = 4


def compare(baseline: Callable[[], Any], candidate: Callable[[], Any], *,
            labels: Sequence[str] = ("baseline", "candidate"), flops: float | None = None,
            bytes_moved: float | Sequence[float | None] | None = None, samples: int | None = None,
            device: Any = None, threads: int | None = None, min_run_time: float = 0.4,
            pairs: int = 12, warmup: int = 2, at_least: float | None = None,
            at_most: float | None = None, budget_s: float | None = None,
            confidence: float = 0.95, looks: int = LOOKS) -> Comparison:
    """Time two callables in interleaved pairs and return both and the per-pair speedups.

    Each pair times a sample of A and of B back to back (A B, then B A), each sample a few
    calls lasting about ``min_run_time / pairs`` seconds.  The speedup is the median per-pair
    ratio with a distribution-free interval (:func:`median_interval`).

    With a claim (``at_least``/``at_most``) it is decided *sequentially* under a plan fixed
    before the first pair (:class:`accelkit.stats.SequentialPlan`): at most ``looks`` looks,
    one after each batch of ``pairs`` pairs, each at the level the Pocock-type spending
    function allows (98.2 %, 98.7 %, ... of four; the last spends the rest), stopping at the
    first decisive look (Lan & DeMets, Biometrika 70 (1983) 659-663; Jennison & Turnbull,
    *Group Sequential Methods*, 2000, ch. 9).  With the true speedup exactly at a floor,
    "holds" comes out in at most ``(1 - confidence) / 2`` of comparisons, as "does not hold
    here" does, however many looks were taken.

    Args:
        baseline: the reference callable.
        candidate: the changed callable.
        labels: names for the two.
        flops: FLOP per call (same work for both).
        bytes_moved: bytes per call, one number for both or a pair ``(baseline, candidate)``.
        samples: samples (data items) per call, for samples/s.
        device, threads, warmup: as in :func:`measure`.
        min_run_time: seconds spent timing *each* callable in the first ``pairs`` pairs.
        pairs: pairs in the first batch (and in each further batch), >= 6 for a 95 %
            interval narrower than (min, max); with a claim, >= 8 lets the first look decide.
        at_least, at_most: the claim to decide while measuring (see :meth:`Comparison.verdict`).
        budget_s: the most wall seconds for further batches (default ``8 * min_run_time``);
            the look during which it runs out is the last.  A first batch that overruns
            ``4 * min_run_time`` stops after :data:`MIN_PAIRS` pairs.
        confidence: the coverage of the interval (with a claim: of all looks together).
        looks: with a claim, the most looks (>= 1; 1: one look at ``confidence``, no more
            pairs); the most pairs timed are ``looks * pairs``.

    Returns:
        A :class:`Comparison`; ``.speedup`` > 1 means ``candidate`` is faster.

    Raises:
        ValueError: for ``pairs < 2``, ``looks < 1``, a confidence outside (0, 1) and as
            :func:`measure`.
    """
    n_threads = _checked(min_run_time, warmup, threads, pairs)
    plan = SequentialPlan(pairs, looks, confidence)  # declared before the first pair
    fns = [_wrap_sync(baseline, device), _wrap_sync(candidate, device)]
    for f in fns:
        for _ in range(warmup):
            f()
    numbers = [_calibrate(f, min_run_time / pairs, n_threads) for f in fns]

    def more(done: int, stop_at: float) -> list[tuple[float, float]]:  # one batch of pairs
        return _pairs(fns, numbers, pairs, done, n_threads, stop_at=stop_at)

    # the first batch takes ~2 * min_run_time; on a much slowed machine it stops at twice that
    got = more(0, time.perf_counter() + 4 * min_run_time)
    budget = 8 * min_run_time if budget_s is None else budget_s
    timed, level, extra = _until_decided(got, more, at_least, at_most, budget, plan)
    bm = bytes_moved if isinstance(bytes_moved, Sequence) else (bytes_moved, bytes_moved)
    made = [Timing(labels[i], tuple(p[i] for p in timed), flops, bm[i], samples, n_threads,
                   "cpu" if device is None else str(device)) for i in range(2)]
    return Comparison(made[0], made[1], tuple(b / c for b, c in timed), confidence, extra, level)


def _calibrate(fn: Callable[[], Any], sample_s: float, threads: int) -> int:
    """Return how many calls of ``fn`` make one sample of about ``sample_s`` seconds."""
    one = _timer(fn, threads).timeit(1).mean
    return max(1, min(10**6, round(sample_s / max(one, 1e-9))))


def _sample(fn: Callable[[], Any], number: int, threads: int) -> float:
    """Return the mean seconds per call of ``number`` back-to-back calls (one sample)."""
    return float(_timer(fn, threads).timeit(number).mean)


def _pairs(fns: Sequence[Callable[[], Any]], numbers: Sequence[int], count: int, start: int,
           threads: int, stop_at: float = math.inf) -> list[tuple[float, float]]:
    """Time ``count`` pairs, alternating A B / B A from pair number ``start`` on; stop early
    past ``stop_at`` (``time.perf_counter()``) once :data:`MIN_PAIRS` pairs exist in all."""
    out: list[tuple[float, float]] = []
    for p in range(start, start + count):
        if p >= MIN_PAIRS and time.perf_counter() > stop_at:
            break
        got = [0.0, 0.0]
        for i in ((0, 1) if p % 2 == 0 else (1, 0)):
            got[i] = _sample(fns[i], numbers[i], threads)
        out.append((got[0], got[1]))
    return out


def _until_decided(got: list[tuple[float, float]],
                   more: Callable[[int, float], list[tuple[float, float]]],
                   at_least: float | None, at_most: float | None, budget_s: float,
                   plan: SequentialPlan) -> tuple[list[tuple[float, float]], float | None,
                                                  dict[str, Any]]:
    """Decide the claim under ``plan`` (:func:`accelkit.stats.decide_sequentially`) on the
    ratios of ``got``, the first batch of ``(baseline_s, candidate_s)`` pairs; ``more(done,
    stop_at)`` times the next.  Returns ``(pairs, level, extra)``: every pair timed, the last
    look's level (None without a claim), ``extra`` as :attr:`Comparison.extra`."""
    start = time.perf_counter()
    if at_least is None and at_most is None:
        return got, None, {"extra_s": time.perf_counter() - start}
    timed = list(got)

    def more_ratios(rows: Any, done: int) -> list[list[float]]:
        new = more(done, start + budget_s)
        timed.extend(new)
        return [[b / c for b, c in new]]

    decision = decide_sequentially([[b / c for b, c in got]], more_ratios, plan, at_least,
                                   at_most, lambda: time.perf_counter() - start >= budget_s)
    return timed, float(decision.levels[0]), {
        "extra_s": time.perf_counter() - start, "claim": {"at_least": at_least, "at_most": at_most},
        "looks": decision.sizes[:int(decision.looks[0])]}
