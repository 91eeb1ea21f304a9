"""Results: what notebooks record, other machines' records read back, and the exercises' keys.

``ak.report.record(key, value, unit)`` appends to the JSON-lines file ``$ACCELKIT_RESULTS``
(set by ``make run``, with ``$ACCELKIT_NOTEBOOK``); outside the runner it only checks and returns.
``make verify`` (``tools/verify.py``) writes ``verified/<class>.json`` (date, hardware class,
emulated or not, versions, results, pass/fail per notebook), read by :func:`load_record(s)`;
``verified/quoted.toml`` holds figures published by others (:func:`load_quotes`).
:func:`reference_lines` prints our records, then quoted figures, else how to add a machine.
Exercises: :data:`EXERCISE_KEYS` and :func:`check_exercise`, the one checker notebooks call
(``tests/test_report.py`` recomputes every key from the package's formulas).

Lives elsewhere: executing notebooks, run summaries, README's table and comparing machines
(``tools/run_notebooks.py``, ``run_summary.py``, ``verify.py``, ``compare.py``).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RESULTS_ENV = "ACCELKIT_RESULTS"
NOTEBOOK_ENV = "ACCELKIT_NOTEBOOK"
_KEY = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class Result:
    """One recorded measurement: a dotted ``key``, a finite number or a str/bool ``value``,
    its ``unit`` (``"TFLOP/s"``, ``"x"``, ``"fraction"``, ``""``), the ``notebook`` stem or ``""``."""

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
    text = f"{value:.3g}" if isinstance(value, float) else str(value)
    return f"{text} {unit}".strip() if unit not in ("", "x") else (text + ("x" if unit else ""))


def plain(text: str) -> str:
    """Return ``text`` without ANSI colour/cursor codes (Jupyter tracebacks carry them)."""
    return _ANSI.sub("", text)


def results(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Gather a results file by key, ``{key: {"value", "unit", "notebook"}}`` (last value wins;
    a missing file gives ``{}``)."""
    return {r.key: {"value": r.value, "unit": r.unit, "notebook": r.notebook}
            for r in load_jsonl(path)}


# ----------------------------------------------------------------------------- verification records
#: The verification records' format (``verified/<class>.json``).
FORMAT = 1


def load_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read one verification record (``verified/<class>.json``): a dict with ``class``,
    ``emulated``, ``date``, ``hardware``, ``notebooks`` (``{stem: {"status", "wall_s", ...}}``),
    ``results``.  Raises ValueError naming the file when it cannot be read, is not JSON, or is
    not a record of format :data:`FORMAT`."""
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
    """Read every ``*.json`` record in ``folder`` (:func:`load_record`, whose ValueError it
    raises), sorted by file name; ``real_only`` leaves out emulated classes (:func:`is_real`)."""
    records = [load_record(p) for p in sorted(Path(folder).glob("*.json"))]
    return [r for r in records if is_real(r) or not real_only]


def is_real(record: dict[str, Any]) -> bool:
    """Whether a record timed its own class, not a CPU class emulated on another CPU
    (``ACCELKIT_HARDWARE``): only real records' times are that class's."""
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
    """Return the folder of records and quoted figures, or ``None`` when there is none.

    ``folder`` is returned as it is; ``None`` looks for :data:`RECORDS` (a checkout), then for
    ``../verified`` when the working directory is ``notebooks/`` (Colab installs accelkit from
    its clone, so :data:`RECORDS` is missing, and works in ``<clone>/notebooks``).
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
    """Return ``key``'s value in every verification record but ``exclude_class``'s.

    ``folder`` defaults to :func:`records_folder` (none: ``[]``).  Returns one dict per record
    holding ``key``: ``class``, ``class_title``, ``emulated``, ``date`` (ISO), ``profile``,
    ``value``, ``unit``, sorted by file name.  Raises ValueError as :func:`load_record`.
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
    """Read and check the figures published by others (``verified/quoted.toml``, whose header
    says what each field means).

    Args:
        path: the file; default :data:`QUOTED` in :func:`records_folder` (none there: ``[]``).
        keys: the notebooks' result keys, ``{key: unit or None}`` (``tools/verify.py``'s
            ``notebook_result_keys``); a figure for another key, or a ``match = "same"`` one
            in another unit, is then an error.

    Returns:
        One dict per ``[[quote]]``, in file order: ``key``, ``hardware``, ``value`` (a number),
        ``unit``, ``match`` (``"same"`` or ``"close"``), ``measured``, ``source``, ``date``
        (``YYYY[-MM[-DD]]``).

    Raises:
        ValueError: naming the file and the figure: not TOML, no ``quote`` list, a field
            missing, unknown, empty or of the wrong type, a value that is not finite, a match
            other than :data:`MATCHES`, a malformed date, an unknown key or unit (with ``keys``).
        ImportError: on Python 3.10 without ``tomli`` (saying so).
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
    """Return the published figures for ``key`` (:func:`load_quotes`, whose errors it raises)."""
    return [q for q in load_quotes(path) if q["key"] == key]


#: What ``reference_lines`` says where neither a record nor a quoted figure holds a key.
ONLY_HERE = ("{key}: measured on this machine only so far; to add another machine, run "
             "`make verify` there and hand in the verified/<class>.json it writes "
             "(README, 'Add a machine to the course')")


def reference_lines(key: str, exclude_class: str | None = None,
                    folder: str | os.PathLike[str] | None = None) -> list[str]:
    """Return printable lines for ``key`` from other hardware: our records, then quoted figures.

    One line per record of a class other than ``exclude_class``, "KEY on CLASS (DATE, PROFILE
    profile): VALUE"; then one per figure in ``quoted.toml`` (:func:`quotes`), "KEY on
    HARDWARE: VALUE, quoted, not measured by this course[, a close quantity]: WHAT (source:
    SOURCE, DATE)"; with neither, :data:`ONLY_HERE`.  ``folder`` defaults to
    :func:`records_folder`.  Raises ValueError for a malformed record or ``quoted.toml``.
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


# ----------------------------------------------------------------------------- exercises
@dataclass(frozen=True)
class ExerciseKey:
    """One exercise's answer key.

    Attributes:
        answer: the expected answer (unused when ``judge`` is set).
        hint: printed with a wrong or missing answer.
        rel: relative tolerance of a numeric answer: right when ``abs(answer - expected) <=
            rel * abs(expected)``; ``None``: right when ``answer == expected``.
        judge: for answers that are functions: ``judge(answer)`` says whether it is right.
    """

    answer: Any
    hint: str
    rel: float | None = None
    judge: Callable[[Any], bool] | None = None


def _pads_to_size(pad_batch: Any) -> bool:
    """Notebook 05, exercise 3: ``pad_batch(x, y, 8)`` pads 3 rows to 8 with weights 1, 1, 1, 0..."""
    import tensorflow as tf  # only this key needs TensorFlow (notebook 05 requires it)

    x, y, w = pad_batch(tf.ones((3, 64)), tf.zeros((3,), tf.int64), 8)
    return x.shape == (8, 64) and y.shape == (8,) and float(tf.reduce_sum(w)) == 3.0


_K = ExerciseKey
#: Every keyed exercise, ``"NN.k"``: notebook NN, exercise k (hands-on ones have no key).
EXERCISE_KEYS: dict[str, ExerciseKey] = {
    # 00 device setup
    "00.1": _K(1 / 12, "1 FLOP per element; bytes: read x and y, write z, 4 bytes each", rel=0.02),
    "00.2": _K(2 * 64**3 / (3 * 64**2 * 2), "2 n**3 FLOP over three n x n bf16 matrices of 2 bytes "
               "per element", rel=0.02),
    "00.3": _K("synced", "which one waits for the device to finish?"),
    # 01 data vs model parallelism (numbers within 2 %)
    "01.1": _K((4 - 1) / (12 + 4 - 1), "the bubble formula of the pipeline section, for p stages "
               "and m micro-batches", rel=0.02),
    "01.2": _K(2 * (8 - 1) / 8 * 2e9 / 200e9, "the ring all-reduce cost model above, "
               "without the latency", rel=0.02),
    "01.3": _K((4 + 4 / 8 + 8 / 8) * 3e9 / 2**30, "the memory model above (ak.memory.per_device): "
               "ZeRO-2 shards gradients and optimizer states, not the weights", rel=0.02),
    # 02 mixed precision (exact answers)
    "02.1": _K({"fp32", "tf32", "bf16"}, "compare 1e-6 with each format's smallest normal"),
    "02.2": _K(2**18, "smallest normal / 3e-10, rounded up to a power of two"),
    "02.3": _K(256 * 64 * 8 * 8 * 2, "elements x bytes per element"),
    # 03 operator fusion (numbers to 1e-9)
    "03.1": _K(5.0, "eager: k kernels of 1 read + 1 write; fused: 1 read + 1 write", rel=1e-9),
    "03.2": _K(3, "read x, read r, write out (bias is tiny)", rel=1e-9),
    "03.3": _K(4000, "compile time / time saved per call", rel=1e-9),
    # 04 distributed data parallel (numbers within 2 %)
    "04.1": _K(0.05 * 8, "SGD's linear rule (Goyal 2017): lr grows with the global batch", rel=0.02),
    "04.2": _K(3400 / (4 * 1000), "measured throughput / the ideal (N x one process)", rel=0.02),
    "04.3": _K((1347 // 2 // 32) // 2, "drop_last drops a remainder twice: when the sampler "
               "splits the samples per rank and when the loader batches them", rel=0.02),
    # 05 TPU (exact answers)
    "05.1": _K(8 * 128, "the global batch is the per-replica batch times the replicas"),
    "05.2": _K(2, "one compilation per batch shape: is the last batch of the training set full?"),
    "05.3": _K(None, "pad x and y with zeros to `size` rows; weight 1.0 for real rows, 0.0 for "
               "padding", judge=_pads_to_size),
    # 06 capstone GPT (numbers within 2 %)
    "06.1": _K(6 * 85_000_000 + 12 * 12 * 768 * 1024, "6 N + 12 L d T (PaLM, appendix B): "
               "ak.gpt.flops_per_token", rel=0.02),
    "06.2": _K(8 * 100, "without no_sync every micro-batch's backward all-reduces", rel=0.02),
    "06.3": _K(6 * (48 - 2), "a checkpointed block keeps only its input; the rest is "
               "recomputed in the backward", rel=0.02),
    # 07 training jobs (exact answer)
    "07.1": _K((80 * 2**30 - 16 * 10**9) // 2**29, "fixed part: 16 bytes per fp32 parameter "
               "(weights, gradients, AdamW's two moments); the rest over 2**29 B per sequence, "
               "rounded down"),
}
_EXERCISE = re.compile(r"\d\d\.\d+")


def _exercise_key(name: str) -> ExerciseKey:
    """Return the key of exercise ``name``, or raise a ValueError naming the ones that exist."""
    if not isinstance(name, str) or not _EXERCISE.fullmatch(name):
        raise ValueError(f"an exercise is named 'NN.k' (notebook NN, exercise k), e.g. '02.3'; "
                         f"got {name!r}")
    if name not in EXERCISE_KEYS:
        same = [n for n in EXERCISE_KEYS if n[:2] == name[:2]]
        raise ValueError(f"exercise {name} has no answer key; notebook {name[:2]} has "
                         f"{', '.join(same) or 'none'} (hands-on exercises are not checked)")
    return EXERCISE_KEYS[name]


def _judge_answer(name: str, key: ExerciseKey, answer: Any) -> tuple[bool, str]:
    """Return ``(right, why)``: ``why`` says what was wrong beyond the hint ("" if nothing)."""
    if key.judge is not None:
        try:
            return bool(key.judge(answer)), ""
        except Exception as e:  # the learner's function failed: show why, with the hint
            return False, f" (calling it raised {type(e).__name__}: {e})"
    expected = key.answer
    if key.rel is None:
        try:
            return bool(answer == expected), ""
        except (TypeError, ValueError):  # e.g. an array: == gives no single truth value
            return False, f" (expected a {type(expected).__name__}, got {type(answer).__name__})"
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return False, f" (expected a number, got {type(answer).__name__})"
    return abs(value - float(expected)) <= key.rel * abs(float(expected)), ""


def check_exercise(name: str, answer: Any) -> bool:
    """Check an exercise answer; print whether it is right, with a hint when it is not.

    Args:
        name: the exercise, ``"NN.k"`` (notebook NN, exercise k), e.g. ``"02.3"``.
        answer: a number (within the key's relative tolerance), a string or set (``==``), a
            function (called by the key's judge), or ``None``: not answered yet.

    Returns:
        True when right; a wrong or missing answer returns False (raises nothing).  Prints
        ``"✓ 02.3 correct"``, ``"✗ 02.3 not yet. Hint: ..."`` or ``"… 02.3 not answered yet.
        Hint: ..."``.

    Raises:
        ValueError: for a name without a key.
    """
    key = _exercise_key(name)
    if answer is None:
        print(f"… {name} not answered yet. Hint: {key.hint}")
        return False
    right, why = _judge_answer(name, key, answer)
    print(f"✓ {name} correct" if right else f"✗ {name} not yet{why}. Hint: {key.hint}")
    return right
