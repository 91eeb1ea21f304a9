"""Reading Python stacks back from worker output: faulthandler dumps and tracebacks.

This module owns the stack *text*: :class:`Frame` (one frame: file, line, function, source
line), :func:`last_stack` (the main thread's stack from the last ``faulthandler`` dump in a
log), :func:`traceback_frames` (the frames of a ``Traceback (most recent call last)`` text),
and :func:`where_waiting`, which turns a stack into one line: the call into torch the rank
was blocked in, and the line of its own code that made it.

What lives elsewhere: asking processes for their stacks (the stack signal,
:func:`accelkit.procs.request_stacks`) and registering it in workers
(:func:`accelkit.dist.enable_stack_dumps`); the launch results that report them
(:mod:`accelkit.launch_result`).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: The signal a worker answers with every thread's Python stack (``faulthandler``); the
#: launcher sends it before killing a stuck launch.  None where the OS has no SIGUSR1.
STACK_SIGNAL = getattr(signal, "SIGUSR1", None)


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


__all__ = [
    "STACK_SIGNAL",
    "Frame",
    "last_stack",
    "traceback_frames",
    "where_waiting",
]
