"""Results and the run summary: what notebooks record, and what ``make run`` writes about it.

A notebook calls ``ak.report.record("amp.matmul_bf16_speedup", 2.1, "x")``.  Under
``make run`` the runner sets ``ACCELKIT_RESULTS`` to a JSON-lines file and
``ACCELKIT_NOTEBOOK`` to the notebook's name; each record is appended there.  Outside the
runner, records are kept in memory only (:func:`recorded`), so running a notebook by hand
writes nothing.

Owns the run summary: :func:`results` (the records gathered by key), :func:`summary` (the
``results.json`` object: format version, anonymous machine label, hardware card, profile,
per-notebook outcome, results), :func:`summary_markdown` and :func:`write_summary`
(``build/results.json`` and ``build/summary.md``), and what makes a summary safe to hand in:
:func:`machine_label` and :func:`anonymise` (no user name, host name or path in the file).
Lives elsewhere: executing notebooks in ``tools/run_notebooks.py``, the machine's description in
:mod:`accelkit.env`, nbval records in :mod:`accelkit.verify`, comparing the summaries of
several machines in ``tools/compare.py``.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import math
import os
import platform
import re
import secrets
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from accelkit.config import Profile

RESULTS_ENV = "ACCELKIT_RESULTS"
NOTEBOOK_ENV = "ACCELKIT_NOTEBOOK"
SUMMARY_JSON, SUMMARY_MD = "results.json", "summary.md"
#: The version of the ``results.json`` layout :func:`summary` writes (files written before
#: versions existed carry no ``"format"``; ``tools/compare.py`` reads them as version 0).
FORMAT = 1
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


def summary(notebooks: Mapping[str, Mapping[str, Any]], gathered: Mapping[str, Mapping[str, Any]],
            profile: Profile, *, previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Assemble the run summary (the ``results.json`` object) of one ``make run``.

    Args:
        notebooks: ``{name: {"status", "wall_s", "error"}}`` for the notebooks run now.
        gathered: :func:`results` of this run's results file.
        profile: the resolved size profile the notebooks ran in.
        previous: an earlier summary (:func:`load_summary`) that a partial run updates: its
            entries for notebooks not run now are kept; those of notebooks run now are replaced;
            its ``run_id`` is kept.

    Returns:
        ``{"format": FORMAT, "machine": {"label", "run_id"}, "hardware":
        env.hardware_summary(), "profile": {"name", "reason"}, "notebooks": {name: {...}},
        "results": {key: {...}}}``, notebooks and keys sorted, passed through :func:`anonymise`.
    """
    from accelkit import env

    runs, res = dict(notebooks), dict(gathered)
    if previous:
        res = {k: v for k, v in previous.get("results", {}).items()
               if v.get("notebook") not in runs} | res
        runs = {k: v for k, v in previous.get("notebooks", {}).items() if k not in runs} | runs
    hardware = env.hardware_summary()
    run_id = (previous or {}).get("machine", {}).get("run_id") or secrets.token_hex(3)
    return anonymise({
        "format": FORMAT,
        "machine": {"label": machine_label(hardware), "run_id": run_id},
        "hardware": hardware,
        "profile": {"name": profile.name, "reason": profile.reason},
        "notebooks": dict(sorted(runs.items())),
        "results": dict(sorted(res.items())),
    })


def load_summary(out: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Read ``<out>/results.json`` written by :func:`write_summary`; ``None`` when there is none."""
    path = Path(out) / SUMMARY_JSON
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def write_summary(out: str | os.PathLike[str], run_summary: Mapping[str, Any]) -> None:
    """Write ``<out>/results.json`` (the summary as JSON) and ``<out>/summary.md`` (Markdown)."""
    out_dir = Path(out)
    (out_dir / SUMMARY_JSON).write_text(json.dumps(run_summary, indent=2) + "\n", encoding="utf-8")
    (out_dir / SUMMARY_MD).write_text(summary_markdown(run_summary), encoding="utf-8")


def summary_markdown(run_summary: Mapping[str, Any]) -> str:
    """Render a ``results.json`` object as Markdown: hardware card, notebooks, results, failures."""
    from accelkit import env

    prof = run_summary["profile"]
    lines = ["# accelkit run summary", "", env.hardware_card_markdown(run_summary["hardware"]), "",
             f"Size profile: **{prof['name']}** ({prof['reason']})",
             "", "## Notebooks", "", "| notebook | status | wall time |", "|---|---|---|"]
    for name, nb in run_summary["notebooks"].items():
        lines.append(f"| {name} | {nb['status']} | {nb['wall_s']:.1f} s |")
    lines += ["", "## Results", "", "| key | value | notebook |", "|---|---|---|"]
    for key, res in run_summary["results"].items():
        lines.append(f"| `{key}` | {format_value(res['value'], res['unit'])} | {res['notebook']} |")
    failed = [n for n, nb in run_summary["notebooks"].items()
              if nb["status"] not in ("ok", "skipped")]
    if failed:
        lines += ["", "## Failures", ""]
        lines += [f"- **{n}**: {plain(run_summary['notebooks'][n]['error'])}" for n in failed]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- handing in
#: Shared account names that identify nobody (containers, Colab, CI); others are scrubbed.
_GENERIC_USERS = frozenset({"root", "user", "runner", "jovyan", "ubuntu", "colab", "admin"})
#: An absolute path with at least one folder: POSIX (not inside a URL) or Windows.
_PATHS = re.compile(r"(?<![\w.:/~-])/(?:[^\s/'\"()<>:,;]+/)+"
                    r"|\b[A-Za-z]:\\(?:[^\s\\'\"]+\\)*")


def _identifying_names() -> dict[str, str]:
    """Return this machine's host names and (non-generic) user name, each with its stand-in.

    Names shorter than 3 characters are left alone: they identify nobody and would replace
    ordinary words.
    """
    names = {}
    for host in {platform.node(), socket.gethostname()}:
        for part in (host, host.split(".")[0]):
            if len(part) >= 3:
                names[part] = "<host>"
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (some containers): nothing to scrub
        user = ""
    if len(user) >= 3 and user.lower() not in _GENERIC_USERS:
        names[user] = "<user>"
    return names


def _scrub(text: str, names: Mapping[str, str]) -> str:
    """Replace each absolute path's folders by ``…/`` and each identifying name by its stand-in."""
    text = _PATHS.sub("…/", text)
    for name in sorted(names, key=len, reverse=True):
        text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", names[name], text,
                      flags=re.IGNORECASE)
    return text


def anonymise(obj: Any, names: Mapping[str, str] | None = None) -> Any:
    """Return a copy of ``obj`` (JSON-like) whose strings name no user, host or folder.

    Every absolute path keeps only its last part (``/home/ana/course/x.py`` -> ``…/x.py``;
    ``C:\\Users\\ana\\x.py`` likewise); the host name and a personal user name become ``<host>``
    and ``<user>`` wherever they stand as a word.  Keys, numbers and URLs are kept.

    Args:
        obj: dicts, lists, strings and scalars (a run summary).
        names: ``{name: stand-in}`` to scrub; default: this machine's host and user names.

    Returns:
        The scrubbed copy (dict key order kept).
    """
    names = _identifying_names() if names is None else names
    if isinstance(obj, str):
        return _scrub(obj, names)
    if isinstance(obj, Mapping):
        return {k: anonymise(v, names) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [anonymise(v, names) for v in obj]
    return obj


def machine_label(hardware: Mapping[str, Any]) -> str:
    """Return a short anonymous name for a machine: its hardware class and a 4-hex hash.

    The hash covers only hardware facts of the card (architecture, CPU model, core count,
    RAM in GiB, accelerators' names and memory), so the same kind of machine always gets the
    same label and two runs of one machine (say, natively and under ``$ACCELKIT_HARDWARE``)
    share the hash.  Identical laptops share a label too; ``run_id`` tells their runs apart.

    Args:
        hardware: a hardware card (:func:`accelkit.env.hardware_summary`, or the
            ``"hardware"`` of a results file or verification record).

    Returns:
        e.g. ``"cpu-avx2-3f9a"``; ``"unknown-..."`` when the card names no class.
    """
    accels = sorted(f"{d.get('kind')}:{d.get('description')}:{d.get('memory_bytes')}"
                    for d in hardware.get("torch_devices", []) if d.get("kind") != "cpu")
    facts = [hardware.get("machine"), hardware.get("cpu"), hardware.get("cpu_count"),
             round((hardware.get("memory_bytes") or 0) / 2**30), accels,
             bool(hardware.get("tpu_attached"))]
    digest = hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:4]
    return f"{hardware.get('hardware_class') or 'unknown'}-{digest}"


def hand_in_line(out: str | os.PathLike[str], run_summary: Mapping[str, Any]) -> str:
    """Return the one line ``make run`` ends with: where ``results.json`` is and how to hand it in."""
    path = Path(out).resolve() / SUMMARY_JSON
    return (f"Your results: {path} (machine {run_summary['machine']['label']}, profile "
            f"{run_summary['profile']['name']}; no user name, host name or path inside). To pool "
            "them, hand in that one file; the instructor runs `python tools/compare.py FILE ...`.")
