"""Distribution-free statistics of repeated measurements, and the rules that decide a claim.

Owns: the confidence interval of a median (:func:`median_interval`, :func:`median_rank`), the
spread (:func:`iqr`, :func:`relative_iqr`), the verdict rule (:func:`decide`) with its three
verdicts (:class:`Verdict`: :data:`HOLDS`, :data:`REFUTED`, :data:`UNDECIDED`), and the
sequential rule that decides a claim while more measurements arrive (:class:`SequentialPlan`,
:func:`decide_sequentially`, :func:`spent_alpha`).  Plain numbers in, plain numbers out:
nothing here times anything or imports torch.

Why a sequential rule: looking at a 95 % interval after every batch and stopping at the first
decisive look spends the 5 % error at *every* look, so the error rate grows with the number
of looks (Armitage, McPherson & Rowe, "Repeated significance tests on accumulating data",
JRSS A 132 (1969) 235-244).  :func:`decide_sequentially` bounds the looks in advance and
takes each look's interval at the error it may still spend (Lan & DeMets, "Discrete
sequential boundaries for clinical trials", Biometrika 70 (1983) 659-663), so the error rate
over all looks together stays at the plan's.

Lives elsewhere: taking the measurements and pairing them (:mod:`accelkit.bench`, whose
``Comparison`` applies these to per-pair speed ratios), failing a notebook on a verdict
(:func:`accelkit.claims.assert_speedup`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


class Verdict(str):
    """A verdict of :func:`decide`: the string a message prints, asked with ``.holds`` etc.

    One of :data:`HOLDS` (``"holds"``), :data:`REFUTED` (``"does not hold here"``) and
    :data:`UNDECIDED` (``"too noisy to decide"``); equal to its plain string.
    """

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

    ``[v_(k), v_(n-k+1)]`` (values sorted, 1-based) misses the true median below with
    probability ``P(Binomial(n, 1/2) <= k - 1)``, and as often above; ``k`` is the largest
    rank keeping the two together within ``1 - confidence`` (Conover, *Practical
    Nonparametric Statistics*, 3rd ed., §3.2).  Only independence and a continuous
    distribution are assumed, not normality.

    Args:
        n: how many values (>= 0).
        confidence: the coverage wanted, in (0, 1]; 1 asks for certainty, which no finite
            interval gives (the answer is then 0).

    Returns:
        ``k`` in ``0 .. n // 2``; 0 when even ``(min, max)`` covers the median with less than
        ``confidence`` (fewer than 6 values at 95 %).

    Raises:
        ValueError: for ``n < 0`` or a confidence outside (0, 1].

    Example: ``median_rank(10, 0.95) == 2``: the interval is ``(v_(2), v_(9))``.
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
    """Return a distribution-free confidence interval for the median of ``values``.

    Order statistics: with ``n`` sorted values, ``[v_(k), v_(n-k+1)]`` covers the true median
    with probability ``1 - 2 P(Binomial(n, 1/2) < k)``; ``k`` is :func:`median_rank`, the
    largest index keeping that at least ``confidence`` (Conover, *Practical Nonparametric
    Statistics*, 3rd ed., §3.2).  It assumes only that the values are independent draws, not
    that they are normal, which matters on a machine whose speed has modes.

    Args:
        values: at least one number (per-pair speed ratios, say).
        confidence: the coverage wanted, in (0, 1).

    Returns:
        ``(low, high)``.  With too few values for ``confidence`` (fewer than 6 at 95 %) it is
        ``(min, max)``, which then covers the median with less than ``confidence``
        (:func:`level_interval` refuses instead).

    Raises:
        ValueError: for no values or a confidence outside (0, 1).
    """
    if not values:
        raise ValueError("median_interval needs at least one value")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    v, n = sorted(values), len(values)
    k = max(median_rank(n, confidence), 1)
    return v[k - 1], v[n - k]


def level_interval(values: Any, level: float) -> tuple[Any, Any]:
    """Return the order-statistic interval for the median at ``level``, or none where too few.

    Like :func:`median_interval`, but strict: where no rank reaches ``level``
    (:func:`median_rank` is 0) the interval is ``(-inf, inf)``, which decides nothing,
    instead of ``(min, max)`` at a lower coverage.  A sequential look must not claim more
    than the error it was given.

    Args:
        values: ``(n,)`` numbers, or ``(S, n)`` for ``S`` sets of ``n`` values at once.
        level: the coverage of this interval, in (0, 1].

    Returns:
        ``(low, high)``: floats for ``(n,)`` values, ``(S,)`` float64 arrays for ``(S, n)``.

    Raises:
        ValueError: for no values, more than two dimensions or a level outside (0, 1].
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
    """Return the interquartile range of ``values``, in their unit (0 for fewer than 2 values).

    Quartiles by ``statistics.quantiles(..., method="inclusive")`` (linear interpolation
    between the order statistics, the data's min and max as the 0th and 100th percentile).
    """
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[2] - q[0]


def relative_iqr(values: Sequence[float]) -> float:
    """Return :func:`iqr` of ``values`` divided by their median (0 for fewer than 2 values).

    0.1 means the middle half of the values lies within about ±5 % of the median.
    """
    if len(values) < 2:
        return 0.0
    return iqr(values) / statistics.median(values)


def decide(interval: tuple[float, float], at_least: float | None = None,
           at_most: float | None = None) -> Verdict:
    """Decide a claim about a quantity from its confidence interval.

    Args:
        interval: ``(low, high)``, e.g. from :func:`median_interval`.
        at_least: the claim "the quantity is at least this" (a lower bound).
        at_most: the claim "the quantity is at most this" (an upper bound).

    Returns:
        A :class:`Verdict`: :data:`HOLDS` (``.holds``) when the whole interval satisfies the
        claim, :data:`REFUTED` (``.refuted``) when the whole interval violates it, else
        :data:`UNDECIDED` (``.undecided``).

    Raises:
        ValueError: when neither bound is given.
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


# ------------------------------------------------------------- sequential decisions
def spent_alpha(t: float, alpha: float) -> float:
    """Return the one-sided error a plan may have spent once a fraction ``t`` of it is measured.

    The Pocock-type spending function of Lan & DeMets (Biometrika 70 (1983) 659-663),
    ``alpha * ln(1 + (e - 1) t)``: 0 at ``t = 0``, ``alpha`` at ``t = 1``, spent fairly evenly
    over the looks, so that an early look can already decide a large effect.  (The
    O'Brien-Fleming-type function spends about 7e-6 of a 2.5 % error at a quarter of the
    plan: a sign test on 12 pairs cannot go below 2**-12 = 2.4e-4, so every claim would
    cost at least two batches.)

    Args:
        t: the information fraction: pairs measured / the plan's most pairs, in [0, 1].
        alpha: the plan's one-sided error, in (0, 0.5).

    Returns:
        The error spent by ``t``, in [0, alpha].

    Raises:
        ValueError: for ``t`` outside [0, 1] or ``alpha`` outside (0, 0.5).

    Example: ``spent_alpha(0.25, 0.025)`` is 0.0089: a first look of four may spend 0.89 %.
    """
    if not 0 <= t <= 1:
        raise ValueError(f"t must be in [0, 1], got {t}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    return alpha * math.log1p((math.e - 1) * t)


@dataclass(frozen=True)
class SequentialPlan:
    """A claim decided in at most ``looks`` looks, one after each batch of ``pairs`` values.

    Declared before anything is measured: the most looks and the batch size fix the most
    values (:attr:`max_pairs`).  Look ``j``, after ``n_j`` values in all, takes the
    order-statistic interval of the median (:func:`level_interval`) at the level
    ``1 - 2 (f(t_j) - f(t_{j-1}))``, ``f`` = :func:`spent_alpha`, ``t_j = n_j / max_pairs``:
    each look spends, on each side, the increment of the spending function since the
    previous look; the last look (``final``: the plan's last, or the one after which the time
    budget ran out) spends all that is left.  A claim is decided at the first look whose
    interval lies on one side of its bound.

    Why the error rate holds: a look's interval misses the median on one side with
    probability at most its increment, so the chance that *any* look misses it, on that
    side, is at most the sum of the increments, ``alpha`` (Bonferroni; the repeated
    confidence intervals of Jennison & Turnbull, *Group Sequential Methods with
    Applications to Clinical Trials*, Chapman & Hall/CRC 2000, ch. 9).  With the true median
    exactly at a floor, "holds" is said in at most ``alpha`` of comparisons, "does not hold"
    in at most ``alpha``, however many looks were taken.  This needs the values to be
    independent draws (the order-statistic interval's assumption) and the sizes of the looks,
    and which look is the last, not to depend on the values themselves (they depend on the
    clock: batches cut short at a deadline, the budget).

    Attributes:
        pairs: values per look (the first batch's size), >= 1.
        looks: the most looks, >= 1 (1: one fixed-size look at ``confidence``).
        confidence: the coverage of all the looks' intervals together, in (0, 1);
            ``alpha = (1 - confidence) / 2`` per side.

    Raises:
        ValueError: for ``pairs < 1``, ``looks < 1`` or a confidence outside (0, 1).

    Example: ``SequentialPlan(12).level([12])`` is 0.982: the first of four looks at 12 pairs
    takes a 98.2 % interval; ``.level([12, 24])`` is 0.987.
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
        """Return the coverage of the interval at the last of the looks made at ``sizes``.

        Args:
            sizes: the values in all at each look so far, nondecreasing, at most
                :attr:`looks` of them (``[12, 24]``: this is the second look, at 24 values).
            final: this look is the last (the plan's last or the budget's): it spends the
                rest of the error.

        Returns:
            The confidence for :func:`level_interval`, in (0, 1]; 1 where the look may spend
            nothing (no new values since the previous one): it decides nothing.

        Raises:
            ValueError: for no sizes, more than :attr:`looks`, or decreasing or negative sizes.
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
    """What :func:`decide_sequentially` decided for each of ``S`` comparisons.

    Attributes:
        verdicts: ``(S,)`` :data:`HOLDS`, :data:`REFUTED` or :data:`UNDECIDED` (object array).
        pairs: ``(S,)`` int: the values each comparison used (the size of its last look).
        levels: ``(S,)`` float: the coverage of each one's last interval
            (:meth:`SequentialPlan.level`), to rebuild it with :func:`level_interval`.
        looks: ``(S,)`` int: how many looks each took.
        sizes: the values in all at each look (shared: every comparison still undecided at a
            look received the same number of new values).
    """

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

    After each batch (a look) the interval at the look's level (:meth:`SequentialPlan.level`,
    :func:`level_interval`) is set against the claim by :func:`decide`; a comparison stops at
    the first look that decides it, and at the plan's last look, or the look after which
    ``out_of_time()`` says the time is spent, whatever it shows.  Vectorised: ``S``
    comparisons are decided at once (the error-rate simulation runs thousands);
    :func:`accelkit.bench.compare` runs this with ``S = 1``.

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

    Example: ``decide_sequentially(rng.normal(1.3, 0.1, (1000, 12)), draw, SequentialPlan(12),
    at_least=1.0)`` decides 1000 simulated claims.
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
