"""Assertions for notebooks, with messages a learner can act on.

They raise ``AssertionError`` (so nbval marks the cell as failed) with what was expected,
what was found and, for timing checks, the hardware class that set the bound.
"""

from __future__ import annotations

from typing import Any

# Default tolerances by dtype: (rtol, atol).  fp32 values follow torch.testing's defaults;
# low-precision ones follow its bf16/fp16 defaults.
_TOL = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "tfloat32": (1e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-5),
    "float16": (1e-3, 1e-5),
}


def tolerance(dtype: Any) -> tuple[float, float]:
    """Return the default ``(rtol, atol)`` for comparing tensors of ``dtype``.

    Accepts torch/NumPy/TF dtypes or names (``"bfloat16"``).  Values follow
    ``torch.testing.assert_close``'s defaults.

    Raises:
        ValueError: for a dtype with no default (integers compare exactly; pass tolerances).
    """
    name = str(getattr(dtype, "name", dtype)).replace("torch.", "")
    if name not in _TOL:
        raise ValueError(f"no default tolerance for dtype {name!r}; pass rtol and atol")
    return _TOL[name]


def _to_numpy(x: Any) -> Any:
    import numpy as np

    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if str(x.dtype) in ("torch.bfloat16", "torch.float16"):
            x = x.float()
        return x.numpy()
    if hasattr(x, "numpy"):
        return np.asarray(x.numpy())
    return np.asarray(x)


def max_abs_err(actual: Any, expected: Any) -> float:
    """Return ``max |actual - expected|`` as a float (tensors of any framework, or arrays).

    Raises:
        ValueError: when the shapes differ.
    """
    import numpy as np

    a, e = _to_numpy(actual), _to_numpy(expected)
    if a.shape != e.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {e.shape}")
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64))))


def assert_close(actual: Any, expected: Any, *, rtol: float | None = None,
                 atol: float | None = None, what: str = "result") -> float:
    """Assert ``|actual - expected| <= atol + rtol*|expected|`` elementwise.

    Args:
        actual, expected: tensors/arrays of the same shape.
        rtol, atol: tolerances; default: :func:`tolerance` of ``actual``'s dtype.
        what: what is compared, for the message.

    Returns:
        The max absolute error (float), to record or print.

    Raises:
        AssertionError: with the max error, where it is, and the tolerances.
    """
    import numpy as np

    if rtol is None or atol is None:
        d_rtol, d_atol = tolerance(getattr(actual, "dtype", "float32"))
        rtol = d_rtol if rtol is None else rtol
        atol = d_atol if atol is None else atol
    a, e = _to_numpy(actual).astype(np.float64), _to_numpy(expected).astype(np.float64)
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shape {a.shape} differs from expected {e.shape}")
    err = np.abs(a - e)
    bad = err > atol + rtol * np.abs(e)
    worst = float(err.max()) if err.size else 0.0
    if bad.any():
        idx = np.unravel_index(int(np.argmax(err)), err.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} values differ; max |error| {worst:.3g} at "
            f"{tuple(int(i) for i in idx)} (got {a[idx]:.6g}, expected {e[idx]:.6g}); "
            f"rtol={rtol:g}, atol={atol:g}")
    return worst


def assert_speedup(speedup: float, *, at_least: float, what: str, hardware: str = "") -> float:
    """Assert that a measured speedup (a ratio from one run) reaches ``at_least``.

    Args:
        speedup: baseline time / candidate time.
        at_least: the floor for this hardware class (1.0 = "not slower"; < 1 allows a
            slowdown, e.g. 0.5 = "at most 2x slower").
        what: what was sped up, for the message.
        hardware: the hardware class that chose the floor, for the message.

    Returns:
        ``speedup``.

    Raises:
        AssertionError: when ``speedup < at_least``.
    """
    if not speedup >= at_least:
        on = f" on {hardware}" if hardware else ""
        raise AssertionError(
            f"{what}: measured speedup {speedup:.2f}x is below the floor {at_least:.2f}x "
            f"expected{on}. Re-run on an idle machine; if it persists, the lesson's claim "
            "does not hold here and the notebook must say why.")
    return speedup


def assert_between(value: float, low: float, high: float, *, what: str) -> float:
    """Assert ``low <= value <= high`` and return ``value``.

    Raises:
        AssertionError: naming ``what``, the value and the bounds.
    """
    if not (low <= value <= high):
        raise AssertionError(f"{what}: {value:.4g} is outside [{low:.4g}, {high:.4g}]")
    return value
