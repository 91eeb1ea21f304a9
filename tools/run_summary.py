"""The run summary a learner hands in (``make run``): ``build/results.json`` and ``summary.md``.

:func:`summary` builds the ``results.json`` object (format version, anonymous machine label,
hardware card, profile, per-notebook outcome, results), :func:`summary_markdown` and
:func:`write_summary` write it, and :func:`machine_label` and :func:`anonymise` make it safe to
hand in (no user name, host name or path in the file).  Used by ``tools/run_notebooks.py`` and
``tools/compare.py``; what notebooks record is :mod:`accelkit.report`.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import platform
import re
import secrets
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelkit import report
from accelkit.env import Profile

SUMMARY_JSON, SUMMARY_MD = "results.json", "summary.md"
#: The version of the ``results.json`` layout :func:`summary` writes (files written before
#: versions existed carry no ``"format"``; ``tools/compare.py`` reads them as version 0).
FORMAT = 1


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
        lines.append(f"| `{key}` | {report.format_value(res['value'], res['unit'])} | {res['notebook']} |")
    failed = [n for n, nb in run_summary["notebooks"].items()
              if nb["status"] not in ("ok", "skipped")]
    if failed:
        lines += ["", "## Failures", ""]
        lines += [f"- **{n}**: {report.plain(run_summary['notebooks'][n]['error'])}" for n in failed]
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
