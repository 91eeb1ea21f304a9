"""Dtype tracing: which dtype every op of a forward pass returns, e.g. under autocast.

This module owns :func:`trace_dtypes` (run a function and record, per top-level torch op,
the dtypes it was given and the dtype it returned: one :class:`OpRecord` each) and
:func:`dtype_table` (those records as a Markdown table), to *see* which ops autocast runs
in low precision and which it keeps in fp32.

What lives elsewhere: autocast, the AMP dtype choice, GradScaler and number formats in
:mod:`accelkit.precision`; dtype names and aliases in :mod:`accelkit.dtypes`.

Example::

    with ak.precision.autocast(device):
        _, ops = ak.dtype_trace.trace_dtypes(lambda: loss_fn(model(x), y))
    print(ak.dtype_trace.dtype_table(ops))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


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


__all__ = [
    "OpRecord",
    "dtype_table",
    "trace_dtypes",
]
