"""What torchrun records about failed workers, read from files instead of its printed report.

torchrun (``torch.distributed.run``, "torchelastic") gives every worker an error file, the
path in ``$TORCHELASTIC_ERROR_FILE``: ``<log-dir>/<run id>_<random>/attempt_<n>/<local
rank>/error.json``.  A worker whose entry point is wrapped in
``torch.distributed.elastic.multiprocessing.errors.record`` (or that calls
``ErrorHandler().record_exception(exc)``, as :func:`accelkit.dist.session` does) writes its
exception and traceback there as JSON::

    {"message": {"message": "ValueError: ...",
                 "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1700000000"}}}

Exit codes are known only to the torchrun agent: when a worker fails it raises
``ChildFailedError``, whose ``failures`` map each failed global rank to a ``ProcessFailure``
(exit code, local rank, pid, error file).  :func:`main` runs torchrun's own ``main()`` and,
when it raises that, writes ``failures`` as JSON to ``$ACCELKIT_FAILURE_REPORT`` (run it as
``python -m accelkit.elastic <torchrun arguments>``; :mod:`accelkit.launch` does).
:func:`read_failures` joins the reports of all agents with the workers' error files.  A worker
killed by a signal writes no error file: its exit code still comes from the agent's report;
without a report (the agent itself was killed) it is unknown.

torch 2.9 (Colab's TPU runtime) records in ``failures`` only the workers that had failed when
the agent noticed the first failure, not the others it then stopped or that failed a moment
later (later torch, 2.13 here, reads their exit codes after stopping them:
pytorch/pytorch#160908).  A rank whose
peer timed out in a collective fails on its own a moment later and writes an error file too;
:func:`read_failures` adds such ranks from their error files beside the reported ones, with
the exit code and pid unknown (None), so a hang's report names every rank on every torch.

Nothing here parses torchrun's human-readable messages.  Launching and the failure summary
live in :mod:`accelkit.launch`; the code that runs inside workers in :mod:`accelkit.dist`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Environment variable with the path :func:`main` writes its failure report to.
REPORT_ENV = "ACCELKIT_FAILURE_REPORT"
_NO_FILE = "<N/A>"  # torch's ProcessFailure.error_file when the worker wrote none


@dataclass(frozen=True)
class RankFailure:
    """One failed worker, as its agent and its error file recorded it.

    Attributes:
        rank: global rank.
        local_rank: rank on its node.
        exitcode: exit status (negative: killed by that signal); None when the agent did not
            record it (a rank read from its error file only, see :func:`read_failures`).
        pid: process id; None when the agent did not record it.
        timestamp: seconds since the epoch: when the error file was written (its
            modification time, finer than the whole seconds inside it), else when the agent
            noticed the failure.
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

    @property
    def signal_name(self) -> str | None:
        """``"SIGKILL"`` etc. for a worker killed by a signal, else None (also when unknown)."""
        if self.exitcode is None or self.exitcode >= 0:
            return None
        try:
            return signal.Signals(-self.exitcode).name
        except ValueError:
            return f"signal {-self.exitcode}"


def read_error_file(path: str | os.PathLike[str]) -> tuple[str, str]:
    """Read a worker's ``error.json`` as torch's ``ErrorHandler`` writes it.

    Both layouts torch reads are accepted: ``{"message": {"message": ..., "extraInfo":
    {"py_callstack": ...}}}`` (``ErrorHandler.record_exception``) and ``{"message": "..."}``.

    Returns:
        ``(message, traceback)``; ``("", "")`` when the file is missing or not valid JSON.
    """
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

    An agent's error files lie in ``<attempt>/<local rank>/<name>``, and a node's global
    ranks are its first global rank plus the local rank, so one reported rank with an error
    file places its node's others.  Only files holding an exception count.
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
    """Join the failure reports :func:`main` wrote (one per agent) with the error files.

    Missing reports are skipped (an agent that succeeded, or that was killed, wrote none).
    A rank the report leaves out but whose error file lies beside a reported rank's (torch 2.9
    reports only the ranks failed when the agent noticed the first; see the module docstring)
    is added with ``exitcode`` and ``pid`` None.

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


#: Lower-case parts of the errors a rank gets when a *peer* went away (gloo's TCP pair:
#: "Connection closed by peer", a reset or a broken pipe; NCCL: "remote process exited"):
#: a consequence of another rank's failure, whichever error file was written first.
PEER_GONE = ("closed by peer", "reset by peer", "broken pipe", "remote process exited")


def peer_gone(failure: RankFailure) -> bool:
    """True when ``failure``'s recorded exception says a peer closed the connection."""
    message = failure.message.lower()
    return any(part in message for part in PEER_GONE)


def root_cause(failures: dict[int, RankFailure]) -> int | None:
    """Return the rank that most likely failed first, or None when none failed.

    torch picks the earliest timestamp, but its timestamps are whole seconds and a worker
    that torchrun stopped gets the time it was noticed.  So, in order: a worker that recorded
    an exception, one not stopped with SIGTERM (the signal torchrun stops the others with),
    one whose exception is not its peer going away (:func:`peer_gone`: a rank that timed out
    in a collective closes its sockets, and the rank waiting on it may write its "closed by
    peer" error file first), the earliest :attr:`RankFailure.timestamp`, the lowest rank.
    """
    if not failures:
        return None
    return min(failures.values(), key=lambda f: (f.error_file is None,
                                                 f.exitcode == -signal.SIGTERM,
                                                 peer_gone(f), f.timestamp, f.rank)).rank


def torchrun_command(script: str | os.PathLike[str], args: Sequence[Any] = (), *,
                     nproc_per_node: int = 2, nnodes: int = 1,
                     rdzv_endpoint: str | None = None, rdzv_id: str = "accelkit",
                     log_dir: str | os.PathLike[str] | None = None,
                     python: str | None = None, as_torchrun: bool = False,
                     module: str = "torch.distributed.run") -> list[str]:
    """Build the ``torchrun`` command line (as a list) for one node.

    ``nnodes == 1`` gives ``torchrun --standalone --nproc-per-node=N script.py ...`` (a local
    c10d rendezvous on a free port).  ``nnodes > 1`` gives the multi-node form that runs
    unchanged on every node: ``--nnodes=M --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT
    --rdzv-id=ID`` (see the torchrun docs, "Elastic launch").

    Args:
        script: the training script.
        args: its arguments.
        nproc_per_node: worker processes per node (one per GPU on a GPU node), >= 1.
        nnodes: number of nodes, >= 1.
        rdzv_endpoint: ``host:port`` of the rendezvous (node 0); required when ``nnodes > 1``.
        rdzv_id: a job id shared by all nodes.
        log_dir: add ``--tee=3 --log-dir=...`` so each rank's output is also written to files
            (and each rank gets an error file there).
        python: the interpreter; default: this one.
        as_torchrun: start the command with ``torchrun`` instead (to print for a cluster).
        module: run as ``python -m module``: ``torch.distributed.run`` is what the
            ``torchrun`` entry point runs; ``accelkit.elastic`` runs the same, plus the
            failure record (:func:`main`).

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


def rank_log_files(log_root: Path, failure: RankFailure) -> str:
    """Return a failed rank's ``stderr.log`` + ``stdout.log`` from torchrun's ``--log-dir``.

    Its folder is the one of its error file; without one, ``<run id>_<random>/attempt_<n>/
    <local rank>`` under ``log_root``, if exactly one agent wrote there ("" otherwise).
    """
    if failure.error_file is not None:
        folders = [failure.error_file.parent]
    else:  # <run id>_<random>/attempt_<n>/<local rank>: one per agent
        folders = sorted(log_root.glob(f"*/attempt_*/{failure.local_rank}"))
    if len(folders) != 1:
        return ""
    return "".join(f.read_text(encoding="utf-8", errors="replace")
                   for f in sorted(folders[0].glob("std*.log")))


def _write_report(path: str, failures: dict[int, Any]) -> None:
    rows = {str(rank): {"local_rank": f.local_rank, "pid": f.pid, "exitcode": f.exitcode,
                        "error_file": f.error_file, "timestamp": f.timestamp}
            for rank, f in failures.items()}
    Path(path).write_text(json.dumps({"failures": rows}, indent=1), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    """Run torchrun with ``argv``; on a worker failure write the report, then fail as it does.

    Raises:
        ChildFailedError: torchrun's own, re-raised after the report is written to
            ``$ACCELKIT_FAILURE_REPORT`` (when set).
    """
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    try:
        run.main(list(sys.argv[1:] if argv is None else argv))
    except ChildFailedError as exc:
        if os.environ.get(REPORT_ENV):
            _write_report(os.environ[REPORT_ENV], exc.failures)
        raise


__all__ = [
    "REPORT_ENV",
    "RankFailure",
    "main",
    "rank_log_files",
    "read_error_file",
    "read_failures",
    "root_cause",
    "torchrun_command",
]

if __name__ == "__main__":
    main()
