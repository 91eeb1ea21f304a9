import math
import random

import numpy as np
import pytest

from accelkit import stats


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError):
        stats.median_interval([])
    with pytest.raises(ValueError):
        stats.median_interval([1.0], confidence=1.0)
    with pytest.raises(ValueError, match="at_least= or at_most="):
        stats.decide((1.0, 2.0))


def test_median_interval_is_the_order_statistic_interval():
    # n = 10: P(X <= 1) = 11/1024 = 1.07 % per tail, P(X <= 2) = 5.5 % -> k = 2 at 95 %
    values = [float(v) for v in range(1, 11)]
    assert stats.median_interval(values) == (2.0, 9.0)
    assert stats.median_interval(values, confidence=0.85) == (3.0, 8.0)  # 1 - 2 * 5.5 % = 89 %
    assert stats.median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few: (min, max)


def test_median_interval_covers_the_median_at_its_confidence():
    rng = random.Random(0)
    n, trials, covered = 15, 2000, 0
    for _ in range(trials):  # a skewed, two-mode distribution whose median is 1.0
        draws = [rng.choice((rng.uniform(0.5, 1.0), rng.uniform(1.0, 5.0))) for _ in range(n)]
        low, high = stats.median_interval(draws)
        covered += low <= 1.0 <= high
    assert 0.94 <= covered / trials <= 0.999, covered / trials


def test_decide_needs_the_whole_interval_on_one_side_of_the_bound():
    assert stats.decide((1.6, 2.2), at_least=1.5) == stats.HOLDS == "holds"
    v = stats.decide((1.6, 2.2), at_least=3.0)  # a Verdict: a string that answers .refuted etc.
    assert (v.holds, v.refuted, v.undecided) == (False, True, False) and f"{v}" == "does not hold here"
    assert stats.decide((1.6, 2.2), at_least=3.0) == stats.REFUTED
    assert stats.decide((1.4, 2.2), at_least=1.5) == stats.UNDECIDED
    assert stats.decide((0.6, 1.2), at_least=0.5, at_most=1.6) == stats.HOLDS
    assert stats.decide((0.6, 1.8), at_least=0.5, at_most=1.6) == stats.UNDECIDED
    assert stats.decide((1.7, 1.8), at_most=1.6) == stats.REFUTED


def test_iqr_and_relative_iqr():
    assert stats.iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == 2.0 and stats.iqr([7.0]) == 0.0
    assert stats.relative_iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2 / 3)
    assert stats.relative_iqr([]) == 0.0


def test_median_rank_is_median_intervals_rank_and_zero_where_none_reaches():
    values = [float(v) for v in range(1, 31)]
    for n in range(1, 31):
        for conf in (0.8, 0.95, 0.99):
            k = stats.median_rank(n, conf)
            assert stats.median_interval(values[:n], conf) == (values[max(k, 1) - 1],
                                                                values[n - max(k, 1)])
    assert stats.median_rank(5, 0.95) == 0 and stats.median_rank(6, 0.95) == 1  # 2/64 <= 5 %
    assert stats.median_rank(12, 1.0) == 0
    with pytest.raises(ValueError):
        stats.median_rank(5, 0.0)


def test_level_interval_is_strict_and_works_on_many_rows():
    rows = np.arange(24.0).reshape(2, 12)[:, ::-1]  # unsorted
    low, high = stats.level_interval(rows, 0.95)  # n = 12: k = 3
    assert low.tolist() == [2.0, 14.0] and high.tolist() == [9.0, 21.0]
    assert stats.level_interval(rows[0], 0.95) == (2.0, 9.0)
    assert stats.level_interval([1.0, 2.0, 3.0], 0.95) == (-math.inf, math.inf)  # not (min, max)
    with pytest.raises(ValueError):
        stats.level_interval([], 0.95)


def test_spent_alpha_is_the_pocock_type_function():
    assert stats.spent_alpha(0.0, 0.025) == 0.0 and stats.spent_alpha(1.0, 0.025) == 0.025
    assert stats.spent_alpha(0.25, 0.025) == pytest.approx(0.025 * math.log(1 + (math.e - 1) / 4))
    ts = np.linspace(0, 1, 11)
    assert all(np.diff([stats.spent_alpha(t, 0.025) for t in ts]) > 0)
    with pytest.raises(ValueError):
        stats.spent_alpha(1.5, 0.025)


def test_a_plans_looks_spend_its_error_and_no_more():
    plan = stats.SequentialPlan(12)  # 4 looks of 12
    sizes = [12, 24, 36, 48]
    levels = [plan.level(sizes[:j]) for j in range(1, 5)]
    assert levels[0] == pytest.approx(0.98213, abs=1e-5) and levels[1] == pytest.approx(0.98686, abs=1e-5)
    assert sum((1 - v) / 2 for v in levels) == pytest.approx(plan.alpha)  # all of it, by look 4
    # the budget ran out at look 2: it spends what is left
    assert (1 - levels[0]) / 2 + (1 - plan.level(sizes[:2], final=True)) / 2 == pytest.approx(0.025)
    assert plan.level([12, 12]) == 1.0  # a look without new pairs may spend nothing
    for bad in ([], [12, 6], [12, 24, 36, 48, 60]):
        with pytest.raises(ValueError):
            plan.level(bad)
    with pytest.raises(ValueError):
        stats.SequentialPlan(12, looks=0)


def _exact_holds(level_of, sizes):
    """P("holds") for a claim 'median >= m' when the true median is m, exactly.

    A look says "holds" when fewer than k of its n values lie below m (k = its rank) and
    "does not hold" when fewer than k lie above; the count below is a Binomial(n, 1/2) walk
    whatever the distribution, so this is the rule's error rate for every continuous noise.
    """
    dist, prev, holds = np.array([1.0]), 0, 0.0
    for j, n in enumerate(sizes, 1):
        m, prev = n - prev, n
        dist = np.convolve(dist, [math.comb(m, i) / 2**m for i in range(m + 1)])
        k = stats.median_rank(n, level_of(sizes[:j], j == len(sizes)))
        if k:
            holds += dist[:k].sum()
            dist[:k] = 0
            dist[n - k + 1:] = 0  # decided the other way: stops too
    return holds


@pytest.mark.parametrize("pairs", [6, 8, 12, 16, 30])
@pytest.mark.parametrize("looks", [1, 2, 4, 6])
def test_the_error_rate_holds_exactly_for_any_noise(pairs, looks):
    plan = stats.SequentialPlan(pairs, looks)
    full = [pairs * j for j in range(1, looks + 1)]
    for last in range(1, looks + 1):  # every look may be the last (the budget ran out)
        assert _exact_holds(plan.level, full[:last]) <= plan.alpha
    cut = [6] + [6 + pairs * j for j in range(1, looks)]  # a deadline cut the first batch
    assert _exact_holds(plan.level, cut) <= plan.alpha


def test_a_95_percent_interval_at_every_look_does_not_hold_its_rate():
    sizes = [12, 24, 36, 48]
    assert _exact_holds(lambda s, final: 0.95, sizes) > 0.04  # the rule compare had before


def test_decide_sequentially_checks_its_input():
    plan = stats.SequentialPlan(6, looks=2)
    with pytest.raises(ValueError, match="at_least= or at_most="):
        stats.decide_sequentially([1.0] * 6, lambda r, d: [1.0] * 6, plan)
    with pytest.raises(ValueError, match="first batch"):
        stats.decide_sequentially(np.zeros((2, 0)), lambda r, d: [], plan, at_least=1.0)
    with pytest.raises(ValueError, match=r"more\(\) must return"):
        stats.decide_sequentially(np.ones((2, 6)), lambda r, d: np.ones((3, 6)), plan,
                                  at_least=1.5)
    one = stats.decide_sequentially([2.0] * 6, lambda r, d: [2.0] * 6, plan, at_least=1.5)
    assert one.verdicts.tolist() == [stats.HOLDS] and one.sizes == (6, 12)
    assert one.looks.tolist() == [2] and one.pairs.tolist() == [12]
