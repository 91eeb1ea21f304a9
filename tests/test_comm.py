"""accelkit.comm: the ring all-reduce model (pure arithmetic), timing collectives alone (a
group of one) and without a group, and GPipe's schedule and bubble.

Collectives on a real 2-rank gloo group are measured in test_dist.py (slow)."""

import pytest
import torch

from accelkit import comm


def test_ring_cost_model_and_fit():
    # 2 ranks move 2*(1/2)*S = S bytes each; 1 GB at 1 GB/s = 1 s (+ latency).
    assert comm.ring_allreduce_s(1e9, 2, 1.0) == pytest.approx(1.0)
    assert comm.ring_allreduce_s(1e9, 4, 1.0, latency_s=0.5) == pytest.approx(0.5 + 1.5)
    assert comm.ring_allreduce_s(1e9, 1, 1.0) == 0.0
    sizes = [1e3, 1e5, 1e6, 1e7]
    times = [comm.ring_allreduce_s(s, 2, 2.5, 1e-4) for s in sizes]
    lat, bw = comm.fit_allreduce(sizes, times, 2)
    assert lat == pytest.approx(1e-4) and bw == pytest.approx(2.5)
    with pytest.raises(ValueError):
        comm.ring_allreduce_s(1, 2, 0)
    with pytest.raises(ValueError, match="grow"):
        comm.fit_allreduce([1, 2], [2.0, 1.0], 2)
    with pytest.raises(ValueError):
        comm.fit_allreduce([1], [1.0], 2)


def test_two_regime_fit_takes_latency_from_small_and_bandwidth_from_large():
    # small messages cost 0.45 ms; large ones follow 0.8 ms + S / (1 GB/s): one line through
    # all of them would overestimate the small ones, the two-regime fit does not
    small = [1024, 4096, 16384]
    large = [4 << 20, 16 << 20]
    times = [0.45e-3] * 3 + [0.8e-3 + s / 1e9 for s in large]
    fit = comm.fit_two_regime(small + large, times, 2, small_max_bytes=16384,
                            large_min_bytes=4 << 20)
    assert fit.bus_gbps == pytest.approx(1.0)
    assert fit.latency_s == pytest.approx(0.45e-3 - 4096 / 1e9)  # the median small size, less its bytes
    assert fit.predict_s(1024) == pytest.approx(0.45e-3, rel=0.02)
    one_lat, one_bus = comm.fit_allreduce(small + large, times, 2)  # one line through all
    one_err = abs(comm.ring_allreduce_s(1024, 2, one_bus, one_lat) - 0.45e-3)
    assert one_err > 5 * abs(fit.predict_s(1024) - 0.45e-3)


def test_two_regime_fit_rejects_bad_regimes():
    sizes, times = [1024, 1 << 20, 1 << 22], [1e-4, 1e-3, 4e-3]
    with pytest.raises(ValueError, match="exceed"):
        comm.fit_two_regime(sizes, times, 2, small_max_bytes=1 << 20, large_min_bytes=1024)
    with pytest.raises(ValueError, match="latency"):
        comm.fit_two_regime(sizes, times, 2, small_max_bytes=512, large_min_bytes=1 << 20)
    with pytest.raises(ValueError):  # one large size: no slope
        comm.fit_two_regime(sizes, times, 2, small_max_bytes=1024, large_min_bytes=1 << 22)
    with pytest.raises(ValueError, match="one time per size"):
        comm.fit_two_regime(sizes, times[:2], 2, small_max_bytes=1024, large_min_bytes=1 << 20)


def test_time_collective_alone_and_its_arguments(no_launcher):
    t = comm.time_collective(lambda: torch.ones(4).sum(), number=3, repeats=2, warmup=0)
    assert len(t.times_s) == 2 and t.median_s > 0
    with pytest.raises(ValueError):
        comm.time_collective(lambda: None, number=0)
    with pytest.raises(RuntimeError, match="process group"):
        comm.measure_allreduce([4])


def test_allreduce_vs_model_needs_a_group(no_launcher):
    with pytest.raises(RuntimeError, match="process group"):
        comm.allreduce_vs_model(4096)


# ----------------------------------------------------------------------------- GPipe
@pytest.mark.parametrize("p,m", [(1, 1), (2, 4), (4, 12), (3, 1), (8, 32)])
def test_every_stage_idles_the_bubble_of_the_formula(p, m):
    slots = comm.gpipe_schedule(p, m)
    length = comm.schedule_length(p, m)
    assert len(slots) == 2 * p * m
    for s in range(p):
        busy = [x.start for x in slots if x.stage == s]
        # fails when a stage runs two things at once or a slot lies outside the step
        assert len(set(busy)) == len(busy) and 0 <= min(busy) and max(busy) < length
        assert 1 - len(busy) / length == pytest.approx(comm.bubble_fraction(p, m))


def test_schedule_respects_the_data_dependencies():
    p, m = 4, 6
    at = {(x.stage, x.kind, x.microbatch): x.start for x in comm.gpipe_schedule(p, m)}
    for i in range(m):
        for s in range(1, p):  # forward flows down the stages, backward back up
            assert at[(s, "F", i)] > at[(s - 1, "F", i)]
            assert at[(s - 1, "B", i)] > at[(s, "B", i)]
        assert at[(p - 1, "B", i)] > at[(p - 1, "F", m - 1)]  # backward after all forwards


def test_bubble_formula_and_errors():
    assert comm.bubble_fraction(4, 12) == pytest.approx(3 / 15)
    assert comm.bubble_fraction(1, 5) == 0.0
    with pytest.raises(ValueError):
        comm.bubble_fraction(0, 4)
    with pytest.raises(TypeError):
        comm.bubble_fraction(2.0, 4)
