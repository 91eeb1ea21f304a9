"""Assertions for notebooks, with messages a learner can act on.

They raise ``AssertionError`` (so nbval marks the cell as failed) with what was expected,
what was found and, for timing checks, the hardware class that set the bound.  This module
owns the assertions and the default tolerance per dtype; dtype names are read by
:mod:`accelkit.dtypes`, speedup verdicts come from :mod:`accelkit.bench`.

Every speedup claim decided by :func:`assert_speedup` is also appended, as one JSON line, to
the file named by ``ACCELKIT_CLAIMS_LOG`` when it is set (``make nbval`` sets it): the
interval next to its bound, so that floors are re-derived from many runs' margins
(``tools/claim_margins.py``), never from one good run.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

from accelkit import dtypes

CLAIMS_LOG_ENV = "ACCELKIT_CLAIMS_LOG"

# Default tolerances by canonical dtype name (accelkit.dtypes): (rtol, atol).  fp32 values
# follow torch.testing's defaults; low-precision ones follow its bf16/fp16 defaults.
_TOL = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "tfloat32": (1e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-5),
    "float16": (1e-3, 1e-5),
}


def tolerance(dtype: Any) -> tuple[float, float]:
    """Return the default ``(rtol, atol)`` for comparing tensors of ``dtype``.

    Accepts torch/NumPy/TF dtypes or names (``"bfloat16"``, ``"bf16"``; read by
    :func:`accelkit.dtypes.canonical`).  Values follow ``torch.testing.assert_close``'s
    defaults.

    Raises:
        ValueError: for a dtype with no default (integers compare exactly; pass tolerances).
    """
    name = dtypes.canonical(dtype)
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


def assert_speedup(comparison: Any, *, at_least: float | None, what: str, hardware: str = "",
                   why: str = "", at_most: float | None = None) -> float:
    """Assert that a measured speedup reaches ``at_least``, deciding from its interval.

    The claim holds when the whole confidence interval of the per-pair speedups
    (:class:`accelkit.bench.Comparison`) lies at or above ``at_least``.  It fails with
    "does not hold here" when the whole interval lies below, and with "too noisy to decide"
    when the interval straddles the floor.  Measure with ``compare(..., at_least=floor)``:
    then up to four batches of pairs are timed, each look's interval at its share of the
    error (alpha spending, :class:`accelkit.stats.SequentialPlan`), so "holds" is said of a
    speedup exactly at the floor in at most 2.5 % of runs however many looks it took.  A
    single number is not accepted: one median says nothing about the noise around it.

    Args:
        comparison: from :func:`accelkit.bench.compare`.
        at_least: the floor for this hardware class, from
            :meth:`accelkit.hardware.HardwareClass.floor` (1.0 = "not slower"; 0.5 = "at most
            2x slower").  ``None`` means this class makes no claim: nothing is asserted.
        what: what was sped up, for the message.
        hardware: the hardware class that chose the floor, for the message.
        why: why the floor holds on this class, for the message.
        at_most: also claim "at most this many times faster" (a ceiling, e.g. "compiling a
            GEMM-bound block gains little").

    Returns:
        The median speedup.

    Raises:
        AssertionError: when the claim is refuted or cannot be decided, with the interval,
            the number of pairs and the noise.
        TypeError: when ``comparison`` is not a Comparison.
    """
    from accelkit import bench

    if not isinstance(comparison, bench.Comparison):
        raise TypeError(f"{what}: assert_speedup takes an ak.bench.Comparison (from "
                        f"ak.bench.compare), not {type(comparison).__name__}: a lone number "
                        "carries no noise to decide from")
    if at_least is None and at_most is None:
        return comparison.speedup
    verdict = comparison.verdict(at_least=at_least, at_most=at_most)
    _log_claim(comparison, what, hardware, at_least, at_most, verdict)
    if verdict != bench.HOLDS:
        on = f" on {hardware}" if hardware else ""
        claim = " and ".join(f"{word} {bound:.2f}x" for word, bound in
                             (("at least", at_least), ("at most", at_most)) if bound is not None)
        because = f" (the floor: {why})" if why else ""
        advice = ("the interval lies outside the claim: the lesson's claim is false on this "
                  "machine, and the notebook must say why" if verdict == bench.REFUTED else
                  "the interval straddles the bound: re-run on an idle machine, or measure "
                  "longer")
        raise AssertionError(
            f"{what}: the claim '{claim}'{on} {verdict}: "
            f"{comparison.summary()}{because}. {advice[0].upper()}{advice[1:]}.")
    return comparison.speedup


def _log_claim(comparison: Any, what: str, hardware: str, at_least: float | None,
               at_most: float | None, verdict: str) -> None:
    """Append one decided claim to the ``ACCELKIT_CLAIMS_LOG`` file, if that is set.

    The path should be absolute (a relative one is read from the kernel's working folder,
    ``notebooks/`` under nbval); its folder is made if missing.  A log that cannot be written
    warns and does not fail the claim: the log is a maintainer's diagnostic.
    """
    path = os.environ.get(CLAIMS_LOG_ENV)
    if not path:
        return
    from accelkit import report

    low, high = comparison.interval
    line = {"what": what, "hardware": hardware, "notebook": os.environ.get(
        report.NOTEBOOK_ENV, ""), "at_least": at_least, "at_most": at_most,
        "speedup": comparison.speedup, "low": low, "high": high,
        "pairs": len(comparison.ratios), "noise": comparison.noise, "verdict": verdict,
        "extra_s": comparison.extra.get("extra_s"),
        "looks": len(comparison.extra.get("looks", ())) or 1, "level": comparison.level}
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
    except OSError as exc:
        warnings.warn(f"{CLAIMS_LOG_ENV}={path}: claim not logged ({exc})", stacklevel=3)


def assert_between(value: float, low: float, high: float, *, what: str) -> float:
    """Assert ``low <= value <= high`` and return ``value``.

    Raises:
        AssertionError: naming ``what``, the value and the bounds.
    """
    if not (low <= value <= high):
        raise AssertionError(f"{what}: {value:.4g} is outside [{low:.4g}, {high:.4g}]")
    return value
