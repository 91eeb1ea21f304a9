# ruff: noqa: E501  (the HLO texts below keep TensorFlow's own long lines)
"""accelkit.tf: the quiet import and the error for configuring devices too late; forcing results
for timing; XLA's optimized HLO read in the layouts TensorFlow prints, and TF traces."""

import os
import subprocess
import sys

import pytest

from accelkit import bench, device
from accelkit import tf as aktf

_META = 'metadata={op_type="Mul" op_name="mul" source_file="ops.py" source_line=1221}'
_X, _B = 1024 * 1024 * 4, 1024 * 4  # bytes of x: (1024, 1024) f32 and bias: (1024,) f32

# TensorFlow 2.21's XLA on a CPU (ReLU(x + bias) * 0.5, metadata trimmed): the entry
# computation holds the fusion instruction itself.
HLO_TF_2_21 = f"""HloModule a_inference_relu_11__.1, is_scheduled=true, alias_passthrough_params=true, entry_computation_layout={{(f32[1024,1024]{{1,0}}, f32[1024]{{0}})->f32[1024,1024]{{1,0}}}}

%fused_computation (param_0.2: f32[1024,1024], param_1.5: f32[1024]) -> f32[1024,1024] {{
  %param_0.2 = f32[1024,1024]{{1,0}} parameter(0)
  %param_1.5 = f32[1024]{{0}} parameter(1)
  %add.1 = f32[1024,1024]{{1,0}} broadcast(%param_1.5), dimensions={{1}}
  %add.0 = f32[1024,1024]{{1,0}} add(%param_0.2, %add.1)
  %Relu.2 = f32[] constant(0)
  %Relu.1 = f32[1024,1024]{{1,0}} broadcast(%Relu.2), dimensions={{}}
  %Relu.0 = f32[1024,1024]{{1,0}} maximum(%add.0, %Relu.1)
  %mul.2 = f32[] constant(0.5)
  %mul.1 = f32[1024,1024]{{1,0}} broadcast(%mul.2), dimensions={{}}
  ROOT %mul.0 = f32[1024,1024]{{1,0}} multiply(%Relu.0, %mul.1)
}}

ENTRY %a_inference_relu_11__.1 (arg0.1: f32[1024,1024], arg1.1: f32[1024]) -> f32[1024,1024] {{
  %arg0.1 = f32[1024,1024]{{1,0}} parameter(0), parameter_replication={{false}}, metadata={{op_name="XLA_Args"}}
  %arg1.1 = f32[1024]{{0}} parameter(1), parameter_replication={{false}}, metadata={{op_name="XLA_Args"}}
  ROOT %broadcast_multiply_fusion = f32[1024,1024]{{1,0}} fusion(%arg0.1, %arg1.1), kind=kLoop, calls=%fused_computation, {_META}, backend_config={{"outer_dimension_partitions":["2"]}}
}}
"""

# TensorFlow 2.20's (Colab's GPU runtime, 2026-08): the entry calls a computation that holds
# the fusion (XLA's CPU backend wraps the loop it splits across threads).
HLO_TF_2_20 = f"""HloModule a_inference_relu_11__.16, is_scheduled=true, alias_passthrough_params=true, entry_computation_layout={{(f32[1024,1024]{{1,0}}, f32[1024]{{0}})->f32[1024,1024]{{1,0}}}}

%fused_computation.clone (param_0.3: f32[1024,1024], param_1.6: f32[1024]) -> f32[1024,1024] {{
  %param_0.3 = f32[1024,1024]{{1,0}} parameter(0)
  %param_1.6 = f32[1024]{{0}} parameter(1)
  %broadcast.6 = f32[1024,1024]{{1,0}} broadcast(%param_1.6), dimensions={{1}}
  %add.1 = f32[1024,1024]{{1,0}} add(%param_0.3, %broadcast.6)
  %constant.3 = f32[] constant(0)
  %broadcast.4 = f32[1024,1024]{{1,0}} broadcast(%constant.3), dimensions={{}}
  %maximum.1 = f32[1024,1024]{{1,0}} maximum(%add.1, %broadcast.4)
  %constant.2 = f32[] constant(0.5)
  %broadcast.3 = f32[1024,1024]{{1,0}} broadcast(%constant.2), dimensions={{}}
  ROOT %multiply.1 = f32[1024,1024]{{1,0}} multiply(%maximum.1, %broadcast.3)
}}

%parallel_broadcast_multiply_fusion (p: f32[1024,1024], p.1: f32[1024]) -> f32[1024,1024] {{
  %p = f32[1024,1024]{{1,0}} parameter(0)
  %p.1 = f32[1024]{{0}} parameter(1)
  ROOT %broadcast_multiply_fusion.clone = f32[1024,1024]{{1,0}} fusion(%p, %p.1), kind=kLoop, calls=%fused_computation.clone, {_META}, backend_config={{"outer_dimension_partitions":["2"]}}
}}

ENTRY %a_inference_relu_11__.16 (arg0.1: f32[1024,1024], arg1.2: f32[1024]) -> f32[1024,1024] {{
  %arg0.1 = f32[1024,1024]{{1,0}} parameter(0), parameter_replication={{false}}, metadata={{op_name="XLA_Args"}}
  %arg1.2 = f32[1024]{{0}} parameter(1), parameter_replication={{false}}, metadata={{op_name="XLA_Args"}}
  ROOT %call = f32[1024,1024]{{1,0}} call(%arg0.1, %arg1.2), to_apply=%parallel_broadcast_multiply_fusion
}}
"""

# A small module with work left outside the fusion and a tuple result.
_HLO_WITH_OTHERS = """HloModule m, is_scheduled=true

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
    assert aktf.hlo_shape_bytes("f32[32768,1024]{1,0}") == 32768 * 1024 * 4
    assert aktf.hlo_shape_bytes("(f32[4,2]{1,0}, bf16[8]{0})") == 48
    assert aktf.hlo_shape_bytes("f32[]") == 4


@pytest.mark.parametrize("text, name", [(HLO_TF_2_21, "broadcast_multiply_fusion"),
                                        (HLO_TF_2_20, "broadcast_multiply_fusion.clone")],
                         ids=["tf-2.21-fusion-in-entry", "tf-2.20-fusion-in-called-computation"])
def test_hlo_fusions_reads_both_layouts_tensorflow_prints(text, name):
    fusions, others = aktf.hlo_fusions(text)
    assert [(f.name, f.kind) for f in fusions] == [(name, "kLoop")]
    assert (fusions[0].operand_bytes, fusions[0].result_bytes) == (_X + _B, _X)
    assert others == []  # the call is a wrapper, not work


def test_hlo_fusions_counts_fusions_bytes_and_other_ops():
    fusions, others = aktf.hlo_fusions(_HLO_WITH_OTHERS)
    assert [(f.name, f.kind) for f in fusions] == [("broadcast_add_fusion", "kLoop")]
    assert fusions[0].operand_bytes == 4 * 8 * 4 + 8 * 4  # x and the bias
    assert fusions[0].result_bytes == 4 * 8 * 4
    assert others == ["convert"]  # unfused work is reported, views and tuples are not


def test_hlo_fusions_reads_operands_printed_with_their_shapes():
    text = HLO_TF_2_21.replace("fusion(%arg0.1, %arg1.1)",
                               "fusion(f32[1024,1024]{1,0} %arg0.1, f32[1024]{0} %arg1.1)")
    fusions, _ = aktf.hlo_fusions(text)
    assert fusions[0].operand_bytes == _X + _B


def test_hlo_fusions_errors_are_clear():
    with pytest.raises(ValueError, match="no ENTRY"):
        aktf.hlo_fusions("HloModule m\n")
    with pytest.raises(ValueError, match="names no computation"):
        aktf.hlo_fusions(HLO_TF_2_20.replace("to_apply=%parallel_", "to_apply=%gone_"))
    with pytest.raises(ValueError, match="no shape"):
        aktf.hlo_fusions(HLO_TF_2_21.replace("fusion(%arg0.1,", "fusion(%arg9,"))


def test_hlo_fusions_of_a_module_without_fusions_is_empty_not_zero_bytes():
    text = """HloModule m

ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%a)
}
"""
    assert aktf.hlo_fusions(text) == ([], ["negate"])


@pytest.mark.slow
def test_trace_and_xla_hlo_of_a_chain(tmp_path):
    tf = pytest.importorskip("tensorflow")

    def chain(t):
        return tf.nn.relu(t + 1.0) * 0.5

    x = tf.random.normal((1024, 1024))  # large enough for the allocator to log allocations
    graph = tf.function(chain)
    graph(x)
    trace = aktf.trace(lambda: graph(x), root=str(tmp_path))
    assert trace.op_types == ["AddV2", "Relu", "Mul"]  # one kernel per op, no fusion
    from tensorflow.python.util import _pywrap_util_port

    if _pywrap_util_port.IsMklEnabled():  # oneDNN's CPU allocator reports large buffers
        assert trace.allocations is not None and 1 <= trace.allocations <= 3  # relu, mul in place
    else:  # oneDNN off (as on an AVX2-only AMD EPYC): the plain CPU allocator reports none
        assert trace.allocations is None
    text = tf.function(chain, jit_compile=True).experimental_get_compiler_ir(x)(
        stage="optimized_hlo")
    fusions, others = aktf.hlo_fusions(text)  # this TensorFlow's own layout
    assert len(fusions) == 1 and not others
    assert fusions[0].bytes == 2 * 1024 * 1024 * 4


_ALLOC_SCRIPT = """
import sys
import tensorflow as tf
from accelkit import tf as aktf
g = tf.function(lambda t: tf.nn.relu(t + 1.0) * 0.5)
x = tf.random.normal((1024, 1024))
g(x)
print("allocations", aktf.trace(lambda: g(x), root=sys.argv[1]).allocations)
"""


@pytest.mark.slow
def test_trace_counts_allocations_where_onednn_is_on(tmp_path):
    """On every machine: with oneDNN forced on, its allocator reports the chain's buffers."""
    pytest.importorskip("tensorflow")
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1")
    run = subprocess.run([sys.executable, "-c", _ALLOC_SCRIPT, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    count = run.stdout.split("allocations")[-1].strip()
    assert count.isdigit() and 1 <= int(count) <= 3, run.stdout[-500:]


# ----------------------------------------------------------------------------- import, devices
def test_has_tf_does_not_import_tensorflow():
    had = "tensorflow" in sys.modules
    aktf.has_tf()
    assert ("tensorflow" in sys.modules) == had


@pytest.mark.skipif(not aktf.has_tf(), reason="TensorFlow not installed")
def test_tf_devices_end_with_the_cpu_and_read_the_hardware_class():
    from accelkit import hardware

    devs = aktf.tf_devices()
    cpu = devs[-1]
    assert isinstance(cpu, device.DeviceInfo) and cpu.kind == "cpu" and cpu.framework == "tf"
    assert cpu.supports_bf16 == hardware.for_device("cpu").bf16_units
    assert aktf.best_tf_device().reason


def test_logical_cpus_must_be_positive():
    with pytest.raises(ValueError, match="n must be >= 1"):
        aktf.set_logical_cpus(0)


@pytest.mark.slow
@pytest.mark.skipif(not aktf.has_tf(), reason="TensorFlow not installed")
def test_tf_too_late_configuration_raises_clear_error():
    code = (
        "import tensorflow as tf\n"
        "from accelkit import tf as aktf\n"
        "tf.constant(1.0)\n"  # initialises the runtime
        "try:\n"
        "    aktf.set_logical_cpus(3)\n"
        "except aktf.TFAlreadyInitializedError as e:\n"
        "    print('RAISED', 'restart the kernel' in str(e).lower())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert "RAISED True" in out.stdout, out.stderr[-2000:]


@pytest.mark.slow
def test_import_tf_drops_the_load_noise_but_keeps_other_stderr():
    code = ("import os; from accelkit import tf as t\n"
            "with t._quiet_load_noise():\n"
            "    os.write(2, b'I0000 00:00:1.2 7 cudart_stub.cc:31] Could not find cuda drivers\\n')\n"
            "    os.write(2, b'E0000 a real error\\n')\n"
            "tf = t.import_tf()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0"))
    assert proc.returncode == 0, proc.stderr
    assert "cuda drivers" not in proc.stderr and "InitializeLog" not in proc.stderr
    assert "E0000 a real error" in proc.stderr


# ----------------------------------------------------------------------------- timing
def test_tf_force_fetches_a_constant_number_of_bytes():
    tf = pytest.importorskip("tensorflow")
    small, big = tf.ones((4,)), tf.ones((1024, 1024))
    got_small, got_big = aktf.force(small), aktf.force({"a": big, "b": 3})
    assert sum(a.nbytes for a in got_small) == sum(a.nbytes for a in got_big) == 4
    assert aktf.sync(lambda: big)() is big


def test_compare_times_tensorflow_callables():
    tf = pytest.importorskip("tensorflow")
    x = tf.ones((32, 32))
    c = aktf.compare(lambda: x + 1, lambda: x * 2, pairs=2, min_run_time=0.01, warmup=0)
    assert isinstance(c, bench.Comparison) and len(c.ratios) == 2
