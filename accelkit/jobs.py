"""Notebook 07's small helpers: profiler shares, the largest batch that fits, flight records.

Owns: :func:`time_in` (seconds a profiler spent in ops of one name, e.g. the DataLoader),
:func:`batch_by_model` (the largest batch a memory model allows), :func:`largest_fitting`
(a measured search: doubling, then bisection) and :func:`collective_rows` /
:func:`first_divergence` (the ranks' flight-recorder records side by side).
Elsewhere: peak memory measurements (:func:`accelkit.memory.measured_peak_bytes`), timing
(:mod:`accelkit.bench`), launching workers (:mod:`accelkit.launch`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: The label a DataLoader iterator gives each ``next()`` in a profiler trace (its
#: ``_profile_name``: ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`` or
#: ``..._MultiProcessingDataLoaderIter.__next__``).
DATALOADER_PREFIX = "enumerate(DataLoader)"


def time_in(prof: Any, prefix: str) -> float:
    """Return the seconds ``prof`` recorded in ops whose name starts with ``prefix``.

    Adds the *total* CPU time (children included) of each matching entry of
    ``prof.key_averages()``; a matching op nested in another matching op would count twice,
    so pick a prefix of outermost spans (a ``record_function`` label, the DataLoader's).

    Args:
        prof: a finished ``torch.profiler.profile``.
        prefix: the start of the op names, e.g. :data:`DATALOADER_PREFIX` or ``"compute"``.

    Returns:
        Seconds (0.0 when no op matched).

    Raises:
        ValueError: for an empty ``prefix``.

    Example: ``waiting_s = time_in(prof, DATALOADER_PREFIX)``
    """
    if not prefix:
        raise ValueError("prefix must not be empty (it would match every op)")
    return sum(e.cpu_time_total for e in prof.key_averages() if e.key.startswith(prefix)) / 1e6


def batch_by_model(capacity_bytes: float, fixed_bytes: float, per_sample_bytes: float) -> int:
    """Return the largest batch whose predicted peak ``fixed + B * per_sample`` fits.

    The memory model of a training step: parameters, gradients and optimizer states do not
    grow with the batch (``fixed_bytes``); the activations saved for the backward pass do,
    linearly (``per_sample_bytes``; ZeRO paper, Rajbhandari et al. 2020, section 3).

    Args:
        capacity_bytes: the memory available, bytes, > 0.
        fixed_bytes: bytes that do not depend on the batch, >= 0.
        per_sample_bytes: bytes per sample, > 0.

    Returns:
        The batch size, >= 0 (0: even the fixed part does not fit).

    Raises:
        ValueError: for a capacity or per-sample size <= 0, or negative fixed bytes.

    Example: ``batch_by_model(16e9, 6e9, 50e6)  # 200``
    """
    if not capacity_bytes > 0 or not per_sample_bytes > 0 or fixed_bytes < 0:
        raise ValueError(f"need capacity > 0, per-sample > 0, fixed >= 0; got {capacity_bytes}, "
                         f"{per_sample_bytes}, {fixed_bytes}")
    return max(int((capacity_bytes - fixed_bytes) // per_sample_bytes), 0)


def largest_fitting(fits: Callable[[int], bool], *, start: int = 1,
                    limit: int = 1 << 20) -> tuple[int, list[tuple[int, bool]]]:
    """Find the largest ``n`` with ``fits(n)``: double from ``start``, then bisect.

    The search a learner runs by hand after an out-of-memory error: try a batch, halve or
    double it.  It assumes that what fits at ``n`` fits below ``n`` (memory grows with the
    batch) and costs about ``2 * log2(answer)`` calls.

    Args:
        fits: runs a step at size ``n`` and returns False when it does not fit (catch
            ``torch.OutOfMemoryError`` inside it on a GPU).
        start: the first size tried, >= 1.
        limit: the largest size tried, >= ``start``.

    Returns:
        ``(largest, tried)``: the largest size that fitted and every ``(size, fitted)`` tried,
        in order.

    Raises:
        ValueError: for ``start < 1``, ``limit < start``, or when ``start`` itself does not fit.

    Example: ``best, tried = largest_fitting(lambda b: peak(b) <= capacity)``
    """
    if start < 1 or limit < start:
        raise ValueError(f"need 1 <= start <= limit, got start={start}, limit={limit}")
    tried: list[tuple[int, bool]] = []

    def check(n: int) -> bool:
        ok = bool(fits(n))
        tried.append((n, ok))
        return ok

    if not check(start):
        raise ValueError(f"size {start} does not fit: nothing smaller was tried; lower start")
    good, bad = start, None
    while bad is None and good < limit:       # doubling: find a size that does not fit
        nxt = min(2 * good, limit)
        if check(nxt):
            good = nxt
        else:
            bad = nxt
    while bad is not None and bad - good > 1:  # bisection between the last good and bad
        mid = (good + bad) // 2
        if check(mid):
            good = mid
        else:
            bad = mid
    return good, tried


def collective_rows(records: Mapping[int, Sequence[Mapping[str, Any]]]) -> list[dict[Any, Any]]:
    """Line the ranks' flight-recorder entries up by collective sequence number.

    Args:
        records: per rank, its entries (dicts with ``collective_seq_id``, ``profiling_name``
            and ``input_sizes``, as in ``torch._C._distributed_c10d._dump_fr_trace``).

    Returns:
        One dict per sequence number, in order: ``{"seq": n, rank: "op shapes" or "—"}``,
        "—" where that rank issued no collective with that number.

    Raises:
        KeyError: when an entry lacks one of the three fields.
    """
    ops: dict[int, dict[int, str]] = {}
    for rank, entries in records.items():
        for e in entries:
            seq = int(e["collective_seq_id"])
            shapes = ", ".join(str(list(s)) for s in e["input_sizes"])
            ops.setdefault(seq, {})[rank] = f"{e['profiling_name']} {shapes}"
    ranks = sorted(records)
    rows: list[dict[Any, Any]] = []
    for seq in sorted(ops):
        row: dict[Any, Any] = {"seq": seq}
        row.update({r: ops[seq].get(r, "—") for r in ranks})
        rows.append(row)
    return rows


def first_divergence(rows: Sequence[Mapping[Any, Any]]) -> int | None:
    """Return the first sequence number at which the ranks' collectives differ, or None.

    Args:
        rows: the output of :func:`collective_rows`.
    """
    for row in rows:
        if len({v for k, v in row.items() if k != "seq"}) > 1:
            return int(row["seq"])
    return None


__all__ = ["DATALOADER_PREFIX", "batch_by_model", "collective_rows", "first_divergence",
           "largest_fitting", "time_in"]
