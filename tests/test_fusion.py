"""accelkit.fusion: AdamW byte accounting, graph recording, the no-compiler fallback
(XLA's HLO and TF traces: tests/test_tf.py)."""


import pytest
import torch

from accelkit import fusion


def test_adamw_bytes_matches_the_kernel_list():
    assert fusion.adamw_step_bytes(10, 4, "fused") == 7 * 10 * 4
    assert fusion.adamw_step_bytes(10, 4, "for-loop") == 20 * 10 * 4
    assert fusion.adamw_step_bytes(10, 4, "foreach") == fusion.adamw_step_bytes(10, 4, "for-loop")
    with pytest.raises(ValueError):
        fusion.adamw_step_bytes(10, 4, "apex")


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


def test_compile_record_reads_the_cache_state():
    assert fusion._cache_state({"fxgraph_cache_hit": 1}, "fxgraph_cache") == "hit"
    assert fusion._cache_state({"fxgraph_cache_hit": 1, "fxgraph_cache_miss": 1},
                               "fxgraph_cache") == "miss"
    assert fusion._cache_state({}, "fxgraph_cache") == ""
    assert fusion.CompileRecord(1.0, "hit", "hit").warm
    assert "cold" in str(fusion.CompileRecord(1.0, "miss", "miss"))


def test_compile_record_says_whether_the_cpu_kernel_is_vectorized():
    vec = "cpp_fused_gelu_0 = ... auto tmp9 = at::vec::Vectorized<float>::loadu(in_ptr0); tmp9.erf();"
    scalar = "cpp_fused_gelu_0 = ... auto tmp9 = in_ptr0[x0]; auto tmp10 = std::erf(tmp9);"
    triton = "@triton.jit\ndef triton_poi_fused_gelu_0(in_ptr0, ...)"
    assert fusion.CompileRecord(1.0, "hit", "hit", (vec,)).vectorized is True
    assert fusion.CompileRecord(1.0, "hit", "hit", (scalar,)).vectorized is False
    assert fusion.CompileRecord(1.0, "hit", "hit", (triton,)).vectorized is None
    assert fusion.CompileRecord(1.0, "hit", "hit").vectorized is None  # no code captured


def _mmapped_bytes() -> int:
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    return libc.mallinfo2().hblkhd


def test_reuse_freed_memory_keeps_large_blocks_off_mmap_and_restores_glibc():
    import platform
    import sys

    if not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"):
        with fusion.reuse_freed_memory() as on:
            assert on is False  # nothing to change without glibc
        return
    n = 16 * 2**20  # 64 MiB of float32: above glibc's largest mmap threshold (32 MiB)
    before = _mmapped_bytes()
    t = torch.empty(n)
    assert _mmapped_bytes() - before >= n * 4  # by default: its own mmap, unmapped on free
    del t
    with fusion.reuse_freed_memory() as on:
        assert on is True
        before = _mmapped_bytes()
        t = torch.empty(n)
        assert _mmapped_bytes() - before == 0  # from the heap, which keeps it when freed
        del t
    before = _mmapped_bytes()  # glibc's defaults are back: a block larger than any the heap
    t = torch.empty(2 * n)  # kept gets its own mmap again
    assert _mmapped_bytes() - before >= 2 * n * 4
    del t


@pytest.mark.slow
def test_timed_compile_captures_the_generated_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))

    def fn(t):
        return torch.nn.functional.gelu(t + 1) * 0.5

    record = fusion.timed_compile(lambda: torch.compile(fn)(torch.randn(64, 32)))
    assert record.code and "gelu" in record.code[0]
    if torch.backends.cpu.get_cpu_capability() != "DEFAULT":  # a CPU with vector units
        assert record.vectorized is True


@pytest.mark.slow
def test_fx_fuse_folds_conv_bn_and_freezing_folds_in_inductor():
    """What notebook 03 teaches instead of torch.ao.quantization.fuse_modules."""
    import torch.fx.experimental.optimization as fx_opt
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                              torch.nn.ReLU()).eval()
    torch.nn.init.uniform_(net[1].running_var, 0.5, 2)
    x = torch.randn(2, 3, 8, 8)
    folded = fx_opt.fuse(net)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    torch.testing.assert_close(folded(x), net(x), rtol=1e-4, atol=1e-5)
    before = counters["inductor"]["binary_folding_conv"]
    torch._dynamo.reset()
    with torch._inductor.config.patch(freezing=True), torch.no_grad():
        torch.testing.assert_close(torch.compile(net)(x), net(x), rtol=1e-4, atol=1e-5)
    assert counters["inductor"]["binary_folding_conv"] > before
