"""Plots for the notebooks: drawing only, each stamped with the device and size profile.

:func:`roofline` and :func:`timeline` draw what was measured on a new figure (or ``ax=``) and
return the ``Axes``; one-off plots are plain matplotlib in the notebooks.  Every plot carries a
grey :func:`stamp`, ``device · profile``, in its lower-right corner.  :func:`text_overlaps`
checks a drawn figure for overlapping texts (the tests run it on every plot here and in
:mod:`accelkit.explore`).  Measurements live in :mod:`accelkit.bench` and
:mod:`accelkit.roofline`; the profile is passed in, never re-read (:mod:`accelkit.env`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from accelkit.env import Profile
    from accelkit.roofline import Placement, Roofline

#: Line styles of the compute roofs, one per dtype (colour alone fails in greyscale print).
_ROOF_STYLES = ("-", "--", ":", "-.")


def _new_ax(ax: Axes | None, figsize: tuple[float, float] = (6.4, 3.6)) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=figsize, layout="constrained")
    return new


def stamp(ax: Axes, device: str, profile: str | Profile) -> Axes:
    """Write ``device · profile <name>`` in small grey text in the lower-right corner of ``ax``
    and return ``ax``; ``profile``: a name (``"ci"``) or the notebook's resolved ``P``."""
    name = profile if isinstance(profile, str) else profile.name
    ax.text(0.995, 0.01, f"{device} · profile {name}", transform=ax.transAxes,
            ha="right", va="bottom", fontsize=7, color="0.45", gid="accelkit-stamp")
    return ax


def roofline(roof: Roofline, points: Sequence[Placement] = (), *, title: str = "",
             ax: Axes | None = None) -> Axes:
    """Draw ``roof`` (:func:`accelkit.roofline.measure`) on log-log axes: the memory roof once, a
    compute roof per dtype from its ridge point (own colour and line style), and ``points``
    (:meth:`Roofline.place`) at (intensity, achieved TFLOP/s).  Returns the ``Axes``
    (x: FLOP/byte, y: TFLOP/s)."""
    import numpy as np

    ax = _new_ax(ax, (6.4, 4.2))
    ridges = [roof.ridge_point(k) for k in roof.peak_tflops]
    xs_pts = [p.intensity for p in points]
    lo = min([min(ridges) / 100] + [x / 4 for x in xs_pts])
    hi = max([max(ridges) * 20] + [x * 4 for x in xs_pts])
    slope = np.geomspace(lo, max(ridges), 100)
    ax.plot(slope, slope * roof.bandwidth_gbps / 1e3, color="0.35", lw=1.5,
            label=f"memory roof: {roof.bandwidth_gbps:.3g} GB/s")
    for i, key in enumerate(roof.peak_tflops):
        peak, ridge = roof.peak_tflops[key], roof.ridge_point(key)
        ax.plot([ridge, hi], [peak, peak], color=f"C{i}", lw=2, ls=_ROOF_STYLES[i % 4],
                label=f"{key}: {peak:.3g} TFLOP/s, ridge {ridge:.3g} FLOP/B")
        ax.plot([ridge], [peak], "|", color=f"C{i}", ms=10, mew=2)  # where its slope ends
    for p in points:
        ax.plot(p.intensity, p.achieved_tflops, "o", color="black")
        ax.annotate(f"{p.label} ({p.fraction:.0%})", (p.intensity, p.achieved_tflops),
                    textcoords="offset points", xytext=(5, -10), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title or f"Roofline of {roof.device}")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    return stamp(ax, roof.device, roof.profile)


def timeline(spans: Sequence[tuple[str, str, float, float]], *, title: str = "",
             device: str = "cpu", profile: str | Profile, top: int = 8,
             ax: Axes | None = None) -> Axes:
    """Draw a profiler timeline of ``spans`` ``(row, name, start_us, duration_us)``
    (:func:`accelkit.gpt.trace_spans`): a row per thread or stream, a box per op, the ``top``
    ops by total time in colours of their own.  Returns the ``Axes`` (x: ms from the first op).
    ``ValueError`` for no spans."""
    if not spans:
        raise ValueError("timeline needs at least one span")
    import matplotlib.pyplot as plt

    totals: dict[str, float] = {}
    for _, name, _, dur in spans:
        totals[name] = totals.get(name, 0.0) + dur
    named = sorted(totals, key=totals.__getitem__, reverse=True)[:top]
    cmap = plt.get_cmap("tab10")
    colours = {n: cmap(i) for i, n in enumerate(named)}
    rows = sorted({row for row, *_ in spans})
    t0 = min(start for _, _, start, _ in spans)
    ax = _new_ax(ax, figsize=(7.2, 0.6 + 0.5 * len(rows)))
    boxes: dict[tuple[str, str], list[tuple[float, float]]] = {}  # one artist per row and colour
    for row, name, start, dur in spans:
        boxes.setdefault((row, name if name in colours else ""), []).append(
            ((start - t0) / 1e3, dur / 1e3))
    for (row, name), ranges in boxes.items():
        ax.broken_barh(ranges, (rows.index(row) - 0.4, 0.8), facecolors=colours.get(name, "0.8"),
                       edgecolor="none")
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_xlabel("time (ms)")
    ax.set_title(title)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[n]) for n in named]
    ax.legend(handles, named, fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return stamp(ax, device, profile)


# ----------------------------------------------------------------------------- checking
def _texts(fig: Any) -> list[tuple[str, Any]]:
    """The visible, non-empty text items of ``fig`` to compare: (description, artist)."""
    items: list[tuple[str, Any]] = []
    for i, ax in enumerate(fig.axes):
        for name, labels, lim, k in (("x tick", ax.get_xticklabels(which="both"), ax.get_xlim(), 0),
                                     ("y tick", ax.get_yticklabels(which="both"), ax.get_ylim(), 1)):
            lo, hi = sorted(lim)
            items += [(f"axes {i} {name} {t.get_text()!r}", t) for t in labels
                      if lo <= t.get_position()[k] <= hi]  # ticks outside the view are not drawn
        items += [(f"axes {i} {t.get_text()!r}", t) for t in
                  (ax.xaxis.label, ax.yaxis.label, ax.title, *ax.texts)]
        if ax.get_legend() is not None:
            items.append((f"axes {i} legend", ax.get_legend()))
    items += [(f"figure {t.get_text()!r}", t) for t in fig.texts]
    items += [(f"figure legend {j}", leg) for j, leg in enumerate(fig.legends)]
    return [(d, a) for d, a in items if a.get_visible() and (
        not hasattr(a, "get_text") or a.get_text().strip())]


def text_overlaps(fig: Any, pad_px: float = 1.0) -> list[tuple[str, str]]:
    """Render ``fig`` and return every pair ``(description, description)`` of texts whose boxes
    overlap: tick labels inside the view, axis labels, titles, texts and annotations, each
    legend as one box, the figure's texts.  Each box first shrinks by ``pad_px`` per side, so
    boxes that merely touch do not count."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = []
    for desc, artist in _texts(fig):
        box = artist.get_window_extent(renderer)
        if box.width > 2 * pad_px and box.height > 2 * pad_px:
            boxes.append((desc, box.expanded((box.width - 2 * pad_px) / box.width,
                                             (box.height - 2 * pad_px) / box.height)))
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:]
            if ba.overlaps(bb)]


__all__ = ["roofline", "stamp", "text_overlaps", "timeline"]
