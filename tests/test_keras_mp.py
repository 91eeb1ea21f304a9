"""accelkit.keras_mp: the Keras mixed-precision policy, its scope, float32 output, loss scaling."""

import importlib.util

import pytest

from accelkit import keras_mp


def test_keras_policy_names(monkeypatch):
    from accelkit import hardware

    assert keras_mp.keras_policy("cpu") == "mixed_bfloat16"
    assert keras_mp.keras_policy("tpu") == "mixed_bfloat16"
    assert keras_mp.keras_policy("cpu", "fp16") == "mixed_float16"
    with pytest.raises(ValueError):
        keras_mp.keras_policy("cpu", "fp32")
    with pytest.raises(ValueError, match="unknown device kind"):
        keras_mp.keras_policy("npu")
    # a GPU kind reads the class of this machine's GPU (faked here: no probe runs)
    for gpu, policy in (("t4", "mixed_float16"), ("v100", "mixed_float16"),
                        ("p100", "mixed_float16"), ("a100", "mixed_bfloat16"),
                        ("l4", "mixed_bfloat16"), ("h100", "mixed_bfloat16")):
        monkeypatch.setattr(hardware, "for_device", lambda *a, g=gpu, **k: hardware.get(g))
        assert keras_mp.keras_policy("cuda") == policy, gpu
        assert keras_mp.keras_policy(hw=hardware.get(gpu)) == policy


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow absent")
def test_keras_helpers():
    import keras

    before = keras.mixed_precision.global_policy().name
    with keras_mp.keras_policy_scope("mixed_bfloat16") as pol:
        assert pol.name == "mixed_bfloat16"
        inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
        model = keras_mp.keras_float32_output(inner)
        opt = keras_mp.keras_optimizer(keras.optimizers.SGD(0.1))
        assert not isinstance(opt, keras.optimizers.LossScaleOptimizer)
    assert keras.mixed_precision.global_policy().name == before
    out = model(keras.ops.ones((2, 4)))
    assert inner.layers[-1].compute_dtype == "bfloat16"
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    assert model.count_params() == inner.count_params()
    scaled = keras_mp.keras_optimizer(keras.optimizers.SGD(0.1), "mixed_float16")
    assert isinstance(scaled, keras.optimizers.LossScaleOptimizer)


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow absent")
def test_keras_activation_bytes_counts_layer_outputs():
    import keras

    def build():
        return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16),
                                 keras.layers.Dense(4)])

    fp32 = build()
    assert keras_mp.keras_activation_bytes(fp32, 10) == 10 * (16 + 4) * 4
    with keras_mp.keras_policy_scope("mixed_bfloat16"):
        mixed = keras_mp.keras_float32_output(build())
    # two bf16 layer outputs, then the float32 output activation
    assert keras_mp.keras_activation_bytes(mixed, 10) == 10 * (16 + 4) * 2 + 10 * 4 * 4
    with pytest.raises(ValueError):
        keras_mp.keras_activation_bytes(fp32, 0)


def test_try_step_times_a_working_call_and_reports_a_failing_one():
    from accelkit import keras_mp

    calls = []
    seconds, err = keras_mp.try_step(lambda x: calls.append(x) or 1.0, 3)
    assert err == "" and seconds is not None and seconds >= 0 and calls == [3, 3]

    def broken(x):
        raise RuntimeError("could not find a kernel for Conv2D bf16\nmore detail")

    seconds, err = keras_mp.try_step(broken, 3)
    assert seconds is None and err == "RuntimeError: could not find a kernel for Conv2D bf16"

    def graph_error(x):  # the shape of TensorFlow's error when oneDNN has no bf16 conv
        raise RuntimeError("Graph execution error:\n\nDetected at node x defined at (most recent "
                           "call last):\n  File a.py\n\x1b[1m{{node}} Operation received an "
                           "exception:Status: 3, message: could not create a primitive "
                           "descriptor for the convolution. Run workload with ..., in file x.cc")

    seconds, err = keras_mp.try_step(graph_error, 3)
    assert err == "RuntimeError: could not create a primitive descriptor for the convolution"
