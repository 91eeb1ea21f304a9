"""Interactive explorers: the course's models as sliders (JupyterLab, Colab), or a static figure.

Each entry point computes a model's numbers with the functions a notebook checks against its
measurements, as a view: :func:`roofline` (00), :func:`memory` (01), :func:`pipeline` (01),
:func:`mfu` (06).  A view shows itself (last expression, ``view.show()``) as core widgets that
recompute it on every change (the readout: an ``HTML`` widget of class :data:`READOUT_CLASS`),
or, static (:func:`is_interactive`), as its figure, readout and the call that reproduces it.
"""

from __future__ import annotations

import html
import importlib.util
import math
import os
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from accelkit import comm, hardware, plot
from accelkit import device as _device
from accelkit import memory as mem
from accelkit import roofline as rl

#: The environment variable that forces the mode (see :func:`is_interactive`).
MODE_ENV = "ACCELKIT_EXPLORE"
READOUT_CLASS = "ak-explore-readout"


# ----------------------------------------------------------------------------- front end
def is_interactive() -> bool:
    """True when explorers should show widgets: ``$ACCELKIT_EXPLORE`` ``static``/``0``/``off`` →
    False; ``interactive`` → where ipywidgets imports; empty or ``auto`` → where ipywidgets
    imports *and* this runs in an IPython kernel.  ValueError for another value."""
    mode = os.environ.get(MODE_ENV, "").strip().lower()
    if mode not in ("", "auto", "interactive", "static", "0", "off"):
        raise ValueError(f"${MODE_ENV} must be 'static', 'interactive' or 'auto', got {mode!r}")
    if mode in ("static", "0", "off") or importlib.util.find_spec("ipywidgets") is None:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return mode == "interactive" or (shell is not None and getattr(shell, "kernel", None) is not None)


def _widget(spec: tuple[Any, ...], value: Any) -> Any:
    """An ipywidget for a control ``spec`` set to ``value`` (a range widens to hold it):
    ``("log"|"logint"|"int", label, low, high)`` (a float/an int on a log slider, an int slider),
    ``("choice", label, options)`` (a dropdown) or ``("bool", label)`` (a checkbox)."""
    import ipywidgets as w

    kind, label, *rest = spec
    common: dict[str, Any] = dict(description=label, style={"description_width": "initial"})
    if kind == "bool":
        return w.Checkbox(value=bool(value), **common)
    common["layout"] = w.Layout(width="360px")
    if kind == "choice":
        return w.Dropdown(options=list(dict.fromkeys([*rest[0], value])), value=value, **common)
    value = value if value > 0 or kind == "int" else rest[0]  # a log slider has no 0
    lo, hi = min(rest[0], value), max(rest[1], value)
    if kind == "int":
        return w.IntSlider(value=value, min=int(lo), max=int(hi), continuous_update=False, **common)
    return w.FloatLogSlider(value=value, base=10, min=math.log10(lo), max=math.log10(hi), step=0.05,
                            readout_format=".3g", continuous_update=False, **common)


def as_code(name: str, settings: Mapping[str, Any]) -> str:
    """Return the call ``ak.explore.<name>(key=value, ...)`` that reproduces ``settings``: floats
    with 6 significant digits, a setting that is no literal (``roof``) as its name (``roof=roof``)."""
    def lit(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.6g}"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{lit(k)}: {lit(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(lit(x) for x in v) + "]"
        return repr(v)

    plain = (int, float, str, dict, list, type(None))
    args = (f"{k}={lit(v) if isinstance(v, plain) else k}" for k, v in settings.items())
    return f"ak.explore.{name}({', '.join(args)})"


class _View(SimpleNamespace):
    """The numbers an entry point computed, as attributes, and ``settings`` (its arguments); has
    ``draw()`` (a Figure), ``readout()`` (text), ``controls()`` (setting -> :func:`_widget` spec)."""

    entry = ""  # the entry point that computes it

    def recompute(self, settings: dict[str, Any]) -> Any:
        """The view of other settings (the entry point called with them)."""
        return globals()[self.entry](**settings)

    def show(self) -> None:
        """Show widgets that recompute the view, or (static) figure, readout and call."""
        import matplotlib.pyplot as plt

        if not is_interactive():
            fig = self.draw()
            plt.show()
            plt.close(fig)
            print(self.readout(), as_code(self.entry, self.settings), sep="\n")
            return
        import ipywidgets as w
        from IPython.display import display

        controls = self.controls()
        boxes = {k: _widget(spec, self.settings[k]) for k, spec in controls.items()}
        readout, out = w.HTML(), w.Output()
        readout.add_class(READOUT_CLASS)

        def update(_: Any = None) -> None:
            now = {**self.settings, **{k: b.value for k, b in boxes.items()}}
            now.update({k: max(1, round(now[k])) for k, s in controls.items() if s[0] == "logint"})
            with out:
                out.clear_output(wait=True)
                try:
                    view = self.recompute(now)
                    fig = view.draw()
                except ValueError as err:  # a combination the model rejects: say why
                    readout.value = f"<pre>{html.escape(str(err))}</pre>"
                    return
                plt.show()
                plt.close(fig)
            code = as_code(self.entry, now)
            readout.value = f"<pre>{html.escape(view.readout())}\n{html.escape(code)}</pre>"

        for box in boxes.values():
            box.observe(update, names="value")
        update()
        display(w.VBox([w.VBox(list(boxes.values())), readout, out]))

    def _ipython_display_(self) -> None:
        self.show()


# ----------------------------------------------------------------------------- roofline
OPS = ("matmul", "add")


class RooflineView(_View):
    """An op on a measured roofline: ``label``, ``dtype``, ``flops``, ``bytes_moved``,
    ``intensity`` and ``ridge`` (FLOP/B), ``attainable_tflops``, ``bound``, ``predicted_s``."""

    entry = "roofline"

    def draw(self) -> Any:
        """:func:`accelkit.plot.roofline` with ``points`` and the op as a star (gid explore-point)."""
        roof = self.settings["roof"]
        ax = plot.roofline(roof, self.settings["points"],
                           title=f"{self.label} on the roofline of {roof.device}")
        lo, hi = ax.get_xlim()
        ax.set_xlim(min(lo, self.intensity / 4), max(hi, self.intensity * 4))
        ax.plot([self.intensity], [self.attainable_tflops], "*", color="tab:red", markersize=14,
                gid="explore-point", label=f"{self.label}: {self.bound}-bound")
        ax.legend(fontsize=7, loc="upper left")  # as plot.roofline: the stamp is lower right
        return ax.figure

    def readout(self) -> str:
        """One line: intensity, bound, attainable TFLOP/s and the predicted time."""
        return (f"{self.label}: {self.intensity:.3g} FLOP/B, {self.bound}-bound (ridge {self.ridge:.3g} "
                f"FLOP/B); at most {self.attainable_tflops:.3g} TFLOP/s -> at least "
                f"{self.predicted_s * 1e3:.3g} ms")

    def controls(self) -> dict[str, tuple[Any, ...]]:
        """Op, size, dtype (the roof's)."""
        return {"op": ("choice", "op", OPS), "size": ("logint", "size (matmul n / add elements)", 8, 2**30),
                "dtype": ("choice", "dtype", list(self.settings["roof"].peak_tflops))}


def roofline(roof: rl.Roofline, *, op: str = "matmul", size: int = 512, dtype: str = "fp32",
             points: Sequence[rl.Placement] = ()) -> RooflineView:
    """Explore where an op of any size lands on ``roof`` (:func:`accelkit.roofline.measure`).

    ``"matmul"`` ``(n, n) @ (n, n)``, n = ``size``: ``2·n³`` FLOP, reads ``2·n²``, writes ``n²``
    elements; ``"add"`` of ``size`` elements: ``size`` FLOP, reads ``2·size``, writes ``size``;
    bytes ``roof.traffic(read, written)``, as notebook 00 places its kernels.  The predicted
    time is a lower bound.  ``points``: measured placements to draw too.  Returns a
    :class:`RooflineView`; ValueError for an unknown op, a size < 1 or an unmeasured ``dtype``.
    """
    if op not in OPS or size < 1:
        raise ValueError(f"op must be one of {OPS} and size >= 1, got {op!r}, {size}")
    key = rl.dtype_key(dtype)
    item = 4 if key == "fp32" else 2  # the roofline's dtypes: fp32, bf16, fp16
    flops, elems = (2.0 * size**3, size**2) if op == "matmul" else (float(size), size)
    nbytes = roof.traffic(2 * elems * item, elems * item)
    ai = flops / nbytes
    return RooflineView(label=f"{op} {size} {key}", dtype=key, flops=flops, bytes_moved=nbytes, intensity=ai,
                        attainable_tflops=roof.attainable_tflops(ai, key), bound=roof.bound(ai, key),
                        predicted_s=roof.predicted_s(flops, nbytes, key), ridge=roof.ridge_point(key),
                        settings=dict(roof=roof, op=op, size=size, dtype=key, points=tuple(points)))


# ----------------------------------------------------------------------------- memory
THIS_MACHINE = "this machine (RAM)"
#: precision -> (bytes per parameter and gradient, fp32 master-copy bytes per parameter)
PRECISIONS = {"fp32": (4, 0), "bf16 mixed (fp32 master)": (2, 4)}
STRATEGY_NAMES = {"single": "single", "dp": "DP", "zero1": "ZeRO-1", "zero2": "ZeRO-2",
                  "zero3": "ZeRO-3/FSDP", "tp": "TP", "pp": "PP"}


def device_bytes(name: str) -> float:
    """A hardware class's ``memory_gib`` or :data:`THIS_MACHINE`'s RAM (NaN: unknown), bytes.
    ValueError for a class without one (CPUs: use THIS_MACHINE)."""
    if name == THIS_MACHINE:
        return float(_device.system_memory_bytes() or 0) or float("nan")
    gib = hardware.get(name).memory_gib
    if gib is None:
        raise ValueError(f"{name} has no memory size in the table; use {THIS_MACHINE!r}")
    return gib * 2**30


def _unit(nbytes: float) -> tuple[str, float]:
    return next(((u, s) for u, s in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)) if nbytes >= s),
                ("B", 1.0))


class MemoryView(_View):
    """Memory per device: ``estimates`` (a :func:`accelkit.memory.table`), ``chosen``, ``peak``
    (or None), the ``device``'s ``device_bytes`` (NaN: unknown), ``fits`` (in 90 % of it)."""

    entry = "memory"

    def draw(self) -> Any:
        """A stacked bar per strategy (and the peak), one container per part; 90 % of the device."""
        import matplotlib.pyplot as plt

        parts = ("params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes")
        bars = [(STRATEGY_NAMES[e.strategy], [getattr(e, p) for p in parts] + [0.0]) for e in self.estimates]
        if self.peak is not None:
            kept = [getattr(self.peak, p) for p in parts[:3]]
            bars.append((f"{STRATEGY_NAMES[self.peak.strategy]} peak",
                         kept + [0.0, self.peak.total_bytes - sum(kept)]))
        unit, scale = _unit(max(sum(v) for _, v in bars))
        fig, ax = plt.subplots(figsize=(7.2, 3.8))
        bottom = [0.0] * len(bars)
        for j, label in enumerate(("parameters", "gradients", "optimizer states", "activations",
                                   "transient at the step's peak")):
            vals = [v[j] / scale for _, v in bars]
            ax.bar(range(len(bars)), vals, bottom=bottom, label=label, color=f"C{j}")
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(range(len(bars)), [n.replace("/", "/\n").replace(" peak", "\npeak") for n, _ in bars],
                      fontsize=8)
        for tick, (name, _) in zip(ax.get_xticklabels(), bars):
            tick.set_fontweight("bold" if name.startswith(STRATEGY_NAMES[self.chosen.strategy]) else "normal")
        dev = self.device_bytes
        if dev == dev and dev <= 4 * max(bottom) * scale:  # dev != dev: RAM unknown (NaN)
            ax.axhline(0.9 * dev / scale, color="tab:red", ls="--", label=f"90% of {self.device}")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.06)  # room above the tallest bar
        ax.set(ylabel=f"per device ({unit})", title=f"memory per device, N = {self.chosen.world_size}")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
        return fig

    def readout(self) -> str:
        """Two lines: the chosen strategy's total (and peak), and whether it fits."""
        c, pk, dev = self.chosen, self.peak, self.device_bytes
        unit, scale = _unit(max(c.total_bytes, pk.total_bytes if pk else 0))
        text = (f"{STRATEGY_NAMES[c.strategy]} on N = {c.world_size}: steady "
                f"{c.total_bytes / scale:.3g} {unit} per device")
        if pk is not None:
            text += f", peak of a step {pk.total_bytes / scale:.3g} {unit}"
        return text + (f"\n{self.device} ({f'{dev / 2**30:.3g} GiB' if dev == dev else 'unknown size'}): "
                       f"{'fits' if self.fits else 'does NOT fit'} (90% usable)")

    def controls(self) -> dict[str, tuple[Any, ...]]:
        """Sliders: parameters, batch, devices N; dropdowns: strategy, precision, optimizer, device."""
        devices = [c.name for c in hardware.CLASSES.values() if c.memory_gib] + [THIS_MACHINE]
        return {"n_params": ("logint", "parameters", 1e5, 1e12), "batch": ("logint", "global batch", 1, 4096),
                "world_size": ("int", "devices N", 1, 64), "strategy": ("choice", "strategy", mem.STRATEGIES),
                "precision": ("choice", "precision", list(PRECISIONS)),
                "optimizer": ("choice", "optimizer", list(mem.OPTIMIZER_STATE_BYTES)),
                "device": ("choice", "device", devices)}


def memory(n_params: int, *, strategy: str = "dp", world_size: int = 2, batch: int = 1,
           widths: Sequence[int] | None = None, precision: str = "fp32", optimizer: str = "adam",
           largest_param: int | None = None, device: str = THIS_MACHINE) -> MemoryView:
    """Explore the memory per device of every strategy (:func:`accelkit.memory.table`; its
    arguments as :func:`accelkit.memory.per_device`), the chosen one's step peak where modelled
    (DP, ZeRO-3 in fp32 with ``largest_param``), and whether it fits in 90 % of ``device`` (a
    hardware class with memory, or :data:`THIS_MACHINE`).  ``widths``: an MLP's layer widths for
    its activations (:func:`accelkit.memory.mlp_activation_bytes`) at the global ``batch``;
    ``precision``: a key of :data:`PRECISIONS`.  Returns a :class:`MemoryView`.

    Raises ValueError for an unknown precision or device, and as :func:`accelkit.memory.per_device`.
    """
    settings = {**locals(), "widths": list(widths) if widths else None}
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    pb, master = PRECISIONS[precision]
    act = mem.mlp_activation_bytes(batch, widths, dtype_bytes=pb) if widths else 0
    strategies = [s for s in mem.STRATEGIES if s != "single" or world_size == 1]
    est = mem.table(n_params, world_size, strategies, param_bytes=pb, master_bytes=master,
                    optimizer=optimizer, activation_bytes=act)
    chosen = next((e for e in est if e.strategy == strategy), None)
    if chosen is None:
        raise ValueError(f"strategy {strategy!r} not among {', '.join(strategies)} for N = {world_size}")
    peak = None
    if largest_param and strategy in ("dp", "zero3") and master == 0:
        peak = mem.per_device(n_params, strategy, world_size, param_bytes=pb, optimizer=optimizer,
                              largest_param=largest_param, activation_bytes=act)
    dev = device_bytes(device)
    return MemoryView(estimates=est, chosen=chosen, peak=peak, device=device, device_bytes=dev,
                      fits=dev == dev and (peak or chosen).fits(dev), settings=settings)


# ----------------------------------------------------------------------------- pipeline
class PipelineView(_View):
    """GPipe of ``stages`` p and ``microbatches`` m: ``schedule``, ``length`` (slots), ``bubble``."""

    entry = "pipeline"

    def draw(self) -> Any:
        """The schedule (a row per stage) and the bubble against m (gid explore-bubble)."""
        import matplotlib.pyplot as plt

        p, m, measured = self.stages, self.microbatches, self.settings["measured"] or {}
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.6, 0.9 + 0.45 * min(p, 16)),
                                     gridspec_kw={"width_ratios": [2.2, 1]})
        for slot in self.schedule:
            ax.broken_barh([(slot.start, 1)], (slot.stage - 0.4, 0.8), edgecolor="white",
                           facecolors="tab:blue" if slot.kind == "F" else "tab:orange")
        ax.set(xlim=(0, self.length), ylim=(p - 0.5, -0.5), xlabel="time slot",
               title=f"GPipe, p = {p}, m = {m}: bubble {self.bubble:.0%}")
        ax.set_yticks(range(p), [f"stage {s}" for s in range(p)], fontsize=7)
        ms = sorted({1, 2, 4, 8, 16, 32, 64, m, *measured})
        bx.plot(ms, [comm.bubble_fraction(p, k) for k in ms], "-", gid="explore-bubble",
                label="(p−1)/(m+p−1)")
        bx.plot([m], [self.bubble], "o", color="black")
        if measured:
            bx.plot(list(measured), list(measured.values()), "r^", label="measured idle")
        bx.set(xscale="log", xlabel="micro-batches m", ylabel="idle fraction", ylim=(0, 1))
        bx.legend(fontsize=7)
        fig.tight_layout()
        return fig

    def readout(self) -> str:
        """One line: the bubble and the slots."""
        return (f"p = {self.stages} stages, m = {self.microbatches} micro-batches: each stage is busy "
                f"{2 * self.microbatches} of {self.length} slots, bubble (p−1)/(m+p−1) = {self.bubble:.3f}")

    def controls(self) -> dict[str, tuple[Any, ...]]:
        """Sliders: stages, micro-batches."""
        return {"stages": ("int", "stages p", 1, 16), "microbatches": ("int", "micro-batches m", 1, 64)}

    def recompute(self, settings: dict[str, Any]) -> Any:
        """As :meth:`_View.recompute`; the measured fractions only for the start p."""
        same_p = settings["stages"] == self.stages
        return pipeline(**{**settings, "measured": settings["measured"] if same_p else None})


def pipeline(stages: int, microbatches: int, *, measured: Mapping[int, float] | None = None) -> PipelineView:
    """Explore GPipe's schedule and bubble ``(p − 1)/(m + p − 1)`` (:mod:`accelkit.comm`) for p
    ``stages``, m ``microbatches``, with the ``measured`` ``{m: idle fraction}`` of this p.
    Returns a :class:`PipelineView`; TypeError, ValueError as :func:`accelkit.comm.bubble_fraction`.
    """
    settings = dict(stages=stages, microbatches=microbatches, measured=dict(measured) if measured else None)
    return PipelineView(stages=stages, microbatches=microbatches,
                        schedule=comm.gpipe_schedule(stages, microbatches),
                        length=comm.schedule_length(stages, microbatches),
                        bubble=comm.bubble_fraction(stages, microbatches), settings=settings)


# ----------------------------------------------------------------------------- MFU
GIVEN = "peak_tflops as given"


def peaks() -> dict[str, float]:
    """Return ``{"<class> <dtype>": dense datasheet TFLOP/s}`` of every hardware class with peaks."""
    return {f"{c.name} {d}": v for c in hardware.CLASSES.values() for d, v in c.peak_tflops.items()}


class MfuView(_View):
    """A GPT's ``n_params`` (non-embedding), ``flops_per_token``, ``recompute_flops`` (per token),
    ``peak_tflops``, ``mfu`` and ``hfu`` (fractions)."""

    entry = "mfu"

    def draw(self) -> Any:
        """MFU and HFU as two bars, ``100·mfu`` and ``100·hfu`` % of the peak."""
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6.4, 1.9))
        vals = [100 * self.mfu, 100 * self.hfu]
        ax.barh([0, 1], vals, color=["tab:blue", "tab:orange"])
        ax.set_yticks([0, 1], ["MFU", "HFU"])
        ax.invert_yaxis()
        ax.set(xlim=(0, max(100.0, *vals) * 1.05), xlabel=f"% of {self.peak_tflops:.3g} TFLOP/s",
               title=f"N = {self.n_params:,} parameters, {self.flops_per_token:.3g} FLOP per token")
        fig.tight_layout()
        return fig

    def readout(self) -> str:
        """One line: MFU, HFU and their ingredients."""
        extra = self.recompute_flops / self.flops_per_token
        return (f"{self.settings['tokens_per_s']:,.0f} tokens/s × {self.flops_per_token:.3g} FLOP/token ÷ "
                f"{self.peak_tflops:.3g} TFLOP/s = MFU {self.mfu:.2%}; HFU {self.hfu:.2%}"
                + (f" (+{extra:.0%} FLOPs recomputed)" if extra else ""))

    def controls(self) -> dict[str, tuple[Any, ...]]:
        """Layers, width (divisible by the heads), sequence, tokens/s, peak, checkpointing."""
        h = self.settings["n_head"]
        widths = {self.settings["n_embd"]} | {h * 32 * k for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48)}
        return {"n_layer": ("int", "layers L", 1, 96), "n_embd": ("choice", "width d", sorted(widths)),
                "seq_len": ("logint", "sequence T", 16, 131072),
                "tokens_per_s": ("log", "tokens/s", 1e2, 1e7), "peak": ("choice", "peak", [GIVEN, *peaks()]),
                "checkpoint": ("bool", "checkpoint every block")}


def mfu(*, n_layer: int, n_head: int, n_embd: int, seq_len: int, tokens_per_s: float, peak_tflops: float,
        vocab_size: int = 256, peak: str = GIVEN, checkpoint: bool = False) -> MfuView:
    """Explore the MFU and HFU of a GPT of any shape (:class:`accelkit.gpt.GPTConfig`'s sizes,
    T = ``seq_len``) at ``tokens_per_s`` and a dense peak, TFLOP/s: ``peak_tflops`` when ``peak``
    is :data:`GIVEN`, else a key of :func:`peaks` (``"h100 bf16"``).

    MFU = tokens/s × (6·N + 12·L·d·T) ÷ peak (notebook 06's :func:`accelkit.gpt.flops_per_token`
    and :func:`accelkit.gpt.mfu`); HFU adds, with ``checkpoint``, the FLOPs every block
    recomputes (:func:`accelkit.gpt.recompute_flops_per_token`).  Returns an :class:`MfuView`.

    Raises ValueError for a shape ``GPTConfig`` rejects, an unknown peak, or ``peak_tflops <= 0``.
    """
    settings = dict(locals())
    from accelkit import gpt

    cfg = gpt.GPTConfig(vocab_size=vocab_size, block_size=seq_len, n_layer=n_layer, n_head=n_head,
                        n_embd=n_embd)
    total, _ = gpt.param_counts(cfg)
    n = total - seq_len * n_embd  # non-embedding: without the position embedding (gpt.n_params)
    n_blocks = n - (vocab_size + 2) * n_embd  # without the token embedding and the final norm
    fpt = gpt.flops_per_token(cfg, n)
    extra = gpt.recompute_flops_per_token(cfg, n_blocks) if checkpoint else 0.0
    pk = peak_tflops if peak == GIVEN else peaks()[peak]
    return MfuView(n_params=n, flops_per_token=fpt, recompute_flops=extra, peak_tflops=pk,
                   mfu=gpt.mfu(tokens_per_s, fpt, pk), hfu=gpt.mfu(tokens_per_s, fpt + extra, pk),
                   settings=settings)


__all__ = ["GIVEN", "MODE_ENV", "OPS", "PRECISIONS", "READOUT_CLASS", "THIS_MACHINE", "MemoryView", "MfuView",
           "PipelineView", "RooflineView", "as_code", "device_bytes", "is_interactive", "memory", "mfu",
           "peaks", "pipeline", "roofline"]
