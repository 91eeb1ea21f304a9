"""Roofline explorer: move a matmul or an elementwise add along this machine's measured roofline.

The roofs are the :class:`accelkit.roofline.Roofline` notebook 00 measured; the point's
attainable TFLOP/s, its bound and its predicted time come from the same object
(:meth:`~accelkit.roofline.Roofline.attainable_tflops`, :meth:`~accelkit.roofline.Roofline.bound`,
:meth:`~accelkit.roofline.Roofline.predicted_s`), the picture from :func:`accelkit.plot.roofline`.
The ops count FLOP and bytes as notebook 00 does: an ``n × n`` matmul ``2·n³`` FLOP over
``3·n²`` elements (two inputs, one output), an add ``numel`` FLOP over ``3·numel`` elements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelkit import plot
from accelkit import roofline as rl
from accelkit.explore import ui

OPS = ("matmul", "add")


def op_counts(op: str, size: int, dtype: str) -> tuple[float, float]:
    """Return ``(flops, bytes_moved)`` of an ``op`` of ``size`` in ``dtype``.

    ``"matmul"``: ``(n, n) @ (n, n)`` with ``n = size``: ``2·n³`` FLOP, ``3·n²`` elements.
    ``"add"``: ``z = x + y`` of ``size`` elements: ``size`` FLOP, ``3·size`` elements.

    Raises:
        ValueError: for an unknown op or a size < 1.
    """
    if op not in OPS or size < 1:
        raise ValueError(f"op must be one of {OPS} and size >= 1, got {op!r}, {size}")
    import torch

    item = getattr(torch, rl.DTYPE_NAMES[rl.dtype_key(dtype)]).itemsize
    if op == "matmul":
        return 2.0 * size**3, 3.0 * size**2 * item
    return float(size), 3.0 * size * item


@dataclass(frozen=True)
class RooflineView:
    """What the roofline explorer shows for one setting.

    Attributes:
        label: ``"matmul 512 fp32"``.
        dtype: the roof's short dtype.
        flops, bytes_moved: the op's work.
        intensity: FLOP per byte.
        attainable_tflops: the roofline's bound there.
        bound: ``"memory"`` or ``"compute"``.
        predicted_s: the time at the roof, seconds.
        ridge: the ridge point of this dtype, FLOP/byte.
    """

    label: str
    dtype: str
    flops: float
    bytes_moved: float
    intensity: float
    attainable_tflops: float
    bound: str
    predicted_s: float
    ridge: float


def compute(roof: rl.Roofline, *, op: str = "matmul", size: int = 512,
            dtype: str = "fp32") -> RooflineView:
    """Compute the explorer's numbers (the update function; arguments as :func:`roofline`)."""
    key = rl.dtype_key(dtype)
    flops, nbytes = op_counts(op, size, key)
    ai = flops / nbytes
    return RooflineView(f"{op} {size} {key}", key, flops, nbytes, ai,
                        roof.attainable_tflops(ai, key), roof.bound(ai, key),
                        roof.predicted_s(flops, nbytes, key), roof.ridge_point(key))


def draw(roof: rl.Roofline, view: RooflineView, points: Sequence[rl.Placement] = ()) -> Any:
    """Draw the roofline (:func:`accelkit.plot.roofline`, with the measured ``points``) and
    the explored op as a red star at (intensity, attainable TFLOP/s).

    Returns:
        The ``Figure``; the star is the line with ``gid="explore-point"``.
    """
    ax = plot.roofline(roof, points, title=f"{view.label} on the roofline of {roof.device}")
    lo, hi = ax.get_xlim()
    ax.set_xlim(min(lo, view.intensity / 4), max(hi, view.intensity * 4))
    ax.plot([view.intensity], [view.attainable_tflops], "*", color="tab:red", markersize=14,
            gid="explore-point", label=f"{view.label}: {view.bound}-bound")
    ax.legend(fontsize=7, loc="upper left")  # as plot.roofline: the stamp is lower right
    return ax.figure


def readout(view: RooflineView) -> str:
    """One line: intensity, bound, attainable TFLOP/s and the predicted time."""
    return (f"{view.label}: {view.intensity:.3g} FLOP/B, {view.bound}-bound (ridge "
            f"{view.ridge:.3g} FLOP/B); at most {view.attainable_tflops:.3g} TFLOP/s -> at "
            f"least {view.predicted_s * 1e3:.3g} ms")


def roofline(roof: rl.Roofline, *, op: str = "matmul", size: int = 512, dtype: str = "fp32",
             points: Sequence[rl.Placement] = ()) -> None:
    """Explore where an op of any size lands on this machine's measured roofline.

    Shows the roofs of ``roof`` (one per measured dtype), the kernels notebook 00 measured
    (``points``) and the chosen op at its attainable TFLOP/s, with its bound and the time the
    roofline predicts (a lower bound: real kernels reach only part of their roof, as the
    measured points show).  Controls: op, size (matmul ``n`` or the add's element count),
    dtype.  Without widgets (see :mod:`accelkit.explore.ui`) it draws this state and prints
    the call that reproduces it.

    Args:
        roof: from :func:`accelkit.roofline.measure` (notebook 00's ``roof``).
        op: ``"matmul"`` (square, ``n = size``) or ``"add"`` (``size`` elements).
        size: the matmul's n or the add's element count, >= 1.
        dtype: ``"fp32"``, ``"bf16"`` or ``"fp16"``, measured in ``roof``.
        points: measured placements to draw too (:meth:`accelkit.roofline.Roofline.place`).

    Returns:
        None (it displays the explorer).

    Raises:
        ValueError: for an unknown op, a size < 1 or a dtype ``roof`` did not measure.

    Example: ``ak.explore.roofline(roof, op="matmul", size=n_mm, points=points)``
    """
    settings = dict(roof=roof, op=op, size=size, dtype=rl.dtype_key(dtype), points=points)
    compute(roof, op=op, size=size, dtype=dtype)
    controls = {"op": ui.Control("choice", "op", options=OPS),
                "size": ui.Control("logint", "size (matmul n / add elements)", 8, 2**30),
                "dtype": ui.Control("choice", "dtype", options=list(roof.peak_tflops))}

    def render(s: dict[str, Any]) -> tuple[Any, str]:
        view = compute(s["roof"], op=s["op"], size=s["size"], dtype=s["dtype"])
        return draw(s["roof"], view, s["points"]), readout(view)

    ui.show("roofline", settings, controls, render, names={"roof": "roof", "points": "points"})


__all__ = ["OPS", "RooflineView", "compute", "draw", "op_counts", "readout", "roofline"]
