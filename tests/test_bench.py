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
    c = bench.compare(slow, fast, labels=("slow", "fast"), min_run_time=0.1, rounds=2, warmup=0)
    assert c.speedup > 2, c  # would be ~1 if the two were swapped or timed the same fn
    assert c.baseline.label == "slow"


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError):
        bench.measure(lambda: None, min_run_time=0)
    with pytest.raises(ValueError):
        bench.measure(lambda: None, threads=0)
    with pytest.raises(ValueError):
        bench.compare(lambda: None, lambda: None, rounds=0)


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


def test_retry_below_measures_again_and_keeps_the_earlier_speedup():
    calls = {"n": 0}

    def candidate():
        calls["n"] += 1
        time.sleep(0.004 if calls["n"] < 40 else 0.0005)  # slow at first, then fast

    base = lambda: time.sleep(0.002)  # noqa: E731
    c = bench.compare(base, candidate, min_run_time=0.05, rounds=1, warmup=0,
                      retry_below=1.5, attempts=50)
    assert c.speedup >= 1.5 and c.extra["earlier_speedups"]
    assert all(s < 1.5 for s in c.extra["earlier_speedups"])
    assert "measured again" in str(c)
    once = bench.compare(base, lambda: time.sleep(0.004), min_run_time=0.05, rounds=1,
                         warmup=0, retry_below=1.5, attempts=1)
    assert "earlier_speedups" not in once.extra
    with pytest.raises(ValueError):
        bench.compare(base, base, attempts=0)
