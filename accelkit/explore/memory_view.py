"""Memory explorer: bytes per device under DP, ZeRO-1/2/3 (FSDP), TP and PP, and whether they fit.

Every number comes from :mod:`accelkit.memory`: the steady state of each strategy from
:func:`accelkit.memory.table` / :func:`~accelkit.memory.per_device`, the peak of a DDP or
FSDP step from :func:`~accelkit.memory.peak_per_device` (the model notebook 01 checks against
measured peaks), activations of an MLP from :func:`~accelkit.memory.mlp_activation_bytes`,
"fits" from :func:`~accelkit.memory.fits`; device memory from the hardware-class table
(:data:`accelkit.hardware.CLASSES`) or this machine's RAM
(:func:`accelkit.device.system_memory_bytes`).  Not modelled (so not offered): activation
checkpointing (lower ``batch`` or ``sample_activation_bytes`` to see what fewer saved
activations would do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelkit import device as _device
from accelkit import hardware
from accelkit import memory as mem
from accelkit.explore import ui

THIS_MACHINE = "this machine (RAM)"
#: precision -> (bytes per parameter and gradient, fp32 master-copy bytes per parameter)
PRECISIONS = {"fp32": (4, 0), "bf16 mixed (fp32 master)": (2, 4)}
STRATEGY_NAMES = {"single": "single", "dp": "DP", "zero1": "ZeRO-1", "zero2": "ZeRO-2",
                  "zero3": "ZeRO-3/FSDP", "tp": "TP", "pp": "PP"}
PARTS = ("params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes")


def device_bytes(name: str) -> float:
    """Return the memory of a device: a hardware class's ``memory_gib``, or this machine's RAM.

    Raises:
        ValueError: for a class without a memory size (CPUs: use :data:`THIS_MACHINE`).
    """
    if name == THIS_MACHINE:
        return float(_device.system_memory_bytes() or 0) or float("nan")
    gib = hardware.get(name).memory_gib
    if gib is None:
        raise ValueError(f"{name} has no memory size in the table; use {THIS_MACHINE!r}")
    return gib * 2**30


def devices() -> list[str]:
    """The device choices: every hardware class with a memory size, then this machine."""
    return [c.name for c in hardware.CLASSES.values() if c.memory_gib] + [THIS_MACHINE]


@dataclass(frozen=True)
class MemoryView:
    """What the memory explorer shows for one setting.

    Attributes:
        estimates: :func:`accelkit.memory.table` for every strategy at this N.
        chosen: the estimate of the chosen strategy.
        peak: :func:`accelkit.memory.peak_per_device` for DP/ZeRO-3 in fp32 when the
            largest parameter is known, else None.
        device_bytes: the chosen device's memory, bytes.
        fits: whether the peak (else the steady total) fits in 90 % of it.
    """

    estimates: list[mem.MemoryEstimate]
    chosen: mem.MemoryEstimate
    peak: mem.PeakEstimate | None
    device_bytes: float
    fits: bool


def compute(n_params: int, *, strategy: str = "dp", world_size: int = 2, batch: int = 1,
            sample_activation_bytes: float = 0.0, widths: Sequence[int] | None = None,
            precision: str = "fp32", optimizer: str = "adam", largest_param: int | None = None,
            device: str = THIS_MACHINE) -> MemoryView:
    """Compute the explorer's numbers (the update function; arguments as :func:`memory`).

    Raises:
        ValueError: for an unknown precision, strategy, optimizer or device, and as
            :func:`accelkit.memory.per_device`.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    pb, master = PRECISIONS[precision]
    act = (mem.mlp_activation_bytes(batch, widths, dtype_bytes=pb) if widths
           else sample_activation_bytes * batch)
    strategies = [s for s in mem.STRATEGIES if s != "single" or world_size == 1]
    est = mem.table(n_params, world_size, strategies, param_bytes=pb, master_bytes=master,
                       optimizer=optimizer, activation_bytes=act)
    chosen = next((e for e in est if e.strategy == strategy), None)
    if chosen is None:
        raise ValueError(f"strategy {strategy!r} not among {', '.join(strategies)} for N = "
                         f"{world_size}")
    peak = None
    if largest_param and strategy in ("dp", "zero3") and master == 0:
        peak = mem.peak_per_device(n_params, strategy, world_size, param_bytes=pb,
                                      largest_param=largest_param, optimizer=optimizer,
                                      activation_bytes=chosen.activations_bytes)
    dev = device_bytes(device)
    ok = dev == dev and (peak or chosen).fits(dev)  # dev != dev: RAM unknown (NaN)
    return MemoryView(est, chosen, peak, dev, ok)


def _unit(nbytes: float) -> tuple[str, float]:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return unit, scale
    return "B", 1.0


def draw(view: MemoryView, device: str) -> Any:
    """Draw one stacked bar per strategy (and the chosen one's peak), with the device's line.

    Returns:
        The matplotlib ``Figure``; bars in :func:`_unit` of the largest total, one container
        per part (parameters, gradients, optimizer, activations[, transient of the peak]).
    """
    import matplotlib.pyplot as plt

    bars = [(STRATEGY_NAMES[e.strategy], [getattr(e, p) for p in PARTS] + [0.0])
            for e in view.estimates]
    if view.peak is not None:
        pk, s = view.peak, view.peak.steady
        transient = pk.total_bytes - (s.params_bytes + s.grads_bytes + s.optimizer_bytes)
        bars.append((f"{STRATEGY_NAMES[s.strategy]} peak",
                     [s.params_bytes, s.grads_bytes, s.optimizer_bytes, 0.0, transient]))
    unit, scale = _unit(max(sum(v) for _, v in bars))
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    bottom = [0.0] * len(bars)
    labels = ("parameters", "gradients", "optimizer states", "activations",
              "transient at the step's peak")
    for j, label in enumerate(labels):
        vals = [v[j] / scale for _, v in bars]
        ax.bar(range(len(bars)), vals, bottom=bottom, label=label, color=f"C{j}")
        bottom = [b + v for b, v in zip(bottom, vals)]
    chosen = STRATEGY_NAMES[view.chosen.strategy]
    ax.set_xticks(range(len(bars)), [n.replace("/", "/\n").replace(" peak", "\npeak")
                                     for n, _ in bars], fontsize=8)
    for tick, (name, _) in zip(ax.get_xticklabels(), bars):
        tick.set_fontweight("bold" if name.startswith(chosen) else "normal")
    if view.device_bytes == view.device_bytes and view.device_bytes <= 4 * max(bottom) * scale:
        ax.axhline(0.9 * view.device_bytes / scale, color="tab:red", ls="--",
                   label=f"90% of {device}")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.06)  # room above the tallest bar
    ax.set_ylabel(f"per device ({unit})")
    ax.set_title(f"memory per device, N = {view.chosen.world_size}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def readout(view: MemoryView, device: str) -> str:
    """One or two lines: the chosen strategy's total (and peak), and whether it fits."""
    c = view.chosen
    unit, scale = _unit(max(c.total_bytes, view.peak.total_bytes if view.peak else 0))
    text = (f"{STRATEGY_NAMES[c.strategy]} on N = {c.world_size}: steady "
            f"{c.total_bytes / scale:.3g} {unit} per device")
    if view.peak is not None:
        text += f", peak of a step {view.peak.total_bytes / scale:.3g} {unit}"
    dev = (f"{view.device_bytes / 2**30:.3g} GiB" if view.device_bytes == view.device_bytes
           else "unknown size")
    return text + f"\n{device} ({dev}): {'fits' if view.fits else 'does NOT fit'} (90% usable)"


def memory(n_params: int, *, strategy: str = "dp", world_size: int = 2, batch: int = 1,
           sample_activation_bytes: float = 0.0, widths: Sequence[int] | None = None,
           precision: str = "fp32", optimizer: str = "adam", largest_param: int | None = None,
           device: str = THIS_MACHINE) -> None:
    """Explore the memory one device needs per strategy, and whether it fits.

    Shows a stacked bar per strategy (parameters, gradients, optimizer states, activations;
    :func:`accelkit.memory.table`), the chosen strategy's step peak where the course models
    it (DP and ZeRO-3 in fp32 with ``largest_param``: :func:`accelkit.memory.peak_per_device`),
    and "fits / does NOT fit" in 90 % of the chosen device.  Sliders: parameters, batch,
    devices N; dropdowns: strategy, precision, optimizer, device.  Without widgets (see
    :mod:`accelkit.explore.ui`) it draws this state and prints the call that reproduces it.

    Args:
        n_params: parameters Ψ of the whole model, >= 1.
        strategy: ``"single"``, ``"dp"``, ``"zero1"``, ``"zero2"``, ``"zero3"`` (FSDP),
            ``"tp"`` or ``"pp"``.
        world_size: devices N, >= 1.
        batch: global batch, samples.
        sample_activation_bytes: activations saved for backward per sample, bytes (used
            when ``widths`` is None).
        widths: an MLP's layer widths ``[d0, ..., dL]``: activations from
            :func:`accelkit.memory.mlp_activation_bytes` in the chosen precision.
        precision: ``"fp32"`` or ``"bf16 mixed (fp32 master)"`` (2-byte parameters and
            gradients, a 4-byte master copy).
        optimizer: ``"sgd"``, ``"momentum"``, ``"adam"``, ``"adamw"``.
        largest_param: elements of the largest parameter tensor (enables the peak bar).
        device: a hardware-class name with memory (``"h100"``, ``"t4"`` ...) or
            :data:`THIS_MACHINE`.

    Returns:
        None (it displays the explorer).

    Raises:
        ValueError: as :func:`compute`, for the start settings.

    Example: ``ak.explore.memory(7_000_000_000, strategy="zero3", world_size=8, device="h100")``
    """
    settings: dict[str, Any] = dict(
        n_params=n_params, strategy=strategy, world_size=world_size, batch=batch,
        sample_activation_bytes=sample_activation_bytes, widths=list(widths) if widths else None,
        precision=precision, optimizer=optimizer, largest_param=largest_param, device=device)
    compute(**settings)  # fail here, with the caller's settings, not inside a widget callback
    controls = {
        "n_params": ui.Control("logint", "parameters", 1e5, 1e12),
        "batch": ui.Control("logint", "global batch", 1, 4096),
        "world_size": ui.Control("int", "devices N", 1, 64),
        "strategy": ui.Control("choice", "strategy", options=mem.STRATEGIES),
        "precision": ui.Control("choice", "precision", options=list(PRECISIONS)),
        "optimizer": ui.Control("choice", "optimizer", options=list(mem.OPTIMIZER_STATE_BYTES)),
        "device": ui.Control("choice", "device", options=devices()),
    }

    def render(s: dict[str, Any]) -> tuple[Any, str]:
        view = compute(**s)
        return draw(view, s["device"]), readout(view, s["device"])

    ui.show("memory", settings, controls, render)


__all__ = ["MemoryView", "THIS_MACHINE", "compute", "device_bytes", "devices", "draw", "memory",
           "readout"]
