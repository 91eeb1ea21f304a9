"""``make verify``: nbval over every notebook on this machine, kept as a dated record per class.

:func:`verify` runs each notebook under ``pytest --nbval-lax`` (as CI does) in the size
profile that fits this machine, gathers what the notebooks recorded with
:func:`accelkit.report.record`, and writes ``verified/<class>.json``: the date, the hardware
class (:mod:`accelkit.hardware`) and whether it was emulated, the library versions, the
hardware card, every recorded result and pass/fail per notebook.  README.md's "Verified on"
table is generated from those records (:func:`readme_table`, :func:`update_readme`), so only
what was really run appears there.

Where no record from other hardware holds a result, ``verified/quoted.toml`` may: figures
published by others (datasheets, vendor posts, papers, public measurement tables), each with
its hardware, source and date, checked by :func:`load_quotes`.  :func:`reference_lines` prints
our records first, then those figures marked "quoted, not measured by this course", and where
there is neither, how to add a machine.

Owns the verification records, the quoted figures and the README table.  Lives elsewhere:
executing notebooks for a build folder in :mod:`accelkit.runner`; which notebooks there are and
what each requires in :mod:`accelkit.course`; recording and gathering results in
:mod:`accelkit.report`.
"""

from __future__ import annotations

import ast
import datetime
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelkit import config, course, hardware, report

FORMAT = 1
START, END = "<!-- verified:start -->", "<!-- verified:end -->"
#: Result keys shown in the README table, with their column titles.
HEADLINE = {"amp.matmul_bf16_speedup": "bf16 matmul", "fusion.compile_speedup": "compile chain",
            "fusion.fused_adamw_speedup": "fused AdamW", "roofline.copy_gbps": "copy GB/s"}
_COUNTS = re.compile(r"(\d+) (passed|failed|error|errors|skipped)")
#: A traceback's last line, as nbval prints a failing cell's: "AssertionError: ...".
_ERROR = re.compile(r"^[A-Z]\w*(Error|Exception|Interrupt): .*")


def _nbval(path: Path, profile: str, results: Path, scratch: Path,
           timeout_s: float) -> dict[str, Any]:
    """Run nbval on one notebook; return its status, cell counts and wall time."""
    cmd = [sys.executable, "-m", "pytest", "-q", "--nbval-lax", "--nbval-current-env",
           "--nbval-sanitize-with", str(path.parent / "sanitize.cfg"), "-p", "no:cacheprovider",
           str(path)]
    env = dict(os.environ, **{config.PROFILE_ENV: profile, report.RESULTS_ENV: str(results),
                              report.NOTEBOOK_ENV: path.stem, config.SCRATCH_ENV: str(scratch)})
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
        out, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out, rc = f"timed out after {timeout_s:.0f} s: {exc}", -1
    counts = {k.rstrip("s"): int(n) for n, k in _COUNTS.findall(out.splitlines()[-1] if out else "")}
    status = "ok" if rc == 0 else ("timeout" if rc == -1 else "failed")
    lines = report.plain(out).splitlines()
    failed = [line for line in lines if line.startswith("FAILED")]
    run = {"status": status, "cells_passed": counts.get("passed", 0),
           "cells_failed": counts.get("failed", 0) + counts.get("error", 0),
           "wall_s": round(time.perf_counter() - start, 1), "failures": failed[:10],
           "errors": list(dict.fromkeys(m.group(0) for m in map(_ERROR.match, lines) if m))[:5]}
    if rc != 0:  # the whole nbval output, for the cell's traceback (not kept in the record)
        log = scratch / f"{path.stem}.nbval.log"
        log.write_text(out, encoding="utf-8")
        run["log"] = str(log)
    return run


def _print_run(name: str, run: dict[str, Any]) -> None:
    """Print one notebook's verification line: status, wall time, cells, failing cells."""
    extra = (f" in {run['wall_s']:.0f} s, {run['cells_passed']} cells passed"
             if "wall_s" in run else f" ({run.get('reason', '')})")
    print(f"[accelkit verify] {name}: {run['status']}{extra}", flush=True)
    for line in run.get("failures", []) + run.get("errors", []):
        print(f"    {line}", flush=True)
    if run.get("log"):
        print(f"    nbval's whole output: {run['log']}", flush=True)


def record_name(cls: Any, cpu: str, emulated: bool) -> str:
    """Return a record's file stem: the class name, ``-emulated`` when emulated.

    A class whose CPUs disagree on bf16 (``cls.bf16_measured``: ``cpu-avx512-bf16`` spans an
    Intel Xeon VM at 0.55x of fp32 and an AMD Zen 4 at 2.9x) keeps one record per vendor, so a
    Zen 4's run never overwrites the Xeon's: ``-amd`` is added for an AMD CPU (``cpu`` is the
    CPU's model name, e.g. ``"AMD EPYC"``); the Intel record keeps the plain class name, which
    ``tools/runtimes.py`` reads as CI's.

    Example: ``record_name(hardware.get("cpu-avx512-bf16"), "AMD EPYC", False)  # "cpu-avx512-bf16-amd"``
    """
    vendor = "-amd" if getattr(cls, "bf16_measured", False) and "AMD" in cpu.upper() else ""
    return cls.name + vendor + ("-emulated" if emulated else "")


def verify(notebooks: str | os.PathLike[str] = "notebooks",
           out: str | os.PathLike[str] = "verified", *, profile: str | config.Profile = "auto",
           only: list[str] | None = None, timeout_s: float = 900,
           readme: str | os.PathLike[str] | None = "README.md") -> dict[str, Any]:
    """Run nbval over the notebooks and write ``<out>/<class>.json``; update the README table.

    Args:
        notebooks: the folder holding ``NN_*.ipynb``.
        out: the folder for the records (created).
        profile: ``ci``, ``full`` or ``auto`` (the profile that fits this machine), or a
            resolved :class:`~accelkit.config.Profile`.
        only: run only notebooks whose name contains one of these strings.
        timeout_s: seconds allowed per notebook.
        readme: the README whose "Verified on" table is regenerated; ``None`` leaves it.

    Returns:
        The record written.  Per notebook: status, cells passed/failed, wall time (s), the
        failing cells (``failures``) and the exception lines they ended with (``errors``).
        A failing notebook's whole nbval output is written to ``<scratch>/verify/<name>.nbval.log``
        and its path printed (a local path, so it is not kept in the record).

    Raises:
        FileNotFoundError: when there are no notebooks.
    """
    from accelkit import env

    paths = course.find_notebooks(notebooks)
    if only:
        paths = [p for p in paths if any(o in p.stem for o in only)]
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    resolved = profile if isinstance(profile, config.Profile) else config.profile(profile)
    cls = hardware.for_device()  # $ACCELKIT_HARDWARE names an emulated CPU class
    emulated = cls.kind == "cpu" and cls != hardware.probed_cpu()
    work = Path(config.scratch_dir("verify"))
    results_file = work / "results.jsonl"
    results_file.unlink(missing_ok=True)
    runs: dict[str, Any] = {}
    for path in paths:
        missing = course.missing_modules(path)
        if missing:
            runs[path.stem] = {"status": "skipped", "reason": f"not installed: {', '.join(missing)}"}
        else:
            runs[path.stem] = _nbval(path, resolved.name, results_file, work, timeout_s)
        _print_run(path.name, runs[path.stem])
        runs[path.stem].pop("log", None)  # a local path: printed, not kept in the record
    info = env.hardware_summary()
    record = {
        "format": FORMAT, "date": datetime.date.today().isoformat(), "class": cls.name,
        "class_title": cls.title, "emulated": emulated,
        "profile": resolved.name, "versions": info.pop("libraries"),
        "hardware": {k: v for k, v in info.items() if k not in ("platform",)},
        "notebooks": runs,
        "results": report.results(results_file),
    }
    name = record_name(cls, str(info.get("cpu", "")), emulated)
    (out_dir / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    if readme is not None and Path(readme).exists():
        update_readme(readme, out_dir)
    return record


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


def readme_table(folder: str | os.PathLike[str] = "verified") -> str:
    """Return the README's "Verified on" table (Markdown) from the records in ``folder``."""
    cols = " | ".join(HEADLINE.values())
    lines = [f"| class | date | profile | notebooks passed | torch | {cols} |",
             "|---|---|---|---|---|" + "---|" * len(HEADLINE)]
    for rec in load_records(folder):
        nbs = rec["notebooks"].values()
        ran = [n for n in nbs if n["status"] != "skipped"]
        ok = sum(n["status"] == "ok" for n in ran)
        res = rec["results"]
        cells = [report.format_value(res[k]["value"], res[k]["unit"]) if k in res else "–"
                 for k in HEADLINE]
        title = f"`{rec['class']}`" + (" (emulated)" if rec.get("emulated") else "")
        lines.append(f"| {title} | {rec['date']} | {rec['profile']} | {ok} of {len(ran)} | "
                     f"{rec['versions'].get('torch')} | " + " | ".join(cells) + " |")
    if len(lines) == 2:
        lines.append("| (no record yet: run `make verify`) |" + " |" * (4 + len(HEADLINE)))
    return "\n".join(lines)


def update_readme(readme: str | os.PathLike[str] = "README.md",
                  folder: str | os.PathLike[str] = "verified") -> bool:
    """Rewrite the table between the README's verified markers; return True if it changed.

    Raises:
        ValueError: when the README lacks the ``<!-- verified:start/end -->`` markers.
    """
    path = Path(readme)
    text = path.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise ValueError(f"{path} has no {START} ... {END} markers for the verified table")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{readme_table(folder)}\n{END}{tail}"
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


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
#: A line of IPython syntax (``%pip ...``, ``!git ...``), replaced by ``pass`` before parsing.
_MAGIC = re.compile(r"^(\s*)[%!].*$", re.M)
_RECORD_KEY = re.compile(r"""record\(\s*["']([a-z0-9_.]+)["']""")


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
            (:func:`notebook_result_keys`); when given, a figure for another key, or a
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

    Example: ``ak.verify.load_quotes(keys=ak.verify.notebook_result_keys("notebooks"))``
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


def notebook_result_keys(notebooks: str | os.PathLike[str] = "notebooks") -> dict[str, str | None]:
    """Return every result key the notebooks record, ``{key: unit}`` (``None``: not a literal).

    Reads the code cells of ``NN_*.ipynb`` for ``ak.report.record("key", value, "unit")``.

    Raises:
        FileNotFoundError: when there are no notebooks (:func:`accelkit.course.find_notebooks`).
    """
    keys: dict[str, str | None] = {}
    for path in course.find_notebooks(notebooks):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                keys.update(_recorded_in("".join(cell["source"])))
    return keys


def _recorded_in(code: str) -> dict[str, str | None]:
    """The ``record("key", value, "unit")`` calls in one code cell, ``{key: unit or None}``."""
    try:
        tree = ast.parse(_MAGIC.sub(r"\1pass", code))
    except SyntaxError:  # not Python after all: the keys alone
        return dict.fromkeys(_RECORD_KEY.findall(code))
    found: dict[str, str | None] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        key = node.args[0]
        if name != "record" or not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        given = node.args[2:3] + [k.value for k in node.keywords if k.arg == "unit"]
        unit = given[0] if given else None
        value = unit.value if isinstance(unit, ast.Constant) else None
        found[key.value] = value if isinstance(value, str) else None
    return found


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

    Example: ``print(*ak.verify.reference_lines("copy.pinned_speedup", HWC.name), sep="\n")``
    """
    lines = [f"{key} on {r['class']}{' (emulated)' if r['emulated'] else ''} "
             f"({r['date']}, {r['profile']} profile): {report.format_value(r['value'], r['unit'])}"
             for r in references(key, folder, exclude_class)]
    base = records_folder(folder)
    try:
        quoted = quotes(key, base / QUOTED) if base is not None and (base / QUOTED).is_file() else []
    except ImportError as exc:  # Python 3.10 without tomli: say so rather than fail the cell
        quoted, lines = [], [*lines, f"{key}: published figures not shown ({exc})"]
    for q in quoted:
        close = ", a close quantity" if q["match"] == "close" else ""
        lines.append(f"{key} on {q['hardware']}: {report.format_value(q['value'], q['unit'])}, "
                     f"quoted, not measured by this course{close}: {q['measured']} "
                     f"(source: {q['source']}, {q['date']})")
    return lines or [ONLY_HERE.format(key=key)]


__all__ = ["FORMAT", "MATCHES", "ONLY_HERE", "QUOTED", "QUOTE_FIELDS", "RECORDS", "is_real", "load_quotes",
           "record_name", "load_record", "load_records", "notebook_result_keys", "quotes", "readme_table",
           "records_folder", "reference_lines", "references", "update_readme", "verify"]
