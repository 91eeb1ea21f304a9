"""The pipeline-parallel cost model: GPipe's schedule and its bubble.

With ``p`` stages and ``m`` micro-batches, GPipe (Huang et al., "GPipe: Efficient Training of
Giant Neural Networks using Pipeline Parallelism", NeurIPS 2019, section 2.3) runs every
micro-batch forward through all stages, then every one backward.  Each stage works ``m`` of
the ``m + p - 1`` time slots of each phase, so it idles the *bubble*
``(p - 1) / (m + p - 1)`` of the step (taking a forward and a backward slot as equally long;
the fraction is the same for any ratio between the two).

This module is pure arithmetic: :func:`bubble_fraction` (the formula notebook 01's pipeline
worker compares with its measured idle time) and :func:`gpipe_schedule` (the slots, to draw).
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


def schedule_length(stages: int, microbatches: int) -> int:
    """Return the slots one GPipe step lasts: ``2 (m + p - 1)``."""
    _check(stages, microbatches)
    return 2 * (microbatches + stages - 1)


__all__ = ["Slot", "bubble_fraction", "gpipe_schedule", "schedule_length"]
