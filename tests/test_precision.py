"""accelkit.precision: formats, AMP choice, dtype tracing, saved-activation bytes, Keras helpers."""

import importlib.util
import math

import pytest
import torch
from torch import nn

from accelkit import precision


# ----------------------------------------------------------------------------- formats
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_ieee_formula_matches_torch_finfo(dtype):
    """The formula used for tf32 must reproduce finfo for the formats finfo knows."""
    fmt = precision.float_format(dtype)
    lim = precision.ieee_limits(fmt.exponent_bits, fmt.mantissa_bits)
    fi = torch.finfo(dtype)
    assert lim["max"] == fi.max
    assert lim["smallest_normal"] == fi.smallest_normal
    assert lim["eps"] == fi.eps
    assert lim["smallest_subnormal"] == fmt.smallest_subnormal


def test_float_format_values_and_aliases():
    fp16 = precision.float_format("fp16")
    assert (fp16.name, fp16.bits, fp16.max, fp16.smallest_normal) == ("float16", 16, 65504.0,
                                                                       2.0**-14)
    assert fp16.smallest_subnormal == 2.0**-24
    assert precision.float_format("half") == fp16
    tf32 = precision.float_format("tf32")
    assert (tf32.exponent_bits, tf32.mantissa_bits, tf32.eps) == (8, 10, 2.0**-10)
    assert tf32.smallest_normal == torch.finfo(torch.float32).smallest_normal
    assert tf32.max == (2 - 2.0**-10) * 2.0**127
    bf16 = precision.float_format(torch.bfloat16)
    assert bf16.range_decades == pytest.approx(precision.float_format("fp32").range_decades,
                                               rel=1e-2)
    assert bf16.decimal_digits == pytest.approx(8 * math.log10(2))
    assert bf16.short == "bf16"


def test_unknown_format_raises():
    with pytest.raises(ValueError, match="unknown float format"):
        precision.float_format("fp8")
    with pytest.raises(ValueError):
        precision.ieee_limits(1, 3)


def test_format_table_lists_every_format():
    text = precision.format_table()
    for short in ("fp32", "tf32", "fp16", "bf16"):
        assert f"| {short} |" in text
    assert "65504" in text.replace("6.55e+04", "65504")


def test_round_to_tf32_is_round_to_nearest_even():
    x = torch.tensor([1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-10, -(1 + 3 * 2.0**-11),
                      1 + 2.0**-11 + 2.0**-20])
    got = precision.round_to(x, "tf32").tolist()
    assert got == [1.0, 1 + 2 * 2.0**-10, 1 + 2.0**-10, -(1 + 2 * 2.0**-10), 1 + 2.0**-10]


def test_round_to_keeps_specials_and_shape():
    x = torch.tensor([[float("inf"), float("-inf")], [float("nan"), 0.0]])
    out = precision.round_to(x, "tf32")
    assert out.shape == x.shape
    assert out[0, 0] == float("inf") and out[0, 1] == float("-inf") and out[1, 0].isnan()


def test_round_to_fp16_underflows_bf16_does_not():
    tiny = torch.tensor([1e-8])
    assert precision.round_to(tiny, "fp16").item() == 0.0
    assert precision.round_to(tiny, "bf16").item() == pytest.approx(1e-8, rel=1e-2)
    assert precision.round_to(torch.tensor([70000.0]), "fp16").item() == float("inf")
    with pytest.raises(TypeError):
        precision.round_to(torch.tensor([1.0], dtype=torch.float64), "fp16")


# ----------------------------------------------------------------------------- AMP choice
def test_amp_choice_cpu_bf16_follows_the_cpu_class(monkeypatch):
    from accelkit import hardware

    monkeypatch.setattr(hardware, "probed_cpu", lambda: hardware.get("cpu-amx"))
    fast = precision.amp_choice("cpu")
    assert (fast.device_type, fast.dtype, fast.needs_scaler, fast.native) == (
        "cpu", torch.bfloat16, False, True)
    monkeypatch.setattr(hardware, "probed_cpu", lambda: hardware.get("cpu-avx2"))
    slow = precision.amp_choice("cpu")
    assert not slow.native and "slower" in slow.reason


def test_amp_choice_fp16_needs_a_scaler():
    choice = precision.amp_choice("cpu", "fp16")
    assert choice.dtype == torch.float16 and choice.needs_scaler
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        precision.amp_choice("cpu", torch.float32)


def test_autocast_and_grad_scaler():
    lin = nn.Linear(4, 4)
    with precision.autocast("cpu"):
        assert lin(torch.randn(2, 4)).dtype == torch.bfloat16
    with precision.autocast("cpu", enabled=False):
        assert lin(torch.randn(2, 4)).dtype == torch.float32
    assert not precision.grad_scaler("cpu", torch.bfloat16).is_enabled()
    scaler = precision.grad_scaler("cpu", torch.float16, init_scale=2.0**10)
    assert scaler.is_enabled() and scaler.get_scale() == 2.0**10


# ----------------------------------------------------------------------------- inspection
def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 8 * 8, 10))


def test_trace_dtypes_shows_what_autocast_lowers_and_keeps():
    model, x, y = _cnn(), torch.randn(2, 1, 8, 8), torch.tensor([0, 1])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, ops = precision.trace_dtypes(lambda: nn.functional.cross_entropy(model(x), y))
    out = {r.op: r.output for r in ops}
    assert out["conv2d"] == "bfloat16" and out["linear"] == "bfloat16"
    assert out["cross_entropy"] == "float32" and loss.dtype == torch.float32
    conv = next(r for r in ops if r.op == "conv2d")
    assert conv.inputs == ("float32", "float32", "float32")  # as given, before the cast
    _, plain = precision.trace_dtypes(lambda: model(x))
    assert {r.output for r in plain} == {"float32"}
    table = precision.dtype_table(ops)
    assert "| conv2d | float32, float32, float32 | bfloat16 | 1 |" in table


def test_saved_activation_bytes_counts_exactly_and_excludes_parameters():
    w = nn.Parameter(torch.randn(16))
    x = torch.randn(8, 16, requires_grad=True)
    # x * w saves x (512 B) and w (excluded); relu saves its output (512 B).
    out, saved = precision.saved_activation_bytes(lambda: torch.relu(x * w), [w])
    assert saved == 8 * 16 * 4 * 2
    _, with_w = precision.saved_activation_bytes(lambda: torch.relu(x * w))
    assert with_w == saved + 16 * 4
    assert out.shape == (8, 16)


def test_saved_activation_bytes_shrink_under_bf16_autocast():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    x = torch.randn(64, 256)

    def fwd():
        return net(x).sum()

    _, fp32 = precision.saved_activation_bytes(fwd, net.parameters())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, bf16 = precision.saved_activation_bytes(fwd, net.parameters())
    # fp32: the input of layer 1 and the ReLU output (= input of layer 2); weights excluded.
    assert fp32 == 2 * 64 * 256 * 4
    # bf16: the same two activations in 2 bytes, plus the bf16 copy of layer 2's weight
    # that autocast made (layer 1's is not needed: x does not require grad).
    assert bf16 == (2 * 64 * 256 + 256 * 256) * 2


def test_peak_memory_is_none_off_cuda():
    assert precision.peak_memory_bytes(lambda: torch.ones(10), "cpu") is None


# ----------------------------------------------------------------------------- Keras, datasheets
def test_keras_policy_names():
    assert precision.keras_policy("cpu") == "mixed_bfloat16"
    assert precision.keras_policy("cuda") == "mixed_float16"
    assert precision.keras_policy("tpu") == "mixed_bfloat16"
    assert precision.keras_policy("cpu", "fp16") == "mixed_float16"
    with pytest.raises(ValueError):
        precision.keras_policy("cpu", "fp32")


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow absent")
def test_keras_helpers():
    import keras

    before = keras.mixed_precision.global_policy().name
    with precision.keras_policy_scope("mixed_bfloat16") as pol:
        assert pol.name == "mixed_bfloat16"
        inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
        model = precision.keras_float32_output(inner)
        opt = precision.keras_optimizer(keras.optimizers.SGD(0.1))
        assert not isinstance(opt, keras.optimizers.LossScaleOptimizer)
    assert keras.mixed_precision.global_policy().name == before
    out = model(keras.ops.ones((2, 4)))
    assert inner.layers[-1].compute_dtype == "bfloat16"
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    assert model.count_params() == inner.count_params()
    scaled = precision.keras_optimizer(keras.optimizers.SGD(0.1), "mixed_float16")
    assert isinstance(scaled, keras.optimizers.LossScaleOptimizer)


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow absent")
def test_keras_activation_bytes_counts_layer_outputs():
    import keras

    def build():
        return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16),
                                 keras.layers.Dense(4)])

    fp32 = build()
    assert precision.keras_activation_bytes(fp32, 10) == 10 * (16 + 4) * 4
    with precision.keras_policy_scope("mixed_bfloat16"):
        mixed = precision.keras_float32_output(build())
    # two bf16 layer outputs, then the float32 output activation
    assert precision.keras_activation_bytes(mixed, 10) == 10 * (16 + 4) * 2 + 10 * 4 * 4
    with pytest.raises(ValueError):
        precision.keras_activation_bytes(fp32, 0)
    peak = precision.tf_peak_memory_bytes(lambda: None, "GPU:0")
    assert peak is None or peak >= 0  # None without a GPU: TF reports no CPU peak


def test_datasheet_tflops():
    assert precision.datasheet_tflops("NVIDIA A100-SXM4-80GB", "bf16") == 312.0
    assert precision.datasheet_tflops("NVIDIA H100 PCIe", torch.float16) == 756.0
    assert precision.datasheet_tflops("NVIDIA H200", "fp32") == 67.0
    assert precision.datasheet_tflops("Tesla T4", "bf16") is None
    assert precision.datasheet_tflops("Intel(R) Xeon(R)", "fp32") is None
