"""Keras mixed precision: the policy, its scope, the float32 output, loss scaling, activation bytes.

This module owns the Keras 3 side of notebook 02: :func:`keras_policy` (the policy name for a
device kind or hardware class: bf16 from Ampere on, fp16 on a T4/V100),
:func:`keras_policy_scope` (set the global policy while a model is built),
:func:`keras_float32_output` (a float32 output layer), :func:`keras_optimizer`
(``keras.optimizers.LossScaleOptimizer`` for fp16), :func:`keras_activation_bytes`
(activation memory from shapes and dtypes) and :func:`try_step` (one trial call of a
step: its time, or the error it raises where a policy's ops have no kernel on this CPU).
Keras and TensorFlow are imported only inside the functions, through :func:`accelkit.tf_device.import_tf`.

Elsewhere: number formats and PyTorch's autocast in :mod:`accelkit.precision`; TensorFlow's
allocator peak (:func:`accelkit.memory.tf_peak_memory_bytes`) with the other memory
measurements in :mod:`accelkit.memory`; the policy each hardware class gets
(``HardwareClass.keras_policy``) in :mod:`accelkit.hardware`.

Example::

    with ak.keras_mp.keras_policy_scope(ak.keras_mp.keras_policy("cpu")):
        model = ak.keras_mp.keras_float32_output(ak.models.keras_cnn())
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

from accelkit import dtypes, report


def keras_policy(device_kind: str = "cpu", dtype: Any = None, *, hw: Any = None) -> str:
    """Return the Keras mixed-precision policy name for a device kind or a hardware class.

    Read from the hardware-class table (``HardwareClass.keras_policy``): ``"mixed_bfloat16"``
    where the hardware has bf16 units (GPUs from Ampere, sm_80, on: A10, L4, A100, H100 ...;
    CPUs; TPUs), so no loss scaling; ``"mixed_float16"`` (with ``LossScaleOptimizer``, see
    :func:`keras_optimizer`) on GPUs with fp16 tensor cores only (T4, V100) or none (P100),
    as the TensorFlow mixed-precision guide advises.  For a GPU kind without ``hw`` the class
    of this machine's first GPU is probed (NVML; CUDA is not initialised).

    Args:
        device_kind: ``"cpu"``, ``"cuda"``/``"gpu"``/``"rocm"``, ``"tpu"``; ignored with ``hw``.
        dtype: force a low-precision dtype (``"bf16"``/``"fp16"``).
        hw: an :class:`accelkit.hardware.HardwareClass` to read the policy from (nothing is
            probed).

    Returns:
        ``"mixed_bfloat16"`` or ``"mixed_float16"``.

    Raises:
        ValueError: for a dtype other than bf16/fp16, or an unknown device kind.

    Example: ``keras.mixed_precision.set_global_policy(keras_policy(hw=ak.hardware.get("l4")))``
    """
    if dtype is not None:
        key = dtypes.canonical(dtype)
        if key not in ("bfloat16", "float16"):
            raise ValueError(f"Keras mixed policies use bfloat16 or float16, not {key}")
        return f"mixed_{key}"
    if hw is not None:
        return str(hw.keras_policy)
    kind = device_kind.lower()
    if kind in ("cuda", "gpu", "rocm"):
        from accelkit import hardware

        return hardware.for_device("cuda").keras_policy
    if kind in ("cpu", "tpu", "xla", "mps"):
        return "mixed_bfloat16"
    raise ValueError(f"unknown device kind {device_kind!r}; use cpu, cuda/gpu/rocm, tpu or mps")


@contextlib.contextmanager
def keras_policy_scope(policy: str) -> Iterator[Any]:
    """Set Keras' global dtype policy inside a ``with`` block and restore the old one after.

    Layers take the global policy when they are *created*, so build the model inside.

    Args:
        policy: ``"float32"``, ``"mixed_bfloat16"``, ``"mixed_float16"`` ...

    Yields:
        The policy object now in force.

    Example: ``with keras_policy_scope("mixed_bfloat16"): model = ak.models.keras_cnn()``
    """
    from accelkit import tf as tf_device

    tf_device.import_tf()
    import keras

    old = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    try:
        yield keras.mixed_precision.global_policy()
    finally:
        keras.mixed_precision.set_global_policy(old)


def keras_float32_output(model: Any) -> Any:
    """Append a float32 ``Activation("linear")`` so a mixed-precision model returns float32.

    The TensorFlow guide's advice: the last layer's output (logits, softmax) should be
    float32 so the loss is computed at full precision.  Adds no parameters.

    Returns:
        ``keras.Sequential([model, Activation("linear", dtype="float32")])``.

    Example: ``model = keras_float32_output(ak.models.keras_cnn())``
    """
    import keras

    return keras.Sequential([model, keras.layers.Activation("linear", dtype="float32")],
                            name=f"{model.name}_f32out")


def keras_optimizer(optimizer: Any, policy: Any = None) -> Any:
    """Wrap ``optimizer`` in ``keras.optimizers.LossScaleOptimizer`` when the policy is fp16.

    Keras 3 API (``keras.mixed_precision.experimental`` no longer exists).  bf16 and fp32
    policies need no loss scaling, so the optimizer is returned unchanged.

    Args:
        optimizer: a Keras optimizer.
        policy: a policy name/object; default: the global policy.

    Example: ``opt = keras_optimizer(keras.optimizers.Adam(1e-3), "mixed_float16")``
    """
    import keras

    pol = policy if policy is not None else keras.mixed_precision.global_policy()
    name = getattr(pol, "name", str(pol))
    if "float16" in name and "bfloat16" not in name:
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def try_step(step: Any, *args: Any) -> tuple[float | None, str]:
    """Call ``step(*args)`` twice (trace, then a timed call); return ``(seconds, "")`` or the error.

    A mixed policy's ops can fail on CPUs whose instruction set lacks their kernels (oneDNN
    capped at AVX2 has no bf16 convolution for TensorFlow); this lets a notebook skip such
    cells with the real error instead of failing, and predict a comparison's cost from the
    timed call where it runs.

    Args:
        step: a callable (a ``tf.function`` training step).
        *args: its arguments (a small batch: the call may be slow).

    Returns:
        ``(seconds of the second call, "")``, or ``(None, "ErrorType: first line")``.

    Example: ``seconds, error = try_step(kstep_mp, x[:16], y[:16])``
    """
    from accelkit import bench

    try:
        step(*args)  # the first call traces and compiles a tf.function
        return bench.time_once(lambda: float(step(*args))), ""  # float(): wait for the result
    except Exception as e:  # noqa: BLE001 - any kernel or dtype error means "does not run here"
        return None, f"{type(e).__name__}: {_error_line(str(e))}"


def _error_line(text: str) -> str:
    """The informative sentence of an error: a TF status ``message:``, else the first line
    that is not a heading such as ``Graph execution error:`` (ANSI colours removed)."""
    import re

    text = report.plain(text)
    status = re.search(r"message: (.+?)(?:\. |\n|$)", text)
    if status:
        return status.group(1)[:200]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return next((ln for ln in lines if not ln.endswith(":")), lines[0] if lines else "")[:200]


_ITEMSIZE = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}


def _leaf_layers(model: Any) -> list[Any]:
    out = []
    for layer in model.layers:
        out += _leaf_layers(layer) if getattr(layer, "layers", None) else [layer]
    return out


def keras_activation_bytes(model: Any, batch_size: int) -> int:
    """Return the bytes of every layer's output for one batch, in each layer's compute dtype.

    ``sum(batch_size * prod(output.shape[1:]) * itemsize(compute_dtype))`` over the model's
    layers (nested models are walked).  TensorFlow reports no allocator peak on a CPU; this
    counts, from shapes and dtypes, the activations a training step produces and mostly
    keeps for the backward pass, which a mixed policy halves.

    Args:
        model: a built Keras model (started with ``keras.Input``).
        batch_size: samples per batch, >= 1.

    Raises:
        ValueError: for ``batch_size < 1`` or a layer dtype with no known size.

    Example: ``keras_activation_bytes(model, 256)``
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    total = 0
    for layer in _leaf_layers(model):
        dtype = str(getattr(layer.compute_dtype, "name", layer.compute_dtype))
        if dtype not in _ITEMSIZE:
            raise ValueError(f"layer {layer.name}: unknown size of dtype {dtype!r}")
        total += batch_size * math.prod(layer.output.shape[1:]) * _ITEMSIZE[dtype]
    return int(total)


__all__ = [
    "keras_activation_bytes",
    "keras_float32_output",
    "keras_optimizer",
    "keras_policy",
    "keras_policy_scope",
    "try_step",
]
