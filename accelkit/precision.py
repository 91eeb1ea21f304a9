"""Mixed precision: number formats, the AMP dtype choice, and what autocast really does.

* **Formats** — :func:`float_format` gives range and precision of fp32, tf32, fp16 and bf16
  (from ``ml_dtypes.finfo``; tf32 has no storage type anywhere, so its limits come from the
  IEEE-754 formula :func:`ieee_limits`, which the tests check against ``finfo`` for the
  others); :func:`round_to` rounds fp32 values to a format, to *see* what it keeps.
* **PyTorch AMP** — :func:`amp_choice` picks the autocast dtype for a device and says whether
  a ``GradScaler`` is needed and whether the hardware has native units for it;
  :func:`autocast` and :func:`grad_scaler` build the device-generic ``torch.autocast`` and
  ``torch.amp.GradScaler`` from it (never the deprecated ``torch.cuda.amp``).
* **Inspection** — :func:`trace_dtypes` records the dtype every op of a forward returns (so
  you can see which ops autocast runs in low precision and which it keeps in fp32);
  :func:`saved_activation_bytes` counts the bytes autograd keeps for the backward pass — an
  honest memory figure on a CPU, where no allocator reports a peak — and
  :func:`peak_memory_bytes` reads the CUDA allocator's peak where there is one.
* **Keras** — :func:`keras_policy`, :func:`keras_policy_scope`, :func:`keras_float32_output`
  and :func:`keras_optimizer` (Keras 3: ``keras.optimizers.LossScaleOptimizer``);
  :func:`keras_activation_bytes` and :func:`tf_peak_memory_bytes` for memory.
* **Datasheets** — :func:`datasheet_tflops`: dense peak TFLOP/s of common GPUs, to state the
  fraction of a device's peak a matmul reaches.

Example::

    amp = ak.precision.amp_choice(device)        # bf16 on this CPU, no scaler
    with ak.precision.autocast(device, amp.dtype):
        loss = loss_fn(model(x), y)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

# ----------------------------------------------------------------------------- formats
#: The formats the course compares, widest first.
FORMATS = ("float32", "tfloat32", "float16", "bfloat16")

# name -> (storage bits, exponent bits, explicit mantissa bits)
_LAYOUT = {
    "float32": (32, 8, 23),
    "tfloat32": (32, 8, 10),  # stored in 32 bits; tensor cores read 1+8+10 of them
    "float16": (16, 5, 10),
    "bfloat16": (16, 8, 7),
}
_FORMAT_ALIASES = {
    "fp32": "float32", "float": "float32", "tf32": "tfloat32", "fp16": "float16",
    "half": "float16", "bf16": "bfloat16",
}
_SHORT = {"float32": "fp32", "tfloat32": "tf32", "float16": "fp16", "bfloat16": "bf16"}


@dataclass(frozen=True)
class FloatFormat:
    """Range and precision of one floating-point format.

    Attributes:
        name: ``"float32"``, ``"tfloat32"``, ``"float16"`` or ``"bfloat16"``.
        bits: storage bits (tf32 is stored in 32 bits; only 19 are used).
        exponent_bits: bits of the exponent (sets the range).
        mantissa_bits: explicit fraction bits (set the precision).
        max: the largest finite value.
        smallest_normal: the smallest positive normal value; below it precision drops.
        smallest_subnormal: the smallest positive value; half of it rounds to 0.
        eps: the gap between 1 and the next value, ``2**-mantissa_bits``.
        source: where the numbers come from (``"ml_dtypes.finfo"`` or ``"IEEE-754 formula"``).
    """

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int
    max: float
    smallest_normal: float
    smallest_subnormal: float
    eps: float
    source: str

    @property
    def short(self) -> str:
        """The short name: ``"fp32"``, ``"tf32"``, ``"fp16"``, ``"bf16"``."""
        return _SHORT[self.name]

    @property
    def decimal_digits(self) -> float:
        """Significant decimal digits, ``(mantissa_bits + 1) * log10(2)``."""
        return (self.mantissa_bits + 1) * math.log10(2)

    @property
    def range_decades(self) -> float:
        """Decades between the smallest normal and the largest value, ``log10(max / min)``."""
        return math.log10(self.max / self.smallest_normal)


def format_name(name: Any) -> str:
    """Return the canonical format name for ``"bf16"``, ``torch.bfloat16``, ``"tf32"`` ...

    Raises:
        ValueError: for a format the course does not cover (lists the known ones).
    """
    raw = str(getattr(name, "name", name)).replace("torch.", "").lower()
    key = _FORMAT_ALIASES.get(raw, raw)
    if key not in _LAYOUT:
        raise ValueError(f"unknown float format {name!r}; use one of {', '.join(FORMATS)} "
                         f"(or {', '.join(_FORMAT_ALIASES)})")
    return key


def ieee_limits(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """Return the limits of an IEEE-754-style binary format from its bit layout.

    With bias ``b = 2**(e-1) - 1``: ``max = (2 - 2**-m) * 2**b``, smallest normal
    ``2**(1-b)``, smallest subnormal ``2**(1-b-m)``, ``eps = 2**-m`` (IEEE 754-2019, §3.3).
    Holds for fp32, fp16, bf16 and tf32 (all reserve the top exponent for inf/NaN).

    Args:
        exponent_bits: exponent bits ``e``, >= 2.
        mantissa_bits: explicit fraction bits ``m``, >= 1.

    Returns:
        ``{"max", "smallest_normal", "smallest_subnormal", "eps"}`` as floats.

    Raises:
        ValueError: for ``e < 2`` or ``m < 1``.

    Example: ``ieee_limits(8, 10)["eps"]  # tf32: 2**-10``
    """
    if exponent_bits < 2 or mantissa_bits < 1:
        raise ValueError(f"need exponent_bits >= 2 and mantissa_bits >= 1, got "
                         f"{exponent_bits}, {mantissa_bits}")
    bias = 2 ** (exponent_bits - 1) - 1
    return {
        "max": (2.0 - 2.0**-mantissa_bits) * 2.0**bias,
        "smallest_normal": 2.0 ** (1 - bias),
        "smallest_subnormal": 2.0 ** (1 - bias - mantissa_bits),
        "eps": 2.0**-mantissa_bits,
    }


def float_format(name: Any) -> FloatFormat:
    """Describe one format: range, precision, smallest normal and subnormal.

    fp32, fp16 and bf16 come from ``ml_dtypes.finfo`` (the same numbers as
    ``torch.finfo``); tf32 from :func:`ieee_limits`, since no library has a tf32 dtype.

    Args:
        name: ``"float32"``/``"fp32"``, ``"tfloat32"``/``"tf32"``, ``"float16"``/``"fp16"``,
            ``"bfloat16"``/``"bf16"``, or a torch dtype.

    Raises:
        ValueError: for an unknown format.

    Example: ``float_format("fp16").max  # 65504.0``
    """
    key = format_name(name)
    bits, e, m = _LAYOUT[key]
    if key == "tfloat32":
        lim = ieee_limits(e, m)
        return FloatFormat(key, bits, e, m, lim["max"], lim["smallest_normal"],
                           lim["smallest_subnormal"], lim["eps"], "IEEE-754 formula")
    import ml_dtypes
    import numpy as np

    np_type = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[key]
    fi = ml_dtypes.finfo(np_type)
    return FloatFormat(key, int(fi.bits), int(fi.nexp), int(fi.nmant), float(fi.max),
                       float(fi.smallest_normal), float(fi.smallest_subnormal), float(fi.eps),
                       "ml_dtypes.finfo")


def format_table(names: Sequence[Any] = FORMATS) -> str:
    """Return a Markdown table of the formats: bits, max, smallest normal/subnormal, eps, digits.

    Example: ``print(format_table())``
    """
    rows = ["| format | bits (sign/exp/mantissa) | max | smallest normal | smallest subnormal "
            "| eps | decimal digits |", "|---|---|---|---|---|---|---|"]
    for n in names:
        f = float_format(n)
        rows.append(f"| {f.short} | {f.bits} (1/{f.exponent_bits}/{f.mantissa_bits}) | "
                    f"{f.max:.4g} | {f.smallest_normal:.4g} | {f.smallest_subnormal:.4g} | "
                    f"{f.eps:.3g} | {f.decimal_digits:.1f} |")
    return "\n".join(rows)


def round_to(x: Any, fmt: Any) -> Any:
    """Round float32 values to a format and return them as float32 (to see what survives).

    fp16 and bf16 round through the real dtype (``x.to(dtype).float()``); tf32 keeps the top
    10 mantissa bits with round-to-nearest-even, as tensor cores do on input.

    Args:
        x: a float32 ``torch.Tensor`` (any shape).
        fmt: the target format (names as in :func:`float_format`).

    Returns:
        A float32 tensor of ``x``'s shape holding the rounded values (inf/NaN kept).

    Raises:
        TypeError: when ``x`` is not a float32 tensor.
        ValueError: for an unknown format.

    Example: ``round_to(torch.tensor([1e-8]), "fp16")  # tensor([0.])``
    """
    import torch

    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        raise TypeError(f"round_to needs a float32 torch.Tensor, got "
                        f"{getattr(x, 'dtype', type(x).__name__)}")
    key = format_name(fmt)
    if key == "float32":
        return x.clone()
    if key in ("float16", "bfloat16"):
        return x.to(getattr(torch, key)).float()
    drop = 23 - _LAYOUT[key][2]  # tf32: 13 low mantissa bits
    bits = x.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    lsb = (bits >> drop) & 1
    rounded = (bits + (1 << (drop - 1)) - 1 + lsb) & ~((1 << drop) - 1) & 0xFFFFFFFF
    out = rounded.to(torch.int64)
    out = torch.where(out >= 2**31, out - 2**32, out).to(torch.int32).view(torch.float32)
    return torch.where(torch.isfinite(x), out, x).reshape(x.shape)


# ----------------------------------------------------------------------------- torch AMP
@dataclass(frozen=True)
class AmpChoice:
    """The autocast settings for one device.

    Attributes:
        device_type: ``"cuda"``, ``"cpu"``, ``"mps"``, ``"xla"`` (what ``torch.autocast``
            and ``torch.amp.GradScaler`` take).
        dtype: the low-precision dtype for autocast (``torch.bfloat16``/``torch.float16``).
        needs_scaler: True for fp16 (gradients underflow without loss scaling).
        native: the hardware has fast units for ``dtype`` (expect a speedup); False means
            it is emulated and usually *slower* than fp32.
        reason: one sentence saying why.
    """

    device_type: str
    dtype: Any
    needs_scaler: bool
    native: bool
    reason: str

    def __str__(self) -> str:
        scaler = "with" if self.needs_scaler else "no"
        return (f"autocast {self.device_type} {str(self.dtype).replace('torch.', '')}, "
                f"{scaler} GradScaler ({self.reason})")


#: The ``torch.autocast`` device type of each hardware-class kind.
AUTOCAST_DEVICE = {"cpu": "cpu", "cuda": "cuda", "rocm": "cuda", "mps": "mps", "tpu": "xla"}


def amp_choice(device: Any = None, dtype: Any = None, *, hw: Any = None) -> AmpChoice:
    """Choose the autocast dtype for ``device`` and say whether it needs a GradScaler.

    Read from the hardware-class table (:mod:`accelkit.hardware`): a GPU with bf16 tensor
    cores (A10/L4/A100/H100/H200, MI300) gets bf16 without a scaler; a T4 or V100 gets fp16
    with a GradScaler (``torch.cuda.is_bf16_supported()`` is not asked: it counts emulation
    and says True on a T4); Apple MPS fp16 with a scaler; a TPU bf16; a CPU bf16 (the CPU
    autocast default), *native* only where its class has bf16 units.  Passing ``dtype``
    forces it (fp16 then always needs a scaler).

    Args:
        device: a ``torch.device`` or string; default: the best device here.
        dtype: force ``torch.bfloat16``/``torch.float16`` (or ``"bf16"``/``"fp16"``).
        hw: decide for this :class:`accelkit.hardware.HardwareClass` instead of probing
            ``device`` (``doctor --hardware`` uses it; nothing is touched).

    Returns:
        An :class:`AmpChoice`.

    Raises:
        ValueError: for a dtype other than bf16/fp16.

    Example: ``amp = amp_choice("cpu"); amp.dtype  # torch.bfloat16``
    """
    import torch

    from accelkit import hardware

    cls = hw if hw is not None else hardware.for_device(device)
    name = cls.amp_dtype
    if dtype is not None:
        name = format_name(dtype)
        if name not in ("bfloat16", "float16"):
            raise ValueError(f"autocast runs in bfloat16 or float16, not {name}")
    short, native = _SHORT[name], cls.native(name)
    scaler = name == "float16"
    if native:
        why = f"{cls.name} has {short} units" + (
            "; fp16's narrow range needs loss scaling" if scaler else
            " (bf16 has fp32's range: no scaler)")
    else:
        why = (f"{cls.name} has no {short} units: {short} is converted to compute, slower "
               "than fp32")
    return AmpChoice(AUTOCAST_DEVICE[cls.kind], getattr(torch, name), scaler, native, why)


def autocast(device: Any = None, dtype: Any = None, *, enabled: bool = True) -> Any:
    """Return ``torch.autocast(device_type=..., dtype=..., enabled=...)`` for ``device``.

    The device-generic API (``torch.cuda.amp.autocast`` is deprecated and does nothing on
    a CPU).  ``enabled=False`` gives the same code path in full precision.

    Args:
        device: a ``torch.device``/string; default: the best device here.
        dtype: the low-precision dtype; default: :func:`amp_choice`'s.
        enabled: False turns autocast off (fp32 baseline).

    Example: ``with autocast(dev): loss = loss_fn(model(x), y)``
    """
    import torch

    choice = amp_choice(device, dtype)
    return torch.autocast(device_type=choice.device_type, dtype=choice.dtype, enabled=enabled)


def grad_scaler(device: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    """Return a ``torch.amp.GradScaler`` for ``device``, enabled only when ``dtype`` is fp16.

    With bf16 (or fp32) the scaler is disabled and ``scale``/``step``/``update`` pass
    through, so one training loop serves every dtype.

    Args:
        device: a ``torch.device``/string; default: the best device here.
        dtype: the autocast dtype; default: :func:`amp_choice`'s.
        **kwargs: passed to ``GradScaler`` (``init_scale``, ``growth_interval`` ...).

    Example: ``scaler = grad_scaler(dev, torch.float16, init_scale=2.0**16)``
    """
    import torch

    choice = amp_choice(device, dtype)
    return torch.amp.GradScaler(choice.device_type, enabled=choice.needs_scaler, **kwargs)


# ----------------------------------------------------------------------------- inspection
@dataclass(frozen=True)
class OpRecord:
    """One op called during a traced function.

    Attributes:
        op: the function's name (``"conv2d"``, ``"relu"``, ``"cross_entropy"``, ``"__add__"``).
        inputs: the dtypes of its tensor arguments, as given (before autocast casts them).
        output: the dtype of its (first) tensor result.
    """

    op: str
    inputs: tuple[str, ...]
    output: str


def _dtype_name(t: Any) -> str:
    return str(t.dtype).replace("torch.", "")


def trace_dtypes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, list[OpRecord]]:
    """Call ``fn(*args, **kwargs)`` and record the dtype each top-level torch op returns.

    Uses ``torch.overrides.TorchFunctionMode``: every ``torch.*``/``F.*``/tensor-method call
    made directly by ``fn`` or the modules it calls is logged with its input and output
    dtypes (calls made *inside* an op are not).  Run it inside ``torch.autocast`` to see
    which ops autocast lowers and which it keeps in float32.

    Args:
        fn: the function to run (e.g. ``lambda: loss_fn(model(x), y)``).
        *args, **kwargs: its arguments.

    Returns:
        ``(result, records)``: ``fn``'s result and one :class:`OpRecord` per op, in order.

    Example: ``_, ops = trace_dtypes(model, x)``
    """
    import torch
    from torch.overrides import TorchFunctionMode

    records: list[OpRecord] = []

    def tensors(obj: Any) -> list[Any]:
        if isinstance(obj, torch.Tensor):
            return [obj]
        if isinstance(obj, (list, tuple)):
            return [t for o in obj for t in tensors(o)]
        if isinstance(obj, dict):
            return [t for o in obj.values() for t in tensors(o)]
        return []

    class _Recorder(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, a: Any = (), kw: Any = None) -> Any:
            out = func(*a, **(kw or {}))
            name = getattr(func, "__name__", str(func))
            outs = tensors(out)
            if outs and name not in ("__get__", "__set__"):  # skip attribute access
                if name.startswith("_") and not name.startswith("__"):
                    name = name[1:]  # F.max_pool2d dispatches to "_max_pool2d"
                ins = tuple(_dtype_name(t) for t in tensors(list(a) + list((kw or {}).values())))
                records.append(OpRecord(name, ins, _dtype_name(outs[0])))
            return out

    with _Recorder():
        result = fn(*args, **kwargs)
    return result, records


def dtype_table(records: Iterable[OpRecord]) -> str:
    """Return a Markdown table of traced ops, one row per distinct (op, inputs, output).

    Example: ``print(dtype_table(ops))``
    """
    seen: dict[tuple[str, tuple[str, ...], str], int] = {}
    for r in records:
        key = (r.op, r.inputs, r.output)
        seen[key] = seen.get(key, 0) + 1
    rows = ["| op | input dtypes | output dtype | calls |", "|---|---|---|---|"]
    for (op, ins, out), n in seen.items():
        rows.append(f"| {op} | {', '.join(ins)} | {out} | {n} |")
    return "\n".join(rows)


def saved_activation_bytes(fn: Callable[[], Any], exclude: Iterable[Any] = ()) -> tuple[Any, int]:
    """Run ``fn()`` and count the bytes of the tensors autograd saves for the backward pass.

    Uses ``torch.autograd.graph.saved_tensors_hooks``; each distinct tensor (same data
    pointer, same size) counts once, and the tensors in ``exclude`` (pass the model's
    parameters: they exist anyway) are not counted.  This is the activation memory of a
    training step, the part AMP shrinks; it is exact and the same on every run, unlike a
    CPU process's resident memory.  Low-precision *copies* of weights that autocast saves
    do count: they are real extra memory.

    Args:
        fn: runs a forward pass (e.g. ``lambda: loss_fn(model(x), y)``).
        exclude: tensors not to count (typically ``model.parameters()``).

    Returns:
        ``(result, bytes)``: ``fn``'s result (call ``.backward()`` on it if you like) and the
        saved bytes.

    Example: ``loss, saved = saved_activation_bytes(lambda: loss_fn(model(x), y), model.parameters())``
    """
    import torch

    skip = {(t.data_ptr(), t.numel() * t.element_size()) for t in exclude}
    seen: set[tuple[int, int]] = set()

    def pack(t: Any) -> Any:
        key = (t.data_ptr(), t.numel() * t.element_size())
        if key not in skip:
            seen.add(key)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn()
    return result, sum(size for _, size in seen)


def peak_memory_bytes(fn: Callable[[], Any], device: Any) -> int | None:
    """Return the peak device memory ``fn()`` allocates above what was allocated before.

    CUDA only (``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``); on
    other devices no allocator reports a peak, so this returns None — use
    :func:`saved_activation_bytes` there.

    Example: ``peak = peak_memory_bytes(lambda: train_step(x, y), dev)``
    """
    import torch

    from accelkit import device as _dev

    if _dev.device_type(device) != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device) - before)


# ----------------------------------------------------------------------------- Keras
def keras_policy(device_kind: str = "cpu", dtype: Any = None) -> str:
    """Return the Keras mixed-precision policy name for a device kind.

    ``"mixed_bfloat16"`` on CPUs and TPUs, ``"mixed_float16"`` on GPUs (the TensorFlow
    mixed-precision guide's advice); ``dtype`` forces ``"bf16"``/``"fp16"``.

    Args:
        device_kind: ``"cpu"``, ``"cuda"``/``"gpu"``, ``"tpu"``.
        dtype: force a low-precision dtype.

    Raises:
        ValueError: for a dtype other than bf16/fp16.

    Example: ``keras.mixed_precision.set_global_policy(keras_policy("cpu"))``
    """
    if dtype is not None:
        key = format_name(dtype)
        if key not in ("bfloat16", "float16"):
            raise ValueError(f"Keras mixed policies use bfloat16 or float16, not {key}")
        return f"mixed_{key}"
    return "mixed_float16" if device_kind.lower() in ("cuda", "gpu", "rocm") else "mixed_bfloat16"


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
    from accelkit import device as _dev

    _dev.import_tf()
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


def tf_peak_memory_bytes(fn: Callable[[], Any], device: str = "GPU:0") -> int | None:
    """Return TensorFlow's peak memory on ``device`` while ``fn()`` runs, or None without a GPU.

    Uses ``tf.config.experimental.reset_memory_stats`` and ``get_memory_info(...)["peak"]``,
    which TensorFlow implements for GPUs (and TPUs), not for the CPU.

    Example: ``peak = tf_peak_memory_bytes(lambda: step(x, y))``
    """
    from accelkit import device as _dev

    tf = _dev.import_tf()
    if not tf.config.list_physical_devices(device.split(":")[0]):
        return None
    tf.config.experimental.reset_memory_stats(device)
    fn()
    return int(tf.config.experimental.get_memory_info(device)["peak"])


# ----------------------------------------------------------------------------- datasheets
def datasheet_tflops(device_name: str, dtype: Any) -> float | None:
    """Return a GPU's dense datasheet peak in TFLOP/s for ``dtype``, or None if unknown.

    The peaks live in the hardware-class table, :func:`accelkit.hardware.datasheet_tflops`
    (each with its datasheet named there); CPUs and unknown devices return None.

    Args:
        device_name: e.g. ``torch.cuda.get_device_name()`` (``"NVIDIA H200"``).
        dtype: ``"fp32"``, ``"tf32"``, ``"bf16"``, ``"fp16"`` or a torch dtype.

    Example: ``datasheet_tflops("NVIDIA A100-SXM4-80GB", "bf16")  # 312.0``
    """
    from accelkit import hardware

    return hardware.datasheet_tflops(device_name, _SHORT[format_name(dtype)])


__all__ = [
    "FORMATS",
    "AmpChoice",
    "FloatFormat",
    "OpRecord",
    "amp_choice",
    "autocast",
    "datasheet_tflops",
    "dtype_table",
    "float_format",
    "format_name",
    "format_table",
    "grad_scaler",
    "ieee_limits",
    "keras_activation_bytes",
    "keras_float32_output",
    "keras_optimizer",
    "keras_policy",
    "keras_policy_scope",
    "peak_memory_bytes",
    "round_to",
    "saved_activation_bytes",
    "tf_peak_memory_bytes",
    "trace_dtypes",
]
