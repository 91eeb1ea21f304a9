"""Pipeline explorer: GPipe's schedule for p stages and m micro-batches, and its bubble.

The schedule is :func:`accelkit.pipeline_model.gpipe_schedule`, the bubble
:func:`accelkit.pipeline_model.bubble_fraction` — the formula notebook 01's pipeline worker
compares with the idle time it measures.  The course teaches GPipe only (no 1F1B), so only
GPipe is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelkit import pipeline_model
from accelkit.explore import ui


@dataclass(frozen=True)
class PipelineView:
    """What the pipeline explorer shows for one setting.

    Attributes:
        stages, microbatches: p and m.
        schedule: the slots (:func:`accelkit.pipeline_model.gpipe_schedule`).
        length: slots per step.
        bubble: the predicted idle fraction of each stage.
    """

    stages: int
    microbatches: int
    schedule: list[pipeline_model.Slot]
    length: int
    bubble: float


def compute(stages: int, microbatches: int) -> PipelineView:
    """Compute the explorer's numbers (the update function; arguments as :func:`pipeline`)."""
    return PipelineView(stages, microbatches,
                        pipeline_model.gpipe_schedule(stages, microbatches),
                        pipeline_model.schedule_length(stages, microbatches),
                        pipeline_model.bubble_fraction(stages, microbatches))


def draw(view: PipelineView, measured: Mapping[int, float] | None = None) -> Any:
    """Draw the schedule (left: one row per stage, forward blue, backward orange, idle white)
    and the bubble against m for this p (right), with ``measured`` idle fractions as dots.

    Returns:
        The ``Figure``; its first axes holds one rectangle per slot, its second the curve
        (``gid="explore-bubble"``) with the chosen m marked.
    """
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.6, 0.9 + 0.45 * min(view.stages, 16)),
                                 gridspec_kw={"width_ratios": [2.2, 1]})
    for slot in view.schedule:
        ax.broken_barh([(slot.start, 1)], (slot.stage - 0.4, 0.8),
                       facecolors="tab:blue" if slot.kind == "F" else "tab:orange",
                       edgecolor="white")
    ax.set(xlim=(0, view.length), ylim=(view.stages - 0.5, -0.5), xlabel="time slot",
           title=f"GPipe, p = {view.stages}, m = {view.microbatches}: bubble {view.bubble:.0%}")
    ax.set_yticks(range(view.stages), [f"stage {s}" for s in range(view.stages)], fontsize=7)
    ms = sorted({1, 2, 4, 8, 16, 32, 64, view.microbatches, *(measured or {})})
    bx.plot(ms, [pipeline_model.bubble_fraction(view.stages, m) for m in ms], "-",
            gid="explore-bubble", label="(p−1)/(m+p−1)")
    bx.plot([view.microbatches], [view.bubble], "o", color="black")
    if measured:
        bx.plot(list(measured), list(measured.values()), "r^", label="measured idle")
    bx.set(xscale="log", xlabel="micro-batches m", ylabel="idle fraction", ylim=(0, 1))
    bx.legend(fontsize=7)
    fig.tight_layout()
    return fig


def readout(view: PipelineView) -> str:
    """One line: the bubble and the slots."""
    return (f"p = {view.stages} stages, m = {view.microbatches} micro-batches: each stage is "
            f"busy {2 * view.microbatches} of {view.length} slots, bubble "
            f"(p−1)/(m+p−1) = {view.bubble:.3f}")


def pipeline(stages: int, microbatches: int, *,
             measured: Mapping[int, float] | None = None) -> None:
    """Explore GPipe's schedule and bubble for p stages and m micro-batches.

    Shows the schedule (every micro-batch forward through all stages, then every one
    backward) and the bubble ``(p − 1)/(m + p − 1)`` against m, with the idle fractions
    notebook 01 measured (``measured``) beside the formula.  Sliders: stages, micro-batches.
    Without widgets (see :mod:`accelkit.explore.ui`) it draws this state and prints the call
    that reproduces it.

    Args:
        stages: pipeline stages p, >= 1.
        microbatches: micro-batches m, >= 1.
        measured: ``{m: measured idle fraction}`` for this p, drawn as dots.

    Returns:
        None (it displays the explorer).

    Raises:
        TypeError, ValueError: as :func:`accelkit.pipeline_model.bubble_fraction`.

    Example: ``ak.explore.pipeline(4, 12)``
    """
    settings = dict(stages=stages, microbatches=microbatches,
                    measured=dict(measured) if measured else None)
    compute(stages, microbatches)
    controls = {"stages": ui.Control("int", "stages p", 1, 16),
                "microbatches": ui.Control("int", "micro-batches m", 1, 64)}

    def render(s: dict[str, Any]) -> tuple[Any, str]:
        view = compute(s["stages"], s["microbatches"])
        return draw(view, s["measured"] if s["stages"] == stages else None), readout(view)

    ui.show("pipeline", settings, controls, render)


__all__ = ["PipelineView", "compute", "draw", "pipeline", "readout"]
