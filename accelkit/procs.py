"""Process groups under :mod:`accelkit.launch`: start, stream, time out, kill.

:func:`run_group` starts :class:`Child` commands (each in its own session, tagged
``$ACCELKIT_LAUNCH_ID``), hands each output line to a callback (:class:`RankedLines`), stops
the rest when one fails, and past its time limit asks the workers for their Python stacks
(:func:`request_stacks`, ``SIGUSR1``) before killing the group (:func:`kill_all`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

from accelkit.dist import STACK_SIGNAL

#: Environment variable set on every process a launch starts (its value: the launch id).
MARKER_ENV = "ACCELKIT_LAUNCH_ID"
# A line a torchrun agent relays from a worker: "[rank3]:text".
_RANK_LINE = re.compile(r"^\[(?:rank|worker)(\d+)\]:(.*)$")
# glog/absl lines TensorFlow prints whatever TF_CPP_MIN_LOG_LEVEL: logged, not streamed.
QUIET_LINE = re.compile(r"^([IWE]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\]|WARNING: All log "
                        r"messages before absl::InitializeLog)")
_POLL_S = 0.05  # how often the watcher checks exit codes and the clock
_SCAN_S = 0.5  # how often it records the group's descendants
_READER_JOIN_S = 5.0  # after the clean-up, how long to wait for the last output
_STACK_WAIT_S = 2.0  # how long the dumps may take to arrive (torchrun relays them from files)


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``n`` distinct TCP ports free on ``host`` now (picked by the OS)."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            if (port := int(s.getsockname()[1])) not in ports:
                ports.append(port)
    return ports


def new_launch_id() -> str:
    """Return a fresh launch id (12 hex digits) to tag a group's processes with."""
    return uuid.uuid4().hex[:12]


def describe_exit(code: int | None) -> str:
    """Say how a process ended from its ``subprocess`` exit ``code``: ``"exited 1"``, ``"was
    stopped by SIGTERM"`` (negative: that signal), ``"gave no exit code"`` (None)."""
    if code is None:
        return "gave no exit code"
    if code < 0:
        try:
            return f"was stopped by {signal.Signals(-code).name}"
        except ValueError:
            return f"was stopped by signal {-code}"
    return f"exited {code}"


def _alive(proc: Any) -> bool:
    with contextlib.suppress(psutil.Error):
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    return False


def process(pid: int) -> Any:
    """Return ``psutil.Process(pid)``, or None when it is gone."""
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid)
    return None


def _running(procs: Iterable[Any]) -> list[Any]:  # psutil handles of those still there
    return [q for q in (process(p.pid) for p in procs) if q is not None]


def _marked(launch_id: str) -> list[Any]:  # processes tagged MARKER_ENV=launch_id
    found = []
    for p in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error, OSError):
            if p.pid != os.getpid() and p.environ().get(MARKER_ENV) == launch_id:
                found.append(p)
    return found


def leftover_processes(launch_id: str) -> list[int]:
    """Return the pids of live processes started by the launch ``launch_id`` (zombies excluded)."""
    return [p.pid for p in _marked(launch_id) if _alive(p)]


def _wait_dead(procs: Sequence[Any], timeout_s: float) -> None:
    """Wait until every process is dead or a zombie, reaping none (``Popen.returncode``
    would read 0 after ``psutil.wait_procs`` reaped it)."""
    deadline = time.perf_counter() + timeout_s
    while any(_alive(p) for p in procs) and time.perf_counter() < deadline:
        time.sleep(0.05)


def _with_descendants(procs: Iterable[Any]) -> dict[int, Any]:
    found: dict[int, Any] = {}
    for p in procs:
        if _alive(p):
            found[p.pid] = p
            with contextlib.suppress(psutil.Error):
                found.update({c.pid: c for c in p.children(recursive=True)})
    return found


def _signal(proc: Any, sig: signal.Signals) -> None:  # proc and its group (never ours)
    with contextlib.suppress(OSError):
        pgid = os.getpgid(proc.pid)
        if pgid != os.getpgrp():  # its own group (start_new_session), never ours
            os.killpg(pgid, sig)
    with contextlib.suppress(psutil.Error):
        proc.send_signal(sig)


def kill_all(procs: Sequence[Any], launch_id: str, grace_s: float) -> int:
    """SIGTERM the ``psutil.Process`` objects ``procs``, their descendants and process groups,
    and every process tagged ``launch_id``; SIGKILL what remains after ``grace_s`` seconds.
    Our own children are not reaped.  Returns how many were alive when the clean-up started.
    """
    targets = _with_descendants(list(procs) + _marked(launch_id))
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 3.0)):
        live = [p for p in targets.values() if _alive(p)]
        if not live:
            break
        for p in live:
            _signal(p, sig)
        _wait_dead(live, wait_s)
    # Anything that appeared meanwhile (a worker spawned during shutdown) goes too.
    for p in _marked(launch_id):
        if _alive(p):
            _signal(p, signal.SIGKILL)
    return len(targets)


def catches_signal(pid: int, sig: int) -> bool:
    """True when process ``pid`` has a handler for ``sig`` (``SigCgt`` in Linux's /proc; False
    without /proc): one without would be *killed* by ``SIGUSR1``."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    m = re.search(r"^SigCgt:\s*([0-9a-fA-F]+)", status, re.M)
    return m is not None and bool(int(m.group(1), 16) >> (int(sig) - 1) & 1)


def request_stacks(procs: Iterable[Any], launch_id: str) -> int:
    """Send :data:`STACK_SIGNAL` to each process that catches it among ``procs``
    (``psutil.Process``), their descendants and those tagged ``launch_id``.  Returns how many
    were signalled (0 where the platform has no ``SIGUSR1``)."""
    if STACK_SIGNAL is None:
        return 0
    sent = 0
    for p in _with_descendants(list(procs) + _marked(launch_id)).values():
        if _alive(p) and catches_signal(p.pid, STACK_SIGNAL):
            with contextlib.suppress(psutil.Error):
                p.send_signal(STACK_SIGNAL)
                sent += 1
    return sent


class RankedLines:
    """An ``on_line`` for :func:`run_group` that keeps output per rank and streams it with a
    ``[rankN]:`` prefix.  A child without a rank (a torchrun agent) relays ``[rankN]:text``
    lines; its own unprefixed lines go to :attr:`launcher`."""

    def __init__(self, ranks: Sequence[int | None], *, label: str = "rank", stream: bool = True,
                 printer: Callable[[str], None] | None = None) -> None:
        """``ranks``: one per child (None: from each line's prefix); ``label``: the prefix word;
        ``stream``: print lines as they come with ``printer`` (default ``print``)."""
        self.ranks, self.label, self.stream = list(ranks), label, stream
        self.printer = printer or (lambda s: print(s, flush=True))
        self.lines: dict[int, list[str]] = {}
        self.launcher: list[str] = []

    def __call__(self, child: int, line: str) -> None:
        rank = self.ranks[child]
        if rank is None:
            m = _RANK_LINE.match(line)
            if not m:
                self.launcher.append(line)
                return
            rank, line = int(m.group(1)), m.group(2)
            dup = f"[rank{rank}]:"
            while line.startswith(dup):  # torch prefixes its own exception lines too
                line = line[len(dup):]
                line = line[1:] if line.startswith(" ") else line
        self.lines.setdefault(rank, []).append(line)
        if self.stream and not QUIET_LINE.match(line):
            self.printer(f"[{self.label}{rank}]: {line}")

    def logs(self) -> dict[int, str]:
        """Everything each rank printed, prefix removed, by rank."""
        return {r: "\n".join(v) + "\n" for r, v in sorted(self.lines.items())}

    def launcher_log(self) -> str:
        """What the children printed without a rank prefix (torchrun's own messages)."""
        return "\n".join(self.launcher) + ("\n" if self.launcher else "")


# An outer launch's variables (a kernel may itself run under a launcher): never inherited.
_LAUNCH_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                "MASTER_ADDR", "MASTER_PORT", "TF_CONFIG", "TORCHELASTIC_RUN_ID",
                "TORCHELASTIC_ERROR_FILE")


def child_env(extra: Mapping[str, Any] | None = None, threads: int | None = None) -> dict[str, str]:
    """Return this environment for a launched worker: an outer launch's variables (``RANK``,
    ``TF_CONFIG``, ...) removed; ``PYTHONUNBUFFERED=1``; unless set ``TF_CPP_MIN_LOG_LEVEL=2``,
    ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT=5`` and on macOS ``GLOO_SOCKET_IFNAME=lo0``;
    ``OMP_NUM_THREADS=threads`` unless None; ``extra`` (as ``str``); this checkout first on
    ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCH_VARS}
    if sys.platform == "darwin":  # gloo binds where the host name resolves; a Mac's ".local"
        env.setdefault("GLOO_SOCKET_IFNAME", "lo0")  # name may not: every worker is local
    full: dict[str, Any] = {"TF_CPP_MIN_LOG_LEVEL": "2", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "5",
                            **env, "PYTHONUNBUFFERED": "1"}
    full.update({} if threads is None else {"OMP_NUM_THREADS": threads}, **(extra or {}))
    env = {k: str(v) for k, v in full.items()}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


@dataclass
class Child:
    """One command of a group: argv, full environment, rank (None: lines carry ``[rankN]:``)."""

    argv: list[str]
    env: dict[str, str]
    rank: int | None = None


@dataclass
class GroupRun:
    """How a group ended: exit code per child (negative: signal), timeout, clean-up, time."""

    returncodes: list[int | None] = field(default_factory=list)
    timed_out: bool = False
    killed: int = 0
    wall_s: float = 0.0
    stacks_requested: int = 0


def _read_lines(child: int, pipe: IO[bytes], lines: queue.Queue[tuple[int, str]]) -> None:
    with pipe:
        for raw in iter(pipe.readline, b""):
            lines.put((child, raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r")))


def _pump(lines: queue.Queue[tuple[int, str]], on_line: Callable[[int, str], None],
          wait_s: float) -> None:
    """Hand queued lines to ``on_line`` for about ``wait_s`` (0: until the queue is empty)."""
    stop = time.perf_counter() + wait_s
    try:
        item = lines.get(timeout=wait_s) if wait_s > 0 else lines.get_nowait()
        while True:
            on_line(*item)
            if wait_s > 0 and time.perf_counter() > stop:
                return
            item = lines.get_nowait()
    except queue.Empty:
        pass


def run_group(children: Sequence[Child], *, launch_id: str, timeout_s: float,
              on_line: Callable[[int, str], None], fail_fast: bool = False,
              grace_s: float = 3.0, stacks: bool = True) -> GroupRun:
    """Start ``children`` (new sessions, ``$ACCELKIT_LAUNCH_ID=launch_id``, stdin closed,
    stderr into stdout), pass each line to ``on_line(child_index, line)`` on this thread, and
    kill every process of the group before returning, whatever happens.  ``fail_fast``: a
    child exiting non-zero stops the others.  Past ``timeout_s`` seconds, with ``stacks``, the
    processes that registered the stack signal get it and their dumps are relayed for 2 s
    before the kill (``grace_s``: seconds from SIGTERM to SIGKILL).  Returns a :class:`GroupRun`.
    """
    start = time.perf_counter()
    lines: queue.Queue[tuple[int, str]] = queue.Queue()
    procs: list[subprocess.Popen[bytes]] = []
    readers: list[threading.Thread] = []
    tracked: dict[int, Any] = {}
    run = GroupRun()
    try:
        for i, child in enumerate(children):
            p = subprocess.Popen(child.argv, env={**child.env, MARKER_ENV: launch_id},
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(p)
            readers.append(threading.Thread(target=_read_lines, args=(i, p.stdout, lines),
                                            daemon=True))
            readers[-1].start()
        next_scan = 0.0
        while not run.timed_out:  # relay lines until every child ended or the time is up
            _pump(lines, on_line, _POLL_S)
            now = time.perf_counter()
            if now >= next_scan:  # remember descendants, in case their parent dies first
                next_scan = now + _SCAN_S
                tracked.update(_with_descendants(process(p.pid) for p in procs
                                                 if p.poll() is None))
            codes = [p.poll() for p in procs]
            if None not in codes:
                break
            if fail_fast and any(c not in (None, 0) for c in codes):
                kill_all(_running(p for p in procs if p.poll() is None)
                         + list(tracked.values()), launch_id, grace_s)
                continue
            run.timed_out = now > start + timeout_s
        if run.timed_out and stacks:
            run.stacks_requested = request_stacks(_running(procs) + list(tracked.values()),
                                                  launch_id)
            if run.stacks_requested:
                stop = time.perf_counter() + _STACK_WAIT_S
                while time.perf_counter() < stop:
                    _pump(lines, on_line, _POLL_S)
    finally:
        run.killed = kill_all(_running(procs) + list(tracked.values()), launch_id, grace_s)
        join_until = time.perf_counter() + _READER_JOIN_S
        for t in readers:  # every writer is dead: the pipes reach end of file
            t.join(timeout=max(0.0, join_until - time.perf_counter()))
        _pump(lines, on_line, 0)
        run.returncodes = [p.wait(timeout=10) for p in procs]  # SIGKILLed above at the latest
        run.wall_s = time.perf_counter() - start
    return run


__all__ = ["MARKER_ENV", "QUIET_LINE", "STACK_SIGNAL", "Child", "GroupRun", "RankedLines",
           "catches_signal", "child_env", "describe_exit", "free_ports", "kill_all",
           "leftover_processes", "new_launch_id", "process", "request_stacks", "run_group"]
