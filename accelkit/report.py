"""Results: what notebooks record, and what other machines recorded, read back beside them.

A notebook calls ``ak.report.record("amp.matmul_bf16_speedup", 2.1, "x")``.  Under
``make run`` the runner sets ``ACCELKIT_RESULTS`` to a JSON-lines file and
``ACCELKIT_NOTEBOOK`` to the notebook's name; each record is appended there.  Outside the
runner a record is checked and returned, and running a notebook by hand writes nothing.

``make verify`` (``tools/verify.py``) runs every notebook under nbval on a machine and writes
``verified/<class>.json``: the date, the hardware class and whether it was emulated, the
library versions, the hardware card, every recorded result and pass/fail per notebook;
:func:`load_record` and :func:`load_records` read them back.  Where no record from other
hardware holds a result, ``verified/quoted.toml`` may: figures published by others
(datasheets, vendor posts, papers), each with its hardware, source and date, checked by
:func:`load_quotes`.  :func:`reference_lines` prints our records first, then those figures
marked "quoted, not measured by this course", and where there is neither, how to add a machine.

Lives elsewhere (maintainers' tools): executing notebooks (``tools/run_notebooks.py``), the run
summary a learner hands in (``tools/run_summary.py``), writing verification records and
README's table (``tools/verify.py``), comparing several machines (``tools/compare.py``).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RESULTS_ENV = "ACCELKIT_RESULTS"
NOTEBOOK_ENV = "ACCELKIT_NOTEBOOK"
_KEY = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


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
    path = os.environ.get(RESULTS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(Result(key, plain, unit, os.environ.get(NOTEBOOK_ENV, ""))))
                     + "\n")
    return value


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


# ----------------------------------------------------------------------------- verification records
#: The verification records' format (``verified/<class>.json``).
FORMAT = 1


def load_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read one verification record (``verified/<class>.json``).

    Returns:
        The record: ``class``, ``emulated``, ``date``, ``hardware``, ``notebooks``
        (``{stem: {"status", "wall_s", ...}}``), ``results``.

    Raises:
        ValueError: naming the file when it cannot be read, is not JSON, or is not a
            verification record of format :data:`FORMAT`.
    """
    path = Path(path)
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the verification record ({exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(rec, dict) or rec.get("format") != FORMAT or "class" not in rec \
            or not isinstance(rec.get("notebooks"), dict):
        raise ValueError(f"{path}: not an accelkit verification record of format {FORMAT}")
    return rec


def load_records(folder: str | os.PathLike[str] = "verified", *,
                 real_only: bool = False) -> list[dict[str, Any]]:
    """Read every ``*.json`` record in ``folder`` (:func:`load_record`), sorted by file name.

    Args:
        real_only: leave out records of an emulated CPU class (``ACCELKIT_HARDWARE``): their
            run times and speeds are not that class's.

    Raises:
        ValueError: as :func:`load_record`.
    """
    records = [load_record(p) for p in sorted(Path(folder).glob("*.json"))]
    return [r for r in records if is_real(r) or not real_only]


def is_real(record: dict[str, Any]) -> bool:
    """Whether a record timed its own class, not a CPU class emulated on another CPU
    (``ACCELKIT_HARDWARE``): only real records' run times and speeds are that class's."""
    return not record.get("emulated")


#: Where the records live in a checkout (``verified/`` beside ``accelkit/``).
RECORDS = Path(__file__).resolve().parents[1] / "verified"
#: The published reference figures' file name, inside the records' folder (:func:`load_quotes`).
QUOTED = "quoted.toml"
#: How a quoted figure relates to the key's quantity: the same one, or a close one.
MATCHES = ("same", "close")
#: Every field a quoted figure must have, with its type.
QUOTE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "key": str, "hardware": str, "value": (int, float), "unit": str, "match": str,
    "measured": str, "source": str, "date": str}
_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


def records_folder(folder: str | os.PathLike[str] | None = None) -> Path | None:
    """Return the folder of verification records and quoted figures, or ``None`` when there is none.

    Args:
        folder: an explicit folder (returned as it is, existing or not); ``None`` looks for
            :data:`RECORDS` (a checkout), then for ``../verified`` when the working directory
            is a checkout's ``notebooks/`` folder: the Colab bootstrap installs accelkit from
            its clone (so :data:`RECORDS` is missing) and moves into ``<clone>/notebooks``.
    """
    if folder is not None:
        return Path(folder)
    if RECORDS.is_dir():
        return RECORDS
    here = Path.cwd()
    beside = here.parent / "verified"
    return beside if here.name == "notebooks" and beside.is_dir() else None


def references(key: str, folder: str | os.PathLike[str] | None = None,
               exclude_class: str | None = None) -> list[dict[str, Any]]:
    """Return ``key``'s value in every verification record, for "on a verified GPU it was ...".

    Args:
        key: a result key, e.g. ``"async.torch_naive_over_synced"``.
        folder: the records' folder; default :func:`records_folder` (none in a pip install
            outside a checkout, which then has no references).
        exclude_class: a hardware class to leave out (usually this machine's own).

    Returns:
        One dict per record holding ``key``: ``class``, ``class_title``, ``emulated``,
        ``date`` (ISO), ``profile``, ``value`` and ``unit``, sorted by file name; ``[]``
        when no record has it. Values were measured by ``make verify`` on that hardware.

    Raises:
        ValueError: a record file that cannot be read or is not a verification record (see
            :func:`load_record`).
    """
    path = records_folder(folder)
    if path is None or not path.is_dir():
        return []
    out = []
    for rec in load_records(path):
        res = rec["results"].get(key)
        if res is None or rec["class"] == exclude_class:
            continue
        out.append({"class": rec["class"], "class_title": rec.get("class_title", ""),
                    "emulated": bool(rec.get("emulated")), "date": rec["date"],
                    "profile": rec["profile"], "value": res["value"], "unit": res["unit"]})
    return out


def _toml_loads(text: str) -> dict[str, Any]:
    """Parse TOML with tomllib (Python 3.11+) or tomli; ImportError says what to install."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ImportError("reading quoted figures needs Python 3.11+ or `pip install tomli`") from None
    return tomllib.loads(text)


def _check_quote(i: int, q: Any, path: Path, keys: Mapping[str, str | None] | None) -> dict[str, Any]:
    """Validate quote number ``i`` of ``path``; return it as a plain dict (ValueError otherwise)."""
    where = f"{path}: quote {i + 1}"
    if not isinstance(q, dict):
        raise ValueError(f"{where}: not a table")
    where += f" ({q.get('key', '?')})"
    missing = [f for f in QUOTE_FIELDS if f not in q]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    extra = sorted(set(q) - set(QUOTE_FIELDS))
    if extra:
        raise ValueError(f"{where}: unknown field(s) {', '.join(extra)} (allowed: {', '.join(QUOTE_FIELDS)})")
    for field, kind in QUOTE_FIELDS.items():
        value = q[field]
        empty = isinstance(value, str) and not value.strip()
        if not isinstance(value, kind) or isinstance(value, bool) or empty:
            what = "number" if field == "value" else "non-empty string"
            raise ValueError(f"{where}: {field} must be a {what}, got {value!r}")
    if not math.isfinite(q["value"]):
        raise ValueError(f"{where}: value must be finite, got {q['value']!r}")
    if q["match"] not in MATCHES:
        raise ValueError(f"{where}: match must be one of {MATCHES}, got {q['match']!r}")
    if not _DATE.match(q["date"]) or not _valid_date(q["date"]):
        raise ValueError(f"{where}: date must be YYYY-MM-DD, YYYY-MM or YYYY, got {q['date']!r}")
    if keys is not None:
        if q["key"] not in keys:
            raise ValueError(f"{where}: no notebook records the key {q['key']!r} "
                             "(ak.report.record in notebooks/*.ipynb)")
        unit = keys[q["key"]]
        if q["match"] == "same" and unit is not None and unit != q["unit"]:
            raise ValueError(f"{where}: unit {q['unit']!r}, but the notebooks record {q['key']} "
                             f"in {unit!r}")
    return dict(q)


def _valid_date(text: str) -> bool:
    """Whether a YYYY[-MM[-DD]] string names a real date (no month 13, no 30 February)."""
    parts = [int(p) for p in text.split("-")]
    try:
        datetime.date(parts[0], *(parts[1:] + [1] * (3 - len(parts))))
    except ValueError:
        return False
    return True


def load_quotes(path: str | os.PathLike[str] | None = None,
                keys: Mapping[str, str | None] | None = None) -> list[dict[str, Any]]:
    """Read and check the published reference figures (``verified/quoted.toml``).

    Each figure was measured by someone else and read in its source; none was measured by this
    course.  The file's header says what each field means.

    Args:
        path: the file; default :data:`QUOTED` in :func:`records_folder` (none there: ``[]``).
        keys: the result keys the notebooks record, ``{key: unit or None}``
            (``tools/verify.py``'s ``notebook_result_keys``); when given, a figure for another key, or a
            ``match = "same"`` figure in another unit, is an error.

    Returns:
        One dict per ``[[quote]]``, in file order: ``key``, ``hardware``, ``value`` (a number),
        ``unit``, ``match`` (``"same"`` or ``"close"``), ``measured``, ``source``, ``date``
        (``YYYY[-MM[-DD]]``).

    Raises:
        ValueError: naming the file and the figure: not TOML, no ``quote`` list, a field
            missing, unknown, empty or of the wrong type, a value that is not finite, a match
            other than :data:`MATCHES`, a malformed date, an unknown key or unit (with ``keys``).
        ImportError: on Python 3.10 without ``tomli`` (saying so).

    Example: ``ak.report.load_quotes(keys=notebook_result_keys("notebooks"))`` (``tools/verify.py``)
    """
    if path is None:
        folder = records_folder()
        if folder is None or not (folder / QUOTED).is_file():
            return []
        path = folder / QUOTED
    path = Path(path)
    try:
        data = _toml_loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the quoted figures ({exc})") from None
    except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise ValueError(f"{path}: not TOML ({exc})") from None
    quotes = data.get("quote")
    if not isinstance(quotes, list) or set(data) - {"quote"}:
        raise ValueError(f"{path}: expected only [[quote]] tables, got {sorted(data)}")
    return [_check_quote(i, q, path, keys) for i, q in enumerate(quotes)]


def quotes(key: str, path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Return the published reference figures for ``key`` (:func:`load_quotes`), in file order.

    Raises:
        ValueError, ImportError: as :func:`load_quotes`.
    """
    return [q for q in load_quotes(path) if q["key"] == key]


#: What ``reference_lines`` says where neither a record nor a quoted figure holds a key.
ONLY_HERE = ("{key}: measured on this machine only so far; to add another machine, run "
             "`make verify` there and hand in the verified/<class>.json it writes "
             "(README, 'Add a machine to the course')")


def reference_lines(key: str, exclude_class: str | None = None,
                    folder: str | os.PathLike[str] | None = None) -> list[str]:
    """Return printable lines for ``key`` from other hardware: our records, then quoted figures.

    First one line per verification record of another class, "KEY on CLASS (DATE, PROFILE
    profile): VALUE" (measured by ``make verify``); then one line per published figure in
    ``quoted.toml`` (:func:`quotes`), "KEY on HARDWARE: VALUE, quoted, not measured by this
    course[, a close quantity]: WHAT (source: SOURCE, DATE)".  Where there is neither, one
    line saying that this machine is the only one so far and how to add another
    (:data:`ONLY_HERE`), so a notebook can always print the result of looking, never a
    typed-in number.

    Args:
        key: a result key.
        exclude_class: a hardware class whose record is left out (usually this machine's own;
            quoted figures are always shown).
        folder: the folder holding the records and ``quoted.toml``; default
            :func:`records_folder`.

    Raises:
        ValueError: a record (:func:`load_record`) or ``quoted.toml`` (:func:`load_quotes`)
            that cannot be read or is malformed.

    Example: ``print(*ak.report.reference_lines("copy.pinned_speedup", HWC.name), sep="\n")``
    """
    lines = [f"{key} on {r['class']}{' (emulated)' if r['emulated'] else ''} "
             f"({r['date']}, {r['profile']} profile): {format_value(r['value'], r['unit'])}"
             for r in references(key, folder, exclude_class)]
    base = records_folder(folder)
    try:
        quoted = quotes(key, base / QUOTED) if base is not None and (base / QUOTED).is_file() else []
    except ImportError as exc:  # Python 3.10 without tomli: say so rather than fail the cell
        quoted, lines = [], [*lines, f"{key}: published figures not shown ({exc})"]
    for q in quoted:
        close = ", a close quantity" if q["match"] == "close" else ""
        lines.append(f"{key} on {q['hardware']}: {format_value(q['value'], q['unit'])}, "
                     f"quoted, not measured by this course{close}: {q['measured']} "
                     f"(source: {q['source']}, {q['date']})")
    return lines or [ONLY_HERE.format(key=key)]
