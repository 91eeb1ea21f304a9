"""Start distributed workers from a notebook, and say how they ended.

:func:`torchrun` (the real one, ``--standalone`` or ``nnodes`` agents on loopback),
:func:`python` (plain or TensorFlow ``TF_CONFIG`` workers), :func:`spawn`
(``torch.multiprocessing`` with a time limit) and :func:`worker_plan` (how many, on which
device).  A failing or stuck worker stops all of them; the :class:`LaunchResult` names the rank
that failed first with the error from its torchrun error file (:meth:`~LaunchResult.summary`)
and where each rank waited (:meth:`~LaunchResult.where`, from its stack or traceback).
Process groups: :mod:`accelkit.procs`; error files and stacks: :mod:`accelkit.scripts`.
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
from accelkit.procs import Child
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
    """What a launch did.  ``kind``: ``"torchrun"``, ``"tf"``, ``"python"``, ``"spawn"``;
    ``commands``: one per torchrun agent / worker; ``exit_codes``: per global rank (negative:
    that signal; missing: none reported); ``logs``: each rank's output, prefix removed;
    ``launcher_log``: torchrun's own messages; ``returncodes``: per command; ``wall_s``,
    ``timeout_s``: seconds taken, the limit; ``failed_rank``: the rank that failed first or
    None; ``failures``: :class:`accelkit.scripts.RankFailure` per failed rank; ``log_dir``:
    torchrun's per-rank logs and error files; ``killed``: processes the clean-up killed;
    ``launch_id``: the ``$ACCELKIT_LAUNCH_ID`` tag; ``out``: the ``--out`` path; ``stacks``:
    per rank, the main thread's stack (innermost first) a timed-out run printed;
    ``collective_timeout_s``: the workers' collective timeout, seconds, or None."""

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
        """Read the JSON the worker wrote to ``out`` (or ``out/name`` for a folder); raises
        ValueError without ``out``, FileNotFoundError when the worker did not write it."""
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
        """Return ``{rank: line}``, by rank, saying where each rank with a stack (timed out) or
        a recorded traceback (failed) was (:func:`accelkit.scripts.where_waiting`)."""
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
        """Return ``"ok: ..."`` for a clean run; else the failing rank's exit code, recorded
        exception and traceback (else its output tail), the other ranks' exit codes, where
        each rank was (on a timeout or several failures), and the launcher's output when no
        rank explains it."""
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
        """Return ``self`` if the run was clean, else raise :class:`LaunchError`."""
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
             nnodes: int = 1, timeout_s: float = 120,
             threads: int | None = 1, env: Mapping[str, str] | None = None,
             out: str | os.PathLike[str] | None = None, stream: bool = True,
             check: bool = True, collective_timeout_s: float | None = None) -> LaunchResult:
    """Run ``script`` under the real torchrun (``python -m accelkit.scripts``), streaming each
    rank's output; returns a :class:`LaunchResult`.  ``--standalone`` for one node, else
    ``nnodes`` agents on 127.0.0.1 with the multi-node command (c10d rendezvous, a free port).
    A failing worker stops the others; past ``timeout_s`` each worker is asked for its Python
    stack, then all are killed.

    Args:
        script, args: the worker script (:func:`accelkit.scripts.worker_script`), its arguments.
        nproc, nnodes: processes per node, simulated nodes; >= 1 each.
        timeout_s: seconds before the group is killed, > 0.
        threads: ``OMP_NUM_THREADS`` per worker; None: inherit.  ``env``: extra variables.
        out: passed as ``--out`` after deleting what a previous run left there.
        stream: print lines as they come; ``check``: raise when the run failed or timed out.
        collective_timeout_s: seconds a worker's collective waits, > 0; default
            ``min(0.75 * timeout_s, 120)`` (a stuck collective raises before the kill).

    Raises:
        ValueError: for a bad ``nproc``, ``nnodes``, ``timeout_s``, ``threads`` or
            ``collective_timeout_s``; FileNotFoundError: when ``script`` does not exist.
        LaunchError: when ``check`` and a rank failed or the run timed out.
    """
    from accelkit.env import scratch_dir

    path = _check_args(script, timeout_s, threads)
    if collective_timeout_s is None:
        collective_timeout_s = min(0.75 * timeout_s, dist.DEFAULT_TIMEOUT_S)
    if not collective_timeout_s > 0:
        raise ValueError(f"collective_timeout_s must be > 0, got {collective_timeout_s}")
    launch_id = procs.new_launch_id()
    log_root = scratch_dir(f"launch/{time.strftime('%Y%m%d-%H%M%S')}-{launch_id}").resolve()
    endpoint = f"127.0.0.1:{procs.free_ports(1)[0]}" if nnodes > 1 else None
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
    """Run ``n`` plain Python processes of ``script`` (ranks 0..n-1); one failing stops the rest.

    ``tf=True``: each gets its ``TF_CONFIG`` (tf.distribute, "Multi-worker training with
    Keras": ``{"cluster": {"worker": ["localhost:PORT", ...]}, "task": {"type": "worker",
    "index": i}}``) and ``CUDA_VISIBLE_DEVICES=-1``.  ``threads``: default inherit (1 per TF
    worker); the other arguments as in :func:`torchrun`.  Returns a :class:`LaunchResult`.

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
    result.exit_codes = {i: rc for i, rc in enumerate(result.returncodes) if rc is not None}
    # the first to fail with an ordinary error (> 0) is the cause; the others were stopped
    failed = sorted((c < 0, r) for r, c in result.exit_codes.items() if c != 0)
    if failed and not (failed[0][0] and result.timed_out):
        result.failed_rank = failed[0][1]
    if tf:  # label the logs "worker i"
        result.logs = {i: result.logs.get(i, "") for i in range(n)}
    return _finish(result, stream, check)


def spawn(fn: Callable[..., Any], *, nprocs: int = 2, args: Sequence[Any] = (),
          timeout_s: float = 60) -> None:
    """``torch.multiprocessing.spawn`` of ``fn(rank, *args)`` in ``nprocs`` processes, with a
    time limit and the children's stderr (a notebook's function cannot be unpickled in a child;
    one from :func:`accelkit.scripts.import_worker` can: its folder goes on their ``sys.path``).

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
    import torch.multiprocessing as mp  # imports torch: only when spawning

    launch_id = procs.new_launch_id()
    # multiprocessing's resource tracker is shared by later calls: start it untagged, with
    # the real stderr, so the clean-up below never takes it for one of our children.
    resource_tracker.ensure_running()
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        try:  # the children inherit the marker, sys.path and fd 2 at start; restored after
            with mock.patch.dict(os.environ, {procs.MARKER_ENV: launch_id}), \
                    mock.patch.object(sys, "path", scripts.sys_path_for(fn)):
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
        except Exception as exc:  # reported below, with the children's stderr
            error = exc
        timed_out = error is None and time.perf_counter() > deadline and any(
            p.is_alive() for p in ctx.processes)
        live = [procs.process(p.pid) for p in ctx.processes if p.is_alive()]
        procs.kill_all([q for q in live if q is not None], launch_id, grace_s=2.0)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace").strip()
    if timed_out:
        raise TimeoutError(f"spawned processes ran past {timeout_s:g} s and were killed")
    if error is not None:
        last = stderr[stderr.rfind(_TRACEBACK):] if _TRACEBACK in stderr else stderr
        msg = (f"{type(error).__name__}: {error}\n--- a child's own stderr ---\n"
               f"{_tail(last, 15) or '(empty)'}")
        raise LaunchError(msg, LaunchResult("spawn", [], logs={0: stderr})) from error


@dataclass(frozen=True)
class WorkerPlan:
    """``nproc`` workers per node on ``device`` (``"cuda"``: a GPU each; ``"cpu"``: gloo), their
    ``env`` (``CUDA_VISIBLE_DEVICES=""`` on the CPU), and the ``reason`` in one sentence."""

    nproc: int
    device: str
    env: dict[str, str]
    reason: str

    def torchrun(self, script: str | os.PathLike[str], args: Sequence[Any] = (), *,
                 nproc: int | None = None, env: Mapping[str, str] | None = None,
                 **launch: Any) -> LaunchResult:
        """:func:`torchrun` with this plan's ``nproc`` (unless given) and ``env`` (``env``
        added); returns and raises as :func:`torchrun`."""
        return torchrun(script, args, nproc=nproc or self.nproc,
                        env={**self.env, **dict(env or {})}, **launch)


def worker_plan(nproc: int | None = None) -> WorkerPlan:
    """Plan ``nproc`` workers per node (default: the GPUs, at least 2): one per GPU when there
    are enough, else all on the CPU with gloo (NCCL cannot share one GPU between processes).
    Raises ValueError for ``nproc < 1``."""
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
