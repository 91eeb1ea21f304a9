"""Distribution-free statistics of repeated measurements, and the rule that decides a claim.

Owns: the confidence interval of a median (:func:`median_interval`), the spread
(:func:`iqr`, :func:`relative_iqr`), and the verdict rule (:func:`decide`) with its three verdicts
(:data:`HOLDS`, :data:`REFUTED`, :data:`UNDECIDED`).  Plain numbers in, plain numbers out:
nothing here times anything or imports torch.

Lives elsewhere: taking the measurements and pairing them (:mod:`accelkit.bench`, whose
``Comparison`` applies these to per-pair speed ratios and re-exports the verdicts), failing a
notebook on a verdict (:func:`accelkit.checks.assert_speedup`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

#: The verdicts :func:`decide` gives a claim about a measured quantity.
HOLDS, REFUTED, UNDECIDED = "holds", "does not hold here", "too noisy to decide"


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Return a distribution-free confidence interval for the median of ``values``.

    Order statistics: with ``n`` sorted values, ``[v_(k), v_(n-k+1)]`` covers the true median
    with probability ``1 - 2 P(Binomial(n, 1/2) < k)``; ``k`` is the largest index keeping that
    at least ``confidence`` (Conover, *Practical Nonparametric Statistics*, 3rd ed., §3.2).
    It assumes only that the values are independent draws, not that they are normal, which
    matters on a machine whose speed has modes.

    Args:
        values: at least one number (per-pair speed ratios, say).
        confidence: the coverage wanted, in (0, 1).

    Returns:
        ``(low, high)``.  With too few values for ``confidence`` (fewer than 6 at 95 %) it is
        ``(min, max)``, which then covers the median with less than ``confidence``.

    Raises:
        ValueError: for no values or a confidence outside (0, 1).
    """
    if not values:
        raise ValueError("median_interval needs at least one value")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    v, n = sorted(values), len(values)
    tail, k = 0.0, 0
    for j in range(n // 2):  # P(X <= j) for X ~ Binomial(n, 1/2)
        tail += math.comb(n, j) / 2**n
        if 2 * tail > 1 - confidence:
            break
        k = j + 1
    k = max(k, 1)
    return v[k - 1], v[n - k]


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
           at_most: float | None = None) -> str:
    """Decide a claim about a quantity from its confidence interval.

    Args:
        interval: ``(low, high)``, e.g. from :func:`median_interval`.
        at_least: the claim "the quantity is at least this" (a lower bound).
        at_most: the claim "the quantity is at most this" (an upper bound).

    Returns:
        :data:`HOLDS` when the whole interval satisfies the claim, :data:`REFUTED` when the
        whole interval violates it, else :data:`UNDECIDED`.

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
