"""Code that runs inside distributed workers: rank, backend, setup and teardown.

:func:`rank_info` reads torchrun's variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``GROUP_RANK``); :func:`setup` creates the process group (NCCL for
CUDA, gloo otherwise); :func:`session` wraps setup/teardown and records a failure in
torchrun's error file.  Without a launcher a script is rank 0 of 1.  Also the collectives'
device (:func:`comm_device`), rank-0 output, the replica check.  Elsewhere: collective timing
(:mod:`accelkit.comm`), starting workers (:mod:`accelkit.launch`).  Never imports IPython.
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
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

#: The signal a worker answers with every thread's Python stack (None without SIGUSR1).
STACK_SIGNAL = getattr(signal, "SIGUSR1", None)

#: Default collective timeout, seconds (torch's: 30 min for gloo, 10 for NCCL).
DEFAULT_TIMEOUT_S = 120.0
#: Environment variable with the collective timeout of :func:`setup`, seconds.
TIMEOUT_ENV = "ACCELKIT_COLLECTIVE_TIMEOUT_S"


@dataclass(frozen=True)
class RankInfo:
    """This worker's place in the group: global ``rank``, ``local_rank`` (its GPU index),
    ``world_size``, ``local_world_size``, ``node_rank`` (``GROUP_RANK``), ``backend`` ("" before
    setup), ``device`` (None when ``LOCAL_RANK`` has no GPU), ``launched`` (by a launcher)."""

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
    if not (raw := os.environ.get(name)):
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
    """Return ``"nccl"`` for a CUDA ``device`` (default: :func:`device_for`) when NCCL exists
    (ROCm's RCCL goes by that name), else ``"gloo"``: NCCL moves CUDA tensors only."""
    import torch
    import torch.distributed as dist

    dev = torch.device(device) if device is not None else device_for()
    return "nccl" if dev.type == "cuda" and dist.is_nccl_available() else "gloo"


def device_for(local_rank: int | None = None) -> Any:
    """Return ``cuda:<local_rank>`` (default ``$LOCAL_RANK`` or 0) when CUDA exists, else CPU;
    raises ValueError when ``local_rank`` is negative or not below the number of GPUs."""
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
    """Return this worker's :class:`RankInfo` from the launcher's variables (rank 0 of 1
    without one); raises ValueError when ``RANK`` is not below ``WORLD_SIZE`` or a variable is
    not an integer."""
    import torch.distributed as dist

    rank, world = _env_int("RANK", 0), _env_int("WORLD_SIZE", 1)
    if not 0 <= rank < world:
        raise ValueError(f"RANK={rank} must be in 0..WORLD_SIZE-1 (WORLD_SIZE={world})")
    backend = dist.get_backend() if has_group() else ""
    try:
        dev = device_for()
    except ValueError:  # LOCAL_RANK beyond the GPUs: setup() raises and says why
        dev = None
    return RankInfo(rank, _env_int("LOCAL_RANK", 0), world, _env_int("LOCAL_WORLD_SIZE", world),
                    _env_int("GROUP_RANK", 0), str(backend), dev, is_launched())


def collective_timeout_s() -> float:
    """Return ``$ACCELKIT_COLLECTIVE_TIMEOUT_S``, else :data:`DEFAULT_TIMEOUT_S` (seconds);
    raises ValueError when the variable is not a number > 0."""
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
    """Print every thread's Python stack to stderr on :data:`STACK_SIGNAL` (``faulthandler``:
    a C handler, so it works while the main thread blocks in a collective).  Returns True
    when registered, False where the platform has no ``SIGUSR1`` (Windows)."""
    if STACK_SIGNAL is not None:
        faulthandler.register(STACK_SIGNAL, all_threads=True)
    return STACK_SIGNAL is not None


def setup(backend: str | None = None, *, timeout_s: float | None = None,
          threads: int | None = None) -> RankInfo:
    """Create the process group (once per worker, before wrapping the model); a launched
    worker also gets :func:`enable_stack_dumps`.

    Args:
        backend: ``"gloo"``/``"nccl"``; default: :func:`choose_backend`.
        timeout_s: seconds a collective waits for the other ranks before it raises (gloo:
            ``Timed out waiting N ms``), > 0; default :func:`collective_timeout_s`.
        threads: torch intra-op threads; default: ``$OMP_NUM_THREADS`` if set.

    Returns:
        The :class:`RankInfo` with ``backend``; without a launcher, rank 0 of 1 (no group).

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
        # Free what keeps the group alive (DDP's reducer sits in cycles) before interpreter
        # shutdown, where gloo's threads can abort the process (exit -6; pytorch#179291).
        atexit.unregister(gc.collect)  # once, however often setup() runs
        atexit.register(gc.collect)
    return replace(rank_info(), backend=chosen if is_launched() else "", device=dev)


def teardown(barrier: bool = True) -> None:
    """Destroy the process group if one exists (safe twice or without one); with ``barrier``
    first wait for every rank (else gloo can abort a peer still using the connections, exit
    -6); ``barrier=False`` on error paths, where a peer may never arrive."""
    import torch.distributed as dist

    if has_group():
        if barrier:
            dist.barrier()
        dist.destroy_process_group()


@contextmanager
def session(backend: str | None = None, *, timeout_s: float | None = None,
            threads: int | None = None) -> Iterator[RankInfo]:
    """``with ak.dist.session() as info:``: :func:`setup` (same arguments), the body, then
    :func:`teardown` with its barrier.  When anything raises, an ``Exception`` (not
    KeyboardInterrupt/SystemExit, as torch's ``@record``) is written to torchrun's per-rank
    error file (``$TORCHELASTIC_ERROR_FILE``), the group is destroyed without a barrier, and
    the exception re-raised unchanged.

    Yields:
        The :class:`RankInfo` of :func:`setup`.
    """
    try:
        yield setup(backend, timeout_s=timeout_s, threads=threads)
        teardown()  # every rank arrives here: wait for the others, then destroy
    except BaseException as exc:
        if isinstance(exc, Exception):
            _record_failure(exc)
        with suppress(Exception):  # the exception in flight is the one to report
            teardown(barrier=False)
        raise


def _record_failure(exc: BaseException) -> None:
    """Write ``exc`` to ``$TORCHELASTIC_ERROR_FILE`` if set (torch's ``ErrorHandler``; call
    inside the ``except`` block); an unwritable file is warned about, never raised."""
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


def save_json(obj: dict[str, Any], path: str | os.PathLike[str], *,
              all_ranks: bool = False) -> None:
    """Write ``obj`` as JSON to ``path`` (folder created; a temp file, then rename) on rank 0,
    or with ``all_ranks`` on every rank (put ``{rank}`` in ``path``: ValueError without it
    when the world size is > 1)."""
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
    """Return the largest ``|p_rank - p_rank0|`` over all parameters and ranks (0.0 without a
    group): a collective (call on every rank) gathering one (P,) float64 vector per rank."""
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
