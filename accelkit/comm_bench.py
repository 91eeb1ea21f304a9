"""Measuring collectives inside workers; the pure cost model is :mod:`accelkit.comm_model`.

This module owns timing that every rank runs in lockstep: :func:`time_collective` (a fixed
number of calls per rank, each block's time the slowest rank's), :func:`measure_allreduce`
(``all_reduce`` of several buffer sizes, interleaved) and :func:`allreduce_vs_model`
(measure, fit the ring model on :data:`FIT_SIZES_BYTES`, predict a held-out size, compare).
Every function here is a collective: call it on every rank, after
:func:`accelkit.dist.setup`.

What lives elsewhere: rank, backend, setup/teardown and the device collectives need
(:func:`accelkit.dist.comm_device`) in :mod:`accelkit.dist`; the all-reduce cost model
(predict, fit, bus bandwidth) in :mod:`accelkit.comm_model`; single-process timing
statistics and :class:`accelkit.bench.Timing` in :mod:`accelkit.bench`.  It never imports
IPython or matplotlib (it runs in worker processes).

Typical worker::

    with ak.dist.session():
        cost = ak.comm_bench.allreduce_vs_model(grad_bytes)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from accelkit import comm_model, dist
from accelkit.bench import Timing

#: Buffer sizes the workers fit the ring model on: 4 KiB .. 16 MiB, bytes.
FIT_SIZES_BYTES: tuple[int, ...] = tuple(4**k for k in (6, 8, 10, 11, 12))


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
    import torch.distributed as td
    from torch.utils.benchmark import Timer

    if number < 1 or repeats < 1 or warmup < 0:
        raise ValueError(f"need number >= 1, repeats >= 1, warmup >= 0; got {number}, "
                         f"{repeats}, {warmup}")
    for _ in range(warmup):
        fn()
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    times = []
    for _ in range(repeats):
        dist.barrier()
        times.append(timer.timeit(number).mean)
    t = torch.tensor(times, dtype=torch.float64)
    if dist.has_group():
        t = t.to(dist.comm_device())
        td.all_reduce(t, op=td.ReduceOp.MAX)
    return Timing(label or "collective", tuple(t.cpu().tolist()), bytes_moved=nbytes,
                  threads=torch.get_num_threads(), device=str(dist.device_for()))


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
        RuntimeError: without a process group (run under torchrun, after
            :func:`accelkit.dist.setup`).
    """
    import torch
    import torch.distributed as td

    if any(s < 4 for s in sizes_bytes) or repeats < 1 or max_number < 1 or block_bytes <= 0:
        raise ValueError("need sizes >= 4 bytes, repeats >= 1, max_number >= 1, block_bytes > 0")
    if not dist.has_group():
        raise RuntimeError("measure_allreduce needs a process group: run the script under "
                           "torchrun and call ak.dist.setup() first")
    dev = dist.comm_device()
    bufs = {s: torch.ones(s // 4, device=dev) for s in sizes_bytes}
    times: dict[int, list[float]] = {s: [] for s in sizes_bytes}
    for _ in range(repeats):
        for s, buf in bufs.items():
            number = max(1, min(max_number, int(block_bytes // s)))
            t = time_collective(partial(td.all_reduce, buf), number=number, repeats=1,
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
    every rank, after :func:`accelkit.dist.setup`.

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
    fit = comm_model.fit_and_predict(sizes, medians, dist.get_world_size(), nbytes)
    return {"latency_s": fit.latency_s, "bus_gbps": fit.bus_gbps, "sizes_bytes": sizes,
            "sizes_median_s": medians, "allreduce_predicted_s": fit.predicted_s,
            "allreduce_measured_s": t[nbytes].median_s,
            "allreduce_times_s": list(t[nbytes].times_s)}


__all__ = [
    "FIT_SIZES_BYTES",
    "allreduce_vs_model",
    "measure_allreduce",
    "time_collective",
]
