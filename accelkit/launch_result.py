"""What a launch returns: :class:`LaunchResult` (exit codes, output per rank, the report)
and :class:`LaunchError`.

This module owns reading a finished launch back for a person: :meth:`LaunchResult.summary`
(the failing rank's own error first: its recorded exception and traceback, else its output
tail; the other ranks' exit codes; where each rank was), :meth:`LaunchResult.where` (per
rank, the call into torch it was blocked in and the worker line that made it),
:meth:`LaunchResult.check` (raise :class:`LaunchError` unless clean),
:meth:`LaunchResult.read_json`, and :func:`spawn_error` (the error of a failed
``torch.multiprocessing`` group, with a child's own stderr).  And the stack *text* it reads:
:class:`Frame`, :func:`last_stack` (the main thread's stack from the last ``faulthandler`` dump
in a log), :func:`traceback_frames` and :func:`where_waiting` (a stack in one line: the call
into torch the rank was blocked in, and the line of its own code that made it).

What lives elsewhere: the launchers that fill these in (:mod:`accelkit.launch`, which
re-exports both classes: ``ak.launch.LaunchError`` is the public spelling); asking processes
for their stacks (:func:`accelkit.procs.request_stacks`) and registering the signal in workers
(:func:`accelkit.dist.enable_stack_dumps`); torchrun's per-rank failure records
(:mod:`accelkit.elastic`); the JSON a worker wrote (:func:`accelkit.scripts.read_json`).
"""

from __future__ import annotations

import re
import shlex
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelkit import procs, scripts
from accelkit.elastic import RankFailure


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
    """Return the main thread's stack from the last ``faulthandler`` dump in ``log``.

    A dump (``faulthandler.dump_traceback(all_threads=True)``, or the stack signal) lists
    each Python thread, innermost frame first; the main thread is the one whose outermost
    frame is ``<module>`` (else the thread marked "Current thread", which received the stack
    signal, else the first listed).  Source lines are filled in from the files.

    Returns:
        Its frames, innermost first; ``[]`` when ``log`` holds no dump.
    """
    import linecache

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
    """Return the frames of a Python traceback text (``Traceback (most recent call last)``).

    Returns:
        Its frames, innermost first (the order of :func:`last_stack`), with source lines.
    """
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
    ``backward``: DDP all-reduces its gradients inside ``backward``); the caller is the frame
    that made it, with its source line.

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
            it printed when a timed-out run asked for it (see :func:`last_stack`).
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
        :func:`where_waiting`).

        Returns:
            ``{rank: line}`` for the ranks with a stack or a recorded traceback, by rank.
        """
        found = {r: where_waiting(st) for r, st in self.stacks.items() if st}
        for r, f in self.failures.items():
            if r not in found and f.traceback:
                found[r] = where_waiting(traceback_frames(f.traceback))
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
    "Frame",
    "LaunchError",
    "LaunchResult",
    "last_stack",
    "spawn_error",
    "traceback_frames",
    "where_waiting",
]
