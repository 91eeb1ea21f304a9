"""Dtypes: the one table of dtype names; the dtype each torch op returns; Keras activation bytes.

Owns three things about dtypes:

* names: the canonical long name (``"bfloat16"``, as torch, NumPy, TensorFlow and
  ``ml_dtypes`` spell it), the short key the course prints and uses as a result key
  (``"bf16"``) and the aliases between them (:func:`canonical`, :func:`short`).  Each user
  checks the name against what *it* covers and raises its own error:
  :func:`accelkit.precision.format_name`, :func:`accelkit.roofline.dtype_key`,
  :func:`accelkit.claims.tolerance` and :func:`accelkit.hardware.datasheet_tflops`;
* tracing: :func:`trace` runs a function and records, per top-level torch op, the dtypes it
  was given and the dtype it returned (one :class:`OpRecord` each), to *see* which ops
  autocast runs in low precision and which it keeps in fp32;
  :meth:`DtypeTrace.table` prints them;
* :func:`keras_activation_bytes`: a Keras model's activation memory from its layers' shapes
  and compute dtypes (what a mixed policy halves).

Importing it imports no framework and no other accelkit module (:mod:`accelkit.hardware`
reads the names).  Elsewhere: autocast, the AMP dtype choice, GradScaler and number formats
in :mod:`accelkit.precision`; the Keras policy of each hardware class
(``HardwareClass.keras_policy``) in :mod:`accelkit.hardware`; TensorFlow's allocator peak in
:mod:`accelkit.memory`.

Example::

    short(torch.bfloat16)  # "bf16"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, ops = ak.dtypes.trace(lambda: loss_fn(model(x), y))
    print(ops.table())
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# ----------------------------------------------------------------------------- names
#: Canonical name -> short key, widest first.
SHORT: dict[str, str] = {
    "float64": "fp64",
    "float32": "fp32",
    "tfloat32": "tf32",
    "float16": "fp16",
    "bfloat16": "bf16",
}

#: Other spellings -> canonical name (the short keys, and the C/PyTorch type names).
ALIASES: dict[str, str] = {
    "fp64": "float64",
    "double": "float64",
    "fp32": "float32",
    "float": "float32",
    "tf32": "tfloat32",
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
}


def canonical(dtype: Any) -> str:
    """Return the canonical name of a dtype: ``"float32"``, ``"tfloat32"``, ``"bfloat16"`` ...

    Args:
        dtype: a name (``"bf16"``, ``"BFloat16"``, ``"half"``), a torch dtype, or anything
            with a ``.name`` (NumPy and TensorFlow dtypes).

    Returns:
        The canonical name for a known spelling; any other name lower-cased and with a
        ``"torch."`` prefix removed (``torch.int8`` -> ``"int8"``), for the caller to reject
        with its own message.  Never raises.
    """
    raw = str(getattr(dtype, "name", dtype)).strip().replace("torch.", "").lower()
    return ALIASES.get(raw, raw)


def short(dtype: Any) -> str:
    """Return the short key of a dtype: ``"fp32"``, ``"tf32"``, ``"fp16"``, ``"bf16"``, ``"fp64"``.

    Args:
        dtype: anything :func:`canonical` takes.

    Returns:
        The short key; a name with none (``"fp8"``, ``"int8"``) is returned as
        :func:`canonical` gives it.  Never raises.
    """
    name = canonical(dtype)
    return SHORT.get(name, name)


# ----------------------------------------------------------------------------- tracing
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


class DtypeTrace(list[OpRecord]):
    """The :class:`OpRecord` of each op a traced function called, in order (a list)."""

    def table(self) -> str:
        """Return a Markdown table of the ops, one row per distinct (op, inputs, output), with
        how many calls each row stands for."""
        seen: dict[tuple[str, tuple[str, ...], str], int] = {}
        for r in self:
            key = (r.op, r.inputs, r.output)
            seen[key] = seen.get(key, 0) + 1
        rows = ["| op | input dtypes | output dtype | calls |", "|---|---|---|---|"]
        for (op, ins, out), n in seen.items():
            rows.append(f"| {op} | {', '.join(ins)} | {out} | {n} |")
        return "\n".join(rows)


def trace(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, DtypeTrace]:
    """Call ``fn(*args, **kwargs)`` and record the dtype each top-level torch op returns.

    Uses ``torch.overrides.TorchFunctionMode``: every ``torch.*``/``F.*``/tensor-method call
    made directly by ``fn`` or the modules it calls is logged with its input and output
    dtypes (calls made *inside* an op are not).  Run it inside ``torch.autocast`` to see
    which ops autocast lowers and which it keeps in float32.

    Args:
        fn: the function to run (e.g. ``lambda: loss_fn(model(x), y)``).
        *args, **kwargs: its arguments.

    Returns:
        ``(result, ops)``: ``fn``'s result and a :class:`DtypeTrace`, one :class:`OpRecord`
        per op, in order (``ops.table()`` is the Markdown table).

    Example: ``_, ops = trace(model, x); print(ops.table())``
    """
    import torch
    from torch.overrides import TorchFunctionMode

    records = DtypeTrace()

    def tensors(obj: Any) -> list[Any]:
        if isinstance(obj, torch.Tensor):
            return [obj]
        if isinstance(obj, (list, tuple)):
            return [t for o in obj for t in tensors(o)]
        if isinstance(obj, dict):
            return [t for o in obj.values() for t in tensors(o)]
        return []

    def dtype(t: Any) -> str:
        return str(t.dtype).replace("torch.", "")

    class _Recorder(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, a: Any = (), kw: Any = None) -> Any:
            out = func(*a, **(kw or {}))
            name = getattr(func, "__name__", str(func))
            outs = tensors(out)
            if outs and name not in ("__get__", "__set__"):  # skip attribute access
                if name.startswith("_") and not name.startswith("__"):
                    name = name[1:]  # F.max_pool2d dispatches to "_max_pool2d"
                ins = tuple(dtype(t) for t in tensors(list(a) + list((kw or {}).values())))
                records.append(OpRecord(name, ins, dtype(outs[0])))
            return out

    with _Recorder():
        result = fn(*args, **kwargs)
    return result, records


# ----------------------------------------------------------------------------- Keras
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
    "ALIASES",
    "SHORT",
    "DtypeTrace",
    "OpRecord",
    "canonical",
    "keras_activation_bytes",
    "short",
    "trace",
]
