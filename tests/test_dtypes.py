"""accelkit.dtypes: the one table of dtype names and the modules that read it; the dtype each op
returns, under autocast and without; Keras activation bytes."""

import importlib.util

import numpy as np
import pytest
import torch
from torch import nn

from accelkit import claims, dtypes, hardware, precision, roofline


@pytest.mark.parametrize(("given", "name", "short"), [
    (torch.bfloat16, "bfloat16", "bf16"), ("bf16", "bfloat16", "bf16"),
    ("BFloat16", "bfloat16", "bf16"), (torch.float16, "float16", "fp16"),
    ("half", "float16", "fp16"), ("float", "float32", "fp32"), (np.dtype("float32"), "float32", "fp32"),
    ("tf32", "tfloat32", "tf32"), ("double", "float64", "fp64"), (torch.float64, "float64", "fp64")])
def test_every_spelling_reads_to_one_name(given, name, short):
    assert dtypes.canonical(given) == name
    assert dtypes.short(given) == short


def test_unknown_names_pass_through_for_the_caller_to_reject():
    assert dtypes.canonical(torch.int8) == "int8"
    assert dtypes.short("fp8") == "fp8"


def test_every_alias_and_short_key_names_a_canonical_dtype():
    assert set(dtypes.ALIASES.values()) <= set(dtypes.SHORT)
    assert all(dtypes.canonical(s) == name for name, s in dtypes.SHORT.items())


def test_the_users_agree_on_names():
    for given in ("bf16", torch.bfloat16, "bfloat16"):
        assert precision.format_name(given) == "bfloat16"
        assert roofline.dtype_key(given) == "bf16"
        assert claims.tolerance(given) == claims.tolerance("bfloat16")
    assert hardware.datasheet_tflops("NVIDIA H200", "half") == 989.4
    with pytest.raises(ValueError, match="no default tolerance"):
        claims.tolerance(torch.int32)


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 8 * 8, 10))


def test_trace_shows_what_autocast_lowers_and_keeps():
    model, x, y = _cnn(), torch.randn(2, 1, 8, 8), torch.tensor([0, 1])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, ops = dtypes.trace(lambda: nn.functional.cross_entropy(model(x), y))
    out = {r.op: r.output for r in ops}
    assert out["conv2d"] == "bfloat16" and out["linear"] == "bfloat16"
    assert out["cross_entropy"] == "float32" and loss.dtype == torch.float32
    conv = next(r for r in ops if r.op == "conv2d")
    assert conv.inputs == ("float32", "float32", "float32")  # as given, before the cast
    _, plain = dtypes.trace(lambda: model(x))
    assert {r.output for r in plain} == {"float32"}
    assert "| conv2d | float32, float32, float32 | bfloat16 | 1 |" in ops.table()


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow absent")
def test_keras_activation_bytes_counts_layer_outputs():
    import keras

    def build(policy):
        return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, dtype=policy),
                                 keras.layers.Dense(4, dtype=policy)])

    fp32 = build("float32")
    assert dtypes.keras_activation_bytes(fp32, 10) == 10 * (16 + 4) * 4
    mixed = keras.Sequential([build("mixed_bfloat16"),  # nested, as notebook 02's model
                              keras.layers.Activation("linear", dtype="float32")])
    # two bf16 layer outputs, then the float32 output activation
    assert dtypes.keras_activation_bytes(mixed, 10) == 10 * (16 + 4) * 2 + 10 * 4 * 4
    with pytest.raises(ValueError):
        dtypes.keras_activation_bytes(fp32, 0)
