"""accelkit.fusion: byte accounting, predictions, graph recording, the no-compiler fallback."""

import math
import os

import pytest
import torch

from accelkit import fusion, tf_trace


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


# ----------------------------------------------------------------------------- evidence helpers
_HLO = """HloModule m, is_scheduled=true

%fused_computation (param_0.2: f32[4,8], param_1.5: f32[8]) -> f32[4,8] {
  %param_0.2 = f32[4,8]{1,0} parameter(0)
  %param_1.5 = f32[8]{0} parameter(1)
  %b = f32[4,8]{1,0} broadcast(%param_1.5), dimensions={1}
  ROOT %add.0 = f32[4,8]{1,0} add(%param_0.2, %b)
}

ENTRY %main (arg0.1: f32[4,8], arg1.1: f32[8]) -> (f32[4,8], bf16[4,8]) {
  %arg0.1 = f32[4,8]{1,0} parameter(0), metadata={op_name="XLA_Args"}
  %arg1.1 = f32[8]{0} parameter(1), metadata={op_name="XLA_Args"}
  %broadcast_add_fusion = f32[4,8]{1,0} fusion(%arg0.1, %arg1.1), kind=kLoop, calls=%fused_computation
  %convert.1 = bf16[4,8]{1,0} convert(%broadcast_add_fusion)
  ROOT %tuple = (f32[4,8]{1,0}, bf16[4,8]{1,0}) tuple(%broadcast_add_fusion, %convert.1)
}
"""


def test_hlo_shape_bytes():
    assert tf_trace.hlo_shape_bytes("f32[32768,1024]{1,0}") == 32768 * 1024 * 4
    assert tf_trace.hlo_shape_bytes("(f32[4,2]{1,0}, bf16[8]{0})") == 48
    assert tf_trace.hlo_shape_bytes("f32[]") == 4


def test_hlo_fusions_counts_fusions_bytes_and_other_ops():
    fusions, others = tf_trace.hlo_fusions(_HLO)
    assert [(f.name, f.kind) for f in fusions] == [("broadcast_add_fusion", "kLoop")]
    assert fusions[0].operand_bytes == 4 * 8 * 4 + 8 * 4  # x and the bias
    assert fusions[0].result_bytes == 4 * 8 * 4
    assert others == ["convert"]  # unfused work is reported, views and tuples are not
    with pytest.raises(ValueError):
        tf_trace.hlo_fusions("HloModule m\n")


def test_compile_record_reads_the_cache_state():
    assert fusion._cache_state({"fxgraph_cache_hit": 1}, "fxgraph_cache") == "hit"
    assert fusion._cache_state({"fxgraph_cache_hit": 1, "fxgraph_cache_miss": 1},
                               "fxgraph_cache") == "miss"
    assert fusion._cache_state({}, "fxgraph_cache") == ""
    assert fusion.CompileRecord(1.0, "hit", "hit").warm
    assert "cold" in str(fusion.CompileRecord(1.0, "miss", "miss"))


@pytest.mark.slow
def test_cold_and_warm_compile_in_a_fresh_cache(tmp_path):
    def fn(t):
        return torch.relu(t + 1) * 0.5

    cold, warm = fusion.cold_and_warm(fn, torch.randn(16), root=str(tmp_path))
    assert (cold.fx_graph, warm.fx_graph) == ("miss", "hit")
    # the fresh folder is gone from the environment (Inductor may have set its default meanwhile)
    assert not os.environ.get("TORCHINDUCTOR_CACHE_DIR", "").startswith(str(tmp_path))


@pytest.mark.slow
def test_trace_tf_and_xla_hlo_of_a_chain(tmp_path):
    tf = pytest.importorskip("tensorflow")

    def chain(t):
        return tf.nn.relu(t + 1.0) * 0.5

    x = tf.random.normal((1024, 1024))  # large enough for the allocator to log allocations
    graph = tf.function(chain)
    graph(x)
    trace = tf_trace.trace_tf(lambda: graph(x), root=str(tmp_path))
    assert trace.op_types == ["AddV2", "Relu", "Mul"]  # one kernel per op, no fusion
    from tensorflow.python.util import _pywrap_util_port

    if _pywrap_util_port.IsMklEnabled():  # oneDNN's CPU allocator reports large buffers
        assert trace.allocations is not None and 1 <= trace.allocations <= 3  # relu, mul in place
    else:  # oneDNN off (as on an AVX2-only AMD EPYC): the plain CPU allocator reports none
        assert trace.allocations is None
    text = tf.function(chain, jit_compile=True).experimental_get_compiler_ir(x)(
        stage="optimized_hlo")
    fusions, others = tf_trace.hlo_fusions(text)
    assert len(fusions) == 1 and not others
    assert fusions[0].bytes == 2 * 1024 * 1024 * 4


_ALLOC_SCRIPT = """
import sys
import tensorflow as tf
from accelkit import tf_trace
g = tf.function(lambda t: tf.nn.relu(t + 1.0) * 0.5)
x = tf.random.normal((1024, 1024))
g(x)
print("allocations", tf_trace.trace_tf(lambda: g(x), root=sys.argv[1]).allocations)
"""


@pytest.mark.slow
def test_trace_tf_counts_allocations_where_onednn_is_on(tmp_path):
    """On every machine: with oneDNN forced on, its allocator reports the chain's buffers."""
    pytest.importorskip("tensorflow")
    import subprocess
    import sys

    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1")
    run = subprocess.run([sys.executable, "-c", _ALLOC_SCRIPT, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    count = run.stdout.split("allocations")[-1].strip()
    assert count.isdigit() and 1 <= int(count) <= 3, run.stdout[-500:]


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
