import random

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
    assert stats.decide((1.6, 2.2), at_least=1.5) == stats.HOLDS
    assert stats.decide((1.6, 2.2), at_least=3.0) == stats.REFUTED
    assert stats.decide((1.4, 2.2), at_least=1.5) == stats.UNDECIDED
    assert stats.decide((0.6, 1.2), at_least=0.5, at_most=1.6) == stats.HOLDS
    assert stats.decide((0.6, 1.8), at_least=0.5, at_most=1.6) == stats.UNDECIDED
    assert stats.decide((1.7, 1.8), at_most=1.6) == stats.REFUTED


def test_iqr_and_relative_iqr():
    assert stats.iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == 2.0 and stats.iqr([7.0]) == 0.0
    assert stats.relative_iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2 / 3)
    assert stats.relative_iqr([]) == 0.0
