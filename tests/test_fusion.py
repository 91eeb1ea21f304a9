"""accelkit.fusion: byte accounting, predictions, graph recording, the no-compiler fallback."""

import math

import pytest
import torch

from accelkit import fusion


def test_chain_bytes_counts_reads_and_writes():
    n = 1000
    # bias + GELU + scale, eager: three kernels each reading one tensor and writing one.
    assert fusion.chain_bytes(n, 4, [(1, 1)] * 3) == 6 * n * 4
    assert fusion.chain_bytes(n, 2, [(2, 1)], extra_bytes=10) == 3 * n * 2 + 10
    with pytest.raises(ValueError):
        fusion.chain_bytes(n, 4, [])
    with pytest.raises(ValueError):
        fusion.chain_bytes(n, 4, [(-1, 1)])
    with pytest.raises(ValueError):
        fusion.chain_bytes(-1, 4, [(1, 1)])


def test_predict_fusion():
    p = fusion.predict_fusion(6e9, 2e9, 20.0)
    assert p.speedup == pytest.approx(3.0)
    assert p.eager_s == pytest.approx(0.3) and p.fused_s == pytest.approx(0.1)
    assert "3.00x" in str(p)
    for bad in ((0, 1, 1), (1, -1, 1), (1, 1, float("nan"))):
        with pytest.raises(ValueError):
            fusion.predict_fusion(*bad)


def test_adamw_bytes_matches_the_kernel_list():
    assert fusion.adamw_step_bytes(10, 4, "fused") == 7 * 10 * 4
    assert fusion.adamw_step_bytes(10, 4, "for-loop") == 20 * 10 * 4
    assert fusion.adamw_step_bytes(10, 4, "foreach") == fusion.adamw_step_bytes(10, 4, "for-loop")
    with pytest.raises(ValueError):
        fusion.adamw_step_bytes(10, 4, "apex")


def test_break_even_calls():
    assert fusion.break_even_calls(2.0, 0.010, 0.004) == pytest.approx(2.0 / 0.006)
    assert math.isinf(fusion.break_even_calls(2.0, 0.004, 0.004))
    with pytest.raises(ValueError):
        fusion.break_even_calls(-1, 1, 1)


def _f(x):
    return torch.sin(x) * 2 + 1


def test_graph_recorder_counts_recompiles_per_shape():
    torch._dynamo.reset()
    rec = fusion.GraphRecorder()
    f = torch.compile(_f, backend=rec, dynamic=False)
    for n in (4, 8, 4):
        assert torch.allclose(f(torch.ones(n)), _f(torch.ones(n)))
    assert rec.count == 2  # 4 and 8; the second 4 reuses the first graph
    assert rec.graphs[0].input_shapes == ((4,),) and not rec.graphs[0].dynamic
    assert rec.graphs[0].ops == 3 and "sin" in rec.graphs[0].code
    torch._dynamo.reset()  # must not wipe what was recorded
    assert rec.count == 2
    rec.clear()
    assert rec.count == 0


def test_graph_recorder_dynamic_graph_serves_all_shapes():
    torch._dynamo.reset()
    rec = fusion.GraphRecorder()
    f = torch.compile(_f, backend=rec, dynamic=True)
    for n in (4, 8, 16):
        f(torch.ones(n))
    assert rec.count == 1 and rec.graphs[0].dynamic


def _g(x):
    return torch.cos(x) * 3 - 1


def test_without_cxx_compiler_raises_and_restores():
    import torch._inductor.config as cfg

    torch._dynamo.reset()
    before = cfg.cpp.cxx
    with fusion.without_cxx_compiler():
        assert cfg.cpp.cxx == (None, "no-such-c++")
        with pytest.raises(Exception, match="InvalidCxxCompiler"):
            torch.compile(_g)(torch.ones(4))
    assert cfg.cpp.cxx == before
    torch._dynamo.reset()
    out = torch.compile(_g, backend="aot_eager")(torch.ones(4))  # no C++ needed
    assert torch.allclose(out, _g(torch.ones(4)))


def test_bench_time_once_calls_once_and_measures_it():
    import time

    from accelkit import bench

    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.05)

    assert 0.05 <= bench.time_once(slow) < 1.0
    assert calls == [1]
    assert bench.time_once(lambda: None, device="cpu") < 0.05


def test_lazy_module_access():
    import accelkit

    assert accelkit.fusion is fusion and accelkit.precision.__name__ == "accelkit.precision"
