"""The pipeline-parallel cost model: GPipe's schedule and its bubble.

With ``p`` stages and ``m`` micro-batches, GPipe (Huang et al., "GPipe: Efficient Training of
Giant Neural Networks using Pipeline Parallelism", NeurIPS 2019, section 2.3) runs every
micro-batch forward through all stages, then every one backward.  Each stage works ``m`` of
the ``m + p - 1`` time slots of each phase, so it idles the *bubble*
``(p - 1) / (m + p - 1)`` of the step (taking a forward and a backward slot as equally long;
the fraction is the same for any ratio between the two).

1F1B (PipeDream-Flush: Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training",
ICML 2021; the schedule of Megatron-LM and ``torch.distributed.pipelining.Schedule1F1B``)
keeps the same bubble but starts each micro-batch's backward as soon as it can: stage ``s``
runs ``p - 1 - s`` forwards to fill the pipeline, then alternates one forward and one
backward.  A stage holds the activations of every micro-batch it has run forward and not yet
backward, so GPipe holds all ``m`` at once and 1F1B at most ``p - s``
(:func:`peak_in_flight`).

This module is pure arithmetic: :func:`bubble_fraction` (the formula notebook 01's pipeline
worker compares with its measured idle time), :func:`gpipe_schedule` and
:func:`one_f_one_b_schedule` (the slots, to draw) and :func:`peak_in_flight`.
Elsewhere: running a pipeline (``torch.distributed.pipelining``) in
``notebooks/workers/pipeline_parallel.py``; the memory of a stage in :mod:`accelkit.memory`
(strategy ``"pp"``); drawing in :mod:`accelkit.explore`.
"""

from __future__ import annotations

from dataclasses import dataclass


def _check(stages: int, microbatches: int) -> None:
    for name, v in (("stages", stages), ("microbatches", microbatches)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")


def bubble_fraction(stages: int, microbatches: int) -> float:
    """Return the fraction of a GPipe step each stage idles: ``(p - 1) / (m + p - 1)``.

    Args:
        stages: pipeline stages p, >= 1.
        microbatches: micro-batches m per step, >= 1.

    Returns:
        The bubble, a fraction in [0, 1) (0 for one stage).

    Raises:
        TypeError: for non-int arguments.
        ValueError: for arguments < 1.

    Example: ``bubble_fraction(4, 12)  # 3 / 15 = 0.2``
    """
    _check(stages, microbatches)
    return (stages - 1) / (microbatches + stages - 1)


@dataclass(frozen=True)
class Slot:
    """One unit of work in a pipeline schedule.

    Attributes:
        stage: the stage (rank) that runs it, 0-based.
        kind: ``"F"`` (forward) or ``"B"`` (backward).
        microbatch: the micro-batch, 0-based.
        start: its time slot, 0-based (each slot is one forward or one backward of one
            micro-batch on one stage).
    """

    stage: int
    kind: str
    microbatch: int
    start: int


def gpipe_schedule(stages: int, microbatches: int) -> list[Slot]:
    """Return GPipe's schedule: all forwards, then all backwards (last micro-batch first).

    Forward of micro-batch ``i`` on stage ``s`` runs in slot ``s + i``; the backward phase
    starts when the last stage has run its last forward and flows back, stage ``s`` taking
    micro-batch ``m-1-i`` in slot ``(m + p - 1) + (p - 1 - s) + i``.  The step lasts
    ``2 (m + p - 1)`` slots, ``2 m`` of them busy on every stage.

    Args:
        stages: pipeline stages p, >= 1.
        microbatches: micro-batches m, >= 1.

    Returns:
        ``2 · p · m`` :class:`Slot` s, sorted by start.

    Raises:
        TypeError, ValueError: as :func:`bubble_fraction`.
    """
    _check(stages, microbatches)
    p, m = stages, microbatches
    slots = [Slot(s, "F", i, s + i) for s in range(p) for i in range(m)]
    slots += [Slot(s, "B", m - 1 - i, (m + p - 1) + (p - 1 - s) + i)
              for s in range(p) for i in range(m)]
    return sorted(slots, key=lambda x: (x.start, x.stage))


def one_f_one_b_schedule(stages: int, microbatches: int) -> list[Slot]:
    """Return the 1F1B schedule: ``p - 1 - s`` warm-up forwards, then one forward, one backward.

    Each stage runs its operations in this order — forwards ``0 .. w-1`` (``w = min(p-1-s,
    m)``), then ``F(w+i), B(i)`` for ``i < m - w``, then the remaining backwards — each as
    soon as the stage is free and its input is ready (forward ``i`` after the previous
    stage's forward ``i``; backward ``i`` after the next stage's backward ``i``, or after the
    stage's own forward ``i`` on the last stage), every operation one slot long.  The step
    lasts ``2 (m + p - 1)`` slots, like GPipe's.

    Args:
        stages: pipeline stages p, >= 1.
        microbatches: micro-batches m, >= 1.

    Returns:
        ``2 · p · m`` :class:`Slot` s, sorted by start.

    Raises:
        TypeError, ValueError: as :func:`bubble_fraction`.

    Example: ``peak_in_flight(one_f_one_b_schedule(4, 8), 0)  # 4, GPipe's would be 8``
    """
    _check(stages, microbatches)
    p, m = stages, microbatches
    order: list[list[tuple[str, int]]] = []
    for s in range(p):
        w = min(p - 1 - s, m)
        ops = [("F", i) for i in range(w)]
        for i in range(m - w):
            ops += [("F", w + i), ("B", i)]
        ops += [("B", i) for i in range(m - w, m)]
        order.append(ops)
    done: dict[tuple[int, str, int], int] = {}     # (stage, kind, micro-batch) -> end slot
    free, nxt, slots = [0] * p, [0] * p, list[Slot]()
    while len(slots) < 2 * p * m:
        progressed = False
        for s in range(p):
            if nxt[s] == len(order[s]):
                continue
            kind, i = order[s][nxt[s]]
            dep = (s - 1, "F", i) if kind == "F" else (s + 1, "B", i) if s < p - 1 else (s, "F", i)
            if kind == "F" and s == 0:
                ready = 0
            elif dep in done:
                ready = done[dep]
            else:
                continue
            start = max(free[s], ready)
            slots.append(Slot(s, kind, i, start))
            done[(s, kind, i)] = free[s] = start + 1
            nxt[s] += 1
            progressed = True
        if not progressed:  # pragma: no cover - the order above has no cycle
            raise RuntimeError("1F1B schedule deadlocked")
    return sorted(slots, key=lambda x: (x.start, x.stage))


def peak_in_flight(slots: list[Slot], stage: int) -> int:
    """Return the most micro-batches ``stage`` holds activations for at once.

    A micro-batch is in flight on a stage from the start of its forward to the end of its
    backward there: the stage keeps its saved activations all that time.

    Args:
        slots: a schedule (:func:`gpipe_schedule`, :func:`one_f_one_b_schedule`).
        stage: the stage, 0-based.

    Returns:
        The peak count (GPipe: m; 1F1B: ``min(p - stage, m)``).

    Raises:
        ValueError: when the schedule has no slot on ``stage``.
    """
    mine = sorted((x.start, x.kind) for x in slots if x.stage == stage)
    if not mine:
        raise ValueError(f"no slot on stage {stage}")
    held = peak = 0
    for _, kind in mine:
        held += 1 if kind == "F" else 0
        peak = max(peak, held)
        held -= 1 if kind == "B" else 0
    return peak


def schedule_length(stages: int, microbatches: int) -> int:
    """Return the slots one GPipe step lasts: ``2 (m + p - 1)``."""
    _check(stages, microbatches)
    return 2 * (microbatches + stages - 1)


__all__ = ["Slot", "bubble_fraction", "gpipe_schedule", "one_f_one_b_schedule", "peak_in_flight",
           "schedule_length"]
