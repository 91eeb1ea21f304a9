"""Plots for the notebooks: drawing only, each stamped with the device and size profile.

Every function takes what was measured (``ak.bench.Timing``, a ``Roofline`` ...), draws it on
a new figure (or on ``ax=`` if given) and returns the matplotlib ``Axes``.  Nothing here
measures or computes results.  Each plot carries a small grey stamp in its lower-right
corner, ``device · profile``, so a figure pasted out of context still says where it was
measured.

Uses the object API (``fig, ax = plt.subplots()``), which works with any backend,
including the non-interactive ``Agg`` used in CI.

:func:`text_overlaps` checks a drawn figure for text boxes that overlap (tick labels, labels,
titles, annotations, legends): the tests run it on every plot of this module and of
:mod:`accelkit.explore`.

Owns drawing only.  The size profile for the stamp is passed in (the notebook's ``P``), never
re-read here: resolving it is :mod:`accelkit.config`'s; the measurements are
:mod:`accelkit.bench`'s and :mod:`accelkit.roofline`'s.

Example::

    ax = ak.plot.timing_bars([eager, fused], "eager vs fused", profile=P)
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from accelkit.bench import Comparison, Timing
    from accelkit.config import Profile
    from accelkit.roofline import Placement, Roofline

#: Line styles of the compute roofs, one per dtype (colour alone fails in greyscale print).
_ROOF_STYLES = ("-", "--", ":", "-.")
_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


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


def _time_unit(seconds: float) -> tuple[str, float]:
    for unit, scale in _UNITS:
        if seconds >= scale:
            return unit, scale
    return _UNITS[-1]


def timing_bars(timings: Sequence[Timing], title: str = "", *, device: str | None = None,
                profile: str | Profile, ax: Axes | None = None) -> Axes:
    """Draw one horizontal bar per timing: the median, with the interquartile range as error bar.

    The time unit (s, ms, µs, ns) is chosen from the slowest median.

    Args:
        timings: from :func:`accelkit.bench.measure`/``compare``; one bar each, top to bottom.
        title: the plot's title.
        device: for the stamp; default: the first timing's ``device``.
        profile: for the stamp (the notebook's ``P``).
        ax: draw here instead of on a new figure.

    Returns:
        The ``Axes``.

    Raises:
        ValueError: for an empty list.
        TypeError: for items that are not ``Timing``s.
    """
    from accelkit.bench import Timing

    if not timings:
        raise ValueError("timing_bars needs at least one Timing")
    if not all(isinstance(t, Timing) for t in timings):
        raise TypeError("timing_bars takes ak.bench.Timing objects (from ak.bench.measure)")
    unit, scale = _time_unit(max(t.median_s for t in timings))
    medians = [t.median_s / scale for t in timings]
    lows, highs = [], []
    for t, med in zip(timings, medians):
        if len(t.times_s) >= 2:
            q1, _, q3 = statistics.quantiles(t.times_s, n=4, method="inclusive")
        else:
            q1 = q3 = t.median_s
        lows.append(max(0.0, med - q1 / scale))
        highs.append(max(0.0, q3 / scale - med))
    ax = _new_ax(ax, (6.4, 0.9 + 0.45 * len(timings)))
    pos = list(range(len(timings)))
    ax.barh(pos, medians, xerr=[lows, highs], capsize=3, color="tab:blue", alpha=0.8)
    ax.set_yticks(pos, [t.label for t in timings])
    ax.invert_yaxis()
    ax.set_xlabel(f"median time per call ({unit}); error bar: IQR")
    ax.set_title(title)
    return stamp(ax, device or timings[0].device, profile)


def ratios(comparison: Comparison, title: str = "", *, floor: float | None = None,
           profile: str | Profile, ax: Axes | None = None) -> Axes:
    """Draw the histogram of a comparison's per-pair speedups, its median and its interval.

    A machine with modes (shared cores, frequency licences, a noisy neighbour) shows two
    humps here; the interval the verdict is decided from is the shaded band.

    Args:
        comparison: from :func:`accelkit.bench.compare`.
        title: the plot's title (default: candidate vs baseline).
        floor: the claim's floor, drawn as a red line when given.
        profile: for the stamp (the notebook's ``P``).
        ax: draw here instead of on a new figure.

    Returns:
        The ``Axes`` (x: speedup per pair, log scale).
    """
    import numpy as np

    ax = _new_ax(ax)
    rs = np.asarray(comparison.ratios)
    bins = np.geomspace(rs.min() / 1.05, rs.max() * 1.05, min(30, max(8, len(rs) // 2)))
    ax.hist(rs, bins=bins.tolist(), color="tab:blue", alpha=0.75, label=f"{len(rs)} pairs")
    low, high = comparison.interval
    ax.axvspan(low, high, color="tab:green", alpha=0.2,
               label=f"{comparison.confidence:.0%} interval of the median")
    ax.axvline(comparison.speedup, color="tab:green", lw=2, label=f"median {comparison.speedup:.2f}x")
    ax.axvline(1.0, color="0.3", ls=":", lw=1)
    if floor is not None:
        ax.axvline(floor, color="tab:red", lw=1.5, label=f"floor {floor:g}x")
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter

    times = FuncFormatter(lambda v, _: f"{v:.2g}x")
    ax.xaxis.set_major_formatter(times)
    ax.xaxis.set_minor_formatter(times)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel(f"speedup per pair: {comparison.baseline.label} time / "
                  f"{comparison.candidate.label} time")
    ax.set_ylabel("pairs")
    ax.set_title(title or f"{comparison.candidate.label} vs {comparison.baseline.label}")
    ax.legend(fontsize=7)
    return stamp(ax, comparison.baseline.device, profile)


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


def _finish(ax: Axes, xlabel: str, ylabel: str, title: str, logy: bool, *, legend: bool,
            device: str, profile: str | Profile) -> Axes:
    """Label, grid, legend and stamp a line plot (shared by the curve helpers)."""
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if legend:
        ax.legend(fontsize=8)
    return stamp(ax, device, profile)


def throughput_curve(xs: Sequence[float], ys: Sequence[float] | Mapping[str, Sequence[float]],
                     *, xlabel: str, ylabel: str, title: str = "", device: str = "cpu",
                     profile: str | Profile, logx: bool = False, logy: bool = False,
                     ax: Axes | None = None) -> Axes:
    """Draw throughput against a size (batch size, tensor size, workers ...), one line per series.

    Args:
        xs: the x values (e.g. batch sizes).
        ys: one sequence (one line) or ``{label: sequence}`` (one line each), same length
            as ``xs``; in the unit named by ``ylabel``.
        xlabel, ylabel: axis labels, with units (``"samples/s"``).
        title: the plot's title.
        device, profile: for the stamp (``profile``: the notebook's ``P``).
        logx, logy: log scales.
        ax: draw here instead of on a new figure.

    Returns:
        The ``Axes``.

    Raises:
        ValueError: when a series' length differs from ``xs``'s, or ``xs`` is empty.
    """
    series = dict(ys) if isinstance(ys, Mapping) else {"": ys}
    if len(xs) == 0:
        raise ValueError("throughput_curve needs at least one x value")
    for name, values in series.items():
        if len(values) != len(xs):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(xs)} x values")
    ax = _new_ax(ax)
    for name, values in series.items():
        ax.plot(list(xs), list(values), "o-", label=name or None)
    if logx:
        ax.set_xscale("log")
    return _finish(ax, xlabel, ylabel, title, logy, legend=any(series), device=device,
                   profile=profile)


def loss_curves(curves: Mapping[str, Sequence[float]], *, title: str = "",
                xlabel: str = "epoch", ylabel: str = "training loss", device: str = "cpu",
                profile: str | Profile, logy: bool = False,
                ax: Axes | None = None) -> Axes:
    """Draw one loss curve per run (e.g. ``{"PyTorch": losses, "Keras": history["loss"]}``).

    Points are numbered from 1 (epoch 1 is the first).

    Args:
        curves: ``{label: per-epoch losses}``.
        title, xlabel, ylabel: text.
        device, profile: for the stamp (``profile``: the notebook's ``P``).
        logy: log scale for the loss.
        ax: draw here instead of on a new figure.

    Returns:
        The ``Axes``.

    Raises:
        ValueError: for no curves or an empty curve.
    """
    if not curves:
        raise ValueError("loss_curves needs at least one curve")
    ax = _new_ax(ax)
    for name, values in curves.items():
        if len(values) == 0:
            raise ValueError(f"curve {name!r} is empty")
        ax.plot(range(1, len(values) + 1), [float(v) for v in values], "o-", label=name)
    return _finish(ax, xlabel, ylabel, title, logy, legend=True, device=device, profile=profile)


def waterfall(labels: Sequence[str], speedups: Sequence[float], *, title: str = "",
              device: str = "cpu", profile: str | Profile, ax: Axes | None = None) -> Axes:
    """Draw a waterfall of cumulative speedup: one bar per step, from the last total to the next.

    Args:
        labels: one name per step (rung), in order.
        speedups: each step's speedup over the step before it (> 1 faster); the first bar
            starts at 1x (the baseline).
        title: the plot's title.
        device, profile: for the stamp (``profile``: the notebook's ``P``).
        ax: draw here instead of on a new figure.

    Returns:
        The ``Axes`` (log y scale: equal factors are equal heights).

    Raises:
        ValueError: for lengths that differ, no steps, or a speedup <= 0.
    """
    if len(labels) != len(speedups) or not labels:
        raise ValueError(f"waterfall needs as many labels as speedups (> 0), got "
                         f"{len(labels)} and {len(speedups)}")
    if any(s <= 0 for s in speedups):
        raise ValueError(f"speedups must be > 0, got {list(speedups)}")
    ax = _new_ax(ax, figsize=(7.2, 3.8))
    level = 1.0
    for i, s in enumerate(speedups):
        new = level * s
        low, high = sorted((level, new))
        ax.bar(i, high - low, bottom=low, color="tab:green" if s >= 1 else "tab:red", width=0.6)
        ax.text(i, high, f"{new:.2f}x", ha="center", va="bottom", fontsize=7)
        if i + 1 < len(labels):
            ax.plot([i + 0.3, i + 0.7], [new, new], color="0.5", lw=0.8)
        level = new
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(labels)), list(labels), rotation=25, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("cumulative speedup over the baseline (x)")
    ax.set_title(title)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    return stamp(ax, device, profile)


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


__all__ = ["loss_curves", "roofline", "stamp", "text_overlaps", "throughput_curve", "timeline",
           "timing_bars", "waterfall"]
