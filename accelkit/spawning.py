"""``torch.multiprocessing`` groups from a notebook: spawn, time limit, real error, clean-up.

This module owns :func:`spawn_group`: ``fn(rank, *args)`` in spawned children tagged with a
launch marker, their stderr captured in a file (not the terminal that runs Jupyter), a time
limit, and every child killed afterwards; :class:`SpawnRun` says how it ended.

What lives elsewhere: the launch marker and killing process trees (:mod:`accelkit.procs`);
the notebook-facing launcher that raises with the children's error
(:func:`accelkit.launch.spawn`).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import resource_tracker
from typing import Any
from unittest import mock

from accelkit.procs import MARKER_ENV, kill_all, new_launch_id, process


@dataclass
class SpawnRun:
    """How a ``torch.multiprocessing`` group ended: timeout, torch's exception, their stderr."""

    timed_out: bool = False
    error: BaseException | None = None
    stderr: str = ""


def _start_spawn(fn: Callable[..., Any], args: Sequence[Any], nprocs: int, launch_id: str,
                 err_fd: int, sys_path: list[str]) -> Any:
    """``start_processes`` with the marker, ``sys_path`` and fd 2 on ``err_fd`` meanwhile."""
    import torch.multiprocessing as mp  # imports torch: only when spawning

    saved = os.dup(2)
    try:
        with mock.patch.dict(os.environ, {MARKER_ENV: launch_id}), \
                mock.patch.object(sys, "path", sys_path):
            os.dup2(err_fd, 2)  # children inherit fd 2 at start; restored right after
            return mp.start_processes(fn, args=tuple(args), nprocs=nprocs, join=False,
                                      start_method="spawn")
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _join_spawn(ctx: Any, timeout_s: float) -> tuple[bool, BaseException | None]:
    """Wait for the children; return (timed out, the exception torch raised or None)."""
    deadline = time.perf_counter() + timeout_s
    try:
        while not ctx.join(timeout=0.1):
            if time.perf_counter() > deadline:
                break
    except Exception as exc:  # the caller reports it, with the children's stderr
        return False, exc
    timed_out = time.perf_counter() > deadline and any(p.is_alive() for p in ctx.processes)
    return timed_out, None


def spawn_group(fn: Callable[..., Any], args: Sequence[Any] = (), *, nprocs: int,
                timeout_s: float, sys_path: list[str] | None = None) -> SpawnRun:
    """Run ``fn(rank, *args)`` in ``nprocs`` spawned processes; kill them all at the end.

    ``torch.multiprocessing.start_processes`` (start method "spawn") with the children
    tagged with a new launch id, their stderr captured in a file instead of the terminal
    that runs Jupyter, and a time limit; every child (and descendant) is killed afterwards.

    Args:
        fn: a function the children can import by name.
        args: passed after the rank.
        nprocs: number of processes.
        timeout_s: seconds before the children are killed.
        sys_path: the children's ``sys.path`` (they copy the parent's at start); default:
            this process's.

    Returns:
        A :class:`SpawnRun`: ``error`` is torch's exception when a child failed (e.g.
        ``ProcessExitedException``), ``stderr`` what the children printed there.
    """
    launch_id = new_launch_id()
    # multiprocessing's resource tracker is shared by later calls: start it untagged, with
    # the real stderr, so the clean-up below never takes it for one of our children.
    resource_tracker.ensure_running()
    with tempfile.TemporaryFile() as err:
        ctx = _start_spawn(fn, args, nprocs, launch_id, err.fileno(),
                           list(sys.path) if sys_path is None else sys_path)
        timed_out, error = _join_spawn(ctx, timeout_s)
        live = [process(p.pid) for p in ctx.processes if p.is_alive()]
        kill_all([q for q in live if q is not None], launch_id, grace_s=2.0)
        err.seek(0)
        return SpawnRun(timed_out, error, err.read().decode("utf-8", "replace").strip())


__all__ = [
    "SpawnRun",
    "spawn_group",
]
