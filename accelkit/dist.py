"""Code that runs inside distributed workers: who am I, which backend, setup and teardown.

A worker started by ``torchrun`` finds its place in the group in environment variables
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
``MASTER_ADDR``/``MASTER_PORT``); :func:`rank_info` reads them, :func:`setup` creates the
process group with the right backend (NCCL for CUDA devices, gloo otherwise: never a
hard-coded ``"nccl"`` on a CPU), and :func:`teardown` destroys it.  A script that is run
without a launcher is a group of one (rank 0 of 1), so the same script runs both ways.

Typical worker::

    with ak.dist.session() as info:           # process group first, then wrap the model
        model = DDP(model.to(info.device))
        ak.dist.print0("epoch", epoch, "loss", loss)
    # torn down here, also when the body raised (then recorded for torchrun: session())

This module owns the code that runs inside a worker: rank and backend, setup/teardown,
the device collectives need (:func:`comm_device`), rank-0 output, the replica check.
Elsewhere: timing collectives and the all-reduce cost model (:mod:`accelkit.comm`); starting
workers (torchrun, ``TF_CONFIG``) and reading their results (:mod:`accelkit.launch`);
TensorFlow strategies (:mod:`accelkit.sharding`).  It never imports IPython or matplotlib (it
runs in worker processes).
"""

from __future__ import annotations

import atexit
import faulthandler
import gc
import json
import os
import signal
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

#: The signal a worker answers with every thread's Python stack (``faulthandler``); the
#: launcher sends it before killing a stuck launch.  None where the OS has no SIGUSR1.
STACK_SIGNAL = getattr(signal, "SIGUSR1", None)

#: How long a collective waits for the other ranks by default, seconds (torch's own default
#: is 30 minutes for gloo and 10 for NCCL: a hang would look like a slow run).
DEFAULT_TIMEOUT_S = 120.0
#: Environment variable that sets the collective timeout of :func:`setup`, seconds;
#: :func:`accelkit.launch.torchrun` sets it (``collective_timeout_s``).
TIMEOUT_ENV = "ACCELKIT_COLLECTIVE_TIMEOUT_S"


@dataclass(frozen=True)
class RankInfo:
    """This worker's place in the group.

    Attributes:
        rank: global rank, 0..world_size-1.
        local_rank: rank on this node (the GPU index on a GPU node).
        world_size: number of workers in the group.
        local_world_size: workers on this node.
        node_rank: this node's index (torchrun's ``GROUP_RANK``).
        backend: the process-group backend (``"gloo"``, ``"nccl"``), or ``""`` before setup.
        device: the ``torch.device`` this worker computes on (None when ``LOCAL_RANK`` has
            no GPU on this node; :func:`setup` raises then, saying why).
        launched: True when a launcher set the variables (False: a single plain process).
    """

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    backend: str
    device: Any
    launched: bool

    @property
    def is_main(self) -> bool:
        """True on global rank 0 (the one that logs and writes checkpoints)."""
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


def has_group() -> bool:
    """True when this process belongs to an initialised ``torch.distributed`` process group."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def is_launched() -> bool:
    """True when a launcher (torchrun) set ``RANK`` and ``WORLD_SIZE`` for this process."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def choose_backend(device: Any = None) -> str:
    """Return the process-group backend for ``device``: ``"nccl"`` for CUDA, else ``"gloo"``.

    NCCL only moves CUDA tensors; a CPU (or a machine without NCCL) needs gloo.  ROCm builds
    expose RCCL under the name ``"nccl"``.

    Args:
        device: a ``torch.device`` or string; default: :func:`device_for` of this rank.

    Returns:
        ``"nccl"`` or ``"gloo"``.
    """
    import torch
    import torch.distributed as dist

    dev = torch.device(device) if device is not None else device_for()
    if dev.type == "cuda" and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def device_for(local_rank: int | None = None) -> Any:
    """Return the device of this worker: ``cuda:<local_rank>`` when CUDA exists, else CPU.

    Args:
        local_rank: default: ``$LOCAL_RANK`` or 0.

    Raises:
        ValueError: when ``local_rank`` is negative or not below the number of GPUs.
    """
    import torch

    lr = _env_int("LOCAL_RANK", 0) if local_rank is None else local_rank
    if lr < 0:
        raise ValueError(f"local_rank must be >= 0, got {lr}")
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        if lr >= n:
            raise ValueError(f"local rank {lr} has no GPU: this node has {n}; start at most "
                             f"{n} processes per node (--nproc-per-node={n})")
        return torch.device("cuda", lr)
    return torch.device("cpu")


def rank_info() -> RankInfo:
    """Read this worker's rank/world size from the launcher's environment.

    Works before and after :func:`setup`; without a launcher it returns rank 0 of 1.

    Raises:
        ValueError: when the variables are inconsistent (rank not below world size).
    """
    import torch.distributed as dist

    launched = is_launched()
    rank = _env_int("RANK", 0)
    world = _env_int("WORLD_SIZE", 1)
    if not 0 <= rank < world:
        raise ValueError(f"RANK={rank} must be in 0..WORLD_SIZE-1 (WORLD_SIZE={world})")
    backend = dist.get_backend() if has_group() else ""
    try:
        dev = device_for()
    except ValueError:  # LOCAL_RANK beyond the GPUs: setup() raises and says why
        dev = None
    return RankInfo(rank, _env_int("LOCAL_RANK", 0), world, _env_int("LOCAL_WORLD_SIZE", world),
                    _env_int("GROUP_RANK", 0), str(backend), dev, launched)


def collective_timeout_s() -> float:
    """Return the collective timeout for :func:`setup`: ``$ACCELKIT_COLLECTIVE_TIMEOUT_S``, else
    :data:`DEFAULT_TIMEOUT_S` (seconds).

    Raises:
        ValueError: when the variable is not a number > 0.
    """
    raw = os.environ.get(TIMEOUT_ENV, "")
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ValueError(f"{TIMEOUT_ENV}={raw!r} must be a number of seconds > 0")
    return value


def enable_stack_dumps() -> bool:
    """Make this process print every thread's Python stack to stderr on :data:`STACK_SIGNAL`.

    ``faulthandler.register(SIGUSR1, all_threads=True)``: the dump is written by a C signal
    handler, so it works while the main thread is blocked inside a collective (in C++, with
    the GIL released).  ``kill -USR1 PID`` shows where a hung worker waits; a timed-out
    :mod:`accelkit.launch` run does it for every worker before killing it.

    Returns:
        True when registered; False where the platform has no ``SIGUSR1`` (Windows).
    """
    if STACK_SIGNAL is None:
        return False
    faulthandler.register(STACK_SIGNAL, all_threads=True)
    return True


def setup(backend: str | None = None, *, timeout_s: float | None = None,
          threads: int | None = None) -> RankInfo:
    """Create the process group (call once per worker, before wrapping the model).

    A launched worker also gets :func:`enable_stack_dumps` (``kill -USR1`` prints its stack).

    Args:
        backend: ``"gloo"``/``"nccl"``; default: :func:`choose_backend` for this device.
        timeout_s: how long a collective waits for the other ranks before it raises, > 0
            (``init_process_group(timeout=...)``; gloo raises ``RuntimeError: ... Timed out
            waiting N ms for recv operation``, with the Python traceback of where this rank
            waited).  Default :func:`collective_timeout_s`: ``$ACCELKIT_COLLECTIVE_TIMEOUT_S``
            (the launcher sets it; notebooks keep it short) or :data:`DEFAULT_TIMEOUT_S`.
            Longer than the slowest legitimate wait (rank 0 writing a checkpoint while the
            others wait in a barrier), shorter than your patience.
        threads: torch intra-op threads; default: ``$OMP_NUM_THREADS`` if set.

    Returns:
        The :class:`RankInfo` (with ``backend`` filled in).  Without a launcher nothing is
        initialised and rank 0 of 1 is returned, so single-process runs need no branch.

    Raises:
        ValueError: for ``timeout_s <= 0`` or ``"nccl"`` asked for on a CPU-only worker.
    """
    import torch
    import torch.distributed as dist

    if timeout_s is None:
        timeout_s = collective_timeout_s()
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    n_threads = threads or _env_int("OMP_NUM_THREADS", 0)
    if n_threads:
        torch.set_num_threads(n_threads)
    dev = device_for()
    chosen = backend or choose_backend(dev)
    if chosen == "nccl" and dev.type != "cuda":
        raise ValueError("backend 'nccl' needs CUDA tensors but this worker has no GPU; "
                         "use backend=None (gloo on a CPU)")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if is_launched() and not has_group():
        enable_stack_dumps()
        kwargs: dict[str, Any] = {"backend": chosen, "timeout": timedelta(seconds=timeout_s)}
        if dev.type == "cuda":
            kwargs["device_id"] = dev  # lets NCCL bind the communicator eagerly
        dist.init_process_group(**kwargs)
        # Objects that keep the process group alive (a DDP model's reducer sits in reference
        # cycles) would otherwise be freed during interpreter shutdown, where gloo's worker
        # threads can abort the process (exit -6, "terminate called without an active
        # exception"; mechanism described in pytorch/pytorch#179291).  Collect them while
        # the interpreter is still whole.
        atexit.unregister(gc.collect)  # once, however often setup() runs
        atexit.register(gc.collect)
    info = rank_info()
    return RankInfo(info.rank, info.local_rank, info.world_size, info.local_world_size,
                    info.node_rank, chosen if is_launched() else "", dev, info.launched)


def teardown(barrier: bool = True) -> None:
    """Destroy the process group if one exists (safe to call twice or without one).

    Args:
        barrier: first wait until every rank has arrived here.  Without it, a rank that
            finishes early tears its connections down while a peer still uses them; with gloo
            the peer can then abort (``terminate called without an active exception``, exit
            code -6) after its work is done.  ``False`` on error paths, where a peer may never
            arrive.
    """
    import torch.distributed as dist

    if has_group():
        if barrier:
            dist.barrier()
        dist.destroy_process_group()


@contextmanager
def session(backend: str | None = None, *, timeout_s: float | None = None,
            threads: int | None = None) -> Iterator[RankInfo]:
    """``with ak.dist.session() as info:`` = :func:`setup`, the body, then :func:`teardown`.

    Teardown always runs.  When the body ends normally it waits for every rank first (the
    barrier of :func:`teardown`); when :func:`setup`, the body or that barrier raises it
    destroys the group *without* a barrier (a peer that died, or that waits for this rank,
    would never arrive) and re-raises.  Before that, an ``Exception`` is written to
    torchrun's per-rank error file (``$TORCHELASTIC_ERROR_FILE``, through
    ``torch.distributed.elastic``'s ``ErrorHandler``, as its ``@record`` decorator does), so
    the launcher can say which rank failed and why; without torchrun nothing is written.
    ``KeyboardInterrupt`` and ``SystemExit`` are not recorded (``@record`` does not either).

    Args:
        backend, timeout_s, threads: as for :func:`setup`.

    Yields:
        The :class:`RankInfo` of :func:`setup`.

    Raises:
        Whatever :func:`setup`, the body or the teardown barrier raises, unchanged.
    """
    try:
        info = setup(backend, timeout_s=timeout_s, threads=threads)
        yield info
        teardown()  # every rank arrives here: wait for the others, then destroy
    except BaseException as exc:
        if isinstance(exc, Exception):
            _record_failure(exc)
        with suppress(Exception):  # the exception in flight is the one to report
            teardown(barrier=False)
        raise


def _record_failure(exc: BaseException) -> None:
    """Write ``exc`` and its traceback to this rank's ``$TORCHELASTIC_ERROR_FILE``, if any.

    The JSON (``{"message": {"message": "Type: text", "extraInfo": {"py_callstack": ...}}}``,
    torch's ``ErrorHandler.record_exception``) is what torchrun and :mod:`accelkit.launch`
    read back.  Call it inside the ``except`` block (the traceback is read from there).  A
    file that cannot be written is warned about, never raised.
    """
    if not os.environ.get("TORCHELASTIC_ERROR_FILE"):
        return  # not under torchrun: the traceback on stderr is the whole report
    from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

    try:
        ErrorHandler().record_exception(exc)
    except OSError as err:
        warnings.warn(f"could not write torchrun's error file "
                      f"{os.environ['TORCHELASTIC_ERROR_FILE']}: {err}", stacklevel=2)


def get_rank() -> int:
    """Global rank (0 without a process group)."""
    import torch.distributed as dist

    return dist.get_rank() if has_group() else _env_int("RANK", 0)


def get_world_size() -> int:
    """World size (1 without a process group)."""
    import torch.distributed as dist

    return dist.get_world_size() if has_group() else _env_int("WORLD_SIZE", 1)


def is_main() -> bool:
    """True on global rank 0."""
    return get_rank() == 0


def print0(*args: Any, **kwargs: Any) -> None:
    """``print`` on rank 0 only (flushed, so the launcher streams it at once)."""
    if is_main():
        kwargs.setdefault("flush", True)
        print(*args, **kwargs)


def barrier() -> None:
    """Wait for every rank (no-op without a process group)."""
    import torch.distributed as dist

    if has_group():
        dist.barrier()


def save_json(obj: dict[str, Any], path: str | os.PathLike[str], *, all_ranks: bool = False) -> None:
    """Write ``obj`` as JSON to ``path`` on rank 0 (atomically: a temp file, then rename).

    Args:
        obj: JSON-serialisable results.
        path: the file (its folder is created).
        all_ranks: write on every rank instead; put ``{rank}`` in ``path`` to keep them apart.

    Raises:
        ValueError: when ``all_ranks`` and ``path`` has no ``{rank}`` with world size > 1.
    """
    rank = get_rank()
    if all_ranks:
        if "{rank}" not in str(path) and get_world_size() > 1:
            raise ValueError("with all_ranks=True put '{rank}' in the path")
        path = str(path).format(rank=rank)
    elif rank != 0:
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + f".tmp{rank}")
    tmp.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
    tmp.replace(p)


def comm_device() -> Any:
    """The device collectives need: the GPU for NCCL, the CPU for gloo."""
    import torch
    import torch.distributed as dist

    return device_for() if dist.get_backend() == "nccl" else torch.device("cpu")


def replica_max_abs_diff(module: Any) -> float:
    """Return the largest ``|p_rank - p_rank0|`` over all parameters and ranks.

    After data-parallel training every replica must hold the same weights; this gathers
    each rank's flattened parameters (collective: call on every rank) and compares them
    with rank 0's.  0.0 without a process group.

    Shape: parameters of any shape; flattened to one (P,) float64 vector per rank.
    """
    import torch
    import torch.distributed as dist

    if not has_group() or dist.get_world_size() == 1:
        return 0.0
    flat = torch.cat([p.detach().reshape(-1).to(comm_device(), torch.float64)
                      for p in module.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    return max(float((g - gathered[0]).abs().max()) for g in gathered)


__all__ = ["DEFAULT_TIMEOUT_S", "STACK_SIGNAL", "TIMEOUT_ENV", "RankInfo", "barrier",
           "choose_backend", "collective_timeout_s", "comm_device", "device_for",
           "enable_stack_dumps", "get_rank", "get_world_size", "has_group", "is_launched",
           "is_main", "print0", "rank_info", "replica_max_abs_diff", "save_json", "session",
           "setup", "teardown"]
