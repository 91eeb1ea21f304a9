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
collective timing (:func:`time_collective`, :func:`measure_allreduce`,
:func:`allreduce_vs_model`), rank-0 output.  Elsewhere: the pure all-reduce cost model
(predict, fit, bus bandwidth) in :mod:`accelkit.comm_model`; starting workers (torchrun,
``TF_CONFIG``) and reading their results in :mod:`accelkit.launch`; single-process timing
statistics in :mod:`accelkit.bench`; TensorFlow strategies in :mod:`accelkit.strategy`.
It never imports IPython or matplotlib (it runs in worker processes).
"""

from __future__ import annotations

import atexit
import faulthandler
import gc
import json
import os
import signal
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from accelkit import comm_model
from accelkit.bench import Timing

#: Buffer sizes the workers fit the ring model on: 4 KiB .. 16 MiB, bytes.
FIT_SIZES_BYTES: tuple[int, ...] = tuple(4**k for k in (6, 8, 10, 11, 12))

#: How long a collective waits for the other ranks by default, seconds (torch's own default
#: is 30 minutes for gloo and 10 for NCCL: a hang would look like a slow run).
DEFAULT_TIMEOUT_S = 120.0
#: Environment variable that sets the collective timeout of :func:`setup`, seconds;
#: :func:`accelkit.launch.torchrun` sets it (``collective_timeout_s``).
TIMEOUT_ENV = "ACCELKIT_COLLECTIVE_TIMEOUT_S"
#: The signal on which a worker prints every thread's Python stack to stderr
#: (``faulthandler``); :mod:`accelkit.launch` sends it before killing a timed-out run.
STACK_SIGNAL = getattr(signal, "SIGUSR1", None)


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


def _has_group() -> bool:
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
    backend = dist.get_backend() if _has_group() else ""
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
    if is_launched() and not _has_group():
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

    if _has_group():
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

    return dist.get_rank() if _has_group() else _env_int("RANK", 0)


def get_world_size() -> int:
    """World size (1 without a process group)."""
    import torch.distributed as dist

    return dist.get_world_size() if _has_group() else _env_int("WORLD_SIZE", 1)


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

    if _has_group():
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


def time_collective(fn: Callable[[], Any], *, number: int = 10, repeats: int = 5,
                    warmup: int = 3, label: str = "", nbytes: float | None = None) -> Timing:
    """Time a collective (or any step that must run in lockstep) on every rank.

    ``ak.bench.measure`` chooses its repeat count adaptively, which a collective cannot
    allow: each rank might pick a different count and the group would deadlock.  Here
    every rank runs exactly ``warmup + number * repeats`` calls
    (``torch.utils.benchmark.Timer.timeit(number)`` per block, ``repeats`` blocks) after a
    barrier, and each block's time is the slowest rank's (a collective ends when its last
    rank does).

    Args:
        fn: the call to time, e.g. ``lambda: dist.all_reduce(buf)``.
        number: calls per timed block, >= 1.
        repeats: timed blocks, >= 1.
        warmup: untimed calls first, >= 0.
        label: a name for tables.
        nbytes: bytes per call (for ``Timing.gbps``).

    Returns:
        A :class:`accelkit.bench.Timing` with seconds per call, identical on every rank.

    Raises:
        ValueError: for ``number < 1``, ``repeats < 1`` or ``warmup < 0``.
    """
    import torch
    import torch.distributed as dist
    from torch.utils.benchmark import Timer

    if number < 1 or repeats < 1 or warmup < 0:
        raise ValueError(f"need number >= 1, repeats >= 1, warmup >= 0; got {number}, "
                         f"{repeats}, {warmup}")
    for _ in range(warmup):
        fn()
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    times = []
    for _ in range(repeats):
        barrier()
        times.append(timer.timeit(number).mean)
    t = torch.tensor(times, dtype=torch.float64)
    if _has_group():
        t = t.to(_comm_device())
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return Timing(label or "collective", tuple(t.cpu().tolist()), bytes_moved=nbytes,
                  threads=torch.get_num_threads(), device=str(device_for()))


def measure_allreduce(sizes_bytes: Sequence[int], *, repeats: int = 9, max_number: int = 20,
                      block_bytes: float = 32e6, warmup: int = 2) -> dict[int, Timing]:
    """Time ``all_reduce`` (sum, float32) of buffers of several sizes, interleaved.

    Each repeat times one block per size, in turn, so a slow moment of a shared machine
    hits all sizes alike (a ratio or a fit across sizes stays fair).  The calls per block are
    ``min(max_number, block_bytes / size)`` (at least 1): the same on every rank.  Call on
    every rank (it is a collective).

    Args:
        sizes_bytes: buffer sizes, bytes, each >= 4 (one float32).
        repeats: timed blocks per size, >= 1.
        max_number: most calls per block, >= 1.
        block_bytes: bytes all-reduced per block, roughly, > 0.
        warmup: untimed calls per size first.

    Returns:
        ``{size: Timing}`` (seconds per all-reduce, the slowest rank's).

    Raises:
        ValueError: for a size < 4 bytes, ``repeats < 1`` or ``max_number < 1``.
        RuntimeError: without a process group (run under torchrun, after :func:`setup`).
    """
    import torch
    import torch.distributed as dist

    if any(s < 4 for s in sizes_bytes) or repeats < 1 or max_number < 1 or block_bytes <= 0:
        raise ValueError("need sizes >= 4 bytes, repeats >= 1, max_number >= 1, block_bytes > 0")
    if not _has_group():
        raise RuntimeError("measure_allreduce needs a process group: run the script under "
                           "torchrun and call ak.dist.setup() first")
    dev = _comm_device()
    bufs = {s: torch.ones(s // 4, device=dev) for s in sizes_bytes}
    times: dict[int, list[float]] = {s: [] for s in sizes_bytes}
    for _ in range(repeats):
        for s, buf in bufs.items():
            number = max(1, min(max_number, int(block_bytes // s)))
            t = time_collective(partial(dist.all_reduce, buf), number=number, repeats=1,
                                warmup=warmup if not times[s] else 0)
            times[s].extend(t.times_s)
    return {s: Timing(f"all_reduce {s} B", tuple(v), bytes_moved=s, device=str(dev))
            for s, v in times.items()}


def allreduce_vs_model(nbytes: int,
                       sizes_bytes: Sequence[int] = FIT_SIZES_BYTES) -> dict[str, Any]:
    """Measure all-reduces, fit the ring model on ``sizes_bytes``, predict ``nbytes``, compare.

    The sequence of notebooks 01 and 04: :func:`measure_allreduce` of ``sizes_bytes`` and
    ``nbytes`` together (interleaved, 9 blocks per size), then
    :func:`accelkit.comm_model.fit_and_predict` on the medians of ``sizes_bytes`` only, so the
    prediction for ``nbytes`` is made without its own measurement.  Collective: call on
    every rank, after :func:`setup`.

    Args:
        nbytes: the buffer to predict and measure, bytes, >= 4 (e.g. the gradient's size).
        sizes_bytes: the sizes to fit on, bytes, >= 4 each, at least two different ones
            (default :data:`FIT_SIZES_BYTES`).

    Returns:
        A JSON-ready dict, the same on every rank: ``latency_s`` (s), ``bus_gbps`` (GB/s;
        None with one rank), ``sizes_bytes``, ``sizes_median_s`` (s, the points fitted), and
        for ``nbytes`` ``allreduce_predicted_s`` (0.0 with one rank), ``allreduce_measured_s``
        (median) and ``allreduce_times_s`` (every block), seconds per all-reduce.

    Raises:
        ValueError: as :func:`measure_allreduce` and :func:`accelkit.comm_model.fit_allreduce`.
        RuntimeError: without a process group.
    """
    sizes = list(sizes_bytes)
    t = measure_allreduce(sizes + [nbytes])
    medians = [t[s].median_s for s in sizes]
    fit = comm_model.fit_and_predict(sizes, medians, get_world_size(), nbytes)
    return {"latency_s": fit.latency_s, "bus_gbps": fit.bus_gbps, "sizes_bytes": sizes,
            "sizes_median_s": medians, "allreduce_predicted_s": fit.predicted_s,
            "allreduce_measured_s": t[nbytes].median_s,
            "allreduce_times_s": list(t[nbytes].times_s)}


def _comm_device() -> Any:
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

    if not _has_group() or dist.get_world_size() == 1:
        return 0.0
    flat = torch.cat([p.detach().reshape(-1).to(_comm_device(), torch.float64)
                      for p in module.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    return max(float((g - gathered[0]).abs().max()) for g in gathered)


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "FIT_SIZES_BYTES",
    "STACK_SIGNAL",
    "TIMEOUT_ENV",
    "RankInfo",
    "allreduce_vs_model",
    "barrier",
    "choose_backend",
    "collective_timeout_s",
    "device_for",
    "enable_stack_dumps",
    "get_rank",
    "get_world_size",
    "is_launched",
    "is_main",
    "measure_allreduce",
    "print0",
    "rank_info",
    "replica_max_abs_diff",
    "save_json",
    "session",
    "setup",
    "teardown",
    "time_collective",
]
