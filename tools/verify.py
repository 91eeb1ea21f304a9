"""``make verify``: nbval over every notebook on this machine, kept as a dated record per class.

    python tools/verify.py [--profile ci] [--only 00_ 02_] [--out verified] [--readme README.md]

:func:`verify` runs each notebook under ``pytest --nbval-lax`` (as CI does) in the size
profile that fits this machine, gathers what the notebooks recorded with
:func:`accelkit.report.record`, and writes ``verified/<class>.json``: the date, the hardware
class (:mod:`accelkit.hardware`) and whether it was emulated, the library versions, the
hardware card, every recorded result and pass/fail per notebook.  README.md's "Verified on"
table is generated from those records (:func:`readme_table`, :func:`update_readme`), so only
what was really run appears there.

A maintainer's tool, not part of the package: reading the records back and the figures
quoted beside them (what the notebooks call) stay in :mod:`accelkit.report`.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from accelkit import env, hardware, report
from accelkit.report import FORMAT, load_records

_MAGIC = re.compile(r"^(\s*)[%!].*$", re.M)
_RECORD_KEY = re.compile(r"""record\(\s*["']([a-z0-9_.]+)["']""")

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
    child_env = dict(os.environ, **{env.PROFILE_ENV: profile, report.RESULTS_ENV: str(results),
                                    report.NOTEBOOK_ENV: path.stem, env.SCRATCH_ENV: str(scratch)})
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=child_env, capture_output=True, text=True, timeout=timeout_s)
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
    Intel Xeon VM at 0.55x of fp32 and an AMD Zen 4 at 2.9x-4.4x) keeps one record per vendor, so a
    Zen 4's run never overwrites the Xeon's: ``-amd`` is added for an AMD CPU (``cpu`` is the
    CPU's model name, e.g. ``"AMD EPYC"``); the Intel record keeps the plain class name, which
    ``tools/runtimes.py`` reads as CI's.

    Example: ``record_name(hardware.get("cpu-avx512-bf16"), "AMD EPYC", False)  # "cpu-avx512-bf16-amd"``
    """
    vendor = "-amd" if getattr(cls, "bf16_measured", False) and "AMD" in cpu.upper() else ""
    return cls.name + vendor + ("-emulated" if emulated else "")


def verify(notebooks: str | os.PathLike[str] = "notebooks",
           out: str | os.PathLike[str] = "verified", *, profile: str | env.Profile = "auto",
           only: list[str] | None = None, timeout_s: float = 900,
           readme: str | os.PathLike[str] | None = "README.md") -> tuple[dict[str, Any], Path]:
    """Run nbval over the notebooks and write ``<out>/<class>.json``; update the README table.

    Args:
        notebooks: the folder holding ``NN_*.ipynb``.
        out: the folder for the records (created).
        profile: ``ci``, ``full`` or ``auto`` (the profile that fits this machine), or a
            resolved :class:`~accelkit.env.Profile`.
        only: run only notebooks whose name contains one of these strings.
        timeout_s: seconds allowed per notebook.
        readme: the README whose "Verified on" table is regenerated; ``None`` leaves it.

    Returns:
        The record written and the path it was written to.  Per notebook: status, cells
        passed/failed, wall time (s), the failing cells (``failures``) and the exception lines
        they ended with (``errors``).
        A failing notebook's whole nbval output is written to ``<scratch>/verify/<name>.nbval.log``
        and its path printed (a local path, so it is not kept in the record).

    Raises:
        FileNotFoundError: when there are no notebooks.
    """
    paths = env.find_notebooks(notebooks)
    if only:
        paths = [p for p in paths if any(o in p.stem for o in only)]
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    resolved = profile if isinstance(profile, env.Profile) else env.profile(profile)
    cls = hardware.for_device()  # $ACCELKIT_HARDWARE names an emulated CPU class
    emulated = cls.kind == "cpu" and cls != hardware.probed_cpu()
    work = Path(env.scratch_dir("verify"))
    results_file = work / "results.jsonl"
    results_file.unlink(missing_ok=True)
    runs: dict[str, Any] = {}
    for path in paths:
        missing = env.missing_modules(path)
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
    written = out_dir / f"{record_name(cls, str(info.get('cpu', '')), emulated)}.json"
    written.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    if readme is not None and Path(readme).exists():
        update_readme(readme, out_dir)
    return record, written


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


def notebook_result_keys(notebooks: str | os.PathLike[str] = "notebooks") -> dict[str, str | None]:
    """Return every result key the notebooks record, ``{key: unit}`` (``None``: not a literal).

    Reads the code cells of ``NN_*.ipynb`` for ``ak.report.record("key", value, "unit")``.

    Raises:
        FileNotFoundError: when there are no notebooks (:func:`accelkit.env.find_notebooks`).
    """
    keys: dict[str, str | None] = {}
    for path in env.find_notebooks(notebooks):
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


def main(argv: list[str] | None = None) -> int:
    """Command line: verify, print the file written; exit 0 when every notebook passed or was skipped."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", default="notebooks")
    parser.add_argument("--out", default="verified")
    parser.add_argument("--profile", default=None,
                        help=f"ci, full or auto (default: ${env.PROFILE_ENV} or auto)")
    parser.add_argument("--only", nargs="*", help="verify only notebooks whose name contains these")
    parser.add_argument("--readme", default="README.md", help="README to update ('' to leave it)")
    args = parser.parse_args(argv)
    rec, written = verify(args.notebooks, args.out, only=args.only, readme=args.readme or None,
                          profile=env.profile(args.profile))
    print(f"wrote {written}")
    return 0 if all(n["status"] in ("ok", "skipped") for n in rec["notebooks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
