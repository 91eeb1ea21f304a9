"""Start distributed workers from a notebook, and what they return.

Launchers (the workers run :mod:`accelkit.dist`): :func:`torchrun` (``--standalone``, or
``nnodes`` agents on loopback rehearsing the multi-node command), :func:`python` (one plain
process, or ``n`` TensorFlow workers with their ``TF_CONFIG``), :func:`spawn`
(``torch.multiprocessing`` with a time limit and the children's real error), and
:func:`worker_plan` (how many workers, on which device).  Each returns a :class:`LaunchResult`
(exit codes and output per rank; :meth:`~LaunchResult.summary` shows the failing rank's own
error first, read from torchrun's per-rank error files, never from its printed report) or
raises :class:`LaunchError`.  A rank stuck in a collective says where: :func:`torchrun` gives
the workers a collective timeout, so the wait raises in the worker with its traceback, and
past the launch's time limit every worker prints its Python stack before the kill;
:meth:`LaunchResult.where` names, per rank, the call into torch it was blocked in
(``barrier``, ``all_reduce``, ``backward``) and the worker's line that made it.  Process
groups and ports: :mod:`accelkit.procs`; error files and stacks: :mod:`accelkit.scripts`.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any
from unittest import mock

from accelkit import dist, procs, scripts
from accelkit.procs import Child, PortInUseError
from accelkit.scripts import Frame, RankFailure

#: torchrun's per-line prefix template; ``${rank}`` is the global rank.
PREFIX_TEMPLATE = "[rank${rank}]:"
_TRACEBACK = "Traceback (most recent call last)"


class LaunchError(RuntimeError):
    """A launched group failed or timed out; ``.result`` holds the :class:`LaunchResult`."""

    def __init__(self, message: str, result: LaunchResult) -> None:
        super().__init__(message)
        self.result = result


def _tail(text: str, n: int) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-n:])


def _code_text(code: int | None) -> str:
    if code is None or code >= 0:
        return f"exit code {'unknown' if code is None else code}"
    return f"exit code {code}, " + procs.describe_exit(code).removeprefix("was stopped by ")


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
        wall_s, timeout_s: seconds from start to the end of clean-up; the time limit.
        timed_out: the run hit ``timeout_s`` and was killed.
        failed_rank: the rank that failed first, or None.
        failures: torchrun's record of each failed rank, with the exception and traceback
            from its error file when it wrote one (:class:`accelkit.scripts.RankFailure`).
        log_dir: the folder with torchrun's per-rank log and error files, or None.
        killed: how many leftover processes the clean-up had to kill.
        launch_id: the tag (``$ACCELKIT_LAUNCH_ID``) on every process this launch started.
        out: the path passed to the worker as ``--out``, or None.
        stacks: per rank, the main thread's Python stack (innermost frame first) from the dump
            it printed when a timed-out run asked for it (:func:`accelkit.scripts.last_stack`).
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

    def leftovers(self) -> list[int]:
        """The pids of this launch's processes still alive (``[]`` after a clean launch)."""
        return procs.leftover_processes(self.launch_id) if self.launch_id else []

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
        # a worker that records its exception also prints it: show the output before it once
        last = record.traceback.strip().splitlines()[-1:]
        if last and own.rstrip().endswith(last[0]) and _TRACEBACK in own:
            own = own[:own.rindex(_TRACEBACK)]
        if own.strip():
            lines += ["its last output before that:", _tail(own, 10)]
        return lines

    def where(self) -> dict[int, str]:
        """Say per rank where it was when the run ended badly, in one line
        (:func:`accelkit.scripts.where_waiting`), from the stack it printed on the stack
        signal (a timed-out run) or the traceback in its error file (a failed run).

        Returns:
            ``{rank: line}`` for the ranks with a stack or a recorded traceback, by rank.
        """
        found = {r: scripts.where_waiting(st) for r, st in self.stacks.items() if st}
        for r, f in self.failures.items():
            if r not in found and f.traceback:
                found[r] = scripts.where_waiting(scripts.traceback_frames(f.traceback))
        return dict(sorted(found.items()))

    def _where_lines(self) -> list[str]:
        where = self.where()
        if not where or (not self.timed_out and len(where) < 2):
            return []  # one failed rank: its traceback above says it all
        how = ("its Python stack when the time limit came (faulthandler)" if self.timed_out
               else "the traceback each recorded")
        lines = [f"where each rank was ({how}):"]
        lines += [f"  rank {r}: {w}" for r, w in where.items()]
        if self.timed_out or any("Timed out" in f.message for f in self.failures.values()):
            lines.append(
                "ranks that wait in different collectives, or for a rank that never comes, hang "
                "until a timeout: uneven inputs (one rank runs more steps) are the usual cause; "
                "see notebook 04 (DistributedSampler, drop_last, Join)")
        return lines

    def summary(self) -> str:
        """Explain how the run ended; a failing rank's own error comes first.

        Returns:
            ``"ok: ..."`` for a clean run; otherwise the failing rank, its exit code and its
            recorded exception and traceback (else its output tail), the other ranks' exit
            codes, where each rank was (:meth:`where`: on a timeout or several failures), and
            the launcher's own message when no rank explains it.
        """
        if self.ok:
            n = max(len(self.exit_codes), len(self.logs))
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
        """Return ``self`` when the run was clean, else raise :class:`LaunchError` with
        :meth:`summary` as the message."""
        if not self.ok:
            raise LaunchError(self.summary(), self)
        return self


def _check_args(script: str | os.PathLike[str], timeout_s: float, threads: int | None) -> Path:
    path = Path(script)
    if not path.is_file():
        raise FileNotFoundError(f"worker script {path} does not exist (see "
                                "accelkit.scripts.worker_script())")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be an int >= 1 or None, got {threads!r}")
    return path.resolve()


def _run(kind: str, children: list[Child], launch_id: str, *, timeout_s: float, stream: bool,
         out: str | os.PathLike[str] | None) -> LaunchResult:
    """Run the group (fail-fast unless one torchrun agent), its output kept per rank."""
    lines = procs.RankedLines([c.rank for c in children],
                              label="worker" if kind == "tf" else "rank", stream=stream)
    run = procs.run_group(children, launch_id=launch_id, timeout_s=timeout_s, on_line=lines,
                          fail_fast=kind != "torchrun" or len(children) > 1)
    logs = lines.logs()
    dumped = {r: st for r, log in logs.items() if (st := scripts.last_stack(log))} \
        if run.stacks_requested else {}
    return LaunchResult(kind, [c.argv for c in children], logs=logs,
                        launcher_log=lines.launcher_log(), returncodes=run.returncodes,
                        wall_s=run.wall_s, timeout_s=timeout_s, timed_out=run.timed_out,
                        killed=run.killed, launch_id=launch_id,
                        out=None if out is None else Path(out), stacks=dumped)


def _finish(result: LaunchResult, stream: bool, check: bool) -> LaunchResult:
    if not result.ok and stream and not check:  # with check, the LaunchError says it
        print(result.summary(), flush=True)
    return result.check() if check else result


def torchrun(script: str | os.PathLike[str], args: Sequence[Any] = (), *, nproc: int = 2,
             nnodes: int = 1, port: int | None = None, timeout_s: float = 120,
             threads: int | None = 1, env: Mapping[str, str] | None = None,
             out: str | os.PathLike[str] | None = None, stream: bool = True,
             check: bool = True, collective_timeout_s: float | None = None) -> LaunchResult:
    """Run ``script`` under the real ``torchrun`` and stream each rank's output here.

    ``nnodes == 1``: ``torchrun --standalone --nproc-per-node=nproc`` (a fresh free port each
    time: a lingering old group never causes "address already in use").  ``nnodes > 1``:
    ``nnodes`` agents on this machine, each with the multi-node command (``--rdzv-backend=c10d``
    on 127.0.0.1) you would run once per node.  torchrun runs as ``python -m accelkit.scripts``
    (its ``main()`` plus a record of failed ranks); when a worker fails it stops the others.
    Past ``timeout_s`` every worker is asked for its Python stack, then everything is killed.

    Args:
        script, args: the worker script (``accelkit.scripts.worker_script(name)``), its arguments.
        nproc, nnodes: processes per node and simulated nodes on loopback, >= 1 each.
        port: rendezvous port for ``nnodes > 1`` (default: a free one).
        timeout_s: seconds before the whole group is killed, > 0.
        threads: ``OMP_NUM_THREADS`` per worker (torchrun's default is 1); None: inherit.
        env: extra environment variables for the workers.
        out: passed as ``--out out`` after deleting a previous run's file or folder there;
            read it back with :meth:`LaunchResult.read_json`.
        stream: print the workers' lines as they come; ``check``: raise :class:`LaunchError`
            when the run failed or timed out.
        collective_timeout_s: how long a collective in the workers waits for the others,
            seconds, > 0 (``$ACCELKIT_COLLECTIVE_TIMEOUT_S``); default ``min(0.75 * timeout_s,
            120)``: a stuck collective raises in the worker before the launcher's kill.

    Returns:
        A :class:`LaunchResult` (exit codes and logs per rank).

    Raises:
        ValueError: for a bad ``nproc``, ``nnodes``, ``timeout_s``, ``threads`` or
            ``collective_timeout_s``; FileNotFoundError: when ``script`` does not exist.
        PortInUseError: when an explicit ``port`` is taken (pass ``port=None``).
        LaunchError: when ``check`` and a rank failed or the run timed out.
    """
    from accelkit import config

    path = _check_args(script, timeout_s, threads)
    if collective_timeout_s is None:
        collective_timeout_s = min(0.75 * timeout_s, dist.DEFAULT_TIMEOUT_S)
    if not collective_timeout_s > 0:
        raise ValueError(f"collective_timeout_s must be > 0, got {collective_timeout_s}")
    if port is not None and not procs.is_port_free(port):
        raise PortInUseError(
            f"port {port} on 127.0.0.1 is already in use (a lingering run or another program); "
            "pass port=None to let the launcher pick a free one")
    launch_id = procs.new_launch_id()
    log_root = config.scratch_dir(f"launch/{time.strftime('%Y%m%d-%H%M%S')}-{launch_id}").resolve()
    endpoint = f"127.0.0.1:{port or procs.free_ports(1)[0]}" if nnodes > 1 else None
    cmd = scripts.torchrun_command(path, args, nproc_per_node=nproc, nnodes=nnodes,
                                   rdzv_endpoint=endpoint, rdzv_id=launch_id, log_dir=log_root,
                                   module="accelkit.scripts")
    if out is not None:
        cmd += ["--out", str(scripts.fresh_path(out))]
    reports = [log_root / f"agent{i}-failures.json" for i in range(nnodes)]
    base = {**procs.child_env({dist.TIMEOUT_ENV: f"{collective_timeout_s:g}", **dict(env or {})},
                              threads),
            "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": PREFIX_TEMPLATE}
    children = [Child(cmd, {**base, scripts.REPORT_ENV: str(report)})
                for report in reports]  # the same command on every "node"
    result = _run("torchrun", children, launch_id, timeout_s=timeout_s, stream=stream, out=out)
    result.log_dir, result.collective_timeout_s = log_root, collective_timeout_s
    # exit codes, failures and the failing rank from the files torchrun left
    result.failures = scripts.read_failures(reports)
    if all(rc == 0 for rc in result.returncodes) and not result.timed_out:
        result.exit_codes = {r: 0 for r in range(nproc * nnodes)}
    else:
        result.exit_codes = {r: f.exitcode for r, f in result.failures.items()
                             if f.exitcode is not None}  # None: read from its error file only
    root = result.failed_rank = None if result.timed_out else scripts.root_cause(result.failures)
    if root is not None and not result.logs.get(root):
        result.logs[root] = scripts.rank_log_files(log_root, result.failures[root])
    return _finish(result, stream, check)


def python(script: str | os.PathLike[str], args: Sequence[Any] = (), *, n: int = 1,
           tf: bool = False, timeout_s: float = 120, threads: int | None = None,
           env: Mapping[str, str] | None = None, out: str | os.PathLike[str] | None = None,
           stream: bool = True, check: bool = True) -> LaunchResult:
    """Run ``n`` plain Python processes of ``script`` (ranks 0..n-1), streaming, with a timeout.

    ``n=1``: the single-process baseline of a distributed script.  ``tf=True``: TensorFlow
    workers, each with its ``TF_CONFIG`` (tf.distribute docs, "Multi-worker training with
    Keras": ``{"cluster": {"worker": ["localhost:PORT", ...]}, "task": {"type": "worker",
    "index": i}}``, a free port each) and the GPUs hidden (``CUDA_VISIBLE_DEVICES=-1``).  When
    one fails the others are stopped at once (they would wait for it forever).

    Args:
        n: number of processes, >= 1; ``tf``: give each a ``TF_CONFIG``.
        script, args, timeout_s, env, out, stream, check: as in :func:`torchrun`.
        threads: ``OMP_NUM_THREADS`` per process; default: inherit (1 per TF worker).

    Returns:
        A :class:`LaunchResult` with ``exit_codes``/``logs`` per rank (worker index).

    Raises:
        ValueError: for ``n < 1``, ``timeout_s <= 0`` or bad ``threads``.
        FileNotFoundError: when ``script`` does not exist.
        LaunchError: when ``check`` and a process failed or the run timed out.
    """
    path = _check_args(script, timeout_s, threads)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    threads = 1 if tf and threads is None else threads
    argv = [sys.executable, str(path), *map(str, args)]
    argv += [] if out is None else ["--out", str(scripts.fresh_path(out))]
    extra = {**({"CUDA_VISIBLE_DEVICES": "-1"} if tf else {}), **dict(env or {})}
    ports = procs.free_ports(n) if tf else []
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    children = [Child(argv, procs.child_env({**extra, **({"TF_CONFIG": json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": i}})} if tf else {})}, threads), i)
        for i in range(n)]
    result = _run("tf" if tf else "python", children, procs.new_launch_id(), timeout_s=timeout_s,
                  stream=stream, out=out)
    codes = result.returncodes
    result.exit_codes = {i: rc for i, rc in enumerate(codes) if rc is not None}
    failed = [(i, rc) for i, rc in enumerate(codes) if rc not in (0, None)]
    # The first to fail with an ordinary error (>0) is the cause; the others were stopped.
    first = [i for i, rc in failed if rc > 0]
    result.failed_rank = first[0] if first else (failed[0][0] if failed and not
                                                  result.timed_out else None)
    if tf:  # label the logs "worker i"
        result.logs = {i: result.logs.get(i, "") for i in range(n)}
    return _finish(result, stream, check)


def _spawn_group(fn: Callable[..., Any], args: Sequence[Any], nprocs: int, timeout_s: float,
                 sys_path: list[str]) -> tuple[bool, BaseException | None, str]:
    """Run ``fn(rank, *args)`` in tagged spawned children, their stderr in a file (not the
    terminal running Jupyter); kill them all at the end.  Returns (timed out, torch's
    exception when a child failed or None, the children's stderr)."""
    import torch.multiprocessing as mp  # imports torch: only when spawning

    launch_id = procs.new_launch_id()
    # multiprocessing's resource tracker is shared by later calls: start it untagged, with
    # the real stderr, so the clean-up below never takes it for one of our children.
    resource_tracker.ensure_running()
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        try:  # the children inherit the marker, sys_path and fd 2 at start; restored after
            with mock.patch.dict(os.environ, {procs.MARKER_ENV: launch_id}), \
                    mock.patch.object(sys, "path", sys_path):
                os.dup2(err.fileno(), 2)
                ctx = mp.start_processes(fn, args=tuple(args), nprocs=nprocs, join=False,
                                         start_method="spawn")
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        deadline, error = time.perf_counter() + timeout_s, None
        try:
            while not ctx.join(timeout=0.1) and time.perf_counter() <= deadline:
                pass
        except Exception as exc:  # reported by spawn(), with the children's stderr
            error = exc
        timed_out = error is None and time.perf_counter() > deadline and any(
            p.is_alive() for p in ctx.processes)
        live = [procs.process(p.pid) for p in ctx.processes if p.is_alive()]
        procs.kill_all([q for q in live if q is not None], launch_id, grace_s=2.0)
        err.seek(0)
        return timed_out, error, err.read().decode("utf-8", "replace").strip()


def spawn(fn: Callable[..., Any], *, nprocs: int = 2, args: Sequence[Any] = (),
          timeout_s: float = 60) -> None:
    """Run ``fn(rank, *args)`` in ``nprocs`` processes with ``torch.multiprocessing``.

    Like ``torch.multiprocessing.spawn`` with a time limit and the children's stderr
    captured: a function defined in a notebook cannot be unpickled in a spawned child (it
    imports ``__main__`` afresh), and its ``AttributeError`` would land in the terminal running
    Jupyter.  A function of a script loaded with :func:`accelkit.scripts.import_worker` works
    (the children get the script's folder on ``sys.path``).

    Args:
        fn: a function importable by name; ``args``: passed after the rank.
        nprocs: number of processes, >= 1; ``timeout_s``: seconds before the kill, > 0.

    Raises:
        ValueError: for ``nprocs < 1`` or ``timeout_s <= 0``.
        LaunchError: when a child fails; the message holds torch's error and the last
            traceback of the children's stderr, and the torch exception is chained.
        TimeoutError: when the children run past ``timeout_s`` (they are killed).
    """
    if not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs must be an int >= 1, got {nprocs!r}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    timed_out, error, stderr = _spawn_group(fn, args, nprocs, timeout_s, scripts.sys_path_for(fn))
    if timed_out:
        raise TimeoutError(f"spawned processes ran past {timeout_s:g} s and were killed")
    if error is not None:
        last = stderr[stderr.rfind(_TRACEBACK):] if _TRACEBACK in stderr else stderr
        msg = (f"{type(error).__name__}: {error}\n--- a child's own stderr ---\n"
               f"{_tail(last, 15) or '(empty)'}")
        raise LaunchError(msg, LaunchResult("spawn", [], logs={0: stderr})) from error


@dataclass(frozen=True)
class WorkerPlan:
    """How many worker processes per node (``nproc``), on which ``device`` (``"cuda"``: one
    GPU each, NCCL; ``"cpu"``: gloo), their ``env`` (``CUDA_VISIBLE_DEVICES=""`` hides GPUs
    when there are fewer than processes), and the ``reason`` in one sentence."""

    nproc: int
    device: str
    env: dict[str, str]
    reason: str

    def torchrun(self, script: str | os.PathLike[str], args: Sequence[Any] = (), *,
                 nproc: int | None = None, env: Mapping[str, str] | None = None,
                 **launch: Any) -> LaunchResult:
        """:func:`torchrun` with this plan's ``nproc`` (unless given) and ``env`` (``env`` is
        added); other keywords go to :func:`torchrun`, e.g. ``PLAN.torchrun(script, args,
        out=SCRATCH / "r.json").read_json()``.  Returns and raises as :func:`torchrun`.
        """
        return torchrun(script, args, nproc=nproc or self.nproc,
                        env={**self.env, **dict(env or {})}, **launch)


def worker_plan(nproc: int | None = None) -> WorkerPlan:
    """Choose ``nproc`` workers per node (default: the number of GPUs, at least 2): one per GPU
    when there are enough GPUs, else all on the CPU with gloo (two processes cannot share one
    GPU under NCCL).

    Returns:
        A :class:`WorkerPlan`; launch with ``plan.torchrun(script, args, ...)``.

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


__all__ = ["PREFIX_TEMPLATE", "LaunchError", "LaunchResult", "WorkerPlan", "python", "spawn",
           "torchrun", "worker_plan"]
