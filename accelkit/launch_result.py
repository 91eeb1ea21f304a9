"""What a launch returns: :class:`LaunchResult` (exit codes, output per rank, the report)
and :class:`LaunchError`.

This module owns reading a finished launch back for a person: :meth:`LaunchResult.summary`
(the failing rank's own error first: its recorded exception and traceback, else its output
tail; the other ranks' exit codes; where each rank was), :meth:`LaunchResult.where` (per
rank, the call into torch it was blocked in and the worker line that made it),
:meth:`LaunchResult.check` (raise :class:`LaunchError` unless clean),
:meth:`LaunchResult.read_json`, and :func:`spawn_error` (the error of a failed
``torch.multiprocessing`` group, with a child's own stderr).

What lives elsewhere: the launchers that fill these in (:mod:`accelkit.launch`, which
re-exports both classes: ``ak.launch.LaunchError`` is the public spelling); reading stacks
and tracebacks as frames (:mod:`accelkit.stacks`); torchrun's per-rank failure records
(:mod:`accelkit.elastic`); the JSON a worker wrote (:func:`accelkit.scripts.read_json`).
"""

from __future__ import annotations

import shlex
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelkit import procs, scripts, stacks
from accelkit.elastic import RankFailure
from accelkit.stacks import Frame

_TRACEBACK = "Traceback (most recent call last)"


class LaunchError(RuntimeError):
    """A launched group failed or timed out; ``.result`` holds the :class:`LaunchResult`."""

    def __init__(self, message: str, result: LaunchResult) -> None:
        super().__init__(message)
        self.result = result


def _tail(text: str, n: int) -> str:
    lines = text.rstrip("\n").splitlines()
    return "\n".join(lines[-n:])


def _before_traceback(output: str, traceback: str) -> str:
    """``output`` without the traceback it ends with, when that ends as ``traceback`` does.

    (A worker that records its exception also prints it; the summary shows it once.)
    """
    last = traceback.strip().splitlines()[-1:]
    if last and output.rstrip().endswith(last[0]) and _TRACEBACK in output:
        return output[:output.rindex(_TRACEBACK)]
    return output


def _code_text(code: int | None) -> str:
    if code is None:
        return "exit code unknown"
    if code < 0:
        try:
            return f"exit code {code}, {signal.Signals(-code).name}"
        except ValueError:
            return f"exit code {code}, signal {-code}"
    return f"exit code {code}"


@dataclass
class LaunchResult:
    """What a launch did: exit codes, each rank's output, and how it ended.

    Attributes:
        kind: ``"torchrun"``, ``"tf"``, ``"python"``, ``"spawn"``.
        commands: the command lines started (one per torchrun agent / TF worker).
        exit_codes: exit code per global rank (negative: killed by that signal; missing: the
            rank never reported one, e.g. the run timed out first).
        logs: everything each rank printed (stdout and stderr), prefix removed.
        launcher_log: what the launchers themselves printed (torchrun's own messages).
        returncodes: the exit code of each started command.
        wall_s: seconds from start to the end of clean-up.
        timeout_s: the time limit, seconds.
        timed_out: the run hit ``timeout_s`` and was killed.
        failed_rank: the rank that failed first, or None.
        failures: torchrun's record of each failed rank, with the exception and traceback
            from its error file when it wrote one (see :mod:`accelkit.elastic`).
        log_dir: the folder with torchrun's per-rank log and error files, or None.
        killed: how many leftover processes the clean-up had to kill.
        launch_id: the tag (``$ACCELKIT_LAUNCH_ID``) on every process this launch started;
            :func:`accelkit.procs.leftover_processes` takes it.
        out: the path passed to the worker as ``--out``, or None.
        stacks: per rank, the main thread's Python stack (innermost frame first) from the dump
            it printed when a timed-out run asked for it (see :func:`accelkit.stacks.last_stack`).
        collective_timeout_s: the workers' collective timeout, seconds, or None (not set).
    """

    kind: str
    commands: list[list[str]]
    exit_codes: dict[int, int] = field(default_factory=dict)
    logs: dict[int, str] = field(default_factory=dict)
    launcher_log: str = ""
    returncodes: list[int | None] = field(default_factory=list)
    wall_s: float = 0.0
    timeout_s: float = 0.0
    timed_out: bool = False
    failed_rank: int | None = None
    failures: dict[int, RankFailure] = field(default_factory=dict)
    log_dir: Path | None = None
    killed: int = 0
    launch_id: str = ""
    out: Path | None = None
    stacks: dict[int, list[Frame]] = field(default_factory=dict)
    collective_timeout_s: float | None = None

    @property
    def ok(self) -> bool:
        """True when every started command and every rank exited with status 0."""
        return (not self.timed_out and all(rc == 0 for rc in self.returncodes)
                and all(c == 0 for c in self.exit_codes.values()))

    @property
    def command(self) -> str:
        """The first command line, shell-quoted (copy-pasteable)."""
        return shlex.join(self.commands[0]) if self.commands else ""

    def read_json(self, name: str = "") -> dict[str, Any]:
        """Read the JSON the worker wrote to ``out`` (or to ``out/name`` when ``out`` is a folder).

        Raises:
            ValueError: when the launch was given no ``out``.
            FileNotFoundError: when the worker did not write it (see :meth:`summary`).
        """
        if self.out is None:
            raise ValueError("this launch had no out=PATH; pass out= to the launcher")
        return scripts.read_json(self.out / name if name else self.out)

    def _failed_rank_lines(self, rank: int) -> list[str]:
        head = f"rank {rank} failed first ({_code_text(self.exit_codes.get(rank))})"
        own = "\n".join(s for s in self.logs.get(rank, "").splitlines()
                        if not procs.QUIET_LINE.match(s))
        record = self.failures.get(rank)
        if record is None or not record.message:
            return [f"{head}; its own output:", _tail(own, 40) or "(it printed nothing)"]
        lines = [f"{head}: {record.message}", "its traceback (from its error file):",
                 _tail(record.traceback, 25) or "(none recorded)"]
        before = _before_traceback(own, record.traceback)
        if before.strip():
            lines += ["its last output before that:", _tail(before, 10)]
        return lines

    def where(self) -> dict[int, str]:
        """Say per rank where it was when the run ended badly, from its Python stack.

        A timed-out run: the stack each rank printed on the stack signal.  A failed run: the
        traceback each failed rank recorded in its error file.  One line per rank, e.g.
        ``"barrier (torch/distributed/distributed_c10d.py:5356), called from
        accelkit/dist.py:283 in teardown: dist.barrier()"`` (see
        :func:`accelkit.stacks.where_waiting`).

        Returns:
            ``{rank: line}`` for the ranks with a stack or a recorded traceback, by rank.
        """
        found = {r: stacks.where_waiting(st) for r, st in self.stacks.items() if st}
        for r, f in self.failures.items():
            if r not in found and f.traceback:
                found[r] = stacks.where_waiting(stacks.traceback_frames(f.traceback))
        return dict(sorted(found.items()))

    def _where_lines(self) -> list[str]:
        where = self.where()
        if not where or (not self.timed_out and len(where) < 2):
            return []  # one failed rank: its traceback above says it all
        how = ("its Python stack when the time limit came (faulthandler)" if self.timed_out
               else "the traceback each recorded")
        lines = [f"where each rank was ({how}):"]
        lines += [f"  rank {r}: {w}" for r, w in where.items()]
        timed = [f.message for f in self.failures.values() if "Timed out" in f.message]
        if timed or self.timed_out:
            lines.append(
                "ranks that wait in different collectives, or for a rank that never comes, hang "
                "until a timeout: uneven inputs (one rank runs more steps) are the usual cause; "
                "see notebook 04 (DistributedSampler, drop_last, Join)")
        return lines

    def summary(self) -> str:
        """Explain how the run ended; a failing rank's own error comes first.

        Returns:
            ``"ok: ..."`` for a clean run; otherwise the failing rank with its exit code, the
            exception and traceback it recorded (torchrun's error file) or its output tail,
            the other ranks' exit codes, where each rank was (:meth:`where`: on a timeout,
            or when several ranks failed), and the launcher's own message when no rank
            explains it.
        """
        n = max(len(self.exit_codes), len(self.logs))
        if self.ok:
            return f"ok: {n} rank(s) exited 0 in {self.wall_s:.1f} s"
        lines: list[str] = []
        if self.timed_out:
            lines.append(f"TIMEOUT: the run passed its time limit of {self.timeout_s:g} s and was "
                         f"killed with all its processes ({self.killed} left over were killed).")
        rank = self.failed_rank
        if rank is not None:
            lines += self._failed_rank_lines(rank)
        known: dict[int, int | None] = {r: None for r in self.failures}  # no code: unknown
        others = {r: c for r, c in sorted({**known, **self.exit_codes}.items()) if r != rank}
        if others:
            lines.append("other ranks: " + ", ".join(
                f"rank {r} " + ("recorded an error (this torch did not record its exit "
                                "code)" if c is None and r in self.failures
                                else procs.describe_exit(c)) for r, c in others.items()))
        lines += self._where_lines()
        if rank is None and not self.timed_out:
            lines.append(f"launcher exit codes {self.returncodes}; launcher output:")
            lines.append(_tail(self.launcher_log, 25) or "(nothing)")
        return "\n".join(lines)

    def check(self) -> LaunchResult:
        """Return ``self`` when the run was clean.

        Raises:
            LaunchError: with :meth:`summary` as the message when any rank failed or the run
                timed out.
        """
        if not self.ok:
            raise LaunchError(self.summary(), self)
        return self


def spawn_error(error: BaseException, stderr: str) -> LaunchError:
    """The :class:`LaunchError` for a failed ``torch.multiprocessing`` group.

    Its message holds torch's error and the last traceback of the children's ``stderr``
    (raise it ``from error`` to chain torch's exception).
    """
    last = stderr[stderr.rfind(_TRACEBACK):] if _TRACEBACK in stderr else stderr
    msg = (f"{type(error).__name__}: {error}\n--- a child's own stderr ---\n"
           f"{_tail(last, 15) or '(empty)'}")
    return LaunchError(msg, LaunchResult("spawn", [], logs={0: stderr}))


__all__ = [
    "LaunchError",
    "LaunchResult",
    "spawn_error",
]
