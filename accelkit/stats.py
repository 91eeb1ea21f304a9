"""Distribution-free statistics of repeated measurements, and the rules that decide a claim.

Owns: the interval of a median (:func:`median_interval`, :func:`median_rank`,
:func:`level_interval`), the spread (:func:`iqr`, :func:`relative_iqr`), the verdict rule
(:func:`decide`, :class:`Verdict`) and the sequential rule (:class:`SequentialPlan`,
:func:`decide_sequentially`, :func:`spent_alpha`).  Plain numbers in and out: no torch.
A 95 % interval looked at after every batch spends 5 % at *every* look (Armitage, McPherson &
Rowe, JRSS A 132 (1969) 235-244); the sequential rule bounds the looks in advance and spends
the error across them (Lan & DeMets, Biometrika 70 (1983) 659-663).

Lives elsewhere: taking and pairing measurements (:mod:`accelkit.bench`), failing a notebook on
a verdict (:func:`accelkit.claims.assert_speedup`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


class Verdict(str):
    """A verdict of :func:`decide`, equal to its string: :data:`HOLDS` (``"holds"``),
    :data:`REFUTED` (``"does not hold here"``) or :data:`UNDECIDED` (``"too noisy to decide"``)."""

    __slots__ = ()

    @property
    def holds(self) -> bool:
        """The whole interval satisfies the claim."""
        return self == "holds"

    @property
    def refuted(self) -> bool:
        """The whole interval violates the claim."""
        return self == "does not hold here"

    @property
    def undecided(self) -> bool:
        """The interval straddles a bound: too noisy to decide."""
        return self == "too noisy to decide"


#: The verdicts :func:`decide` gives a claim about a measured quantity.
HOLDS, REFUTED, UNDECIDED = Verdict("holds"), Verdict("does not hold here"), Verdict("too noisy to decide")


def median_rank(n: int, confidence: float) -> int:
    """Return the rank ``k`` of the order-statistic interval for the median of ``n`` values.

    ``[v_(k), v_(n-k+1)]`` (sorted, 1-based) misses the median below with probability
    ``P(Binomial(n, 1/2) <= k - 1)``, and as often above; ``k`` is the largest rank keeping
    the two within ``1 - confidence`` (Conover, *Practical Nonparametric Statistics*, 3rd ed.,
    §3.2; assumes independent draws from a continuous distribution, not normality).

    Returns:
        ``k`` in ``0 .. n // 2``; 0 when even ``(min, max)`` covers less than ``confidence``
        (fewer than 6 values at 95 %; always for confidence 1).  ``median_rank(10, 0.95) == 2``.

    Raises:
        ValueError: for ``n < 0`` or a confidence outside (0, 1].
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0 < confidence <= 1:
        raise ValueError(f"confidence must be in (0, 1], got {confidence}")
    tail, k = 0, 0  # tail: the count of sign sequences with at most j values below
    for j in range(n // 2):
        tail += math.comb(n, j)
        if 2 * tail > (1 - confidence) * 2**n:
            break
        k = j + 1
    return k


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Return the distribution-free interval ``[v_(k), v_(n-k+1)]`` for the median of ``values``,
    ``k`` = :func:`median_rank` at ``confidence`` in (0, 1).

    Returns ``(low, high)``; with too few values (fewer than 6 at 95 %) ``(min, max)``, which
    then covers less than ``confidence`` (:func:`level_interval` refuses instead).
    Raises ValueError for no values or a confidence outside (0, 1).
    """
    if not values:
        raise ValueError("median_interval needs at least one value")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    v, n = sorted(values), len(values)
    k = max(median_rank(n, confidence), 1)
    return v[k - 1], v[n - k]


def level_interval(values: Any, level: float) -> tuple[Any, Any]:
    """Return the order-statistic interval for the median at ``level`` in (0, 1], strictly:
    ``(-inf, inf)`` (deciding nothing) where no rank reaches ``level``, not ``(min, max)``.

    ``values`` is ``(n,)`` or ``(S, n)`` (S sets at once).  Returns ``(low, high)``: floats,
    or ``(S,)`` float64 arrays.  Raises ValueError for no values, more than two dimensions or
    a level outside (0, 1].
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim not in (1, 2) or v.shape[-1] == 0:
        raise ValueError(f"level_interval needs (n,) or (S, n) values with n >= 1, got {v.shape}")
    n = v.shape[-1]
    k = median_rank(n, level)
    if k == 0:
        inf = np.full(v.shape[:-1], np.inf)
        low, high = -inf, inf
    else:
        part = np.partition(v, (k - 1, n - k), axis=-1)
        low, high = part[..., k - 1], part[..., n - k]
    if v.ndim == 1:
        return float(low), float(high)
    return low, high


def iqr(values: Sequence[float]) -> float:
    """Return the interquartile range of ``values``, in their unit (0 for fewer than 2 values),
    quartiles by ``statistics.quantiles(..., method="inclusive")``."""
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[2] - q[0]


def relative_iqr(values: Sequence[float]) -> float:
    """Return :func:`iqr` / median of ``values`` (0 for fewer than 2): 0.1 is about ±5 %."""
    if len(values) < 2:
        return 0.0
    return iqr(values) / statistics.median(values)


def decide(interval: tuple[float, float], at_least: float | None = None,
           at_most: float | None = None) -> Verdict:
    """Decide the claim "at least ``at_least`` / at most ``at_most``" from ``(low, high)``.

    Returns :data:`HOLDS` when the whole interval satisfies the claim, :data:`REFUTED` when the
    whole interval violates it, else :data:`UNDECIDED`.  Raises ValueError without a bound.
    """
    if at_least is None and at_most is None:
        raise ValueError("a claim needs at_least= or at_most=")
    low, high = interval
    lo = -math.inf if at_least is None else at_least
    hi = math.inf if at_most is None else at_most
    if lo <= low and high <= hi:
        return HOLDS
    if high < lo or low > hi:
        return REFUTED
    return UNDECIDED


def spent_alpha(t: float, alpha: float) -> float:
    """Return the one-sided error a plan may have spent once a fraction ``t`` of it is measured.

    The Pocock-type spending function of Lan & DeMets (Biometrika 70 (1983) 659-663),
    ``alpha * ln(1 + (e - 1) t)``, spends fairly evenly, so an early look can decide a large
    effect (O'Brien-Fleming's spends ~7e-6 of 2.5 % at a quarter, below a 12-pair sign test's
    2**-12).  ``t``: pairs measured / the plan's most, in [0, 1]; ``alpha`` in (0, 0.5).

    Returns the error spent by ``t``, in [0, alpha] (``spent_alpha(0.25, 0.025)`` is 0.0089).
    Raises ValueError for ``t`` or ``alpha`` out of range.
    """
    if not 0 <= t <= 1:
        raise ValueError(f"t must be in [0, 1], got {t}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    return alpha * math.log1p((math.e - 1) * t)


@dataclass(frozen=True)
class SequentialPlan:
    """A claim decided in at most ``looks`` looks, one after each batch of ``pairs`` values.

    Declared before anything is measured.  Look ``j``, after ``n_j`` values, takes the
    :func:`level_interval` at ``1 - 2 (f(t_j) - f(t_{j-1}))``, ``f`` = :func:`spent_alpha`,
    ``t_j = n_j / max_pairs``; the last look (the plan's, or the budget's) spends the rest.
    Each look misses the median on a side with at most its increment, so all looks together
    miss it with at most ``alpha`` (Bonferroni; repeated confidence intervals, Jennison &
    Turnbull, *Group Sequential Methods*, Chapman & Hall/CRC 2000, ch. 9), provided the values
    are independent and the looks' sizes depend on the clock, not on the values.

    Attributes:
        pairs: values per look (the first batch's size), >= 1.
        looks: the most looks, >= 1 (1: one fixed-size look at ``confidence``).
        confidence: the coverage of all looks together, in (0, 1); ``alpha = (1 -
            confidence) / 2`` per side.  ``SequentialPlan(12).level([12])`` is 0.982.

    Raises:
        ValueError: for ``pairs < 1``, ``looks < 1`` or a confidence outside (0, 1).
    """

    pairs: int
    looks: int = 4
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.pairs < 1 or self.looks < 1:
            raise ValueError(f"a plan needs pairs >= 1 and looks >= 1, got pairs={self.pairs}, "
                             f"looks={self.looks}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")

    @property
    def alpha(self) -> float:
        """The one-sided error of the whole plan, per side: ``(1 - confidence) / 2``."""
        return (1 - self.confidence) / 2

    @property
    def max_pairs(self) -> int:
        """The most values the plan measures: ``pairs * looks``."""
        return self.pairs * self.looks

    def level(self, sizes: Sequence[int], final: bool = False) -> float:
        """Return the coverage of the last look's interval, in (0, 1] (1: nothing to spend).

        ``sizes``: values in all at each look so far, nondecreasing, at most :attr:`looks`
        (``[12, 24]``: the second look); ``final``: this look spends the rest.  Raises
        ValueError for no sizes, more than :attr:`looks`, or decreasing or negative sizes.
        """
        sizes = list(sizes)
        if not sizes or len(sizes) > self.looks:
            raise ValueError(f"a plan of {self.looks} looks has no look after sizes {sizes}")
        if sizes[0] < 0 or any(b < a for a, b in zip(sizes, sizes[1:])):
            raise ValueError(f"sizes must be nondecreasing counts, got {sizes}")

        def t(n: int) -> float:
            return min(1.0, n / self.max_pairs)

        before = spent_alpha(t(sizes[-2]), self.alpha) if len(sizes) > 1 else 0.0
        final = final or len(sizes) == self.looks
        now = self.alpha if final else spent_alpha(t(sizes[-1]), self.alpha)
        return min(1.0, 1 - 2 * (now - before))


@dataclass(frozen=True)
class SequentialDecision:
    """What :func:`decide_sequentially` decided for ``S`` comparisons: ``(S,)`` arrays of
    ``verdicts`` (object), ``pairs`` (int: values used), ``levels`` (float: the last look's
    coverage) and ``looks`` (int); ``sizes``: the values in all at each look (shared)."""

    verdicts: np.ndarray
    pairs: np.ndarray
    levels: np.ndarray
    looks: np.ndarray
    sizes: tuple[int, ...]


def decide_sequentially(first: Any, more: Callable[[np.ndarray, int], Any],
                        plan: SequentialPlan, at_least: float | None = None,
                        at_most: float | None = None,
                        out_of_time: Callable[[], bool] | None = None) -> SequentialDecision:
    """Decide a claim about the median of values that arrive in batches, under ``plan``.

    After each batch the look's interval (:meth:`SequentialPlan.level`) is decided by
    :func:`decide`; a comparison stops at its first decisive look, or at the last (the plan's,
    or after ``out_of_time()`` said so).  Vectorised over ``S`` comparisons (``compare``: 1).

    Args:
        first: the first batch, ``(S, n1)`` values (or ``(n1,)`` for one comparison).
        more: ``more(rows, done)`` returns the next batch, ``(len(rows), m)`` values, for the
            comparisons ``rows`` (indices into ``S``) still undecided after ``done`` values
            each; ``m`` may be 0 (a deadline cut the batch to nothing).
        plan: the looks, their batch size and the confidence, declared in advance.
        at_least, at_most: the claim (as :func:`decide`).
        out_of_time: called after a batch arrived, before it is looked at; ``True`` makes this
            look the last.  It must not depend on the values (a wall clock does not).

    Returns:
        A :class:`SequentialDecision`, one entry per comparison.

    Raises:
        ValueError: without a bound, for a first batch that is not ``(S, n1)`` with ``n1 >= 1``,
            or for a batch of the wrong number of rows.
    """
    if at_least is None and at_most is None:
        raise ValueError("a claim needs at_least= or at_most=")
    rows = np.asarray(first, dtype=np.float64)
    rows = rows[None, :] if rows.ndim == 1 else rows
    if rows.ndim != 2 or rows.shape[1] == 0:
        raise ValueError(f"the first batch must be (S, n1) values with n1 >= 1, got {rows.shape}")
    count = rows.shape[0]
    verdicts = np.full(count, UNDECIDED, dtype=object)
    used, looks = np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64)
    levels = np.ones(count)
    active, sizes = np.arange(count), []
    while True:
        sizes.append(rows.shape[1])
        final = len(sizes) == plan.looks or bool(out_of_time and out_of_time())
        level = plan.level(sizes, final)
        lows, highs = level_interval(rows, level)
        got = np.array([decide((lo, hi), at_least, at_most) for lo, hi in zip(lows, highs)],
                       dtype=object)
        stop = np.ones(len(active), dtype=bool) if final else got != UNDECIDED
        done = active[stop]
        verdicts[done], used[done], levels[done], looks[done] = got[stop], sizes[-1], level, \
            len(sizes)
        active, rows = active[~stop], rows[~stop]
        if not len(active):
            break
        new = np.asarray(more(active, sizes[-1]), dtype=np.float64)
        new = new[None, :] if new.ndim == 1 and len(active) == 1 else new
        if new.ndim != 2 or new.shape[0] != len(active):
            raise ValueError(f"more() must return ({len(active)}, m) values, got {new.shape}")
        rows = np.concatenate([rows, new], axis=1)
    return SequentialDecision(verdicts, used, levels, looks, tuple(sizes))
