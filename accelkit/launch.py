"""Start distributed workers from a notebook: ``torchrun`` for PyTorch, ``TF_CONFIG`` for TF.

This module runs in the notebook (the workers use :mod:`accelkit.dist`).  It owns the
launchers: :func:`torchrun` (the real launcher, ``--standalone`` or
``nnodes`` agents on loopback rehearsing the multi-node command), :func:`tf_workers` (N
workers, each with its ``TF_CONFIG``), :func:`python` (one process, the baseline),
:func:`spawn` (``torch.multiprocessing`` with a time limit and the children's real error),
and :func:`worker_plan` (how many workers, on which device; ``PLAN.torchrun(...)`` launches
with it).  Each returns a :class:`LaunchResult` (exit codes and output per rank; its
:meth:`~LaunchResult.summary` shows the failing rank's own error first) or raises
:class:`LaunchError`; both are defined in :mod:`accelkit.launch_result` and re-exported
here.  With ``out=PATH`` the worker gets ``--out PATH`` (a stale result there
deleted first) and ``result.read_json()`` reads what it wrote.  A torchrun worker's failure
is read from torchrun's per-rank error files and its agent's failure record
(:mod:`accelkit.elastic`), never from its printed report.

A rank stuck in a collective says so, two ways.  :func:`torchrun` gives the workers a
collective timeout (``collective_timeout_s``, default 3/4 of the launch's own limit, at most
:data:`accelkit.dist.DEFAULT_TIMEOUT_S`; :func:`accelkit.dist.setup` reads it), so a
collective that waits for a rank that never comes raises in the worker, with the traceback of
where it waited.  And past the launch's time limit every worker that registered the stack
signal (:func:`accelkit.dist.setup` does, with ``faulthandler``) prints its Python stack
before the group is killed.  :meth:`LaunchResult.where` and the summary then say, per rank,
which call into torch it was blocked in (``barrier``, ``all_reduce``, ``backward`` where DDP
all-reduces gradients) and which line of the worker made it.

What lives elsewhere: starting, streaming, timing out and killing process groups, ports and
the launch marker (:mod:`accelkit.procs`); the result, its report and the error
(:mod:`accelkit.launch_result`, which also reads stacks back); torchrun's
command line and records (:mod:`accelkit.elastic`); finding, showing and importing worker
scripts and reading their JSON (:mod:`accelkit.scripts`).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any
from unittest import mock

from accelkit import dist, elastic, procs, scripts
from accelkit.launch_result import LaunchError, LaunchResult, last_stack, spawn_error
from accelkit.procs import Child, PortInUseError

#: torchrun's per-line prefix template; ``${rank}`` is the global rank.
PREFIX_TEMPLATE = "[rank${rank}]:"


# ----------------------------------------------------------------------------- shared
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


def _with_out(args: Sequence[Any], out: str | os.PathLike[str] | None) -> list[str]:
    """The script's arguments, plus ``--out PATH`` (cleared of a previous run's files)."""
    extra = [] if out is None else ["--out", str(scripts.fresh_path(out))]
    return [*map(str, args), *extra]


def _finish(result: LaunchResult, stream: bool, check: bool) -> LaunchResult:
    if not result.ok and stream and not check:  # with check, the LaunchError says it
        print(result.summary(), flush=True)
    return result.check() if check else result


def _run(kind: str, children: list[Child], launch_id: str, *, timeout_s: float, stream: bool,
         fail_fast: bool, out: str | os.PathLike[str] | None) -> LaunchResult:
    lines = procs.RankedLines([c.rank for c in children],
                              label="worker" if kind == "tf" else "rank", stream=stream)
    run = procs.run_group(children, launch_id=launch_id, timeout_s=timeout_s, on_line=lines,
                          fail_fast=fail_fast)
    logs = lines.logs()
    dumped = {r: st for r, log in logs.items() if (st := last_stack(log))} \
        if run.stacks_requested else {}
    return LaunchResult(kind, [c.argv for c in children], logs=logs,
                        launcher_log=lines.launcher_log(), returncodes=run.returncodes,
                        wall_s=run.wall_s, timeout_s=timeout_s, timed_out=run.timed_out,
                        killed=run.killed, launch_id=launch_id,
                        out=None if out is None else Path(out), stacks=dumped)


# ----------------------------------------------------------------------------- torchrun
def _read_torchrun_outcome(result: LaunchResult, reports: list[Path], world: int) -> None:
    """Fill in exit codes, failures and the failing rank from the files torchrun left."""
    result.failures = elastic.read_failures(reports)
    if all(rc == 0 for rc in result.returncodes) and not result.timed_out:
        result.exit_codes = {r: 0 for r in range(world)}
    else:
        result.exit_codes = {r: f.exitcode for r, f in result.failures.items()
                             if f.exitcode is not None}  # None: read from its error file only
    result.failed_rank = None if result.timed_out else elastic.root_cause(result.failures)
    root = result.failed_rank
    if root is not None and not result.logs.get(root) and result.log_dir is not None:
        result.logs[root] = elastic.rank_log_files(result.log_dir, result.failures[root])


def torchrun(script: str | os.PathLike[str], args: Sequence[Any] = (), *, nproc: int = 2,
             nnodes: int = 1, port: int | None = None, timeout_s: float = 120,
             threads: int | None = 1, env: Mapping[str, str] | None = None,
             out: str | os.PathLike[str] | None = None, stream: bool = True,
             check: bool = True, collective_timeout_s: float | None = None) -> LaunchResult:
    """Run ``script`` under the real ``torchrun`` and stream each rank's output here.

    With ``nnodes == 1``: ``torchrun --standalone --nproc-per-node=nproc`` (its rendezvous
    picks a free port every time, so re-running a cell while an old group lingers never
    meets "address already in use").  With ``nnodes > 1``: ``nnodes`` torchrun agents on this
    machine, each with the multi-node command (``--rdzv-backend=c10d`` on 127.0.0.1), i.e.
    the command you would run once per node of a cluster.  torchrun runs as
    ``python -m accelkit.elastic`` (its own ``main()``, plus a record of failed ranks).

    torchrun itself stops the other workers when one fails; this function then reports the
    failing rank's exit code and the exception it recorded in its error file (else its own
    output) first.  Past ``timeout_s`` every worker is asked for its Python stack (see the
    module docstring), then everything is killed.

    Args:
        script: the worker script (e.g. ``accelkit.scripts.worker_script("ddp_train.py")``).
        args: its command-line arguments.
        nproc: processes per node, >= 1.
        nnodes: simulated nodes on loopback, >= 1.
        port: rendezvous port for ``nnodes > 1`` (default: a free one).
        timeout_s: seconds before the whole group is killed, > 0.
        threads: ``OMP_NUM_THREADS`` per worker (torchrun's default is 1); None: inherit.
        env: extra environment variables for the workers.
        out: passed to the script as ``--out out`` after deleting a previous run's file or
            folder there; read it back with :meth:`LaunchResult.read_json`.
        stream: print the workers' lines as they come.
        check: raise :class:`LaunchError` when the run failed or timed out.
        collective_timeout_s: how long a collective in the workers waits for the other
            ranks, seconds, > 0 (``$ACCELKIT_COLLECTIVE_TIMEOUT_S``, read by
            :func:`accelkit.dist.setup`); default ``min(0.75 * timeout_s, 120)``, so a stuck
            collective raises in the worker, with its traceback, before the launcher's kill.

    Returns:
        A :class:`LaunchResult` (exit codes and logs per rank).

    Raises:
        ValueError: for bad ``nproc``/``nnodes``/``timeout_s``/``threads``/
            ``collective_timeout_s``.
        FileNotFoundError: when ``script`` does not exist.
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
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_root = config.scratch_dir(f"launch/{stamp}-{launch_id}").resolve()
    endpoint = f"127.0.0.1:{port or procs.free_port()}" if nnodes > 1 else None
    cmd = elastic.torchrun_command(path, args, nproc_per_node=nproc, nnodes=nnodes,
                           rdzv_endpoint=endpoint, rdzv_id=launch_id, log_dir=log_root,
                           module="accelkit.elastic") + _with_out((), out)
    reports = [log_root / f"agent{i}-failures.json" for i in range(nnodes)]
    base = {**procs.child_env({dist.TIMEOUT_ENV: f"{collective_timeout_s:g}", **dict(env or {})},
                              threads),
            "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": PREFIX_TEMPLATE}
    children = [Child(cmd, {**base, elastic.REPORT_ENV: str(report)})
                for report in reports]  # the same command on every "node"
    result = _run("torchrun", children, launch_id, timeout_s=timeout_s, stream=stream,
                  fail_fast=nnodes > 1, out=out)
    result.log_dir = log_root
    result.collective_timeout_s = collective_timeout_s
    _read_torchrun_outcome(result, reports, nproc * nnodes)
    return _finish(result, stream, check)


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


def _finish_plain(result: LaunchResult, n: int, stream: bool, check: bool) -> LaunchResult:
    """Exit codes and the failing rank of children we started ourselves (no torchrun)."""
    codes = result.returncodes
    result.exit_codes = {i: rc for i, rc in enumerate(codes) if rc is not None}
    failed = [(i, rc) for i, rc in enumerate(codes) if rc not in (0, None)]
    # The first to fail with an ordinary error (>0) is the cause; the others were stopped.
    first = [i for i, rc in failed if rc > 0]
    result.failed_rank = first[0] if first else (failed[0][0] if failed and not
                                                  result.timed_out else None)
    if result.kind == "tf":  # label the logs "worker i"
        result.logs = {i: result.logs.get(i, "") for i in range(n)}
    return _finish(result, stream, check)


def tf_workers(script: str | os.PathLike[str], args: Sequence[Any] = (), *, n: int = 2,
               timeout_s: float = 180, threads: int | None = 1,
               env: Mapping[str, str] | None = None, out: str | os.PathLike[str] | None = None,
               stream: bool = True, check: bool = True) -> LaunchResult:
    """Run ``n`` TensorFlow workers of ``script``, each with its own ``TF_CONFIG``.

    Each worker gets a free port on localhost; ``MultiWorkerMirroredStrategy`` in the script
    reads ``TF_CONFIG`` to find the others.  GPUs are hidden (``CUDA_VISIBLE_DEVICES=-1``)
    so the workers do not fight over one device.  When a worker fails the others are
    stopped at once (they would wait for it forever).

    Args:
        script: the worker script.
        args: its arguments.
        n: number of workers, >= 1.
        timeout_s, threads, env, out, stream, check: as in :func:`torchrun`.

    Returns:
        A :class:`LaunchResult` with ``exit_codes``/``logs`` per worker index.

    Raises:
        ValueError: for ``n < 1``, ``timeout_s <= 0`` or bad ``threads``.
        FileNotFoundError: when ``script`` does not exist.
        LaunchError: when ``check`` and a worker failed or the run timed out.
    """
    path = _check_args(script, timeout_s, threads)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    launch_id, ports = procs.new_launch_id(), procs.free_ports(n)
    argv = [sys.executable, str(path), *_with_out(args, out)]
    extra = {"CUDA_VISIBLE_DEVICES": "-1", **dict(env or {})}
    children = [Child(argv, procs.child_env({**extra, "TF_CONFIG": tf_config(n, i, ports)},
                                            threads), i) for i in range(n)]
    result = _run("tf", children, launch_id, timeout_s=timeout_s, stream=stream,
                  fail_fast=True, out=out)
    return _finish_plain(result, n, stream, check)


def python(script: str | os.PathLike[str], args: Sequence[Any] = (), *, timeout_s: float = 120,
           threads: int | None = None, env: Mapping[str, str] | None = None,
           out: str | os.PathLike[str] | None = None, stream: bool = True,
           check: bool = True) -> LaunchResult:
    """Run ``script`` as one plain Python process (rank 0), with streaming and a timeout.

    The single-process baseline of a distributed script: same interpreter, same output
    handling, same clean-up as :func:`torchrun`.

    Args and Raises: as in :func:`tf_workers` (``threads``: ``OMP_NUM_THREADS``; None: inherit).
    """
    path = _check_args(script, timeout_s, threads)
    launch_id = procs.new_launch_id()
    argv = [sys.executable, str(path), *_with_out(args, out)]
    child = Child(argv, procs.child_env(env, threads), 0)
    result = _run("python", [child], launch_id, timeout_s=timeout_s, stream=stream,
                  fail_fast=True, out=out)
    return _finish_plain(result, 1, stream, check)


# ----------------------------------------------------------------------------- spawn
def _start_spawn(fn: Callable[..., Any], args: Sequence[Any], nprocs: int, launch_id: str,
                 err_fd: int, sys_path: list[str]) -> Any:
    """``start_processes`` with the marker, ``sys_path`` and fd 2 on ``err_fd`` meanwhile."""
    import torch.multiprocessing as mp  # imports torch: only when spawning

    saved = os.dup(2)
    try:
        with mock.patch.dict(os.environ, {procs.MARKER_ENV: launch_id}), \
                mock.patch.object(sys, "path", sys_path):
            os.dup2(err_fd, 2)  # children inherit fd 2 at start; restored right after
            return mp.start_processes(fn, args=tuple(args), nprocs=nprocs, join=False,
                                      start_method="spawn")
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _spawn_group(fn: Callable[..., Any], args: Sequence[Any], nprocs: int, timeout_s: float,
                 sys_path: list[str]) -> tuple[bool, BaseException | None, str]:
    """Run ``fn(rank, *args)`` in spawned children tagged with a new launch id, their stderr in
    a file (not the terminal that runs Jupyter); kill them all at the end.

    Returns:
        (timed out, torch's exception when a child failed or None, the children's stderr).
    """
    launch_id = procs.new_launch_id()
    # multiprocessing's resource tracker is shared by later calls: start it untagged, with
    # the real stderr, so the clean-up below never takes it for one of our children.
    resource_tracker.ensure_running()
    with tempfile.TemporaryFile() as err:
        ctx = _start_spawn(fn, args, nprocs, launch_id, err.fileno(), sys_path)
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

    Like ``torch.multiprocessing.spawn`` but with a time limit, and with the children's
    stderr captured: a function defined in a notebook cannot be unpickled in a spawned child
    (the child imports ``__main__`` afresh and finds no such function), and the child's
    ``AttributeError`` would otherwise land in the terminal running Jupyter, not here.  A
    function from a script imported with :func:`accelkit.scripts.import_worker` works: the
    children get the script's folder on ``sys.path``.

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
    if not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs must be an int >= 1, got {nprocs!r}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    timed_out, error, stderr = _spawn_group(fn, args, nprocs, timeout_s, scripts.sys_path_for(fn))
    if timed_out:
        raise TimeoutError(f"spawned processes ran past {timeout_s:g} s and were killed")
    if error is not None:
        raise spawn_error(error, stderr) from error


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

    def torchrun(self, script: str | os.PathLike[str], args: Sequence[Any] = (), *,
                 nproc: int | None = None, env: Mapping[str, str] | None = None,
                 **launch: Any) -> LaunchResult:
        """:func:`torchrun` with this plan's ``nproc`` and ``env``.

        ``nproc`` overrides the plan's; ``env`` is added to the plan's.  Other keywords
        (``out``, ``timeout_s``, ``check``, ...) go to :func:`torchrun` as they are, e.g.
        ``PLAN.torchrun(script, args, out=SCRATCH / "r.json").read_json()``.

        Returns and Raises: as :func:`torchrun`.
        """
        return torchrun(script, args, nproc=nproc or self.nproc,
                        env={**self.env, **dict(env or {})}, **launch)


def worker_plan(nproc: int | None = None) -> WorkerPlan:
    """Choose the workers for this machine: one per GPU when there are enough GPUs, else CPUs.

    Two processes cannot share one GPU under NCCL, so with fewer GPUs than processes every
    worker runs on the CPU with gloo (the GPUs are hidden from them).

    Args:
        nproc: processes wanted per node (>= 1); default: the number of GPUs, at least 2.

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


__all__ = [
    "LaunchError",
    "LaunchResult",
    "PREFIX_TEMPLATE",
    "WorkerPlan",
    "python",
    "spawn",
    "tf_config",
    "tf_workers",
    "torchrun",
    "worker_plan",
]
