"""Notebook 06's GPT (GPT-2 / nanoGPT shape, tied head): model, FLOPs and MFU, step, sizing.

The attention (``"manual"`` materialises the T×T scores, ``"sdpa"`` fused kernels) and
activation checkpointing switch at run time.  Elsewhere: corpus, batches and the Keras twin
(:mod:`accelkit.models`), the memory model (:mod:`accelkit.memory`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from accelkit import memory

ATTENTIONS = ("manual", "sdpa")


@dataclass(frozen=True)
class GPTConfig:
    """The shape of a GPT: vocabulary V (256 for bytes), longest context T_max (``block_size``),
    L blocks, H heads (must divide the width d, ``n_embd``) and the attention (``"manual"`` or
    ``"sdpa"``).  ``ValueError`` for a size < 1 or not an int, H not dividing d, another attention.
    """

    vocab_size: int = 256
    block_size: int = 128
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    attention: str = "manual"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GPTConfig.{name} must be an int >= 1, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} must be divisible by n_head {self.n_head}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, got {self.attention!r}")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention, ``(B, T, C)`` -> ``(B, T, C)``; ``.attention`` picks."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head, self.attention = cfg.n_head, cfg.attention
        self.qkv, self.proj = nn.Linear(cfg.n_embd, 3 * cfg.n_embd), nn.Linear(cfg.n_embd, cfg.n_embd)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)  # (T_max, T_max): True = may see

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in self.qkv(x).split(C, dim=2))  # each (B, H, T, C/H)
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # softmax(QKᵀ/√d, masked)·V written out (Vaswani et al. 2017, eq. 1)
            mask: torch.Tensor = self.mask  # type: ignore[assignment]
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, H, T, T), kept
            y = torch.softmax(att.masked_fill(~mask[:T, :T], float("-inf")), dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    """One pre-norm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(),
                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A GPT-2-shaped decoder-only transformer (after Karpathy's nanoGPT) of shape ``cfg``;
    the first ``checkpoint_blocks`` blocks recompute their activations in the backward.

    **Shape** ``idx: (B, T)`` int64, ``T <= cfg.block_size`` (else ``ValueError``) -> logits
    ``(B, T, vocab_size)`` and, with ``targets: (B, T)``, the mean fp32 cross-entropy, else None.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg, self.checkpoint_blocks = cfg, 0
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.wte.weight  # tied: the output head is the token embedding
        self.apply(_init_weights)
        for name, p in self.named_parameters():  # GPT-2: scale residual projections by 1/√(2L)
            if name.endswith(("attn.proj.weight", "mlp.2.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    def set_attention(self, kind: str) -> GPT:
        """Switch every block's attention to ``"manual"`` or ``"sdpa"``; returns ``self``."""
        if kind not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, got {kind!r}")
        for block in self.blocks:
            block.attn.attention = kind  # type: ignore[union-attr]
        self.cfg = replace(self.cfg, attention=kind)
        return self

    def forward(self, idx: torch.Tensor,
                targets: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        T = idx.size(1)
        if T > self.cfg.block_size:
            raise ValueError(f"sequence of {T} tokens is longer than block_size "
                             f"{self.cfg.block_size}")
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))  # (B, T, C)
        for i, block in enumerate(self.blocks):
            if i < self.checkpoint_blocks and torch.is_grad_enabled():
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = self.head(self.ln_f(x))  # (B, T, V)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                       targets.reshape(-1))


def _init_weights(module: nn.Module) -> None:  # GPT-2: N(0, 0.02), zero biases
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(bias := getattr(module, "bias", None), torch.Tensor):
            nn.init.zeros_(bias)


def n_params(model: nn.Module, non_embedding: bool = True) -> int:
    """Count parameters (shared ones once); ``non_embedding`` leaves out the position embedding
    (nanoGPT's ``get_num_params``, Kaplan et al. 2020: it does no matmul; the token embedding
    is also the tied output head and stays in)."""
    total = sum(p.numel() for p in model.parameters())
    wpe = getattr(model, "wpe", None)
    if non_embedding and isinstance(wpe, nn.Embedding):
        total -= wpe.weight.numel()
    return total


def flops_per_token(cfg: GPTConfig, n_param: int, seq_len: int | None = None) -> float:
    """Training FLOPs per token (forward + backward), a float: ``6·N + 12·L·d·T``.

    Dense: one multiply-add per parameter and token forward, two backward: 6·N (N = ``n_param``,
    :func:`n_params`).  Attention: QKᵀ and ·V cost ``2·T·d`` each per token and layer forward,
    ``12·L·d·T`` for training, the full T×T counted (T = ``seq_len`` or T_max).  Sources: PaLM
    (Chowdhery et al. 2022), appendix B; nanoGPT's ``estimate_mfu`` (Kaplan et al. 2020, eq.
    2.2, count the scores once: half this term).
    """
    t = cfg.block_size if seq_len is None else seq_len
    return 6.0 * n_param + 12.0 * cfg.n_layer * cfg.n_embd * t


def recompute_flops_per_token(cfg: GPTConfig, block_params: int,
                              seq_len: int | None = None) -> float:
    """FLOPs per token that checkpointing every block adds (for HFU): ``2·N_b + 4·L·d·T`` (float),
    the blocks' forward again (N_b = ``block_params``; the forward third of the attention term)."""
    t = cfg.block_size if seq_len is None else seq_len
    return 2.0 * block_params + 4.0 * cfg.n_layer * cfg.n_embd * t


def mfu(tokens_per_s: float, flops_token: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation, a fraction: ``tokens_per_s · flops_token`` ÷ ``peak_tflops``
    (the matmuls' dtype's dense peak, TFLOP/s; ``<= 0``: ``ValueError``)."""
    if peak_tflops <= 0:
        raise ValueError(f"peak_tflops must be > 0, got {peak_tflops}")
    return tokens_per_s * flops_token / (peak_tflops * 1e12)


class Stepper:
    """One training configuration: each call takes one ``opt`` step of ``model`` (returning
    ``(logits, loss)``) on the next of ``batches`` (``(x, y)`` pairs, wrapping around, or
    ``i -> (x, y)``) copied to ``device``, and returns the loss (a 0-d tensor).

    ``accum`` k: micro-batches whose gradients (each loss ÷ k) add up before one step (k must
    divide the batch, else the call raises ``ValueError``); ``amp``: an
    :class:`accelkit.precision.AmpChoice` or None (fp32), autocast and GradScaler from
    :func:`accelkit.precision.make_step`; ``no_sync``: ``ddp_model.no_sync``, for the first k - 1
    backward passes; ``clip``: the gradients' global norm limit (fp16's unscaled first), the
    last norm before clipping kept in ``grad_norm``.  ``ValueError`` for accum < 1 or clip <= 0.
    """

    def __init__(self, model: nn.Module, opt: torch.optim.Optimizer,
                 batches: Sequence[tuple[torch.Tensor, torch.Tensor]]
                 | Callable[[int], tuple[torch.Tensor, torch.Tensor]], *, accum: int = 1,
                 amp: Any = None, device: Any = "cpu",
                 no_sync: Callable[[], Any] | None = None, clip: float | None = None) -> None:
        if not isinstance(accum, int) or accum < 1:
            raise ValueError(f"accum must be an int >= 1, got {accum!r}")
        if clip is not None and not clip > 0:
            raise ValueError(f"clip must be a positive norm or None, got {clip!r}")
        self.grad_norm: torch.Tensor | None = None
        self.model, self.opt, self.batches, self.accum, self.clip = model, opt, batches, accum, clip
        self.device, self.no_sync, self.i = device, no_sync, 0
        from accelkit.precision import make_step  # the course's one autocast + GradScaler recipe
        recipe = make_step(model, opt, device, None if amp is None else amp.dtype)
        self.autocast, self.scaler = recipe.autocast, recipe.scaler  # disabled: pass-throughs

    def __call__(self) -> torch.Tensor:
        from torch.profiler import record_function  # labels the profiler's table and trace

        with record_function("batch"):
            i, b = self.i, self.batches
            x, y = (t.to(self.device, non_blocking=True)
                    for t in (b(i) if callable(b) else b[i % len(b)]))
        self.i += 1
        if x.size(0) % self.accum:
            raise ValueError(f"batch {x.size(0)} is not divisible into {self.accum} micro-batches")
        total = torch.zeros((), device=x.device)
        for j, (xm, ym) in enumerate(zip(x.chunk(self.accum), y.chunk(self.accum))):
            with self.no_sync() if self.no_sync and j < self.accum - 1 else nullcontext():
                with record_function("forward"), self.autocast:
                    loss = self.model(xm, ym)[1] / self.accum
                with record_function("backward"):
                    self.scaler.scale(loss).backward()
            total += loss.detach()
        with record_function("optimizer"):
            if self.clip is not None:
                self.scaler.unscale_(self.opt)  # true gradients first (a no-op without fp16)
                self.grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            self.scaler.step(self.opt)  # opt.step(); skipped on inf/NaN fp16 gradients
            self.scaler.update()
            self.opt.zero_grad(set_to_none=True)
        return total

    def train(self, steps: int) -> list[float]:
        """Take ``steps`` steps; return the training loss of each."""
        return [float(self()) for _ in range(steps)]


@torch.no_grad()
def evaluate(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> float:
    """The mean cross-entropy (nats) of ``model`` on one ``(x, y)`` batch, in eval mode."""
    was = model.training
    model.eval()
    _, loss = model(*batch)
    model.train(was)
    return float(loss)


@torch.no_grad()
def generate(model: GPT, prompt: torch.Tensor, new_tokens: int, *,
             temperature: float = 0.8, seed: int = 0) -> torch.Tensor:
    """Sample ``new_tokens`` tokens after ``prompt`` ``(1, T0)``; returns ``(1, T0 + new)``."""
    g = torch.Generator(device=prompt.device).manual_seed(seed)
    idx = prompt
    for _ in range(new_tokens):
        logits, _ = model(idx[:, -model.cfg.block_size:])
        probs = torch.softmax(logits[:, -1, :].float() / temperature, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, 1, generator=g)], dim=1)
    return idx


def trace_spans(path: str | Path, categories: Sequence[str] = (
        "user_annotation", "cpu_op", "kernel", "gpu_memcpy")) -> list[tuple[str, str, float, float]]:
    """Read a Chrome trace's (``prof.export_chrome_trace``) outermost spans per thread, for
    :func:`accelkit.plot.timeline`: ``(row, name, start_us, duration_us)`` for each complete
    event (``"ph": "X"``) of ``categories`` not inside another of its category on its thread or
    stream; ``row`` is ``"<category> <tid>"``."""
    events = json.loads(Path(path).read_text(encoding="utf-8"))["traceEvents"]
    spans = []
    for cat in categories:
        mine = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == cat),
                      key=lambda e: (e["tid"], float(e["ts"]), -float(e.get("dur", 0))))
        end: dict[Any, float] = {}
        for e in mine:
            ts, dur = float(e["ts"]), float(e.get("dur", 0))
            if ts >= end.get(e["tid"], float("-inf")):  # not inside the last outer span
                spans.append((f"{cat} {e['tid']}", str(e["name"]), ts, dur))
                end[e["tid"]] = ts + dur
    return spans


# ----------------------------------------------------------------------------- sizing
#: GPT-2 small's shape on bytes (vocabulary 256): notebook 06's ``full``-profile model.
GPT2_SMALL = GPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=1024)
#: (T, batch) pairs the ``full`` profile tries, largest first.  Batches are multiples of 8:
#: rung 7 splits the batch into 4 micro-batches, rung 8 gives 2 ranks half of it in 4.
CAPSTONE_SIZES = ((1024, 16), (1024, 8), (512, 16), (512, 8), (256, 16), (256, 8))


def param_counts(cfg: GPTConfig) -> tuple[int, int]:
    """Return ``(parameters, largest parameter tensor)`` of ``GPT(cfg)`` from its shape, without
    building it (shared ones once, position embedding included; tested against the model)."""
    d, L = cfg.n_embd, cfg.n_layer
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    total = cfg.vocab_size * d + cfg.block_size * d + L * block + 2 * d
    return total, max(cfg.vocab_size * d, cfg.block_size * d, 4 * d * d)


def step_peak(cfg: GPTConfig, batch: int, *, attention: str | None = None) -> memory.MemoryEstimate:
    """Predict the peak bytes of one fp32 AdamW step of ``GPT(cfg)`` on ``batch`` sequences
    (:func:`accelkit.memory.gpt_step_peak` at T = ``cfg.block_size``); it bounds the autocast,
    checkpointing and accumulation rungs (up to autocast's weight copies)."""
    n, largest = param_counts(cfg)
    return memory.gpt_step_peak(n, largest, batch=batch, seq_len=cfg.block_size,
                                n_layer=cfg.n_layer, n_head=cfg.n_head, n_embd=cfg.n_embd,
                                vocab_size=cfg.vocab_size, attention=attention or cfg.attention)


def capstone_phases(cfg: GPTConfig, batch: int) -> dict[str, float]:
    """Predict notebook 06's peak device bytes in its largest phases, ``{phase: bytes}``: the base
    weights (``4·N``) all along, two rungs' models and AdamW states (``12·N`` each) alive for
    rungs 0-5, three for 6-7, plus one step's peak (:func:`step_peak`; manual attention for
    rungs 0-1 and the Keras cell, SDPA for 2-7)."""
    n, _ = param_counts(cfg)
    states = memory.per_device(n, "single", 1, optimizer="adamw")
    base = states.params_bytes
    kept = base + states.optimizer_bytes  # a rung between its steps
    manual = step_peak(cfg, batch, attention="manual").total_bytes
    fused = step_peak(cfg, batch, attention="sdpa").total_bytes
    return {"rungs 0-1: hand-written attention, 2 rungs alive": base + kept + manual,
            "rungs 2-7: SDPA, up to 3 rungs alive": base + 2 * kept + fused,
            "Keras side by side (TensorFlow) + PyTorch's top rung": base + kept + manual}


@dataclass(frozen=True)
class CapstoneSize:
    """Notebook 06's size: ``cfg`` (T = ``cfg.block_size``), ``batch``, device memory
    ``device_gib`` (None: unknown), the ``headroom`` fraction to use, bytes per ``phases``."""

    cfg: GPTConfig
    batch: int
    device_gib: float | None
    headroom: float
    phases: Mapping[str, float]

    @property
    def peak_bytes(self) -> float:
        """The largest predicted peak over the notebook's phases, bytes."""
        return max(self.phases.values())

    @property
    def budget_bytes(self) -> float | None:
        """``headroom · device memory`` in bytes, or ``None`` when the memory is unknown."""
        return None if self.device_gib is None else self.headroom * self.device_gib * 2**30

    @property
    def fits(self) -> bool:
        """True when :attr:`peak_bytes` fits the budget (or the device memory is unknown)."""
        budget = self.budget_bytes
        return budget is None or self.peak_bytes <= budget

    def __str__(self) -> str:
        where = ("device memory unknown" if self.device_gib is None else
                 f"{self.headroom:.0%} of {self.device_gib:g} GiB = "
                 f"{(self.budget_bytes or 0) / 2**30:.1f} GiB")
        return (f"L={self.cfg.n_layer}, d={self.cfg.n_embd}, T = {self.cfg.block_size}, "
                f"batch {self.batch}: predicted peak {self.peak_bytes / 2**30:.1f} GiB "
                f"({where})")


def capstone_size(memory_gib: float | None, *, headroom: float = memory.HEADROOM,
                  cfg: GPTConfig = GPT2_SMALL, batch: int | None = None) -> CapstoneSize:
    """Return notebook 06's :class:`CapstoneSize` on a device of ``memory_gib`` GiB (None: unknown).

    Without ``batch``: the first of :data:`CAPSTONE_SIZES` for ``cfg`` whose predicted peak
    (:func:`capstone_phases`) stays under ``headroom`` of the memory (T4 16 GiB: GPT-2 small,
    T = 1024, batch 8; A100 40 GB up: batch 16); unknown memory gets the largest, too little
    the smallest with ``fits`` False.  With ``batch``: ``cfg`` at that batch, fitting or not.
    ``ValueError`` for ``memory_gib <= 0``, ``headroom`` outside (0, 1] or ``batch < 1``.
    """
    if memory_gib is not None and memory_gib <= 0:
        raise ValueError(f"memory_gib must be > 0 (or None when unknown), got {memory_gib}")
    if not 0 < headroom <= 1:
        raise ValueError(f"headroom must be in (0, 1], got {headroom}")
    if batch is not None:
        if not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be an int >= 1, got {batch!r}")
        return CapstoneSize(cfg, batch, memory_gib, headroom, capstone_phases(cfg, batch))
    sizes = [capstone_size(memory_gib, headroom=headroom, cfg=replace(cfg, block_size=t), batch=b)
             for t, b in CAPSTONE_SIZES]
    return next((s for s in sizes if s.fits), sizes[-1])
