"""Worker scripts and what they leave behind: find, show, import; their files and stacks.

The committed scripts live in ``notebooks/workers/``: :func:`worker_script` finds one,
:func:`show` displays it (one ``# region NAME`` ... ``# endregion``, or its diff from
another), :func:`import_worker` imports it so a notebook can call its ``main()``;
:func:`fresh_path` and :func:`read_json` handle the files it writes.  The Python stacks in a
worker's output: :func:`last_stack`, :func:`traceback_frames`, :func:`where_waiting`.

What torchrun records about failed workers, from files, never its printed report: every
worker's error file (``$TORCHELASTIC_ERROR_FILE``, written by ``@record`` or
:func:`accelkit.dist.session`) holds its exception; exit codes are known only to the agent,
whose ``ChildFailedError`` :func:`main` (``python -m accelkit.scripts <torchrun args>``)
writes to ``$ACCELKIT_FAILURE_REPORT``; :func:`read_failures` joins both.  torch 2.9 reports
only the workers failed when the agent noticed the first (pytorch/pytorch#160908), so ranks
with an error file beside theirs are added, exit code and pid unknown.  Starting workers:
:mod:`accelkit.launch`; the code inside them: :mod:`accelkit.dist`.
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
    """Return the path of a committed worker script: ``./workers/name`` (a notebook's own
    folder), else this checkout's ``notebooks/workers/name``.

    Raises:
        FileNotFoundError: naming the folders searched.
    """
    here, repo = Path("workers") / name, _REPO_WORKERS / name
    for cand in (here, repo):
        if cand.is_file():
            return cand.resolve()
    raise FileNotFoundError(f"worker script {name!r} not found in {here.parent.resolve()} "
                            f"or {repo.parent}; run the notebook from the repository's notebooks/")


def import_worker(name: str) -> ModuleType:
    """Import the worker script ``name`` (found by :func:`worker_script`) as a module.

    The module is registered in ``sys.modules`` under the file's stem (``"single_train"``),
    so its functions pickle by name; :func:`accelkit.launch.spawn` puts its folder on the
    children's ``sys.path`` (:func:`sys_path_for`).  Each call runs the file afresh.

    Returns:
        The module; call e.g. ``module.main(["--out", path])``.

    Raises:
        FileNotFoundError: when there is no such script.
    """
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
    """Return ``sys.path`` plus the folder of ``fn``'s script, for spawned children that
    import ``fn``'s module by name (a script loaded with :func:`import_worker` is not on
    ``sys.path``).  Functions of ``__main__``, of packages, or of importable modules leave
    ``sys.path`` as it is.
    """
    name = getattr(fn, "__module__", "") or ""
    file = getattr(sys.modules.get(name), "__file__", None)
    if name == "__main__" or "." in name or not file:
        return list(sys.path)
    folder = str(Path(file).resolve().parent)
    return list(sys.path) if folder in sys.path else [folder, *sys.path]


def script_source(path: str | os.PathLike[str], region: str | None = None) -> str:
    """Return a script's text, or only the lines of one ``# region NAME`` ... ``# endregion``.

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: when the region marker is missing.
    """
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
    """Return a unified diff from script ``old`` to script ``new`` (``context`` lines around).

    Raises:
        FileNotFoundError: when a file does not exist.
    """
    a, b = (Path(p).read_text(encoding="utf-8").splitlines() for p in (old, new))
    return "\n".join(difflib.unified_diff(a, b, Path(old).name, Path(new).name, n=context,
                                          lineterm=""))


def show(path: str | os.PathLike[str], region: str | None = None, *,
         diff_from: str | os.PathLike[str] | None = None) -> None:
    """Display a worker script, one region of it (:func:`script_source`), or with
    ``diff_from`` its diff from that older script (:func:`script_diff`), as highlighted code.

    Falls back to ``print`` outside IPython.

    Raises:
        FileNotFoundError, ValueError: as :func:`script_source`.
    """
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
    """Return ``path`` for a worker to write, after deleting the file or folder a previous run
    left there (it would pass for this run's result if the worker fails); its parent created."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_dir():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)
    return p


def read_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read the JSON results a worker wrote (see :func:`accelkit.dist.save_json`).

    Raises:
        FileNotFoundError: when the worker did not write it (did it fail? see the launch log).
    """
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
    """Return the main thread's stack from the last ``faulthandler`` dump in ``log``: the
    thread whose outermost frame is ``<module>``, else the "Current thread" (the one that got
    the stack signal), else the first listed; source lines filled in from the files.

    Returns:
        Its frames, innermost first; ``[]`` when ``log`` holds no dump.
    """
    lines = log.splitlines()
    heads = [i for i, s in enumerate(lines) if _DUMP_HEAD.match(s.strip())]
    if not heads:
        return []
    blocks: list[list[Frame]] = []
    current = -1  # the block faulthandler marks "Current thread" (the one that dumped)
    for s in lines[_dump_start(lines, heads):]:
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


def _dump_start(lines: Sequence[str], heads: Sequence[int]) -> int:
    """The first line of the last dump: the first of its thread headers."""
    start = heads[-1]
    for h in reversed(heads[:-1]):
        if all(_FRAME.match(s) or not s.strip() for s in lines[h + 1:start]):
            start = h
        else:
            break
    return start


def traceback_frames(traceback: str) -> list[Frame]:
    """Return the frames of a Python traceback text, innermost first (the order of
    :func:`last_stack`), with their source lines."""
    lines = traceback.splitlines()
    frames = []
    for i, s in enumerate(lines):
        m = _FRAME.match(s)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.match(
                lines[i + 1]) else ""
            frames.append(Frame(m["file"], int(m["line"]), m["func"], code))
    return frames[::-1]


def where_waiting(frames: Sequence[Frame]) -> str:
    """Say in one line where a stack (innermost first) was: torch's call and the caller's line.

    The call is the outermost torch frame below the caller's code (``barrier``, ``all_reduce``,
    ``backward``, where DDP all-reduces gradients); the caller is the frame that made it.
    Example: ``"barrier (torch/distributed/distributed_c10d.py:5356), called from
    accelkit/dist.py:283 in teardown: dist.barrier()"``.
    """
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
    """One failed worker, as its agent and its error file recorded it.

    Attributes:
        rank: global rank.
        local_rank: rank on its node.
        exitcode: exit status (negative: killed by that signal); None when the agent did not
            record it (a rank read from its error file only, see :func:`read_failures`).
        pid: process id; None when the agent did not record it.
        timestamp: seconds since the epoch: the error file's modification time (finer than
            the whole seconds inside it), else when the agent noticed the failure.
        error_file: the worker's error file, or None when it wrote none.
        message: ``"ExceptionType: text"`` from the error file ("" without one).
        traceback: the Python traceback from the error file ("" without one).
    """

    rank: int
    local_rank: int
    exitcode: int | None
    pid: int | None
    timestamp: float
    error_file: Path | None = None
    message: str = ""
    traceback: str = ""


def read_error_file(path: str | os.PathLike[str]) -> tuple[str, str]:
    """Read a worker's ``error.json`` in either layout torch reads (``{"message": {"message":
    ..., "extraInfo": {"py_callstack": ...}}}`` from ``ErrorHandler.record_exception``, or
    ``{"message": "..."}``): ``(message, traceback)``, ``("", "")`` if missing or not JSON."""
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
    return RankFailure(rank=rank, local_rank=int(row["local_rank"]),
                       exitcode=int(row["exitcode"]), pid=int(row["pid"]), timestamp=stamp,
                       error_file=error_file, message=message, traceback=tb)


def _unreported(reported: dict[int, RankFailure]) -> dict[int, RankFailure]:
    """Ranks with an error file beside a reported rank's that the agent's report leaves out.

    Error files lie in ``<attempt>/<local rank>/<name>`` and a node's global ranks are its
    first global rank plus the local rank, so one reported rank with an error file places its
    node's others.  Only files holding an exception count.
    """
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
            message, tb = read_error_file(path)
            if message or tb:
                found[rank] = RankFailure(rank=rank, local_rank=int(folder.name), exitcode=None,
                                          pid=None, timestamp=path.stat().st_mtime,
                                          error_file=path, message=message, traceback=tb)
    return found


def read_failures(reports: Iterable[str | os.PathLike[str]]) -> dict[int, RankFailure]:
    """Join the failure reports :func:`main` wrote (one per agent; missing ones skipped) with
    the error files; a rank left out whose error file lies beside a reported rank's is added
    with ``exitcode`` and ``pid`` None (see the module docstring).

    Returns:
        The failed workers by global rank, sorted by rank.
    """
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


#: Lower-case parts of the errors a rank gets when a *peer* went away (gloo: "Connection
#: closed by peer", a reset, a broken pipe; NCCL: "remote process exited").
PEER_GONE = ("closed by peer", "reset by peer", "broken pipe", "remote process exited")


def root_cause(failures: dict[int, RankFailure]) -> int | None:
    """Return the rank that most likely failed first, or None when none failed.

    torch picks the earliest timestamp, but its timestamps are whole seconds and a worker
    torchrun stopped gets the time it was noticed.  So, in order: a worker that recorded an
    exception, one not stopped with SIGTERM (what torchrun stops the others with), one whose
    exception is not its peer going away (:data:`PEER_GONE`: a rank that timed out in a
    collective closes its sockets, and the rank waiting on it may write its error file
    first), the earliest :attr:`RankFailure.timestamp`, the lowest rank.
    """
    if not failures:
        return None
    return min(failures.values(), key=lambda f: (
        f.error_file is None, f.exitcode == -signal.SIGTERM,
        any(part in f.message.lower() for part in PEER_GONE), f.timestamp, f.rank)).rank


def rank_log_files(log_root: Path, failure: RankFailure) -> str:
    """Return a failed rank's ``stderr.log`` + ``stdout.log`` from torchrun's ``--log-dir``:
    the folder of its error file, else ``*/attempt_*/<local rank>`` under ``log_root`` if
    exactly one agent wrote there ("" otherwise).
    """
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
    """Build the ``torchrun`` command line (as a list) that runs ``script`` on one node.

    ``nnodes == 1`` gives ``torchrun --standalone --nproc-per-node=N script.py ...``;
    ``nnodes > 1`` the form that runs unchanged on every node: ``--nnodes=M
    --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT --rdzv-id=ID`` (torchrun docs, "Elastic launch").

    Args:
        script, args: the training script and its arguments.
        nproc_per_node, nnodes: processes per node (one per GPU), nodes; >= 1 each.
        rdzv_endpoint: ``host:port`` of the rendezvous (node 0); required when ``nnodes > 1``.
        rdzv_id: a job id shared by all nodes.
        log_dir: add ``--tee=3 --log-dir=...`` (each rank's output and error file there).
        python: the interpreter; default: this one.
        as_torchrun: start with ``torchrun`` instead (to print for a cluster).
        module: run as ``python -m module``: ``torch.distributed.run`` (what ``torchrun``
            runs) or ``accelkit.scripts`` (the same plus the failure report, :func:`main`).

    Returns:
        The argument list for ``subprocess``; ``shlex.join`` it to print.

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
    """Run torchrun with ``argv``; on a worker failure write the report, then fail as it does.

    Raises:
        ChildFailedError: torchrun's own, re-raised after its ``failures`` are written as
            JSON to ``$ACCELKIT_FAILURE_REPORT`` (when set).
    """
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
