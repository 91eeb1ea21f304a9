"""Process groups: start them, stream their output, time them out, kill them.

The plumbing under :mod:`accelkit.launch`: :func:`run_group` starts :class:`Child` commands
(each in its own session, tagged ``$ACCELKIT_LAUNCH_ID``), hands every output line to a
callback on the calling thread (:class:`RankedLines` keeps them per rank), stops the rest when
one fails, and past ``timeout_s`` first asks the workers for their Python stacks
(:func:`request_stacks`: ``SIGUSR1``, registered by :func:`accelkit.dist.setup`; read back by
:func:`accelkit.scripts.last_stack`), then kills the group (:func:`kill_all`).  Also ports
(:func:`free_ports`, :func:`is_port_free`) and what a launch left alive
(:func:`leftover_processes`).
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
# A line a torchrun agent relays from a worker: "[rank3]:text" (see accelkit.launch).
_RANK_LINE = re.compile(r"^\[(?:rank|worker)(\d+)\]:(.*)$")
# glog/absl lines TensorFlow prints before its logging is configured (TF_CPP_MIN_LOG_LEVEL
# does not silence them): kept in the logs, hidden from the live stream.
QUIET_LINE = re.compile(r"^([IWE]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\]|WARNING: All log "
                        r"messages before absl::InitializeLog)")
_POLL_S = 0.05  # how often the watcher checks exit codes and the clock
_SCAN_S = 0.5  # how often it records the group's descendants
_READER_JOIN_S = 5.0  # after the clean-up, how long to wait for the last output
_STACK_WAIT_S = 2.0  # how long the dumps may take to arrive (torchrun relays them from files)


class PortInUseError(OSError):
    """A port that was asked for explicitly is already taken by another process."""


# ----------------------------------------------------------------------------- ports
def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``n`` distinct TCP ports free on ``host`` now (the OS picks them; another process
    could take one before it is bound: ``torchrun --standalone`` avoids even that race)."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            if (port := int(s.getsockname()[1])) not in ports:
                ports.append(port)
    return ports


def is_port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when ``port`` can be bound on ``host`` now (ValueError outside 1..65535)."""
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"port must be an int in 1..65535, got {port!r}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


# ----------------------------------------------------------------------------- finding, killing
def new_launch_id() -> str:
    """Return a fresh launch id (12 hex digits) to tag a group's processes with."""
    return uuid.uuid4().hex[:12]


def describe_exit(code: int | None) -> str:
    """Say how a process ended, from its exit ``code`` as ``subprocess`` reports it (negative:
    that signal; None: unknown): ``"exited 1"``, ``"was stopped by SIGTERM"``, ..."""
    if code is None:
        return "gave no exit code"
    if code < 0:
        try:
            return f"was stopped by {signal.Signals(-code).name}"
        except ValueError:
            return f"was stopped by signal {-code}"
    return f"exited {code}"


def _alive(proc: Any) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def process(pid: int) -> Any:
    """Return ``psutil.Process(pid)``, or None when it is gone."""
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _running(procs: Iterable[Any]) -> list[Any]:
    """``psutil`` handles of the ``Popen``/``multiprocessing`` processes still there."""
    return [q for q in (process(p.pid) for p in procs) if q is not None]


def _marked(launch_id: str) -> list[Any]:
    """Processes of this user whose environment carries ``MARKER_ENV=launch_id``."""
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
    """Wait until every process is dead or a zombie, without reaping any (``psutil.wait_procs``
    would reap our children, and ``Popen.returncode`` would then read 0)."""
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


def _signal(proc: Any, sig: signal.Signals) -> None:
    """Send ``sig`` to ``proc`` and to its process group when that group is not ours."""
    with contextlib.suppress(OSError):
        pgid = os.getpgid(proc.pid)
        if pgid != os.getpgrp():  # its own group (start_new_session), never ours
            os.killpg(pgid, sig)
    with contextlib.suppress(psutil.Error):
        proc.send_signal(sig)


def kill_all(procs: Sequence[Any], launch_id: str, grace_s: float) -> int:
    """SIGTERM the ``psutil.Process`` objects ``procs``, their descendants and process groups,
    and every process tagged ``launch_id`` (also those whose parent died); SIGKILL what remains
    after ``grace_s`` seconds.  Exit codes of our own children are not reaped.

    Returns:
        How many processes were still alive when the clean-up started.
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


# ----------------------------------------------------------------------------- stack dumps
def catches_signal(pid: int, sig: int) -> bool:
    """True when process ``pid`` has a handler for ``sig`` (Linux: ``SigCgt`` in /proc; False
    where /proc is missing).  A process without one would be *killed* by ``SIGUSR1``."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    m = re.search(r"^SigCgt:\s*([0-9a-fA-F]+)", status, re.M)
    if m is None:
        return False
    return bool(int(m.group(1), 16) >> (int(sig) - 1) & 1)


def request_stacks(procs: Iterable[Any], launch_id: str) -> int:
    """Send :data:`STACK_SIGNAL` to every live process that catches it among ``procs``
    (``psutil.Process``), their descendants and the processes tagged ``launch_id``.

    Returns:
        How many processes were signalled (0 where the platform has no ``SIGUSR1``).
    """
    if STACK_SIGNAL is None:
        return 0
    sent = 0
    for p in _with_descendants(list(procs) + _marked(launch_id)).values():
        if _alive(p) and catches_signal(p.pid, STACK_SIGNAL):
            with contextlib.suppress(psutil.Error):
                p.send_signal(STACK_SIGNAL)
                sent += 1
    return sent


# ----------------------------------------------------------------------------- output
class RankedLines:
    """Keep a group's output per rank and stream it with a ``[rankN]:`` prefix.

    Pass an instance as ``on_line`` to :func:`run_group`.  A child with a rank owns all its
    lines; a child without one (a torchrun agent) relays its workers' lines as
    ``[rankN]:text``, and its own unprefixed lines go to :attr:`launcher`.
    """

    def __init__(self, ranks: Sequence[int | None], *, label: str = "rank", stream: bool = True,
                 printer: Callable[[str], None] | None = None) -> None:
        """Args: ``ranks``: one per child (None: read the rank from each line's prefix);
        ``label``: the prefix word (``"rank"``, ``"worker"``); ``stream``: print lines as
        they come, with ``printer`` (default: ``print``)."""
        self.ranks = list(ranks)
        self.label = label
        self.stream = stream
        self.printer = printer or (lambda s: print(s, flush=True))
        self.lines: dict[int, list[str]] = {}
        self.launcher: list[str] = []

    def __call__(self, child: int, line: str) -> None:
        """Take one line (without its newline) printed by child number ``child``."""
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


# ----------------------------------------------------------------------------- groups
# An outer launch's variables (a kernel may itself run under a launcher): never inherited.
_LAUNCH_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                "MASTER_ADDR", "MASTER_PORT", "TF_CONFIG", "TORCHELASTIC_RUN_ID",
                "TORCHELASTIC_ERROR_FILE")


def child_env(extra: Mapping[str, Any] | None = None, threads: int | None = None) -> dict[str, str]:
    """Return the environment for a launched Python worker: this one, cleaned and completed.

    Removes an outer launch's variables (``RANK``, ``MASTER_PORT``, ``TF_CONFIG``, ...), sets
    ``PYTHONUNBUFFERED=1`` (lines arrive as printed), ``TF_CPP_MIN_LOG_LEVEL=2`` and
    ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT=5`` unless set, ``OMP_NUM_THREADS=threads`` unless None,
    on macOS ``GLOO_SOCKET_IFNAME=lo0`` unless set (the workers all run on this machine),
    then ``extra`` (values made ``str``), and puts this checkout first on ``PYTHONPATH`` so
    the workers import this ``accelkit`` even when it is not installed.
    """
    env = dict(os.environ)
    for key in _LAUNCH_VARS:
        env.pop(key, None)
    if sys.platform == "darwin":  # gloo binds where the host name resolves; a Mac's ".local"
        env.setdefault("GLOO_SOCKET_IFNAME", "lo0")  # name may not: every worker is local
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "5")
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    env.update({k: str(v) for k, v in (extra or {}).items()})
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


@dataclass
class Child:
    """One command of a group: its argument list, its full environment, and its rank (None:
    its lines carry their own ``[rankN]:`` prefix, as torchrun's do)."""

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
    """Reader thread: put every line of ``pipe`` on ``lines`` until end of file."""
    with pipe:
        for raw in iter(pipe.readline, b""):
            lines.put((child, raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r")))


def _pump(lines: queue.Queue[tuple[int, str]], on_line: Callable[[int, str], None],
          wait_s: float) -> None:
    """Hand queued lines to ``on_line``, waiting up to ``wait_s`` for the first; with
    ``wait_s > 0`` return after about ``wait_s`` even while lines keep coming (the watcher
    must still see the clock), with ``wait_s == 0`` empty the queue."""
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


def _start(children: Sequence[Child], launch_id: str, lines: queue.Queue[tuple[int, str]],
           procs: list[subprocess.Popen[bytes]], readers: list[threading.Thread]) -> None:
    for i, child in enumerate(children):
        p = subprocess.Popen(child.argv, env={**child.env, MARKER_ENV: launch_id},
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        assert p.stdout is not None
        t = threading.Thread(target=_read_lines, args=(i, p.stdout, lines), daemon=True,
                             name=f"accelkit-reader-{i}")
        t.start()
        readers.append(t)


def _watch(procs: Sequence[subprocess.Popen[bytes]], tracked: dict[int, Any], *,
           lines: queue.Queue[tuple[int, str]], on_line: Callable[[int, str], None],
           launch_id: str, deadline: float, fail_fast: bool, grace_s: float) -> bool:
    """Relay lines until every child ended (False) or the deadline passed (True)."""
    next_scan = 0.0
    while True:
        _pump(lines, on_line, _POLL_S)
        now = time.perf_counter()
        if now >= next_scan:  # remember descendants, in case their parent dies first
            next_scan = now + _SCAN_S
            tracked.update(_with_descendants(process(p.pid) for p in procs if p.poll() is None))
        codes = [p.poll() for p in procs]
        if None not in codes:
            return False
        if fail_fast and any(c not in (None, 0) for c in codes):
            kill_all(_running(p for p in procs if p.poll() is None) + list(tracked.values()),
                     launch_id, grace_s)
            continue
        if now > deadline:
            return True


def run_group(children: Sequence[Child], *, launch_id: str, timeout_s: float,
              on_line: Callable[[int, str], None], fail_fast: bool = False,
              grace_s: float = 3.0, stacks: bool = True) -> GroupRun:
    """Start ``children``, relay their output, enforce the time limit, clean up everything.

    Each child starts in a new session with ``$ACCELKIT_LAUNCH_ID=launch_id`` (see
    :func:`new_launch_id`) added to its environment, stdin closed, stderr merged into stdout;
    ``on_line(child_index, line)`` (e.g. a :class:`RankedLines`) gets each line on this thread.
    With ``fail_fast`` a child exiting non-zero stops the others.  Past ``timeout_s`` seconds,
    with ``stacks``, every process that registered the stack signal gets it
    (:func:`request_stacks`) and its dump is relayed for up to 2 s, then the group is killed
    (``grace_s``: seconds between SIGTERM and SIGKILL).  Whatever the outcome (also
    KeyboardInterrupt), every process of the group is killed before returning.

    Returns:
        A :class:`GroupRun`.
    """
    start = time.perf_counter()
    lines: queue.Queue[tuple[int, str]] = queue.Queue()
    procs: list[subprocess.Popen[bytes]] = []
    readers: list[threading.Thread] = []
    tracked: dict[int, Any] = {}
    run = GroupRun()
    try:
        _start(children, launch_id, lines, procs, readers)
        run.timed_out = _watch(procs, tracked, lines=lines, on_line=on_line,
                               launch_id=launch_id, deadline=start + timeout_s,
                               fail_fast=fail_fast, grace_s=grace_s)
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
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILLed above
                p.kill()
        run.returncodes = [p.returncode for p in procs]
        run.wall_s = time.perf_counter() - start
    return run


__all__ = ["MARKER_ENV", "QUIET_LINE", "STACK_SIGNAL", "Child", "GroupRun", "PortInUseError",
           "RankedLines", "catches_signal", "child_env", "describe_exit", "free_ports",
           "is_port_free", "kill_all", "leftover_processes", "new_launch_id", "process",
           "request_stacks", "run_group"]
