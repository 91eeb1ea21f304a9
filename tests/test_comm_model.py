"""accelkit.comm_model: the ring all-reduce cost model (pure arithmetic, no process group)."""

import pytest

from accelkit import comm_model as cm


def test_ring_cost_model_and_fit():
    # 2 ranks move 2*(1/2)*S = S bytes each; 1 GB at 1 GB/s = 1 s (+ latency).
    assert cm.ring_allreduce_s(1e9, 2, 1.0) == pytest.approx(1.0)
    assert cm.ring_allreduce_s(1e9, 4, 1.0, latency_s=0.5) == pytest.approx(0.5 + 1.5)
    assert cm.ring_allreduce_s(1e9, 1, 1.0) == 0.0
    assert cm.bus_bandwidth_gbps(1e9, 2, 1.0) == pytest.approx(1.0)
    sizes = [1e3, 1e5, 1e6, 1e7]
    times = [cm.ring_allreduce_s(s, 2, 2.5, 1e-4) for s in sizes]
    lat, bw = cm.fit_allreduce(sizes, times, 2)
    assert lat == pytest.approx(1e-4) and bw == pytest.approx(2.5)
    with pytest.raises(ValueError):
        cm.ring_allreduce_s(1, 2, 0)
    with pytest.raises(ValueError):
        cm.bus_bandwidth_gbps(1, 1, 1)
    with pytest.raises(ValueError, match="grow"):
        cm.fit_allreduce([1, 2], [2.0, 1.0], 2)
    with pytest.raises(ValueError):
        cm.fit_allreduce([1], [1.0], 2)


def test_fit_and_predict_recovers_the_model_and_handles_one_rank():
    sizes = [4096, 1 << 20, 1 << 24]
    times = [cm.ring_allreduce_s(s, 4, 10.0, 2e-5) for s in sizes]
    p = cm.fit_and_predict(sizes, times, 4, 5e6)
    assert p.latency_s == pytest.approx(2e-5) and p.bus_gbps == pytest.approx(10.0)
    assert p.predicted_s == pytest.approx(cm.ring_allreduce_s(5e6, 4, 10.0, 2e-5))
    assert (p.nbytes, p.world_size) == (5e6, 4)
    alone = cm.fit_and_predict(sizes, times, 1, 5e6)  # one rank sends nothing
    assert (alone.latency_s, alone.bus_gbps, alone.predicted_s) == (0.0, None, 0.0)
    with pytest.raises(ValueError, match="world_size"):
        cm.fit_and_predict(sizes, times, 0, 5e6)


def test_two_regime_fit_takes_latency_from_small_and_bandwidth_from_large():
    # small messages cost 0.45 ms; large ones follow 0.8 ms + S / (1 GB/s): one line through
    # all of them would overestimate the small ones, the two-regime fit does not
    small = [1024, 4096, 16384]
    large = [4 << 20, 16 << 20]
    times = [0.45e-3] * 3 + [0.8e-3 + s / 1e9 for s in large]
    fit = cm.fit_two_regime(small + large, times, 2, small_max_bytes=16384,
                            large_min_bytes=4 << 20)
    assert fit.bus_gbps == pytest.approx(1.0)
    assert fit.latency_s == pytest.approx(0.45e-3 - 4096 / 1e9)  # the median small size, less its bytes
    assert fit.predict_s(1024) == pytest.approx(0.45e-3, rel=0.02)
    one_lat, one_bus = cm.fit_allreduce(small + large, times, 2)  # one line through all
    one_err = abs(cm.ring_allreduce_s(1024, 2, one_bus, one_lat) - 0.45e-3)
    assert one_err > 5 * abs(fit.predict_s(1024) - 0.45e-3)
    assert fit.crossover_bytes == pytest.approx(fit.latency_s * 1e9)
    # halving the bytes of a 4.5 MB buffer: (α + S/2B) / (α + S/B), not 0.5
    s = 4.5e6
    assert fit.time_ratio(s) == pytest.approx((fit.latency_s + s / 2e9) / (fit.latency_s + s / 1e9))
    assert 0.5 < fit.time_ratio(s) < 0.6


def test_two_regime_fit_rejects_bad_regimes():
    sizes, times = [1024, 1 << 20, 1 << 22], [1e-4, 1e-3, 4e-3]
    with pytest.raises(ValueError, match="exceed"):
        cm.fit_two_regime(sizes, times, 2, small_max_bytes=1 << 20, large_min_bytes=1024)
    with pytest.raises(ValueError, match="latency"):
        cm.fit_two_regime(sizes, times, 2, small_max_bytes=512, large_min_bytes=1 << 20)
    with pytest.raises(ValueError):  # one large size: no slope
        cm.fit_two_regime(sizes, times, 2, small_max_bytes=1024, large_min_bytes=1 << 22)
    with pytest.raises(ValueError, match="one time per size"):
        cm.fit_two_regime(sizes, times[:2], 2, small_max_bytes=1024, large_min_bytes=1 << 20)


def test_ring_latency_grows_with_the_ring_steps():
    # a ring all-reduce is 2(N-1) steps, each paying one message's start-up cost
    assert cm.ring_latency_s(5e-6, 8) == pytest.approx(14 * 5e-6)
    assert cm.ring_latency_s(5e-6, 1) == 0.0
    with pytest.raises(ValueError):
        cm.ring_latency_s(-1.0, 4)
    with pytest.raises(ValueError):
        cm.ring_latency_s(1e-6, 0)


def test_a_fit_moved_to_more_ranks_keeps_alpha_per_step_not_per_call():
    fit = cm.RingFit(1e-3, 1.0, 2)                 # 2 ranks: 2 steps of 0.5 ms
    assert fit.step_latency_s == pytest.approx(0.5e-3)
    assert fit.at(2) == fit
    big = fit.at(8)
    # fails if the latency is held fixed in N (the explorer's old behaviour): 14 steps, not 2
    assert big.latency_s == pytest.approx(7e-3) and big.bus_gbps == fit.bus_gbps
    assert big.predict_s(0) == pytest.approx(7 * fit.predict_s(0))
    # bytes term: 2(N-1)/N of the buffer at B, whatever the latency
    assert big.predict_s(1e9) - big.latency_s == pytest.approx(2 * 7 / 8)
    with pytest.raises(ValueError):
        fit.at(1)
