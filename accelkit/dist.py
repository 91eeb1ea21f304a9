"""Code that runs inside distributed workers: who am I, which backend, setup and teardown.

A worker started by ``torchrun`` finds its place in the group in environment variables
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
``MASTER_ADDR``/``MASTER_PORT``); :func:`rank_info` reads them, :func:`setup` creates the
process group with the right backend (NCCL for CUDA devices, gloo otherwise: never a
hard-coded ``"nccl"`` on a CPU), and :func:`teardown` destroys it.  A script that is run
without a launcher is a group of one (rank 0 of 1), so the same script runs both ways.

Typical worker::

    info = ak.dist.setup()                    # process group first, then wrap the model
    model = DDP(model.to(info.device))
    ak.dist.print0("epoch", epoch, "loss", loss)
    ak.dist.teardown()

This module never imports IPython or matplotlib (it runs in worker processes).
"""

from __future__ import annotations

import atexit
import gc
import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from accelkit.bench import Timing


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
    backend = dist.get_backend() if dist.is_available() and dist.is_initialized() else ""
    try:
        dev = device_for()
    except ValueError:  # LOCAL_RANK beyond the GPUs: setup() raises and says why
        dev = None
    return RankInfo(rank, _env_int("LOCAL_RANK", 0), world, _env_int("LOCAL_WORLD_SIZE", world),
                    _env_int("GROUP_RANK", 0), str(backend), dev, launched)


def setup(backend: str | None = None, *, timeout_s: float = 120,
          threads: int | None = None) -> RankInfo:
    """Create the process group (call once per worker, before wrapping the model).

    Args:
        backend: ``"gloo"``/``"nccl"``; default: :func:`choose_backend` for this device.
        timeout_s: how long collectives wait for the other ranks before failing, > 0
            (a hung peer then raises instead of blocking forever).
        threads: torch intra-op threads; default: ``$OMP_NUM_THREADS`` if set.

    Returns:
        The :class:`RankInfo` (with ``backend`` filled in).  Without a launcher nothing is
        initialised and rank 0 of 1 is returned, so single-process runs need no branch.

    Raises:
        ValueError: for ``timeout_s <= 0`` or ``"nccl"`` asked for on a CPU-only worker.
    """
    import torch
    import torch.distributed as dist

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
    if is_launched() and not dist.is_initialized():
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

    if dist.is_available() and dist.is_initialized():
        if barrier:
            dist.barrier()
        dist.destroy_process_group()


@contextmanager
def session(backend: str | None = None, *, timeout_s: float = 120,
            threads: int | None = None) -> Iterator[RankInfo]:
    """``with ak.dist.session() as info:`` = :func:`setup`, then :func:`teardown` at the end.

    The group is destroyed also when the body raises, so the launcher sees a clean failure.
    """
    info = setup(backend, timeout_s=timeout_s, threads=threads)
    try:
        yield info
    except BaseException:
        teardown(barrier=False)  # a failed rank must not wait for peers that wait for it
        raise
    teardown()


def get_rank() -> int:
    """Global rank (0 without a process group)."""
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else \
        _env_int("RANK", 0)


def get_world_size() -> int:
    """World size (1 without a process group)."""
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else \
        _env_int("WORLD_SIZE", 1)


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

    if dist.is_available() and dist.is_initialized():
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
    if dist.is_available() and dist.is_initialized():
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
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("measure_allreduce needs a process group: run the script under "
                           "torchrun and call ak.dist.setup() first")
    dev = _comm_device()
    bufs = {s: torch.ones(s // 4, device=dev) for s in sizes_bytes}
    times: dict[int, list[float]] = {s: [] for s in sizes_bytes}
    for _ in range(repeats):
        for s, buf in bufs.items():
            number = max(1, min(max_number, int(block_bytes // s)))
            t = time_collective(lambda b=buf: dist.all_reduce(b), number=number, repeats=1,
                                warmup=warmup if not times[s] else 0)
            times[s].extend(t.times_s)
    return {s: Timing(f"all_reduce {s} B", tuple(v), bytes_moved=s, device=str(dev))
            for s, v in times.items()}


def ring_allreduce_s(nbytes: float, world_size: int, bus_gbps: float,
                     latency_s: float = 0.0) -> float:
    """Predict the time of a ring all-reduce of ``nbytes`` over ``world_size`` ranks.

    ``T = latency_s + 2 (N-1)/N * nbytes / bandwidth``: in a ring each rank sends and
    receives ``(N-1)/N`` of the buffer twice (reduce-scatter, then all-gather) (Patarasuk &
    Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 2009).
    ``bus_gbps`` is the "bus bandwidth" of the NCCL tests (``busBw = algBw * 2(N-1)/N``),
    so one number describes the link for any N; ``latency_s`` is the fixed cost of one
    all-reduce (measure it with a tiny buffer).

    Args:
        nbytes: buffer size, bytes, >= 0.
        world_size: ranks N, >= 1 (N = 1 costs nothing).
        bus_gbps: bus bandwidth, GB/s (10**9 bytes/s), > 0.
        latency_s: fixed cost per call, seconds, >= 0.

    Returns:
        Predicted seconds per all-reduce.

    Raises:
        ValueError: for negative sizes, ``world_size < 1`` or ``bus_gbps <= 0``.
    """
    if nbytes < 0 or latency_s < 0:
        raise ValueError(f"nbytes and latency_s must be >= 0, got {nbytes}, {latency_s}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not bus_gbps > 0:
        raise ValueError(f"bus_gbps must be > 0, got {bus_gbps}")
    if world_size == 1:
        return 0.0
    return latency_s + 2 * (world_size - 1) / world_size * nbytes / (bus_gbps * 1e9)


def fit_allreduce(sizes_bytes: Sequence[float], seconds: Sequence[float],
                  world_size: int) -> tuple[float, float]:
    """Fit the latency-bandwidth model of :func:`ring_allreduce_s` to measured times.

    Least squares of ``t = latency + x / bandwidth`` with ``x = 2 (N-1)/N * size`` (the
    "alpha-beta" model of Hockney, Parallel Computing 1994, applied to the ring).  Plain
    least squares lets the largest buffers decide the slope: that is the regime of gradient
    all-reduces (megabytes), and the fitted latency is then the offset of that regime, not
    the time of an empty message (which small buffers would give).

    Args:
        sizes_bytes: buffer sizes, bytes (at least two different ones).
        seconds: measured seconds per all-reduce, one per size.
        world_size: ranks N, >= 2.

    Returns:
        ``(latency_s, bus_gbps)``; the latency is clipped at 0.

    Raises:
        ValueError: for mismatched lengths, fewer than two sizes, ``world_size < 2``, or
            times that do not grow with size (no bandwidth to fit).
    """
    if len(sizes_bytes) != len(seconds) or len(set(sizes_bytes)) < 2:
        raise ValueError("need one time per size and at least two different sizes")
    if world_size < 2:
        raise ValueError("fitting needs world_size >= 2")
    if any(not t > 0 for t in seconds):
        raise ValueError("every time must be > 0 seconds")
    f = 2 * (world_size - 1) / world_size
    xs = [f * s for s in sizes_bytes]
    mx, my = sum(xs) / len(xs), sum(seconds) / len(seconds)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, seconds)) / sxx
    if not slope > 0:
        raise ValueError("the times do not grow with the size; measure larger buffers")
    return max(0.0, my - slope * mx), 1.0 / slope / 1e9


def bus_bandwidth_gbps(nbytes: float, world_size: int, seconds: float) -> float:
    """Return the bus bandwidth (GB/s) of an all-reduce of ``nbytes`` that took ``seconds``.

    ``busBw = 2 (N-1)/N * nbytes / seconds`` (NCCL tests' definition, PERFORMANCE.md),
    the inverse of :func:`ring_allreduce_s` without latency.

    Raises:
        ValueError: for ``world_size < 2`` (no traffic) or ``seconds <= 0``.
    """
    if world_size < 2:
        raise ValueError("bus bandwidth needs world_size >= 2 (one rank moves no bytes)")
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    return 2 * (world_size - 1) / world_size * nbytes / seconds / 1e9


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

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return 0.0
    flat = torch.cat([p.detach().reshape(-1).to(_comm_device(), torch.float64)
                      for p in module.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    return max(float((g - gathered[0]).abs().max()) for g in gathered)


__all__ = [
    "RankInfo",
    "barrier",
    "bus_bandwidth_gbps",
    "choose_backend",
    "device_for",
    "fit_allreduce",
    "get_rank",
    "get_world_size",
    "is_launched",
    "is_main",
    "measure_allreduce",
    "print0",
    "rank_info",
    "replica_max_abs_diff",
    "ring_allreduce_s",
    "save_json",
    "session",
    "setup",
    "teardown",
    "time_collective",
]
