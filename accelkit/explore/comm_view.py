"""Communication explorer: ring all-reduce time, bus bandwidth and the overlap budget.

Every time comes from :func:`accelkit.comm_model.ring_allreduce_s` (the model notebook 01
fits to measured all-reduces, ``T = α + 2 (N-1)/N · S / B``), the effective bus bandwidth
from :func:`accelkit.comm_model.bus_bandwidth_gbps`.  Link presets are theoretical
per-direction peaks (NCCL's bus bandwidth of an ideal ring equals the per-GPU link's
one-way rate; the NCCL tests reach less):

* PCIe 4.0 x16: 16 GT/s × 16 lanes, 128b/130b encoding → 31.5 GB/s per direction
  (PCI-SIG, PCI Express Base Specification 4.0).
* PCIe 5.0 x16: 32 GT/s × 16 lanes → 63 GB/s per direction (PCI Express Base Specification 5.0).
* NVLink 3 (A100): 600 GB/s per GPU, both directions → 300 (NVIDIA A100 Tensor Core GPU
  datasheet).
* NVLink 4 (H100 SXM): 900 GB/s per GPU, both directions → 450 (NVIDIA H100 Tensor Core GPU
  datasheet).
* InfiniBand HDR: 200 Gb/s per port → 25 GB/s (NVIDIA ConnectX-6 VPI datasheet).
* InfiniBand NDR: 400 Gb/s per port → 50 GB/s (NVIDIA ConnectX-7 datasheet).

A preset sets the bandwidth only; the latency α stays the one given (default: this
machine's fitted α), since per-call latency depends on the library and the topology more
than on the link.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelkit import comm_model
from accelkit.explore import ui

GIVEN = "bus_gbps as given"
#: link -> bus bandwidth, GB/s (10**9 B/s), per direction; sources in the module docstring.
LINKS: dict[str, float] = {
    "PCIe 4.0 x16": 31.5,
    "PCIe 5.0 x16": 63.0,
    "NVLink 3 (A100)": 300.0,
    "NVLink 4 (H100 SXM)": 450.0,
    "InfiniBand HDR (200 Gb/s)": 25.0,
    "InfiniBand NDR (400 Gb/s)": 50.0,
}


@dataclass(frozen=True)
class CommView:
    """What the communication explorer shows for one setting.

    Attributes:
        link: the link's name (:data:`GIVEN` for ``bus_gbps``).
        bus_gbps: the bus bandwidth used, GB/s.
        allreduce_s: predicted seconds per all-reduce.
        effective_bus_gbps: ``2 (N-1)/N · S / T`` including the latency, GB/s (None for
            N = 1).
        budget_s: ``backward_s - allreduce_s`` (> 0: it can hide behind backward), or None.
    """

    link: str
    bus_gbps: float
    allreduce_s: float
    effective_bus_gbps: float | None
    budget_s: float | None


def link_gbps(link: str, bus_gbps: float) -> float:
    """Return the bandwidth of ``link`` (:data:`LINKS`), or ``bus_gbps`` for :data:`GIVEN`.

    Raises:
        ValueError: for an unknown link.
    """
    if link == GIVEN:
        return bus_gbps
    if link not in LINKS:
        raise ValueError(f"unknown link {link!r}; use {GIVEN!r} or one of {', '.join(LINKS)}")
    return LINKS[link]


def compute(nbytes: float, world_size: int, *, bus_gbps: float, latency_s: float = 0.0,
            link: str = GIVEN, backward_s: float | None = None) -> CommView:
    """Compute the explorer's numbers (the update function; arguments as :func:`comm`)."""
    bw = link_gbps(link, bus_gbps)
    t = comm_model.ring_allreduce_s(nbytes, world_size, bw, latency_s)
    eff = comm_model.bus_bandwidth_gbps(nbytes, world_size, t) if world_size > 1 and t > 0 \
        else None
    return CommView(link, bw, t, eff, None if backward_s is None else backward_s - t)


def draw(view: CommView, nbytes: float, world_size: int, latency_s: float,
         backward_s: float | None = None) -> Any:
    """Draw seconds per all-reduce against the buffer size: the chosen link (bold), every
    preset (thin), the chosen size (a dot) and the backward time (a dashed line).

    Returns:
        The ``Figure``; the chosen link's curve has ``gid="explore-link"``.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    sizes = np.geomspace(min(1e3, nbytes / 10), max(1e10, nbytes * 10), 80)
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    for i, (name, bw) in enumerate(LINKS.items()):
        ax.plot(sizes, [comm_model.ring_allreduce_s(float(s), world_size, bw, latency_s)
                        for s in sizes], color=f"C{i + 1}", lw=0.8, alpha=0.6, label=name)
    ax.plot(sizes, [comm_model.ring_allreduce_s(float(s), world_size, view.bus_gbps, latency_s)
                    for s in sizes], color="C0", lw=2.5, gid="explore-link",
            label=f"{view.link}: {view.bus_gbps:.3g} GB/s")
    ax.plot([nbytes], [view.allreduce_s], "o", color="black", markersize=8)
    if backward_s is not None:
        ax.axhline(backward_s, color="tab:red", ls="--", label="backward time")
    ax.set(xscale="log", yscale="log", xlabel="buffer size (bytes)",
           ylabel="seconds per all-reduce",
           title=f"ring all-reduce on N = {world_size}, α = {latency_s * 1e6:.3g} µs")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def readout(view: CommView, nbytes: float, world_size: int) -> str:
    """One or two lines: time, effective bus bandwidth, overlap budget."""
    text = (f"all-reduce of {nbytes / 1e6:.3g} MB on {world_size} ranks over {view.link} "
            f"({view.bus_gbps:.3g} GB/s): {view.allreduce_s * 1e3:.3g} ms")
    if view.effective_bus_gbps is not None:
        text += f", effective bus bandwidth {view.effective_bus_gbps:.3g} GB/s"
    if view.budget_s is not None:
        text += ("\nit fits in the backward pass with " if view.budget_s >= 0 else
                 "\nlonger than the backward pass by ") + f"{abs(view.budget_s) * 1e3:.3g} ms " \
            "(DDP overlaps all buckets but the last)"
    return text


def comm(nbytes: float, world_size: int, *, bus_gbps: float, latency_s: float = 0.0,
         link: str = GIVEN, backward_s: float | None = None) -> None:
    """Explore the time of a ring all-reduce, its bus bandwidth and the overlap budget.

    Shows ``T = α + 2 (N-1)/N · S / B`` (:func:`accelkit.comm_model.ring_allreduce_s`) against
    the buffer size for the chosen link and every preset (:data:`LINKS`, sources in the module
    docstring), the chosen buffer, and, with ``backward_s``, how much time is left for the
    all-reduce to hide behind the backward pass.  Controls: buffer size, ranks, link, bus
    bandwidth (used when the link is :data:`GIVEN`), latency.  Without widgets (see
    :mod:`accelkit.explore.ui`) it draws this state and prints the call that reproduces it.

    Args:
        nbytes: buffer size S, bytes (e.g. the gradient's).
        world_size: ranks N, >= 1.
        bus_gbps: bus bandwidth B, GB/s (default link: this machine's fitted B).
        latency_s: α, seconds per call (this machine's fitted α).
        link: :data:`GIVEN` or a key of :data:`LINKS`.
        backward_s: the backward pass's time, seconds, or None.

    Returns:
        None (it displays the explorer).

    Raises:
        ValueError: for an unknown link, and as :func:`accelkit.comm_model.ring_allreduce_s`.

    Example: ``ak.explore.comm(4.5e6, 8, bus_gbps=0.9, latency_s=8e-4, link="NVLink 4 (H100 SXM)")``
    """
    settings: dict[str, Any] = dict(nbytes=nbytes, world_size=world_size, bus_gbps=bus_gbps,
                                    latency_s=latency_s, link=link, backward_s=backward_s)
    compute(**settings)
    controls = {"nbytes": ui.Control("log", "buffer (bytes)", 1e3, 1e11),
                "world_size": ui.Control("int", "ranks N", 1, 1024),
                "link": ui.Control("choice", "link", options=[GIVEN, *LINKS]),
                "bus_gbps": ui.Control("log", "bus_gbps (GB/s)", 0.1, 1000),
                "latency_s": ui.Control("log", "latency α (s)", 1e-6, 1e-2)}

    def render(s: dict[str, Any]) -> tuple[Any, str]:
        view = compute(**s)
        return (draw(view, s["nbytes"], s["world_size"], s["latency_s"], s["backward_s"]),
                readout(view, s["nbytes"], s["world_size"]))

    ui.show("comm", settings, controls, render)


__all__ = ["GIVEN", "LINKS", "CommView", "comm", "compute", "draw", "link_gbps", "readout"]
