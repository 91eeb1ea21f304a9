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
