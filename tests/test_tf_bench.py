import pytest

from accelkit import bench, tf_bench


def test_tf_force_fetches_a_constant_number_of_bytes():
    tf = pytest.importorskip("tensorflow")
    small, big = tf.ones((4,)), tf.ones((1024, 1024))
    got_small, got_big = tf_bench.force(small), tf_bench.force({"a": big, "b": 3})
    assert sum(a.nbytes for a in got_small) == sum(a.nbytes for a in got_big) == 4
    assert tf_bench.sync(lambda: big)() is big


def test_measure_and_compare_time_tensorflow_callables():
    tf = pytest.importorskip("tensorflow")
    x = tf.ones((32, 32))
    t = tf_bench.measure(lambda: tf.matmul(x, x), min_run_time=0.02, warmup=1)
    assert isinstance(t, bench.Timing) and t.median_s > 0 and t.label == "<lambda>"
    c = tf_bench.compare(lambda: x + 1, lambda: x * 2, pairs=2, min_run_time=0.01, warmup=0)
    assert isinstance(c, bench.Comparison) and len(c.ratios) == 2
