"""Interactive explorers: the course's models as sliders (JupyterLab, Colab), or a static figure.

Each entry point computes a model's numbers with the function a notebook checks against its
measurements and returns them as a view: :func:`roofline` (00), :func:`memory` (01),
:func:`pipeline` (01), :func:`mfu` (06).  A view shows itself as a notebook cell's last
expression or with ``view.show()``: core widgets that recompute it on every change (Colab renders
them without a custom widget manager; the readout is an ``HTML`` widget of CSS class
``ak-explore-readout``, which the browser check reads), or (static: :func:`is_interactive`; the
course's runners set ``$ACCELKIT_EXPLORE=static``) its figure, readout and the call that
reproduces it.  Example: ``ak.explore.memory(7_000_000_000, strategy="zero3", world_size=8)``
"""

from __future__ import annotations

import functools
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
    """True when explorers should show widgets: ``$ACCELKIT_EXPLORE`` = ``static``/``0``/``off`` →
    False; ``interactive`` → True where ipywidgets imports; empty or ``auto`` → True where
    ipywidgets imports *and* this runs in an IPython kernel (JupyterLab, Colab, VS Code).

    Raises ValueError for another ``$ACCELKIT_EXPLORE``.
    """
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
    """Return the call that reproduces ``settings``: ``ak.explore.<name>(key=value, ...)``, floats
    (also inside dicts and lists) with 6 significant digits, a setting that is no such literal
    (``roof``, a tuple of ``points``) as its own name (``roof=roof``)."""
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
    """A view: the numbers an entry point computed, as attributes, and ``settings`` (its keyword
    arguments).  Each view has ``draw()`` (a matplotlib Figure), ``readout()`` (text) and
    ``controls()`` (setting -> control spec, see :func:`_widget`)."""

    entry = ""  # the entry point that computes it

    def recompute(self, settings: dict[str, Any]) -> Any:
        """The view of other settings (the entry point called with them)."""
        return globals()[self.entry](**settings)

    def show(self) -> None:
        """Show the explorer: widgets that recompute the view on every change, or (static) the
        figure, the readout and the call that reproduces it."""
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
    """An op on a measured roofline: ``label`` (``"matmul 512 fp32"``), ``dtype`` (its roof),
    ``flops``, ``bytes_moved`` (memory traffic, :meth:`accelkit.roofline.Roofline.traffic`),
    ``intensity`` (FLOP/B), ``attainable_tflops``, ``bound`` (``"memory"``/``"compute"``),
    ``predicted_s`` (the time at the roof, s), ``ridge`` (FLOP/B)."""

    entry = "roofline"

    def draw(self) -> Any:
        """:func:`accelkit.plot.roofline` with the measured ``points``, and the op as a red star
        (``gid="explore-point"``) at (intensity, attainable TFLOP/s)."""
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
    """Explore where an op of any size lands on this machine's measured roofline.

    ``op="matmul"``, ``(n, n) @ (n, n)`` with ``n = size``: ``2·n³`` FLOP, reads ``2·n²`` and
    writes ``n²`` elements; ``"add"`` of ``size`` elements: ``size`` FLOP, reads ``2·size``, writes
    ``size``.  Bytes: ``roof.traffic(read, written)``, as notebook 00 places its measured kernels.
    The predicted time is a lower bound (real kernels reach part of their roof, as ``points`` show).

    ``roof``: from :func:`accelkit.roofline.measure`, ``dtype`` one it measured; ``points``:
    measured placements to draw too (:meth:`accelkit.roofline.Roofline.place`).  Returns a
    :class:`RooflineView`.  Raises ValueError for an unknown op, a size < 1 or a dtype ``roof``
    did not measure.

    Example: ``ak.explore.roofline(roof, op="matmul", size=n_mm, points=points)``
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
    """Return a device's memory, bytes: a hardware class's ``memory_gib``, or :data:`THIS_MACHINE`'s
    RAM (NaN when unknown).  Raises ValueError for a class without one (CPUs: use THIS_MACHINE)."""
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
    """Memory per device: ``estimates`` (:func:`accelkit.memory.table`, every strategy),
    ``chosen`` (the chosen strategy's), ``peak`` (:func:`accelkit.memory.per_device` with
    ``largest_param``, for DP/ZeRO-3 in fp32 when it is known, else None), the ``device``'s
    ``device_bytes`` (NaN: unknown), ``fits`` (the peak, else the steady total, in 90 % of it)."""

    entry = "memory"

    def draw(self) -> Any:
        """A stacked bar per strategy (and the chosen one's peak) and 90 % of the device: one bar
        container per part, in :func:`_unit` of the largest total."""
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
    """Explore the memory one device needs per strategy (steady state: :func:`accelkit.memory.table`),
    the chosen strategy's step peak where the course models it (DP and ZeRO-3 in fp32 with
    ``largest_param``), and whether it fits in 90 % of the device; returns a :class:`MemoryView`.

    Args:
        n_params, strategy, world_size, optimizer, largest_param: as :func:`accelkit.memory.per_device`.
        batch: global batch, samples.
        widths: an MLP's layer widths ``[d0, ..., dL]``: its activations
            (:func:`accelkit.memory.mlp_activation_bytes`, in the chosen precision); None: none.
        precision: a key of :data:`PRECISIONS`.
        device: a hardware class with memory (``"h100"``, ``"t4"`` ...) or :data:`THIS_MACHINE`.

    Raises ValueError for an unknown precision or device, and as :func:`accelkit.memory.per_device`.

    Example: ``ak.explore.memory(7_000_000_000, strategy="zero3", world_size=8, device="h100")``
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
    """GPipe with p = ``stages``, m = ``microbatches``: its ``schedule``
    (:func:`accelkit.comm.gpipe_schedule`), ``length`` (slots per step), ``bubble`` (each
    stage's idle fraction, :func:`accelkit.comm.bubble_fraction`)."""

    entry = "pipeline"

    def draw(self) -> Any:
        """The schedule (left: a row per stage, forward blue, backward orange) and the bubble
        against m for this p (right, ``gid="explore-bubble"``), the ``measured`` as triangles."""
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
    """Explore GPipe's schedule and bubble ``(p − 1)/(m + p − 1)`` for p ``stages`` and m
    ``microbatches`` (each >= 1), with the ``measured`` ``{m: idle fraction}`` of this p
    (notebook 01) beside the formula.  Returns a :class:`PipelineView`.

    Raises:
        TypeError, ValueError: as :func:`accelkit.comm.bubble_fraction`.

    Example: ``ak.explore.pipeline(4, 12)``
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


@functools.lru_cache(maxsize=64)
def _param_counts(cfg: Any) -> tuple[int, int]:
    """``(N, N_blocks)``: :func:`accelkit.gpt.n_params` and the blocks' parameters of the GPT of
    ``cfg`` (a :class:`accelkit.gpt.GPTConfig`), built on PyTorch's ``meta`` device (no memory)."""
    import torch

    from accelkit import gpt

    with torch.device("meta"):
        model = gpt.GPT(cfg)
    return gpt.n_params(model), sum(p.numel() for p in model.blocks.parameters())


class MfuView(_View):
    """A GPT's utilisation: ``n_params`` (N, non-embedding), ``flops_per_token`` (model FLOPs),
    ``recompute_flops`` (per token, that checkpointing adds; 0 without), ``peak_tflops``
    (divided by), ``mfu`` and ``hfu`` (fractions)."""

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
    """Explore the MFU and HFU of a GPT of any shape at a given throughput and peak.

    MFU = tokens/s × (6·N + 12·L·d·T) ÷ peak (:func:`accelkit.gpt.flops_per_token`,
    :func:`accelkit.gpt.mfu`, N from :func:`accelkit.gpt.n_params` of this shape); HFU adds the
    FLOPs activation checkpointing recomputes (:func:`accelkit.gpt.recompute_flops_per_token`):
    notebook 06's functions.  Moving the shape keeps the tokens/s ("what MFU would this need?").
    Returns an :class:`MfuView`.

    Args:
        n_layer, n_head, n_embd, seq_len, vocab_size: the GPT (:class:`accelkit.gpt.GPTConfig`).
        tokens_per_s: training throughput, tokens per second.
        peak_tflops: dense peak of the matmuls' dtype, TFLOP/s (used when ``peak`` is :data:`GIVEN`).
        peak: :data:`GIVEN` or a key of :func:`peaks` (``"h100 bf16"``).
        checkpoint: every block recomputes its forward in the backward (HFU > MFU).

    Raises ValueError for a shape ``GPTConfig`` rejects, an unknown peak, or ``peak_tflops <= 0``.

    Example: ``ak.explore.mfu(n_layer=12, n_head=12, n_embd=768, seq_len=1024, tokens_per_s=1e5,
    peak_tflops=989.4)``
    """
    settings = dict(locals())
    from accelkit import gpt

    cfg = gpt.GPTConfig(vocab_size=vocab_size, block_size=seq_len, n_layer=n_layer, n_head=n_head,
                        n_embd=n_embd)
    n, n_blocks = _param_counts(cfg)
    fpt = gpt.flops_per_token(cfg, n)
    extra = gpt.recompute_flops_per_token(cfg, n_blocks) if checkpoint else 0.0
    pk = peak_tflops if peak == GIVEN else peaks()[peak]
    return MfuView(n_params=n, flops_per_token=fpt, recompute_flops=extra, peak_tflops=pk,
                   mfu=gpt.mfu(tokens_per_s, fpt, pk), hfu=gpt.mfu(tokens_per_s, fpt + extra, pk),
                   settings=settings)


__all__ = ["GIVEN", "MODE_ENV", "OPS", "PRECISIONS", "READOUT_CLASS", "THIS_MACHINE", "MemoryView", "MfuView",
           "PipelineView", "RooflineView", "as_code", "device_bytes", "is_interactive", "memory", "mfu",
           "peaks", "pipeline", "roofline"]
