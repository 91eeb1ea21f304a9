"""Start distributed workers from a notebook: ``torchrun`` for PyTorch, ``TF_CONFIG`` for TF.

This module runs in the notebook (the workers use :mod:`accelkit.dist`).  It starts real
launchers as child processes and watches them from the notebook's main thread:

* :func:`torchrun` runs ``torchrun --standalone --nproc-per-node=N script.py ...`` (the real
  launcher, with its c10d rendezvous on a port the OS picks), or ``nnodes`` torchrun agents
  on loopback with ``--nnodes --rdzv-backend=c10d`` to rehearse a multi-node command;
* :func:`tf_workers` runs N Python workers, each with its own ``TF_CONFIG``;
* :func:`python` runs one plain Python process (a single-process baseline);
* :func:`spawn` wraps ``torch.multiprocessing.start_processes`` with a timeout, so a function
  that cannot be pickled into the workers fails with its real error instead of hanging.

Every line a worker prints is streamed into the notebook with a ``[rankN]:`` (or
``[workerN]:``) prefix and kept per rank in the :class:`LaunchResult`.  When a worker fails,
the others are stopped and the failing worker's own traceback is shown first; a run that
passes ``timeout_s`` is killed with every process it started.  Every process is started in
a new session and tagged with an environment variable, so the clean-up finds and kills all
of them (also those whose parent died first): no orphan is left behind.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import selectors
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Environment variable set on every process a launch starts (its value: the launch id).
MARKER_ENV = "ACCELKIT_LAUNCH_ID"
#: torchrun's per-line prefix template; ``${rank}`` is the global rank.
PREFIX_TEMPLATE = "[rank${rank}]:"
_RANK_LINE = re.compile(r"^\[(?:rank|worker)(\d+)\]:(.*)$")
# glog/absl lines ("I0000 00:00:17.. 123 file.cc:12] ...") that TensorFlow prints before its
# logging is configured; TF_CPP_MIN_LOG_LEVEL does not silence them.  Kept in the logs,
# hidden from the live stream.
_ABSL_LINE = re.compile(r"^([IWE]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\]|WARNING: All log "
                        r"messages before absl::InitializeLog)")
_POLL_S = 0.05


class LaunchError(RuntimeError):
    """A launched group failed or timed out; ``.result`` holds the :class:`LaunchResult`."""

    def __init__(self, message: str, result: LaunchResult) -> None:
        super().__init__(message)
        self.result = result


class PortInUseError(OSError):
    """A port that was asked for explicitly is already taken by another process."""


@dataclass
class LaunchResult:
    """What a launch did: exit codes, each rank's output, and how it ended.

    Attributes:
        kind: ``"torchrun"``, ``"tf"``, ``"python"``.
        commands: the command lines started (one per torchrun agent / TF worker).
        exit_codes: exit code per global rank (negative: killed by that signal; missing: the
            rank never reported one, e.g. the run timed out first).
        logs: everything each rank printed (stdout and stderr), prefix removed.
        launcher_log: what the launchers themselves printed (torchrun's own messages).
        returncodes: the exit code of each started command.
        wall_s: seconds from start to the end of clean-up.
        timeout_s: the time limit, seconds.
        timed_out: the run hit ``timeout_s`` and was killed.
        failed_rank: the rank that failed first (torchrun's "root cause"), or None.
        log_dir: the folder with torchrun's per-rank log files, or None.
        killed: how many leftover processes the clean-up had to kill.
        launch_id: the tag (``$ACCELKIT_LAUNCH_ID``) on every process this launch started;
            :func:`leftover_processes` takes it.
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
    log_dir: Path | None = None
    killed: int = 0
    launch_id: str = ""

    @property
    def ok(self) -> bool:
        """True when every started command and every rank exited with status 0."""
        return (not self.timed_out and all(rc == 0 for rc in self.returncodes)
                and all(c == 0 for c in self.exit_codes.values()))

    @property
    def command(self) -> str:
        """The first command line, shell-quoted (copy-pasteable)."""
        return shlex.join(self.commands[0]) if self.commands else ""

    def summary(self) -> str:
        """Explain how the run ended; a failing rank's own traceback comes first.

        Returns:
            ``"ok: ..."`` for a clean run; otherwise the failing rank, its output tail, the
            other ranks' exit codes, and the launcher's own message when no rank explains it.
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
            code = self.exit_codes.get(rank)
            lines.append(f"rank {rank} failed first (exit code {code}); its own output:")
            own = "\n".join(s for s in self.logs.get(rank, "").splitlines()
                            if not _ABSL_LINE.match(s))
            lines.append(_tail(own, 40) or "(it printed nothing)")
        others = {r: c for r, c in sorted(self.exit_codes.items()) if r != rank}
        if others:
            lines.append("other ranks: " + ", ".join(
                f"rank {r} {_describe_code(c)}" for r, c in others.items()))
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


# ----------------------------------------------------------------------------- ports
def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` right now (the OS picks it).

    Another process could take it before you bind it; launchers that can choose their own
    port (``torchrun --standalone``) avoid even that race.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def is_port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when ``port`` can be bound on ``host`` now.

    Raises:
        ValueError: for a port outside 1..65535.
    """
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"port must be an int in 1..65535, got {port!r}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


# ----------------------------------------------------------------------------- processes
def _describe_code(code: int | None) -> str:
    if code is None:
        return "gave no exit code"
    if code < 0:
        try:
            return f"was stopped by {signal.Signals(-code).name}"
        except ValueError:
            return f"was stopped by signal {-code}"
    return f"exited {code}"


def _tail(text: str, n: int) -> str:
    lines = text.rstrip("\n").splitlines()
    return "\n".join(lines[-n:])


def _alive(proc: Any) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _ps(pid: int) -> Any:
    """``psutil.Process(pid)``, or None when it is gone."""
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _marked(launch_id: str) -> list[Any]:
    """Processes of this user whose environment carries ``MARKER_ENV=launch_id``."""
    import psutil

    found = []
    me = os.getpid()
    for p in psutil.process_iter(["pid"]):
        if p.pid == me:
            continue
        try:
            if p.environ().get(MARKER_ENV) == launch_id:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def leftover_processes(launch_id: str) -> list[int]:
    """Return the pids of live processes started by the launch ``launch_id`` (zombies excluded).

    Used by tests and notebooks to check that a launch left nothing behind.
    """
    return [p.pid for p in _marked(launch_id) if _alive(p)]


def _wait_dead(procs: Sequence[Any], timeout_s: float) -> None:
    """Wait until every process is dead or a zombie, without reaping any.

    (``psutil.wait_procs`` would reap our own children and their exit codes with them:
    ``Popen.returncode`` would then read 0.)
    """
    deadline = time.perf_counter() + timeout_s
    while any(_alive(p) for p in procs) and time.perf_counter() < deadline:
        time.sleep(0.05)


def _kill_all(procs: Sequence[Any], launch_id: str, grace_s: float) -> int:
    """SIGTERM every process (and its process group), wait ``grace_s``, SIGKILL the rest.

    Returns:
        How many processes were still alive when the clean-up started.
    """
    import psutil

    targets: dict[int, Any] = {}
    for p in list(procs) + _marked(launch_id):
        if _alive(p):
            targets[p.pid] = p
            try:
                for c in p.children(recursive=True):
                    targets[c.pid] = c
            except psutil.Error:
                pass
    count = len(targets)
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 3.0)):
        live = [p for p in targets.values() if _alive(p)]
        if not live:
            break
        for p in live:
            try:
                pgid = os.getpgid(p.pid)
                if pgid != os.getpgrp():  # its own group (start_new_session), never ours
                    os.killpg(pgid, sig)
            except OSError:
                pass
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        _wait_dead(live, wait_s)
    # Anything that appeared meanwhile (a worker spawned during shutdown) goes too.
    for p in _marked(launch_id):
        if _alive(p):
            try:
                p.kill()
            except psutil.Error:
                pass
    return count


@dataclass
class _Spec:
    argv: list[str]
    env: dict[str, str]
    rank: int | None  # None: lines carry their own [rankN]: prefix (torchrun)


def _child_env(extra: Mapping[str, str] | None, launch_id: str, threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    # A notebook kernel may carry variables of an outer launch; workers must not inherit them.
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                "MASTER_ADDR", "MASTER_PORT", "TF_CONFIG", "TORCHELASTIC_RUN_ID"):
        env.pop(key, None)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "5")
    env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = PREFIX_TEMPLATE
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    env.update({k: str(v) for k, v in (extra or {}).items()})
    env[MARKER_ENV] = launch_id
    # The workers import accelkit; make this checkout importable even when not installed.
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _run_group(kind: str, specs: list[_Spec], *, timeout_s: float, stream: bool,
               launch_id: str, fail_fast: bool, grace_s: float = 3.0,
               printer: Callable[[str], None] | None = None) -> LaunchResult:
    """Start ``specs``, stream their output, enforce the timeout, clean up everything."""
    import psutil

    out = printer or (lambda s: print(s, flush=True))
    result = LaunchResult(kind, [s.argv for s in specs], timeout_s=timeout_s,
                          launch_id=launch_id)
    logs: dict[int, list[str]] = {}
    launcher: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []
    tracked: dict[int, Any] = {}
    sel = selectors.DefaultSelector()
    buffers: dict[int, bytes] = {}
    start = time.perf_counter()

    def handle(line: str, spec: _Spec) -> None:
        if spec.rank is not None:
            rank, text = spec.rank, line
        else:
            m = _RANK_LINE.match(line)
            if not m:
                launcher.append(line)
                return
            rank, text = int(m.group(1)), m.group(2)
            dup = f"[rank{rank}]:"
            while text.startswith(dup):  # torch prefixes its own exception lines too
                text = text[len(dup):]
                text = text[1:] if text.startswith(" ") else text
        logs.setdefault(rank, []).append(text)
        if stream and not _ABSL_LINE.match(text):
            out(f"[{'worker' if kind == 'tf' else 'rank'}{rank}]: {text}")

    def drain(fd: int, spec: _Spec, final: bool = False) -> bool:
        try:
            data = os.read(fd, 65536)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            data = b""
        buf = buffers.get(fd, b"") + data
        *lines, rest = buf.split(b"\n")
        buffers[fd] = rest
        for raw in lines:
            handle(raw.decode("utf-8", "replace").rstrip("\r"), spec)
        if not data:
            if rest:
                handle(rest.decode("utf-8", "replace"), spec)
                buffers[fd] = b""
            return False
        return True

    try:
        for spec in specs:
            p = subprocess.Popen(spec.argv, env=spec.env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            procs.append(p)
            assert p.stdout is not None
            os.set_blocking(p.stdout.fileno(), False)
            sel.register(p.stdout.fileno(), selectors.EVENT_READ, spec)
        next_scan = 0.0
        ended_at: float | None = None
        while True:
            for key, _ in sel.select(timeout=_POLL_S):
                if not drain(key.fd, key.data):
                    sel.unregister(key.fd)
            now = time.perf_counter()
            if now >= next_scan:  # remember descendants, in case their parent dies first
                next_scan = now + 0.5
                for p in procs:
                    try:
                        for c in psutil.Process(p.pid).children(recursive=True):
                            tracked[c.pid] = c
                    except psutil.Error:
                        pass
            codes = [p.poll() for p in procs]
            if fail_fast and any(c not in (None, 0) for c in codes) and None in codes:
                running = [_ps(p.pid) for p in procs if p.poll() is None]
                _kill_all([q for q in running if q is not None] + list(tracked.values()),
                          launch_id, grace_s)
                continue
            if None not in codes:
                ended_at = ended_at or now
                if not sel.get_map() or now - ended_at > 1.0:
                    break
            if now - start > timeout_s:
                result.timed_out = True
                break
    except KeyboardInterrupt:
        launcher.append("interrupted by the user (KeyboardInterrupt)")
        result.timed_out = False
        raise
    finally:
        live = [q for q in (_ps(p.pid) for p in procs) if q is not None]
        result.killed = _kill_all(live + list(tracked.values()), launch_id, grace_s)
        for key in list(sel.get_map().values()):
            while drain(key.fd, key.data, final=True):
                pass
            sel.unregister(key.fd)
        sel.close()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILLed above
                p.kill()
            if p.stdout:
                p.stdout.close()
        result.returncodes = [p.returncode for p in procs]
        result.logs = {r: "\n".join(v) + "\n" for r, v in sorted(logs.items())}
        result.launcher_log = "\n".join(launcher) + ("\n" if launcher else "")
        result.wall_s = time.perf_counter() - start
    return result


# ----------------------------------------------------------------------------- torchrun
_FAILURE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


def _parse_torchrun_failures(text: str) -> tuple[dict[int, int], int | None]:
    """Read torchrun's ``ChildFailedError`` report: exit code per rank and the root cause."""
    codes = {int(r): int(c) for r, c in _FAILURE.findall(text)}
    root = None
    if "Root Cause" in text:
        m = _FAILURE.search(text.split("Root Cause", 1)[1])
        root = int(m.group(1)) if m else None
    return codes, root


def torchrun_command(script: str | os.PathLike[str], args: Sequence[str] = (), *,
                     nproc_per_node: int = 2, nnodes: int = 1,
                     rdzv_endpoint: str | None = None, rdzv_id: str = "accelkit",
                     log_dir: str | os.PathLike[str] | None = None,
                     python: str | None = None, as_torchrun: bool = False) -> list[str]:
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
        log_dir: add ``--tee=3 --log-dir=...`` so each rank's output is also written to files.
        python: the interpreter; default: this one (``python -m torch.distributed.run`` is
            what the ``torchrun`` entry point runs).
        as_torchrun: start the command with ``torchrun`` instead (to print for a cluster).

    Returns:
        The argument list for ``subprocess``; ``shlex.join`` it to print.

    Raises:
        ValueError: for ``nproc_per_node < 1``, ``nnodes < 1`` or a missing endpoint.
    """
    if not isinstance(nproc_per_node, int) or nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be an int >= 1, got {nproc_per_node!r}")
    if not isinstance(nnodes, int) or nnodes < 1:
        raise ValueError(f"nnodes must be an int >= 1, got {nnodes!r}")
    cmd = ["torchrun"] if as_torchrun else [python or sys.executable, "-m",
                                             "torch.distributed.run"]
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


def _check_script(script: str | os.PathLike[str]) -> Path:
    path = Path(script)
    if not path.is_file():
        raise FileNotFoundError(f"worker script {path} does not exist (see worker_script())")
    return path.resolve()


def torchrun(script: str | os.PathLike[str], args: Sequence[str] = (), *, nproc: int = 2,
             nnodes: int = 1, port: int | None = None, timeout_s: float = 120,
             threads: int | None = 1, env: Mapping[str, str] | None = None,
             stream: bool = True, check: bool = True) -> LaunchResult:
    """Run ``script`` under the real ``torchrun`` and stream each rank's output here.

    With ``nnodes == 1``: ``torchrun --standalone --nproc-per-node=nproc`` (its rendezvous
    picks a free port every time, so re-running a cell while an old group lingers never
    meets "address already in use").  With ``nnodes > 1``: ``nnodes`` torchrun agents on this
    machine, each with the multi-node command (``--rdzv-backend=c10d`` on 127.0.0.1), i.e.
    the command you would run once per node of a cluster.

    torchrun itself stops the other workers when one fails; this function then shows the
    failing rank's own traceback first.  Past ``timeout_s`` everything is killed.

    Args:
        script: the worker script (e.g. ``worker_script("ddp_train.py")``).
        args: its command-line arguments.
        nproc: processes per node, >= 1.
        nnodes: simulated nodes on loopback, >= 1.
        port: rendezvous port for ``nnodes > 1`` (default: a free one).
        timeout_s: seconds before the whole group is killed, > 0.
        threads: ``OMP_NUM_THREADS`` per worker (torchrun's default is 1); None: inherit.
        env: extra environment variables for the workers.
        stream: print the workers' lines as they come.
        check: raise :class:`LaunchError` when the run failed or timed out.

    Returns:
        A :class:`LaunchResult` (exit codes and logs per rank).

    Raises:
        ValueError: for bad ``nproc``/``nnodes``/``timeout_s``/``threads``.
        FileNotFoundError: when ``script`` does not exist.
        PortInUseError: when an explicit ``port`` is taken (pass ``port=None``).
        LaunchError: when ``check`` and a rank failed or the run timed out.
    """
    from accelkit import config

    path = _check_script(script)
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be an int >= 1 or None, got {threads!r}")
    if port is not None and not is_port_free(port):
        raise PortInUseError(
            f"port {port} on 127.0.0.1 is already in use (a lingering run or another program); "
            "pass port=None to let the launcher pick a free one")
    launch_id = uuid.uuid4().hex[:12]
    log_root = config.scratch_dir(f"launch/{time.strftime('%Y%m%d-%H%M%S')}-{launch_id}")
    endpoint = None
    if nnodes > 1:
        endpoint = f"127.0.0.1:{port or free_port()}"
    specs = []
    for _ in range(nnodes):  # the same command on every "node"
        cmd = torchrun_command(path, args, nproc_per_node=nproc, nnodes=nnodes,
                               rdzv_endpoint=endpoint, rdzv_id=launch_id, log_dir=log_root)
        specs.append(_Spec(cmd, _child_env(env, launch_id, threads), None))
    result = _run_group("torchrun", specs, timeout_s=timeout_s, stream=stream,
                        launch_id=launch_id, fail_fast=nnodes > 1)
    result.log_dir = log_root
    codes, root = _parse_torchrun_failures(result.launcher_log)
    world = nproc * nnodes
    if all(rc == 0 for rc in result.returncodes) and not result.timed_out:
        codes = {r: 0 for r in range(world)}
    result.exit_codes = dict(sorted(codes.items()))
    result.failed_rank = None if result.timed_out else root
    if root is not None and not result.logs.get(root):
        result.logs[root] = _read_rank_log(log_root, root, nproc)
    if not result.ok and stream and not check:  # with check, the LaunchError says it
        print(result.summary(), flush=True)
    return result.check() if check else result


def _read_rank_log(log_root: Path, rank: int, nproc: int) -> str:
    """Fallback: read a rank's stderr/stdout files from torchrun's ``--log-dir``."""
    local = rank % nproc
    parts = []
    for f in sorted(log_root.glob(f"*/attempt_*/{local}/std*.log")):
        parts.append(f.read_text(encoding="utf-8", errors="replace"))
    return "".join(parts)


# ----------------------------------------------------------------------------- TF / python
def tf_config(n_workers: int, index: int, ports: Sequence[int], host: str = "localhost") -> str:
    """Return the ``TF_CONFIG`` JSON for worker ``index`` of a cluster of ``n_workers``.

    Format (tf.distribute docs, "Multi-worker training with Keras"):
    ``{"cluster": {"worker": ["localhost:12345", ...]}, "task": {"type": "worker", "index": i}}``.

    Raises:
        ValueError: when ``index`` is out of range or ``ports`` has the wrong length.
    """
    if len(ports) != n_workers:
        raise ValueError(f"need {n_workers} ports, got {len(ports)}")
    if not 0 <= index < n_workers:
        raise ValueError(f"index must be in 0..{n_workers - 1}, got {index}")
    return json.dumps({"cluster": {"worker": [f"{host}:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}})


def tf_workers(script: str | os.PathLike[str], args: Sequence[str] = (), *, n: int = 2,
               timeout_s: float = 180, threads: int | None = 1,
               env: Mapping[str, str] | None = None, stream: bool = True,
               check: bool = True) -> LaunchResult:
    """Run ``n`` TensorFlow workers of ``script``, each with its own ``TF_CONFIG``.

    Each worker gets a free port on localhost; ``MultiWorkerMirroredStrategy`` in the script
    reads ``TF_CONFIG`` to find the others.  GPUs are hidden (``CUDA_VISIBLE_DEVICES=-1``)
    so the workers do not fight over one device.  When a worker fails the others are
    stopped at once (they would wait for it forever).

    Args:
        script: the worker script.
        args: its arguments.
        n: number of workers, >= 1.
        timeout_s, threads, env, stream, check: as in :func:`torchrun`.

    Returns:
        A :class:`LaunchResult` with ``exit_codes``/``logs`` per worker index.

    Raises:
        ValueError: for ``n < 1`` or ``timeout_s <= 0``.
        FileNotFoundError: when ``script`` does not exist.
        LaunchError: when ``check`` and a worker failed or the run timed out.
    """
    path = _check_script(script)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    launch_id = uuid.uuid4().hex[:12]
    ports = []
    while len(ports) < n:
        p = free_port()
        if p not in ports:
            ports.append(p)
    specs = []
    for i in range(n):
        extra = {"CUDA_VISIBLE_DEVICES": "-1", **dict(env or {}),
                 "TF_CONFIG": tf_config(n, i, ports)}
        specs.append(_Spec([sys.executable, str(path), *map(str, args)],
                           _child_env(extra, launch_id, threads), i))
    return _finish_plain("tf", specs, launch_id, timeout_s, stream, check)


def python(script: str | os.PathLike[str], args: Sequence[str] = (), *, timeout_s: float = 120,
           threads: int | None = None, env: Mapping[str, str] | None = None,
           stream: bool = True, check: bool = True) -> LaunchResult:
    """Run ``script`` as one plain Python process (rank 0), with streaming and a timeout.

    The single-process baseline of a distributed script: same interpreter, same output
    handling, same clean-up as :func:`torchrun`.

    Args and Raises: as in :func:`tf_workers` (``threads``: ``OMP_NUM_THREADS``; None: inherit).
    """
    path = _check_script(script)
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    launch_id = uuid.uuid4().hex[:12]
    spec = _Spec([sys.executable, str(path), *map(str, args)],
                 _child_env(env, launch_id, threads), 0)
    return _finish_plain("python", [spec], launch_id, timeout_s, stream, check)


def _finish_plain(kind: str, specs: list[_Spec], launch_id: str, timeout_s: float,
                  stream: bool, check: bool) -> LaunchResult:
    result = _run_group(kind, specs, timeout_s=timeout_s, stream=stream, launch_id=launch_id,
                        fail_fast=True)
    result.exit_codes = {i: rc for i, rc in enumerate(result.returncodes) if rc is not None}
    failed = [(i, rc) for i, rc in enumerate(result.returncodes) if rc not in (0, None)]
    # The first to fail with an ordinary error (>0) is the cause; the others were stopped.
    first = [i for i, rc in failed if rc > 0]
    result.failed_rank = first[0] if first else (failed[0][0] if failed and not
                                                  result.timed_out else None)
    if kind == "tf":  # label the logs "worker i"
        result.logs = {i: result.logs.get(i, "") for i in range(len(specs))}
    if not result.ok and stream and not check:  # with check, the LaunchError says it
        print(result.summary(), flush=True)
    return result.check() if check else result


# ----------------------------------------------------------------------------- spawn
def spawn(fn: Callable[..., Any], *, nprocs: int = 2, args: Sequence[Any] = (),
          timeout_s: float = 60) -> None:
    """Run ``fn(rank, *args)`` in ``nprocs`` processes with ``torch.multiprocessing``.

    Like ``torch.multiprocessing.spawn`` but with a time limit, and with the children's
    stderr captured: a function defined in a notebook cannot be unpickled in a spawned child
    (the child imports ``__main__`` afresh and finds no such function), and the child's
    ``AttributeError`` would otherwise land in the terminal running Jupyter, not here.

    Args:
        fn: a function importable by name (defined in a module/script, not in the notebook).
        nprocs: number of processes, >= 1.
        args: extra arguments passed after the rank.
        timeout_s: seconds before the children are killed, > 0.

    Raises:
        ValueError: for ``nprocs < 1`` or ``timeout_s <= 0``.
        LaunchError: when a child fails; the message holds torch's error and the child's
            own stderr, and the torch exception is chained (``__cause__``).
        TimeoutError: when the children run past ``timeout_s`` (they are killed).
    """
    import tempfile

    import torch.multiprocessing as mp

    if not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs must be an int >= 1, got {nprocs!r}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    launch_id = uuid.uuid4().hex[:12]
    # multiprocessing's resource tracker is shared by later calls: start it untagged, with
    # the real stderr, so the clean-up below never takes it for one of our children.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        old_marker = os.environ.get(MARKER_ENV)
        os.environ[MARKER_ENV] = launch_id
        try:
            os.dup2(err.fileno(), 2)  # children inherit fd 2 at start; restored right after
            ctx = mp.start_processes(fn, args=tuple(args), nprocs=nprocs, join=False,
                                     start_method="spawn")
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if old_marker is None:
                os.environ.pop(MARKER_ENV, None)
            else:
                os.environ[MARKER_ENV] = old_marker
        deadline = time.perf_counter() + timeout_s
        failure: BaseException | None = None
        try:
            while not ctx.join(timeout=0.1):
                if time.perf_counter() > deadline:
                    break
        except Exception as exc:  # re-raised below, with the child's stderr
            failure = exc
        timed_out = time.perf_counter() > deadline and failure is None and any(
            p.is_alive() for p in ctx.processes)
        pids = [_ps(p.pid) for p in ctx.processes if p.is_alive()]
        _kill_all([q for q in pids if q is not None], launch_id, grace_s=2.0)
        err.seek(0)
        child_err = err.read().decode("utf-8", "replace").strip()
    if timed_out:
        raise TimeoutError(f"spawned processes ran past {timeout_s:g} s and were killed")
    if failure is not None:
        res = LaunchResult("spawn", [], logs={0: child_err})
        last = child_err[child_err.rfind("Traceback (most recent call last)"):] \
            if "Traceback (most recent call last)" in child_err else child_err
        msg = (f"{type(failure).__name__}: {failure}\n--- a child's own stderr ---\n"
               f"{_tail(last, 15) or '(empty)'}")
        raise LaunchError(msg, res) from failure


# ----------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class WorkerPlan:
    """How many worker processes to start per node, on which device, and why.

    Attributes:
        nproc: processes per node.
        device: ``"cuda"`` (one GPU per process, NCCL) or ``"cpu"`` (gloo).
        env: environment for the workers (``CUDA_VISIBLE_DEVICES=""`` hides GPUs when there
            are fewer GPUs than processes).
        reason: one sentence for the notebook.
    """

    nproc: int
    device: str
    env: dict[str, str]
    reason: str


def worker_plan(nproc: int | None = None) -> WorkerPlan:
    """Choose the workers for this machine: one per GPU when there are enough GPUs, else CPUs.

    Two processes cannot share one GPU under NCCL, so with fewer GPUs than processes every
    worker runs on the CPU with gloo (the GPUs are hidden from them).

    Args:
        nproc: processes wanted per node (>= 1); default: the number of GPUs, at least 2.

    Returns:
        A :class:`WorkerPlan`; pass ``nproc=plan.nproc, env=plan.env`` to :func:`torchrun`.

    Raises:
        ValueError: for ``nproc < 1``.
    """
    from accelkit import device

    if nproc is not None and (not isinstance(nproc, int) or nproc < 1):
        raise ValueError(f"nproc must be an int >= 1, got {nproc!r}")
    gpus = [d for d in device.torch_devices() if d.kind in ("cuda", "rocm")]
    want = nproc or max(2, len(gpus))
    if len(gpus) >= want:
        return WorkerPlan(want, "cuda", {}, f"{len(gpus)} GPU(s): {want} processes, one GPU "
                          "each, NCCL")
    return WorkerPlan(want, "cpu", {"CUDA_VISIBLE_DEVICES": ""},
                      f"{len(gpus)} GPU(s) for {want} processes: all {want} on the CPU with gloo "
                      "(GPUs hidden from the workers)")


# ----------------------------------------------------------------------------- scripts
def worker_script(name: str) -> Path:
    """Return the path of a committed worker script in ``notebooks/workers/``.

    Looks in ``./workers`` (a notebook's own folder) and then in this checkout's
    ``notebooks/workers``.

    Raises:
        FileNotFoundError: naming the folders searched.
    """
    here = Path("workers") / name
    repo = Path(__file__).resolve().parents[1] / "notebooks" / "workers" / name
    for cand in (here, repo):
        if cand.is_file():
            return cand.resolve()
    raise FileNotFoundError(f"worker script {name!r} not found in {here.parent.resolve()} "
                            f"or {repo.parent}; run the notebook from the repository's notebooks/")


def _region(lines: list[str], name: str) -> list[str]:
    start = next((i for i, s in enumerate(lines) if s.strip() == f"# region {name}"), None)
    if start is None:
        raise ValueError(f"no '# region {name}' marker in the script")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == "# endregion"),
               len(lines))
    return lines[start + 1:end]


def script_source(path: str | os.PathLike[str], region: str | None = None) -> str:
    """Return a script's text, or only the lines of one ``# region NAME`` ... ``# endregion``.

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: when the region marker is missing.
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if region is not None:
        lines = _region(lines, region)
    return "\n".join(lines)


def show(path: str | os.PathLike[str], region: str | None = None) -> None:
    """Display a worker script (or one region of it) as highlighted code in the notebook.

    Falls back to ``print`` outside IPython.  See :func:`script_source` for ``region``.
    """
    text = script_source(path, region)
    title = Path(path).name + (f" (region {region!r})" if region else "")
    try:
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython is a dev dependency
        print(f"# {title}\n{text}")
        return
    display(Markdown(f"`{title}`\n```python\n{text}\n```"))


def script_diff(old: str | os.PathLike[str], new: str | os.PathLike[str], context: int = 1) -> str:
    """Return a unified diff from script ``old`` to script ``new`` (what changed, marked).

    Raises:
        FileNotFoundError: when a file does not exist.
    """
    a = Path(old).read_text(encoding="utf-8").splitlines()
    b = Path(new).read_text(encoding="utf-8").splitlines()
    return "\n".join(difflib.unified_diff(a, b, Path(old).name, Path(new).name, n=context,
                                          lineterm=""))


def fresh_path(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` for a worker to write, after deleting what a previous run left there.

    A stale file would otherwise pass for this run's result when a worker fails to write.
    The parent folder is created.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_dir():
        import shutil

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


__all__ = [
    "LaunchError",
    "LaunchResult",
    "WorkerPlan",
    "MARKER_ENV",
    "PortInUseError",
    "free_port",
    "fresh_path",
    "is_port_free",
    "leftover_processes",
    "python",
    "read_json",
    "script_diff",
    "script_source",
    "show",
    "spawn",
    "tf_config",
    "tf_workers",
    "torchrun",
    "torchrun_command",
    "worker_plan",
    "worker_script",
]
