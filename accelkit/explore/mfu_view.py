"""MFU explorer: a GPT's shape, tokens/s and a peak → model and hardware FLOPs utilisation.

The parameters come from :func:`accelkit.gpt.n_params` of a :class:`accelkit.gpt.GPT` built
on PyTorch's ``meta`` device (shapes only, no memory), the FLOPs per token from
:func:`accelkit.gpt.flops_per_token` (``6·N + 12·L·d·T``) and, for activation
checkpointing, :func:`accelkit.gpt.recompute_flops_per_token`; the utilisation from
:func:`accelkit.gpt.mfu` — the functions notebook 06 computes its MFU table with.  Peaks:
the one given (the notebook's, of the dtype its matmuls ran in) or a dense datasheet peak
from the hardware-class table (:data:`accelkit.hardware.CLASSES`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from accelkit import hardware
from accelkit.explore import ui

GIVEN = "peak_tflops as given"


def peaks() -> dict[str, float]:
    """Return ``{"<class> <dtype>": dense datasheet TFLOP/s}`` for every GPU/TPU class."""
    return {f"{c.name} {d}": v for c in hardware.CLASSES.values()
            for d, v in c.peak_tflops.items()}


@functools.lru_cache(maxsize=64)
def param_counts(n_layer: int, n_head: int, n_embd: int, seq_len: int,
                 vocab_size: int) -> tuple[int, int]:
    """Return ``(N, N_blocks)``: :func:`accelkit.gpt.n_params` and the blocks' parameters.

    Raises:
        ValueError: as :class:`accelkit.gpt.GPTConfig` (``n_embd`` divisible by ``n_head``).
    """
    import torch

    from accelkit import gpt

    cfg = gpt.GPTConfig(vocab_size=vocab_size, block_size=seq_len, n_layer=n_layer,
                        n_head=n_head, n_embd=n_embd)
    with torch.device("meta"):
        model = gpt.GPT(cfg)
    return gpt.n_params(model), sum(p.numel() for p in model.blocks.parameters())


@dataclass(frozen=True)
class MfuView:
    """What the MFU explorer shows for one setting.

    Attributes:
        n_params: N, non-embedding parameters.
        flops_per_token: model FLOPs per token.
        recompute_flops: FLOPs per token checkpointing adds (0 without it).
        peak_tflops: the peak divided by.
        mfu, hfu: model and hardware FLOPs utilisation (fractions).
    """

    n_params: int
    flops_per_token: float
    recompute_flops: float
    peak_tflops: float
    mfu: float
    hfu: float


def compute(*, n_layer: int, n_head: int, n_embd: int, seq_len: int, tokens_per_s: float,
            peak_tflops: float, vocab_size: int = 256, peak: str = GIVEN,
            checkpoint: bool = False) -> MfuView:
    """Compute the explorer's numbers (the update function; arguments as :func:`mfu`)."""
    from accelkit import gpt

    cfg = gpt.GPTConfig(vocab_size=vocab_size, block_size=seq_len, n_layer=n_layer,
                        n_head=n_head, n_embd=n_embd)
    n, n_blocks = param_counts(n_layer, n_head, n_embd, seq_len, vocab_size)
    fpt = gpt.flops_per_token(cfg, n)
    extra = gpt.recompute_flops_per_token(cfg, n_blocks) if checkpoint else 0.0
    pk = peak_tflops if peak == GIVEN else peaks()[peak]
    return MfuView(n, fpt, extra, pk, gpt.mfu(tokens_per_s, fpt, pk),
                   gpt.mfu(tokens_per_s, fpt + extra, pk))


def draw(view: MfuView) -> Any:
    """Draw MFU and HFU as two horizontal bars (percent of the peak).

    Returns:
        The ``Figure``; bar widths are ``100·mfu`` and ``100·hfu``.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 1.9))
    vals = [100 * view.mfu, 100 * view.hfu]
    ax.barh([0, 1], vals, color=["tab:blue", "tab:orange"])
    ax.set_yticks([0, 1], ["MFU", "HFU"])
    ax.invert_yaxis()
    ax.set_xlim(0, max(100.0, *vals) * 1.05)
    ax.set_xlabel(f"% of {view.peak_tflops:.3g} TFLOP/s")
    ax.set_title(f"N = {view.n_params:,} parameters, {view.flops_per_token:.3g} FLOP per token")
    fig.tight_layout()
    return fig


def readout(view: MfuView, tokens_per_s: float) -> str:
    """One line: MFU, HFU and their ingredients."""
    return (f"{tokens_per_s:,.0f} tokens/s × {view.flops_per_token:.3g} FLOP/token ÷ "
            f"{view.peak_tflops:.3g} TFLOP/s = MFU {view.mfu:.2%}; HFU {view.hfu:.2%}"
            + (f" (+{view.recompute_flops / view.flops_per_token:.0%} FLOPs recomputed)"
               if view.recompute_flops else ""))


def mfu(*, n_layer: int, n_head: int, n_embd: int, seq_len: int, tokens_per_s: float,
        peak_tflops: float, vocab_size: int = 256, peak: str = GIVEN,
        checkpoint: bool = False) -> None:
    """Explore the MFU and HFU of a GPT of any shape at a given throughput and peak.

    MFU = tokens/s × (6·N + 12·L·d·T) ÷ peak (:func:`accelkit.gpt.mfu`); HFU adds the
    FLOPs activation checkpointing recomputes. Controls: layers, width, sequence length,
    tokens/s, the peak (the one given or a datasheet peak), checkpointing.  Changing the shape
    does not change the tokens/s: move both to ask "what MFU would this need?".  Without
    widgets (see :mod:`accelkit.explore.ui`) it draws this state and prints the call that
    reproduces it.

    Args:
        n_layer, n_head, n_embd: L, H, d (``n_embd`` divisible by ``n_head``).
        seq_len: T, tokens per sequence.
        tokens_per_s: training throughput, tokens per second.
        peak_tflops: dense peak of the dtype the matmuls run in, TFLOP/s (used when
            ``peak`` is :data:`GIVEN`).
        vocab_size: tokens in the vocabulary.
        peak: :data:`GIVEN` or a key of :func:`peaks` (``"h100 bf16"``).
        checkpoint: every block recomputes its forward in the backward (HFU > MFU).

    Returns:
        None (it displays the explorer).

    Raises:
        ValueError: for a shape :class:`accelkit.gpt.GPTConfig` rejects, an unknown peak, or
            ``peak_tflops <= 0``.

    Example: ``ak.explore.mfu(n_layer=12, n_head=12, n_embd=768, seq_len=1024, tokens_per_s=1e5,
    peak_tflops=989.4)``
    """
    settings: dict[str, Any] = dict(
        n_layer=n_layer, n_head=n_head, n_embd=n_embd, seq_len=seq_len, tokens_per_s=tokens_per_s,
        peak_tflops=peak_tflops, vocab_size=vocab_size, peak=peak, checkpoint=checkpoint)
    compute(**settings)
    controls = {"n_layer": ui.Control("int", "layers L", 1, 96),
                "n_embd": ui.Control("choice", "width d", options=sorted(  # divisible by H
                    {n_embd} | {n_head * 32 * k for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48)})),
                "seq_len": ui.Control("logint", "sequence T", 16, 131072),
                "tokens_per_s": ui.Control("log", "tokens/s", 1e2, 1e7),
                "peak": ui.Control("choice", "peak", options=[GIVEN, *peaks()]),
                "checkpoint": ui.Control("bool", "checkpoint every block")}

    def render(s: dict[str, Any]) -> tuple[Any, str]:
        view = compute(**s)
        return draw(view), readout(view, s["tokens_per_s"])

    ui.show("mfu", settings, controls, render)


__all__ = ["GIVEN", "MfuView", "compute", "draw", "mfu", "param_counts", "peaks", "readout"]
