import time

import pytest
import torch

from accelkit import bench


def test_measure_reports_units():
    x = torch.ones(64, 64)
    t = bench.measure(lambda: x @ x, label="mm", flops=2 * 64**3, bytes_moved=3 * 64 * 64 * 4,
                      samples=64, min_run_time=0.05)
    assert t.median_s > 0 and t.tflops > 0 and t.gbps > 0 and t.samples_per_s > 0
    assert t.label == "mm" and "TFLOP/s" in str(t)


def test_compare_detects_the_faster_callable():
    fast = lambda: time.sleep(0.0005)  # noqa: E731
    slow = lambda: time.sleep(0.003)  # noqa: E731
    c = bench.compare(slow, fast, labels=("slow", "fast"), min_run_time=0.2, pairs=12, warmup=0)
    assert c.speedup > 2, c  # would be ~1 if the two were swapped or timed the same fn
    assert c.baseline.label == "slow" and len(c.ratios) == 12
    assert c.interval[0] > 1.5 and c.verdict(at_least=1.5) == bench.HOLDS
    assert c.verdict(at_least=50) == bench.REFUTED


def test_pairs_alternate_their_order(monkeypatch):
    order = []
    real = bench._sample

    def spy(fn, number, threads):
        order.append(fn.__name__)
        return real(fn, number, threads)

    def a():
        pass

    def b():
        pass

    monkeypatch.setattr(bench, "_sample", spy)
    bench.compare(a, b, pairs=4, warmup=0, min_run_time=1e-3)
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a"], order


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError):
        bench.measure(lambda: None, min_run_time=0)
    with pytest.raises(ValueError):
        bench.measure(lambda: None, threads=0)
    with pytest.raises(ValueError):
        bench.compare(lambda: None, lambda: None, pairs=1)


def _fake(ratios):
    t = bench.Timing("b", tuple(1.0 for _ in ratios))
    c = bench.Timing("c", tuple(1.0 / r for r in ratios))
    return bench.Comparison(t, c)


def test_verdicts_decide_from_the_interval_not_the_median():
    clear = _fake([2.0, 2.1, 2.2, 1.9, 2.05, 2.15, 1.95, 2.0])
    assert clear.verdict(at_least=1.5) == bench.HOLDS
    assert clear.verdict(at_least=3.0) == bench.REFUTED
    assert clear.verdict(at_most=1.5) == bench.REFUTED and clear.verdict(at_most=3) == bench.HOLDS
    two_modes = _fake([0.8, 2.5, 0.9, 2.4, 0.85, 2.6, 0.95, 2.3])  # median 1.6, spread wide
    assert two_modes.speedup > 1.5 and two_modes.verdict(at_least=1.5) == bench.UNDECIDED
    with pytest.raises(ValueError):
        clear.verdict()
    assert "8 pairs" in clear.summary() and "interval" in str(clear)


def test_a_claim_keeps_measuring_until_decided_or_out_of_budget():
    calls = {"n": 0}

    def noisy():  # two modes, alternating call by call: 2x faster, then 2x slower
        calls["n"] += 1
        time.sleep(0.005 if calls["n"] % 2 else 0.02)

    base = lambda: time.sleep(0.01)  # noqa: E731 - every call outlasts a sample: 1 call each
    c = bench.compare(base, noisy, pairs=6, warmup=0, min_run_time=0.02, at_least=1.0,
                      budget_s=0.3)
    assert len(c.ratios) > 6 and c.extra["claim"] == {"at_least": 1.0, "at_most": None}
    decided = bench.compare(base, lambda: time.sleep(0.0002), pairs=6, warmup=0,
                            min_run_time=0.02, at_least=1.5, budget_s=5)
    assert decided.verdict(at_least=1.5) == bench.HOLDS and len(decided.ratios) == 6


def test_threads_are_applied():
    seen = []
    bench.measure(lambda: seen.append(torch.get_num_threads()), threads=1, min_run_time=0.01,
                  warmup=0)
    assert set(seen) == {1}


def test_table_and_format():
    t1 = bench.Timing("a", (0.002, 0.002))
    t2 = bench.Timing("b", (0.001, 0.001))
    md = bench.table([t1, t2])
    assert "2.00x" in md and md.count("\n") == 3
    assert bench.format_time(0.0015) == "1.5 ms"
    with pytest.raises(ValueError):
        bench.table([])


def test_iqr_of_spread_times():
    t = bench.Timing("x", (1.0, 2.0, 3.0, 4.0, 5.0))
    assert t.median_s == 3.0 and t.iqr_s == 2.0


def test_finding_says_faster_slower_or_no_clear_difference():
    assert _fake([2.0] * 8).finding().startswith("c is faster than b: 2.00x")
    assert _fake([0.5] * 8).finding().startswith("c is slower than b: 0.50x its speed")
    assert _fake([0.8, 1.2] * 4).finding().startswith("no clear difference between c and b")


def test_fit_size_doubles_while_one_call_fits():
    sizes = []

    def make(m):
        sizes.append(m)
        return lambda: time.sleep(1e-6 * m**2)  # 2-exponent work: 16 ms at 128

    assert bench.fit_size(make, 128, max_call_s=1.0, exponent=2) == (128, "")
    sizes.clear()
    size, why = bench.fit_size(make, 1024, max_call_s=0.1, exponent=2)
    assert size == 256 and sizes == [128, 256], sizes  # 512 predicted at 0.26 s: not timed
    assert "at 1024 one call would take about 1" in why and "at 256" in why
    assert bench.fit_size(make, 1024, max_call_s=1e-6, exponent=2)[0] == 128  # never below
    assert bench.fit_size(make, 512, max_call_s=0.5, exponent=2) == (512, "")
    with pytest.raises(ValueError):
        bench.fit_size(make, 0, max_call_s=1)


def test_a_slowed_machine_still_ends_in_bounded_time():
    slow = lambda: time.sleep(0.05)  # noqa: E731 - one call far longer than a sample's share
    c = bench.compare(slow, slow, pairs=40, warmup=0, min_run_time=0.04, at_least=2.0,
                      budget_s=0.2)
    assert bench.MIN_PAIRS <= len(c.ratios) < 20, len(c.ratios)
    assert c.verdict(at_least=2.0) == bench.REFUTED
