"""Execute the course's notebooks headless and gather what they recorded (``make run``).

Each notebook runs in a fresh kernel through ``nbclient`` with ``ACCELKIT_NOTEBOOK``,
``ACCELKIT_RESULTS`` and ``ACCELKIT_SCRATCH`` set, so ``accelkit.report.record`` lands in
the run's results.  Executed copies and HTML go to the output folder; the notebooks
themselves are never written (the output folder may not be the notebooks' folder).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from accelkit import report

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def plain(text: str) -> str:
    """Return ``text`` without ANSI colour/cursor codes (Jupyter tracebacks carry them)."""
    return _ANSI.sub("", text)


@dataclass(frozen=True)
class NotebookRun:
    """The outcome of executing one notebook.

    Attributes:
        name: the notebook's stem (``"00_device_setup"``).
        status: ``"ok"``, ``"error"``, ``"timeout"`` or ``"skipped"`` (a package the notebook
            requires is not installed; ``error`` says which).
        wall_s: wall-clock seconds, kernel start included.
        error: the error's last lines, or ``""``.
    """

    name: str
    status: str
    wall_s: float
    error: str = ""


def find_notebooks(folder: str | os.PathLike[str] = "notebooks") -> list[Path]:
    """Return the course notebooks in ``folder``, in order (``NN_name.ipynb``).

    Raises:
        FileNotFoundError: when the folder does not exist or holds no notebook.
    """
    root = Path(folder)
    found = sorted(p for p in root.glob("[0-9][0-9]_*.ipynb"))
    if not found:
        raise FileNotFoundError(f"no NN_*.ipynb notebooks in {root.resolve()}")
    return found


def _guard_out(path: Path, source: Path) -> None:
    if path.resolve() == source.resolve() or source.resolve().parent in path.resolve().parents \
            or path.resolve().parent == source.resolve().parent:
        raise ValueError(
            f"refusing to write {path}: executed notebooks go to a build folder, never next to "
            f"the learner's notebooks in {source.parent} (use --out build)")


def missing_requirements(source: str | os.PathLike[str]) -> list[str]:
    """Return the modules a notebook requires that are not importable here.

    A notebook declares them in its metadata, ``{"accelkit": {"requires": ["tensorflow"]}}``
    (notebook 05 is TensorFlow-only; a machine without TensorFlow skips it instead of failing).
    """
    import importlib.util

    import nbformat

    meta = nbformat.read(source, as_version=4).metadata.get("accelkit", {})
    return [m for m in meta.get("requires", []) if importlib.util.find_spec(m) is None]


def execute(source: str | os.PathLike[str], dest: str | os.PathLike[str], *,
            profile: str = "auto", timeout_s: float = 600, env: dict[str, str] | None = None,
            in_place: bool = False, html: bool = True) -> NotebookRun:
    """Execute one notebook top to bottom in a fresh kernel and save the executed copy.

    Args:
        source: the notebook to run; its folder is the kernel's working directory.
        dest: where to write the executed notebook (``.ipynb``); an ``.html`` is written
            beside it when ``html`` is true.
        profile: the size profile (``ci``/``full``/``auto``), passed as ``ACCELKIT_PROFILE``.
        timeout_s: seconds allowed per cell.
        env: extra environment variables for the kernel.
        in_place: allow ``dest == source`` (maintainers refreshing stored outputs only).
        html: also export HTML.

    Returns:
        A :class:`NotebookRun`; errors are reported there, not raised.

    Raises:
        ValueError: when ``dest`` would overwrite a notebook and ``in_place`` is false.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    src, out = Path(source), Path(dest)
    if not in_place:
        _guard_out(out, src)
    nb = nbformat.read(src, as_version=4)
    for cell in nb.cells:  # a run that stops early must not leave stored outputs behind
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    kernel_env = dict(os.environ)
    kernel_env.update({"ACCELKIT_PROFILE": profile, report.NOTEBOOK_ENV: src.stem})
    kernel_env.update(env or {})
    client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                            resources={"metadata": {"path": str(src.parent)}})
    status, error = "ok", ""
    start = time.perf_counter()
    try:
        client.execute(env=kernel_env)
    except CellTimeoutError as exc:
        status, error = "timeout", plain(str(exc)).strip().splitlines()[-1][:500]
    except CellExecutionError as exc:
        status, error = "error", "\n".join(plain(str(exc)).strip().splitlines()[-3:])[:2000]
    wall = time.perf_counter() - start
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    if html:
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter().from_notebook_node(nb)
        out.with_suffix(".html").write_text(body, encoding="utf-8")
    return NotebookRun(src.stem, status, round(wall, 2), error)


def run_all(notebooks: str | os.PathLike[str] = "notebooks", out: str | os.PathLike[str] = "build",
            *, profile: str = "auto", only: list[str] | None = None,
            timeout_s: float = 600) -> dict[str, Any]:
    """Execute every notebook and write ``results.json`` and ``summary.md`` into ``out``.

    Args:
        notebooks: the folder holding ``NN_*.ipynb``.
        out: the build folder (created); must not be the notebooks' folder.
        profile: the size profile for every notebook.
        only: run only notebooks whose name contains one of these strings; their entries
            then replace those of the same notebooks in an existing ``results.json``.
        timeout_s: seconds allowed per cell.

    Returns:
        The ``results.json`` object: ``{"hardware": ..., "profile": ...,
        "notebooks": {name: {"status", "wall_s", "error"}},
        "results": {key: {"value", "unit", "notebook"}}}``.

    Raises:
        ValueError: when ``out`` is the notebooks' folder.
        FileNotFoundError: when there are no notebooks.
    """
    from accelkit import config, env

    out_dir = Path(out)
    paths = find_notebooks(notebooks)
    if only:
        paths = [p for p in paths if any(o in p.stem for o in only)]
    _guard_out(out_dir / "x.ipynb", paths[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    results_file = out_dir / "results.jsonl"
    results_file.unlink(missing_ok=True)
    scratch = out_dir / "scratch"
    resolved = config.profile(profile)
    runs: list[NotebookRun] = []
    for path in paths:
        missing = missing_requirements(path)
        if missing:
            runs.append(NotebookRun(path.stem, "skipped", 0.0, f"not installed: {', '.join(missing)}"))
            print(f"[accelkit run] {path.name}: skipped ({runs[-1].error})", flush=True)
            continue
        print(f"[accelkit run] {path.name} (profile {resolved.name}) ...", flush=True)
        run = execute(path, out_dir / path.name, profile=resolved.name, timeout_s=timeout_s,
                      env={report.RESULTS_ENV: str(results_file.resolve()),
                           config.SCRATCH_ENV: str(scratch.resolve())})
        print(f"[accelkit run] {path.name}: {run.status} in {run.wall_s:.1f} s"
              + (f"\n{run.error}" if run.error else ""), flush=True)
        runs.append(run)
    results = {r.key: {"value": r.value, "unit": r.unit, "notebook": r.notebook}
               for r in report.load_jsonl(results_file)}
    notebooks_run = {r.name: {k: v for k, v in asdict(r).items() if k != "name"} for r in runs}
    previous = out_dir / "results.json"
    if only and previous.exists():  # a partial run updates the summary of earlier runs
        old = json.loads(previous.read_text(encoding="utf-8"))
        results = {k: v for k, v in old.get("results", {}).items()
                   if v.get("notebook") not in notebooks_run} | results
        notebooks_run = {k: v for k, v in old.get("notebooks", {}).items()
                         if k not in notebooks_run} | notebooks_run
    summary = {
        "hardware": env.hardware_summary(),
        "profile": {"name": resolved.name, "reason": resolved.reason},
        "notebooks": dict(sorted(notebooks_run.items())),
        "results": dict(sorted(results.items())),
    }
    (out_dir / "results.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out_dir / "summary.md").write_text(summary_markdown(summary), encoding="utf-8")
    return summary


def summary_markdown(summary: dict[str, Any]) -> str:
    """Render a ``results.json`` object as Markdown: hardware card, notebooks, results."""
    from accelkit import env

    lines = ["# accelkit run summary", "", env.hardware_card_markdown(summary["hardware"]), "",
             f"Size profile: **{summary['profile']['name']}** ({summary['profile']['reason']})",
             "", "## Notebooks", "", "| notebook | status | wall time |", "|---|---|---|"]
    for name, nb in summary["notebooks"].items():
        lines.append(f"| {name} | {nb['status']} | {nb['wall_s']:.1f} s |")
    lines += ["", "## Results", "", "| key | value | notebook |", "|---|---|---|"]
    for key, res in summary["results"].items():
        lines.append(f"| `{key}` | {report.format_value(res['value'], res['unit'])} | "
                     f"{res['notebook']} |")
    failed = [n for n, nb in summary["notebooks"].items() if nb["status"] not in ("ok", "skipped")]
    if failed:
        lines += ["", "## Failures", ""]
        lines += [f"- **{n}**: {plain(summary['notebooks'][n]['error'])}" for n in failed]
    return "\n".join(lines) + "\n"
