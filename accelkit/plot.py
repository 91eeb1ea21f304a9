"""Plots for the notebooks: drawing only, each stamped with the device and size profile.

:func:`roofline` and :func:`timeline` take what was measured (a ``Roofline``, a profiler's
spans), draw it on a new figure (or on ``ax=`` if given) and return the matplotlib ``Axes``;
one-off plots are a few lines of plain matplotlib in the notebooks.  Nothing here measures or
computes results.  Every plot carries a small grey :func:`stamp` in its lower-right corner,
``device · profile``, so a figure pasted out of context still says where it was measured.
Uses the object API (``fig, ax = plt.subplots()``), which works with any backend, including
the non-interactive ``Agg`` used in CI.

:func:`text_overlaps` checks a drawn figure for text boxes that overlap (tick labels, labels,
titles, annotations, legends): the tests run it on every plot of this module and of
:mod:`accelkit.explore`.

Owns drawing only.  The size profile for the stamp is passed in (the notebook's ``P``), never
re-read here: resolving it is :mod:`accelkit.config`'s; the measurements are
:mod:`accelkit.bench`'s and :mod:`accelkit.roofline`'s.

Example: ``fig, ax = plt.subplots(); ax.plot(xs, ys); ak.plot.stamp(ax, str(dev), P)``
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from accelkit.config import Profile
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
    """Write ``device · profile <name>`` in small grey text in the lower-right corner of ``ax``.

    Args:
        ax: the axes to stamp.
        device: where the data was measured (``"cpu"``, ``"cuda:0 NVIDIA H200"``).
        profile: the size profile the data was measured in: its name (``"ci"``) or the
            notebook's resolved :class:`~accelkit.config.Profile` (``P``); never re-read here.

    Returns:
        ``ax``.
    """
    name = profile if isinstance(profile, str) else profile.name
    ax.text(0.995, 0.01, f"{device} · profile {name}", transform=ax.transAxes,
            ha="right", va="bottom", fontsize=7, color="0.45", gid="accelkit-stamp")
    return ax


def roofline(roof: Roofline, points: Sequence[Placement] = (), *, title: str = "",
             ax: Axes | None = None) -> Axes:
    """Draw a roofline on log-log axes: one compute roof per dtype, the memory roof, and points.

    The memory roof (shared by every dtype) is drawn once, up to the highest ridge point; each
    compute roof runs flat from its own ridge point, in its own colour and line style, so roofs
    of similar height never hide one another.

    Args:
        roof: from :func:`accelkit.roofline.measure`.
        points: kernels placed with :meth:`Roofline.place`; each is drawn at
            (intensity, achieved TFLOP/s) with its label.
        title: the plot's title (default: "Roofline of <device>").
        ax: draw here instead of on a new figure.

    Returns:
        The ``Axes`` (x: FLOP/byte, y: TFLOP/s).
    """
    import numpy as np

    ax = _new_ax(ax, (6.4, 4.2))
    ridges = [roof.ridge_point(k) for k in roof.peak_tflops]
    xs_pts = [p.intensity for p in points]
    lo = min([min(ridges) / 100] + [x / 4 for x in xs_pts])
    hi = max([max(ridges) * 20] + [x * 4 for x in xs_pts])
    # one memory roof shared by every dtype (drawn once, so it hides none of them), then each
    # dtype's compute roof from its ridge point on, in a style of its own: roofs of similar
    # height stay distinguishable, and none is drawn on top of another's slope
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
    """Draw a profiler timeline: one row per thread (or stream), one box per op.

    Args:
        spans: ``(row, name, start_us, duration_us)`` per op, e.g. from a Chrome trace's
            complete (``"ph": "X"``) events.
        title: the plot's title.
        device, profile: for the stamp.
        top: ops with the most total time get their own colour (and a legend entry); the
            rest are grey.
        ax: draw here instead of on a new figure.

    Returns:
        The ``Axes`` (x in milliseconds from the first op).

    Raises:
        ValueError: for no spans.
    """
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
    """Render ``fig`` and list every pair of texts whose boxes overlap.

    Compared: tick labels (major and minor, those inside the view), axis labels, titles,
    texts and annotations of every axes, each legend as one box, and the figure's texts.
    A legend's own entries are inside its box and not compared with it.

    Args:
        fig: a matplotlib ``Figure`` (``ax.figure`` for a helper that returns an ``Axes``).
        pad_px: shrink every box by this many pixels per side first, so that boxes that
            merely touch do not count.

    Returns:
        ``[(description, description), ...]``, empty when no two texts overlap.

    Example: ``assert not ak.plot.text_overlaps(ax.figure), ak.plot.text_overlaps(ax.figure)``
    """
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
