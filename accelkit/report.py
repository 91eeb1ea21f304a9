"""Results: what notebooks record, kept for ``make run`` and ``make verify`` to gather.

A notebook calls ``ak.report.record("amp.matmul_bf16_speedup", 2.1, "x")``.  Under
``make run`` the runner sets ``ACCELKIT_RESULTS`` to a JSON-lines file and
``ACCELKIT_NOTEBOOK`` to the notebook's name; each record is appended there.  Outside the
runner, records are kept in memory only (:func:`recorded`), so running a notebook by hand
writes nothing.

Owns :func:`record` and :func:`results` (the records of a results file gathered by key).
Lives elsewhere (maintainers' tools): executing notebooks (``tools/run_notebooks.py``), the run
summary a learner hands in and its anonymisation (``tools/run_summary.py``), nbval records
(``tools/verify.py``), comparing several machines (``tools/compare.py``).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass
from typing import Any

RESULTS_ENV = "ACCELKIT_RESULTS"
NOTEBOOK_ENV = "ACCELKIT_NOTEBOOK"
_KEY = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

_records: list[Result] = []


@dataclass(frozen=True)
class Result:
    """One recorded measurement.

    Attributes:
        key: dotted, stable name (``"roofline.copy_gbps"``).
        value: a finite number, or a string/bool for categorical results.
        unit: the unit (``"TFLOP/s"``, ``"GB/s"``, ``"s"``, ``"x"``, ``"fraction"``, ``""``).
        notebook: the notebook that recorded it (``"00_device_setup"``) or ``""``.
    """

    key: str
    value: float | int | str | bool
    unit: str
    notebook: str = ""


def record(key: str, value: Any, unit: str = "") -> Any:
    """Record one result of this run and return ``value`` unchanged.

    Args:
        key: a dotted lowercase name, ``<topic>.<name>`` (``"digits.torch_test_acc"``).
        value: a number (int/float/NumPy/0-d tensor), a bool or a short string.
        unit: its unit, e.g. ``"TFLOP/s"``, ``"GB/s"``, ``"s"``, ``"x"`` (a ratio), ``"fraction"``.

    Returns:
        ``value``, so ``acc = ak.report.record("digits.tf_test_acc", acc, "fraction")`` works.

    Raises:
        ValueError: for a malformed key or a NaN/infinite number.
        TypeError: for a value that is not a number, bool or string.
    """
    if not _KEY.match(key):
        raise ValueError(f"result key {key!r} must look like 'topic.name' (lowercase, dots)")
    plain: float | int | str | bool
    if isinstance(value, (bool, str)):
        plain = value
    else:
        try:
            plain = value.item() if hasattr(value, "item") else value
        except (ValueError, RuntimeError):
            raise TypeError(f"result {key!r}: value must be a scalar, got {value!r}") from None
        if isinstance(plain, bool) or not isinstance(plain, (int, float)):
            raise TypeError(f"result {key!r}: value must be a number, bool or str, got {value!r}")
        if isinstance(plain, float) and not math.isfinite(plain):
            raise ValueError(f"result {key!r}: value is not finite ({plain})")
    res = Result(key, plain, unit, os.environ.get(NOTEBOOK_ENV, ""))
    _records[:] = [r for r in _records if r.key != key] + [res]
    path = os.environ.get(RESULTS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(res)) + "\n")
    return value


def recorded() -> dict[str, Result]:
    """Return the results recorded in this process so far, by key (last value wins)."""
    return {r.key: r for r in _records}


def load_jsonl(path: str | os.PathLike[str]) -> list[Result]:
    """Read the results that :func:`record` appended to ``path`` (missing file: empty list)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return [Result(**json.loads(line)) for line in fh if line.strip()]


def format_value(value: Any, unit: str = "") -> str:
    """Format a result for a table: 3 significant digits for floats, the unit after it."""
    if isinstance(value, float):
        text = f"{value:.3g}"
    else:
        text = str(value)
    return f"{text} {unit}".strip() if unit not in ("", "x") else (text + ("x" if unit else ""))


def plain(text: str) -> str:
    """Return ``text`` without ANSI colour/cursor codes (Jupyter tracebacks carry them)."""
    return _ANSI.sub("", text)


# ----------------------------------------------------------------------------- run summary
def results(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Gather the records in a results file by key: ``{key: {"value", "unit", "notebook"}}``.

    A key recorded twice keeps its last value; a missing file gives ``{}``.
    """
    return {r.key: {"value": r.value, "unit": r.unit, "notebook": r.notebook}
            for r in load_jsonl(path)}
