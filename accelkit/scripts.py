"""Worker scripts and what they leave behind: find, show, import; their files and stacks.

Scripts in ``notebooks/workers/``: :func:`worker_script`, :func:`show`, :func:`import_worker`,
:func:`fresh_path`, :func:`read_json`.  Stacks in a worker's output: :func:`last_stack`,
:func:`where_waiting`.  Failed workers, read from files (never torchrun's printed report):
each worker's error file holds its exception; :func:`main` (``python -m accelkit.scripts
<torchrun args>``) writes the agent's ``ChildFailedError`` (exit codes) to
``$ACCELKIT_FAILURE_REPORT``; :func:`read_failures` joins both.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import linecache
import os
import re
import shutil
import signal
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

_REPO_WORKERS = Path(__file__).resolve().parents[1] / "notebooks" / "workers"
#: Environment variable with the path :func:`main` writes its failure report to.
REPORT_ENV = "ACCELKIT_FAILURE_REPORT"
_NO_FILE = "<N/A>"  # torch's ProcessFailure.error_file when the worker wrote none


def worker_script(name: str) -> Path:
    """Return ``./workers/name`` if it exists, else this checkout's ``notebooks/workers/name``;
    raises FileNotFoundError naming the folders searched."""
    here, repo = Path("workers") / name, _REPO_WORKERS / name
    for cand in (here, repo):
        if cand.is_file():
            return cand.resolve()
    raise FileNotFoundError(f"worker script {name!r} not found in {here.parent.resolve()} "
                            f"or {repo.parent}; run the notebook from the repository's notebooks/")


def import_worker(name: str) -> ModuleType:
    """Import the worker script ``name`` afresh as a module, registered in ``sys.modules``
    under the file's stem so its functions pickle by name (:func:`sys_path_for`); raises
    FileNotFoundError when there is no such script."""
    path = worker_script(name)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(path.stem, None)
        raise
    return module


def sys_path_for(fn: Callable[..., Any]) -> list[str]:
    """Return ``sys.path`` with the folder of ``fn``'s script first (a script loaded with
    :func:`import_worker`), for spawned children; else ``sys.path`` as it is."""
    name = getattr(fn, "__module__", "") or ""
    file = getattr(sys.modules.get(name), "__file__", None)
    if name == "__main__" or "." in name or not file:
        return list(sys.path)
    folder = str(Path(file).resolve().parent)
    return list(sys.path) if folder in sys.path else [folder, *sys.path]


def script_source(path: str | os.PathLike[str], region: str | None = None) -> str:
    """Return a script's text, or the lines between ``# region NAME`` and ``# endregion``;
    raises FileNotFoundError (no such file), ValueError (no such region marker)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if region is not None:
        start = next((i for i, s in enumerate(lines) if s.strip() == f"# region {region}"), None)
        if start is None:
            raise ValueError(f"no '# region {region}' marker in the script")
        end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == "# endregion"),
                   len(lines))
        lines = lines[start + 1:end]
    return "\n".join(lines)


def script_diff(old: str | os.PathLike[str], new: str | os.PathLike[str], context: int = 1) -> str:
    """Return a unified diff from script ``old`` to ``new`` (FileNotFoundError if missing)."""
    a, b = (Path(p).read_text(encoding="utf-8").splitlines() for p in (old, new))
    return "\n".join(difflib.unified_diff(a, b, Path(old).name, Path(new).name, n=context,
                                          lineterm=""))


def show(path: str | os.PathLike[str], region: str | None = None, *,
         diff_from: str | os.PathLike[str] | None = None) -> None:
    """Display a script, one region of it, or its diff from ``diff_from``, as highlighted
    code (``print`` without IPython); raises as :func:`script_source`."""
    if diff_from is not None:
        text, lang = script_diff(diff_from, path), "diff"
        title = f"{Path(diff_from).name} -> {Path(path).name}"
    else:
        text, lang = script_source(path, region), "python"
        title = Path(path).name + (f" (region {region!r})" if region else "")
    try:
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython is a dev dependency
        print(f"# {title}\n{text}")
        return
    display(Markdown(f"`{title}`\n```{lang}\n{text}\n```"))


def fresh_path(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` with its parent created and a previous run's file or folder deleted."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
    return p


def read_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read the JSON a worker wrote (FileNotFoundError when it did not)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no results at {p}: the worker did not write them "
                                "(check the launch output above)")
    return json.loads(p.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Frame:
    """One frame of a Python stack: file, line number, function, and its source line."""

    file: str
    line: int
    func: str
    code: str = ""

    @property
    def short_file(self) -> str:
        """The path from ``torch/`` or ``accelkit/`` on, else the file name."""
        parts = Path(self.file).parts
        for root in ("torch", "accelkit"):
            if root in parts:
                return "/".join(parts[len(parts) - 1 - parts[::-1].index(root):])
        return Path(self.file).name

    @property
    def in_torch(self) -> bool:
        """True for a frame inside the torch package."""
        return "torch" in Path(self.file).parts[:-1]

    def __str__(self) -> str:
        return f"{self.short_file}:{self.line} in {self.func}"


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+),? in (?P<func>\S+)')
_DUMP_HEAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ .*most recent call first")


def last_stack(log: str) -> list[Frame]:
    """Return the main thread's frames (innermost first, source lines filled in) from the
    last ``faulthandler`` dump in ``log``: the thread whose outermost frame is ``<module>``,
    else the "Current thread", else the first; ``[]`` without a dump."""
    lines = log.splitlines()
    heads = [i for i, s in enumerate(lines) if _DUMP_HEAD.match(s.strip())]
    if not heads:
        return []
    start = heads[-1]  # the last dump begins at the first of its thread headers
    for h in reversed(heads[:-1]):
        if not all(_FRAME.match(s) or not s.strip() for s in lines[h + 1:start]):
            break
        start = h
    blocks: list[list[Frame]] = []
    current = -1  # the block faulthandler marks "Current thread" (the one that dumped)
    for s in lines[start:]:
        if _DUMP_HEAD.match(s.strip()):
            current = len(blocks) if s.strip().startswith("Current thread") else current
            blocks.append([])
        elif (m := _FRAME.match(s)) and blocks:
            code = linecache.getline(m["file"], int(m["line"])).strip()
            blocks[-1].append(Frame(m["file"], int(m["line"]), m["func"], code))
        elif s.strip() and blocks and blocks[-1]:
            break  # the dump ended: later output is not part of it
    main = [b for b in blocks if b and b[-1].func == "<module>"]
    return main[0] if main else blocks[max(current, 0)]


def traceback_frames(traceback: str) -> list[Frame]:
    """Return the frames of a Python traceback text, innermost first, with their code."""
    lines = traceback.splitlines() + [""]
    return [Frame(m["file"], int(m["line"]), m["func"],
                  "" if _FRAME.match(lines[i + 1]) else lines[i + 1].strip())
            for i, s in enumerate(lines) if (m := _FRAME.match(s))][::-1]


def where_waiting(frames: Sequence[Frame]) -> str:
    """Say in one line where a stack (innermost first) was: the outermost torch call below the
    caller's code (``barrier``, ``all_reduce``, ``backward``) and the caller's line, e.g.
    ``"barrier (torch/distributed/distributed_c10d.py:5356), called from accelkit/dist.py:283
    in teardown: dist.barrier()"``."""
    if not frames:
        return "(no stack)"
    callers = [i for i, f in enumerate(frames) if not f.in_torch]
    first_own = callers[0] if callers else len(frames)
    calls = [f for f in frames[:first_own] if f.func != "wrapper"]  # c10d_logger's wrapper
    if not calls:  # blocked in its own code, not in torch
        f = frames[0]
        return f"{f}" + (f": {f.code}" if f.code else "")
    call = calls[-1]  # the torch function the caller called
    where = f"{call.func} ({call.short_file}:{call.line})"
    if callers:
        caller = frames[first_own]
        where += f", called from {caller}" + (f": {caller.code}" if caller.code else "")
    return where


@dataclass(frozen=True)
class RankFailure:
    """One failed worker: ``rank`` (global), ``local_rank``, ``exitcode`` (negative: that
    signal) and ``pid`` (None when the agent did not record them), ``timestamp`` (seconds since
    the epoch: the error file's mtime, else when the agent noticed), ``error_file`` (or None),
    and from it ``message`` (``"Type: text"``) and ``traceback`` ("" without one)."""

    rank: int
    local_rank: int
    exitcode: int | None
    pid: int | None
    timestamp: float
    error_file: Path | None = None
    message: str = ""
    traceback: str = ""


def read_error_file(path: str | os.PathLike[str]) -> tuple[str, str]:
    """Return ``(message, traceback)`` from a worker's ``error.json`` in either layout torch
    reads (``{"message": {"message": ..., "extraInfo": {"py_callstack": ...}}}`` or
    ``{"message": "..."}``); ``("", "")`` if missing or not JSON."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "", ""
    msg = data.get("message", "") if isinstance(data, dict) else ""
    if isinstance(msg, dict):
        extra = msg.get("extraInfo") or {}
        return str(msg.get("message", "")), str(extra.get("py_callstack", ""))
    return str(msg), ""


def _failure(rank: int, row: dict[str, Any]) -> RankFailure:
    path = row.get("error_file") or _NO_FILE
    error_file = None if path == _NO_FILE else Path(path)
    message, tb = read_error_file(error_file) if error_file else ("", "")
    try:
        stamp = error_file.stat().st_mtime if error_file else float(row["timestamp"])
    except OSError:
        stamp = float(row["timestamp"])
    code, pid = row.get("exitcode"), row.get("pid")  # None: a rank read from its file only
    return RankFailure(rank, int(row["local_rank"]), None if code is None else int(code),
                       None if pid is None else int(pid), stamp, error_file, message, tb)


def _unreported(reported: dict[int, RankFailure]) -> dict[int, RankFailure]:
    """Ranks left out of the report whose error file (holding an exception) lies beside a
    reported rank's, in ``<attempt>/<local rank>/``: global rank = node's first + local."""
    found: dict[int, RankFailure] = {}
    for f in reported.values():
        if f.error_file is None:
            continue
        attempt, first = f.error_file.parent.parent, f.rank - f.local_rank
        try:
            folders = [d for d in attempt.iterdir() if d.is_dir() and d.name.isdigit()]
        except OSError:
            continue
        for folder in folders:
            rank, path = first + int(folder.name), folder / f.error_file.name
            if rank in reported or rank in found or not path.is_file():
                continue
            new = _failure(rank, {"local_rank": folder.name, "error_file": str(path),
                                  "timestamp": 0})
            if new.message or new.traceback:
                found[rank] = new
    return found


def read_failures(reports: Iterable[str | os.PathLike[str]]) -> dict[int, RankFailure]:
    """Return the failed workers by global rank, sorted: the reports :func:`main` wrote (one
    per agent; missing ones skipped) joined with the error files.  torch 2.9 reports only the
    ranks failed when the agent noticed the first (pytorch/pytorch#160908): ranks with an
    error file beside theirs are added, ``exitcode`` and ``pid`` None."""
    found: dict[int, RankFailure] = {}
    for report in reports:
        try:
            rows = json.loads(Path(report).read_text(encoding="utf-8"))["failures"]
        except (OSError, ValueError, KeyError):
            continue
        for rank, row in rows.items():
            found[int(rank)] = _failure(int(rank), row)
    found.update(_unreported(found))
    return dict(sorted(found.items()))


#: Lower-case parts of the errors a rank gets when a *peer* went away (gloo, NCCL).
PEER_GONE = ("closed by peer", "reset by peer", "broken pipe", "remote process exited")


def root_cause(failures: dict[int, RankFailure]) -> int | None:
    """Return the rank that most likely failed first (None when none failed): preferring, in
    order, one that recorded an exception, one not stopped with SIGTERM (as torchrun stops the
    rest), one whose peer did not go away (:data:`PEER_GONE`), the earliest timestamp (torch's
    own are whole seconds), the lowest rank."""
    if not failures:
        return None
    return min(failures.values(), key=lambda f: (
        f.error_file is None, f.exitcode == -signal.SIGTERM,
        any(part in f.message.lower() for part in PEER_GONE), f.timestamp, f.rank)).rank


def rank_log_files(log_root: Path, failure: RankFailure) -> str:
    """Return a failed rank's ``stderr.log`` + ``stdout.log`` from its error file's folder, else
    from the one ``*/attempt_*/<local rank>`` under ``log_root`` ("" if not exactly one)."""
    if failure.error_file is not None:
        folders = [failure.error_file.parent]
    else:
        folders = sorted(log_root.glob(f"*/attempt_*/{failure.local_rank}"))
    if len(folders) != 1:
        return ""
    return "".join(f.read_text(encoding="utf-8", errors="replace")
                   for f in sorted(folders[0].glob("std*.log")))


def torchrun_command(script: str | os.PathLike[str], args: Sequence[Any] = (), *,
                     nproc_per_node: int = 2, nnodes: int = 1,
                     rdzv_endpoint: str | None = None, rdzv_id: str = "accelkit",
                     log_dir: str | os.PathLike[str] | None = None,
                     python: str | None = None, as_torchrun: bool = False,
                     module: str = "torch.distributed.run") -> list[str]:
    """Return the torchrun argument list that runs ``script`` on one node: ``--standalone
    --nproc-per-node=N`` for one node, else ``--nnodes=M --rdzv-backend=c10d
    --rdzv-endpoint=HOST:PORT --rdzv-id=ID`` (the same on every node; torchrun docs).

    Args:
        rdzv_endpoint: node 0's ``host:port``, required when ``nnodes > 1``.
        log_dir: add ``--tee=3 --log-dir=...`` (per-rank output and error files).
        python: the interpreter (default: this one); ``as_torchrun``: start with ``torchrun``.
        module: ``python -m module``: ``torch.distributed.run`` or ``accelkit.scripts``.

    Raises:
        ValueError: for ``nproc_per_node < 1``, ``nnodes < 1`` or a missing endpoint.
    """
    if not isinstance(nproc_per_node, int) or nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be an int >= 1, got {nproc_per_node!r}")
    if not isinstance(nnodes, int) or nnodes < 1:
        raise ValueError(f"nnodes must be an int >= 1, got {nnodes!r}")
    cmd = ["torchrun"] if as_torchrun else [python or sys.executable, "-m", module]
    if nnodes == 1:
        cmd += ["--standalone", f"--nproc-per-node={nproc_per_node}"]
    else:
        if not rdzv_endpoint:
            raise ValueError("a multi-node launch needs rdzv_endpoint='host:port' of node 0")
        cmd += [f"--nnodes={nnodes}", f"--nproc-per-node={nproc_per_node}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}", f"--rdzv-id={rdzv_id}"]
    if log_dir is not None:
        cmd += ["--tee=3", f"--log-dir={log_dir}"]
    return cmd + [str(script), *map(str, args)]


def main(argv: Sequence[str] | None = None) -> None:
    """Run torchrun with ``argv``; on ``ChildFailedError`` write its ``failures`` as JSON to
    ``$ACCELKIT_FAILURE_REPORT`` (when set), then re-raise it."""
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    try:
        run.main(list(sys.argv[1:] if argv is None else argv))
    except ChildFailedError as exc:
        if os.environ.get(REPORT_ENV):
            rows = {str(rank): {"local_rank": f.local_rank, "pid": f.pid, "exitcode": f.exitcode,
                                "error_file": f.error_file, "timestamp": f.timestamp}
                    for rank, f in exc.failures.items()}
            Path(os.environ[REPORT_ENV]).write_text(json.dumps({"failures": rows}, indent=1),
                                                    encoding="utf-8")
        raise


__all__ = ["PEER_GONE", "REPORT_ENV", "Frame", "RankFailure", "fresh_path", "import_worker",
           "last_stack", "main", "rank_log_files", "read_error_file", "read_failures", "read_json",
           "root_cause", "script_diff", "script_source", "show", "sys_path_for",
           "torchrun_command", "traceback_frames", "where_waiting", "worker_script"]

if __name__ == "__main__":
    main()
