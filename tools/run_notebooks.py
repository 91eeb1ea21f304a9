"""Execute the course's notebooks headless (``make run``): one notebook, or all of them.

    python tools/run_notebooks.py [--out build] [--profile ci] [--only 00 02]

Each notebook runs in a fresh kernel through ``nbclient`` with ``ACCELKIT_PROFILE``,
``ACCELKIT_NOTEBOOK``, ``ACCELKIT_RESULTS`` and ``ACCELKIT_SCRATCH`` set, so
``accelkit.report.record`` lands in the run's results.  Executed copies and HTML go to the
output folder; the notebooks themselves are never written (the output folder may not be the
notebooks' folder).

Owns executing only.  Lives elsewhere: which notebooks there are and what each requires in
:mod:`accelkit.env`; the run summary (``results.json``, ``summary.md``) in
:mod:`accelkit.report`; nbval checks in ``tools/verify.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from accelkit import env, report
from accelkit.env import PROFILE_ENV
from accelkit.explore import MODE_ENV as EXPLORE_ENV

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_summary  # noqa: E402  (tools/run_summary.py)

RESULTS_JSONL = "results.jsonl"  # in the build folder: what the notebooks record, one line each


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

    def row(self) -> dict[str, Any]:
        """Return this outcome as the summary's per-notebook entry: ``{"status", "wall_s", "error"}``."""
        return {k: v for k, v in asdict(self).items() if k != "name"}


def _guard_out(path: Path, source: Path) -> None:
    if path.resolve() == source.resolve() or source.resolve().parent in path.resolve().parents \
            or path.resolve().parent == source.resolve().parent:
        raise ValueError(
            f"refusing to write {path}: executed notebooks go to a build folder, never next to "
            f"the learner's notebooks in {source.parent} (use --out build)")


def execute(source: str | os.PathLike[str], dest: str | os.PathLike[str], *,
            profile: str | env.Profile = "auto", timeout_s: float = 600, env: dict[str, str] | None = None,
            in_place: bool = False, html: bool = True) -> NotebookRun:
    """Execute one notebook top to bottom in a fresh kernel and save the executed copy.

    Args:
        source: the notebook to run; its folder is the kernel's working directory.
        dest: where to write the executed notebook (``.ipynb``); an ``.html`` is written
            beside it when ``html`` is true.
        profile: the size profile (``ci``/``full``/``auto``, or a resolved
            :class:`~accelkit.env.Profile`), passed to the kernel as ``$ACCELKIT_PROFILE``.
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
    kernel_env.update({PROFILE_ENV: profile if isinstance(profile, str) else profile.name,
                       report.NOTEBOOK_ENV: src.stem,
                       EXPLORE_ENV: "static"})  # no front end: explorers draw a figure
    kernel_env.update(env or {})
    client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                            resources={"metadata": {"path": str(src.parent)}})
    status, error = "ok", ""
    start = time.perf_counter()
    try:
        client.execute(env=kernel_env)
    except CellTimeoutError as exc:
        status, error = "timeout", timeout_message(exc)
    except CellExecutionError as exc:
        status, error = "error", "\n".join(report.plain(str(exc)).strip().splitlines()[-3:])[:2000]
    wall = time.perf_counter() - start
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    if html:
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter().from_notebook_node(nb)
        out.with_suffix(".html").write_text(body, encoding="utf-8")
    return NotebookRun(src.stem, status, round(wall, 2), error)


def timeout_message(exc: BaseException) -> str:
    """Return one line for a timed-out cell: nbclient's first line and the cell's first line.

    nbclient's message ends with the cell's source between two dashed rules; its last line
    is a rule, which says nothing.
    """
    lines = [ln.strip() for ln in report.plain(str(exc)).splitlines() if ln.strip()]
    rules = [i for i, ln in enumerate(lines) if set(ln) == {"-"}]
    cell = lines[rules[0] + 1] if rules and rules[0] + 1 < len(lines) else ""
    return ((lines[0] if lines else "timed out") + (f" Cell: {cell}" if cell else ""))[:500]


def _run_one(path: Path, out_dir: Path, profile: env.Profile, timeout_s: float) -> NotebookRun:
    """Execute one notebook of :func:`run_all` into ``out_dir``, or skip it when a module is missing."""
    missing = env.missing_modules(path)
    if missing:
        run = NotebookRun(path.stem, "skipped", 0.0, f"not installed: {', '.join(missing)}")
        print(f"[accelkit run] {path.name}: skipped ({run.error})", flush=True)
        return run
    print(f"[accelkit run] {path.name} (profile {profile.name}) ...", flush=True)
    run = execute(path, out_dir / path.name, profile=profile, timeout_s=timeout_s,
                  env={report.RESULTS_ENV: str((out_dir / RESULTS_JSONL).resolve()),
                       env.SCRATCH_ENV: str((out_dir / "scratch").resolve())})
    print(f"[accelkit run] {path.name}: {run.status} in {run.wall_s:.1f} s"
          + (f"\n{run.error}" if run.error else ""), flush=True)
    return run


def run_all(notebooks: str | os.PathLike[str] = "notebooks", out: str | os.PathLike[str] = "build",
            *, profile: str | env.Profile = "auto", only: list[str] | None = None,
            timeout_s: float = 600) -> dict[str, Any]:
    """Execute every notebook and write ``results.json`` and ``summary.md`` into ``out``.

    Args:
        notebooks: the folder holding ``NN_*.ipynb``.
        out: the build folder (created); must not be the notebooks' folder.
        profile: the size profile for every notebook (a name, or a resolved
            :class:`~accelkit.env.Profile` whose reason the summary keeps).
        only: run only notebooks whose name contains one of these strings; their entries
            then replace those of the same notebooks in an existing ``results.json``.
        timeout_s: seconds allowed per cell.

    Returns:
        The summary ``run_summary.summary`` made and wrote: ``{"hardware": ...,
        "profile": ..., "notebooks": {name: {"status", "wall_s", "error"}},
        "results": {key: {"value", "unit", "notebook"}}}``.

    Raises:
        ValueError: when ``out`` is the notebooks' folder.
        FileNotFoundError: when there are no notebooks (or none matches ``only``).
    """
    prof = profile if isinstance(profile, env.Profile) else env.profile(profile)
    out_dir = Path(out)
    paths = env.find_notebooks(notebooks)
    if only:
        paths = [p for p in paths if any(o in p.stem for o in only)]
        if not paths:
            raise FileNotFoundError(f"no notebook in {notebooks} matches --only {' '.join(only)}")
    _guard_out(out_dir / "x.ipynb", paths[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RESULTS_JSONL).unlink(missing_ok=True)
    runs = [_run_one(path, out_dir, prof, timeout_s) for path in paths]
    summary = run_summary.summary({r.name: r.row() for r in runs},
                             report.results(out_dir / RESULTS_JSONL), prof,
                             previous=run_summary.load_summary(out_dir) if only else None)
    run_summary.write_summary(out_dir, summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    """Command line: run every notebook into a build folder; exit 1 when one failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", default="notebooks")
    parser.add_argument("--out", default="build")
    parser.add_argument("--profile", default=None,
                        help=f"ci, full or auto (default: ${env.PROFILE_ENV} or auto)")
    parser.add_argument("--only", nargs="*", help="run only notebooks whose name contains these")
    args = parser.parse_args(argv)
    try:
        summary = run_all(args.notebooks, args.out, profile=env.profile(args.profile),
                          only=args.only)
    except (FileNotFoundError, ValueError) as exc:  # no notebooks, or the out folder refused
        print(f"run_notebooks: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}/summary.md and {args.out}/results.json")
    print(run_summary.hand_in_line(args.out, summary))
    return 0 if all(n["status"] in ("ok", "skipped") for n in summary["notebooks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
