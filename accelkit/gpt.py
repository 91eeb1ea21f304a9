"""A small GPT (decoder-only transformer) and its offline byte-level corpus, for notebook 06.

The model follows GPT-2 / nanoGPT: token + position embedding, ``n_layer`` pre-norm blocks of
causal self-attention and an MLP, a final LayerNorm and an output head *tied* to the token
embedding.  Two things are switchable at run time, because notebook 06 measures them:

* the attention: ``"manual"`` writes softmax(QKᵀ/√d + mask)·V by hand (the T×T score matrix
  is materialised), ``"sdpa"`` calls ``torch.nn.functional.scaled_dot_product_attention``
  (fused kernels: FlashAttention / memory-efficient on a GPU, a flash kernel on a CPU);
* activation checkpointing: the first ``checkpoint_blocks`` blocks run under
  ``torch.utils.checkpoint.checkpoint`` (their activations are recomputed in the backward).

Owns: :class:`GPTConfig`, :class:`GPT`, :func:`flops_per_token` (the MFU numerator),
:func:`mfu`, :class:`Stepper` (one training configuration), :func:`evaluate`,
:func:`trace_spans` (the profiler timeline), :func:`keras_gpt` (the Keras twin),
:func:`generate`; the capstone's size per device (:func:`capstone_size`, from the memory model
of :func:`accelkit.memory.gpt_step_peak`) and its out-of-memory report (:func:`guard_oom`).
Lives elsewhere: the corpus and the batch sampler (:mod:`accelkit.gpt_data`); peak memory
(:func:`accelkit.memory.measured_peak_bytes`); timing (:mod:`accelkit.bench`); the hardware
peaks (:mod:`accelkit.hardware`, :mod:`accelkit.roofline`); launching the DDP worker (:mod:`accelkit.launch`,
``notebooks/workers/gpt_ddp.py``).
"""

from __future__ import annotations

import gc
import math
import traceback
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from accelkit import memory

ATTENTIONS = ("manual", "sdpa")
T_ = TypeVar("T_")

@dataclass(frozen=True)
class GPTConfig:
    """The shape of a GPT.

    Attributes:
        vocab_size: tokens in the vocabulary (256 for bytes).
        block_size: the longest sequence (context) the position embedding covers, T_max.
        n_layer: transformer blocks, L.
        n_head: attention heads, H (``n_embd`` must be divisible by it).
        n_embd: model width, d.
        attention: ``"manual"`` or ``"sdpa"`` (see the module docstring).

    Example: ``GPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=1024)  # GPT-2 small``
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
    """Multi-head causal self-attention; ``self.attention`` picks the implementation.

    **Shape** ``x: (B, T, C)`` -> ``(B, T, C)``.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.attention = cfg.attention
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)  # (T_max, T_max): True = may see

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # each (B, T, C)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in (q, k, v))  # (B, H, T, C/H)
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            mask: torch.Tensor = self.mask  # type: ignore[assignment]
            y = manual_attention(q, k, v, mask[:T, :T])
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


def manual_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     mask: torch.Tensor) -> torch.Tensor:
    """softmax(QKᵀ/√d, masked) · V, written out (Vaswani et al. 2017, eq. 1).

    **Shape** ``q, k, v: (B, H, T, D)``, ``mask: (T, T)`` bool (True where a query may attend)
    -> ``(B, H, T, D)``.  The ``(B, H, T, T)`` score matrix is materialised (and kept for the
    backward pass): this is what fused attention avoids.
    """
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, H, T, T)
    att = att.masked_fill(~mask, float("-inf"))
    return torch.softmax(att, dim=-1) @ v


class Block(nn.Module):
    """One pre-norm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(),
                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A GPT-2-shaped decoder-only transformer (after Karpathy's nanoGPT).

    Attributes:
        cfg: its :class:`GPTConfig`.
        checkpoint_blocks: how many blocks (the first ones) recompute their activations in
            the backward pass (``torch.utils.checkpoint``, non-reentrant); 0 = none.

    **Shape** ``idx: (B, T)`` int64 token ids, ``T <= cfg.block_size`` -> logits
    ``(B, T, vocab_size)``; with ``targets: (B, T)`` also the mean cross-entropy loss.

    Example: ``logits, loss = GPT(GPTConfig())(x, y)``
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.checkpoint_blocks = 0
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
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)  # (B, T, C)
        for i, block in enumerate(self.blocks):
            if i < self.checkpoint_blocks and torch.is_grad_enabled():
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = self.head(self.ln_f(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)


def n_params(model: nn.Module, non_embedding: bool = True) -> int:
    """Count parameters (shared ones once); ``non_embedding`` leaves out the position embedding.

    The convention of nanoGPT's ``get_num_params`` and Kaplan et al. (2020): the position
    embedding does no matrix multiply, while the token embedding is also the output head (tied)
    and stays in.
    """
    total = sum(p.numel() for p in model.parameters())
    wpe = getattr(model, "wpe", None)
    if non_embedding and isinstance(wpe, nn.Embedding):
        total -= wpe.weight.numel()
    return total


def flops_per_token(cfg: GPTConfig, n_param: int, seq_len: int | None = None) -> float:
    """Training FLOPs per token: ``6·N + 12·L·d·T`` (forward + backward).

    The dense part: each parameter takes part in one multiply-add (2 FLOPs) per token in the
    forward pass and two in the backward (gradients for the input and for the weight): 6·N.
    The attention part: QKᵀ and the product with V each cost ``2·T·d`` per token and layer
    forward, so ``12·L·d·T`` for training.  Sources: PaLM (Chowdhery et al. 2022), appendix
    B, and nanoGPT's ``estimate_mfu``. (Kaplan et al. 2020, eq. 2.2, count the attention
    scores' FLOPs only once, ``2·L·T·d`` forward: half this term.)  The full T×T matrix is
    counted although a causal mask needs only half: the convention every MFU table uses.

    Args:
        cfg: the model's shape (L = ``n_layer``, d = ``n_embd``).
        n_param: N, the non-embedding parameters (:func:`n_params`).
        seq_len: T, the sequence length trained on; default ``cfg.block_size``.

    Returns:
        FLOPs per token (float).

    Example: ``flops_per_token(GPTConfig(n_layer=12, n_embd=768, block_size=1024), 124_000_000)``
    """
    t = cfg.block_size if seq_len is None else seq_len
    return 6.0 * n_param + 12.0 * cfg.n_layer * cfg.n_embd * t


def mfu(tokens_per_s: float, flops_token: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s ÷ the peak (a fraction, 0..1).

    Model FLOPs count the work the model needs (:func:`flops_per_token`), not work a
    technique adds (recomputation under checkpointing counts in *hardware* FLOPs utilisation,
    HFU, instead).  ``peak_tflops`` must be the dense peak of the dtype the matmuls run in.
    """
    if peak_tflops <= 0:
        raise ValueError(f"peak_tflops must be > 0, got {peak_tflops}")
    return tokens_per_s * flops_token / (peak_tflops * 1e12)


def recompute_flops_per_token(cfg: GPTConfig, block_params: int,
                              seq_len: int | None = None) -> float:
    """FLOPs per token that activation checkpointing of every block adds: ``2·N_b + 4·L·d·T``.

    A checkpointed block runs its forward pass again in the backward: its dense part
    ``2·N_b`` (``N_b`` the blocks' parameters) and its attention ``4·L·d·T`` (the forward half
    of :func:`flops_per_token`'s ``12·L·d·T``).  Add it to :func:`flops_per_token` for the
    *hardware* FLOPs utilisation (HFU; :func:`mfu` with the sum).

    Args:
        cfg: the model's shape (L = ``n_layer``, d = ``n_embd``).
        block_params: parameters of the checkpointed blocks.
        seq_len: T, default ``cfg.block_size``.

    Returns:
        FLOPs per token (float).
    """
    t = cfg.block_size if seq_len is None else seq_len
    return 2.0 * block_params + 4.0 * cfg.n_layer * cfg.n_embd * t


class Stepper:
    """One training configuration; each call takes one optimizer step on the next batch.

    The same object serves the ladder of notebook 06, its DDP worker and the loss check:
    ``batches`` is a list of ``(x, y)`` (prepared ahead) or a function ``i -> (x, y)`` (cut
    on the fly, the unfed baseline).  With ``accum = k`` the batch is split into ``k``
    micro-batches whose gradients add up (each loss divided by ``k``) before one optimizer
    step: the same gradient as the whole batch, at about 1/k of the activation memory.  With
    ``no_sync`` (a DDP model's ``no_sync``) the first ``k - 1`` backward passes skip the
    all-reduce.

    Args:
        model: the model (a :class:`GPT`, compiled or DDP-wrapped: it returns ``(logits, loss)``).
        opt: its optimizer.
        batches: a list of ``(x, y)`` or a function ``i -> (x, y)``.
        accum: micro-batches per step, k (must divide the batch).
        amp: an :class:`accelkit.precision.AmpChoice` to run the forward under autocast,
            or ``None`` for full precision.  The autocast context and the GradScaler (enabled
            for fp16 only) are :func:`accelkit.precision.make_step`'s, not rebuilt here.
        device: where ``x, y`` go (``non_blocking`` copies; a no-op when already there).
        no_sync: ``ddp_model.no_sync`` to skip the all-reduce of the first ``k - 1`` passes.
        clip: clip the gradients' global norm to this before each optimizer step, or ``None``.
            The GradScaler's gradients are scaled (fp16): ``scaler.unscale_(opt)`` comes
            first, so the norm is the true one; ``grad_norm`` keeps the last step's norm
            before clipping (a tensor: reading it does not synchronise the step).

    Raises:
        ValueError: for ``accum < 1`` or ``clip <= 0``.
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
        self.grad_norm: torch.Tensor | None = None  # the last step's norm before clipping
        self.model, self.opt, self.batches, self.accum, self.clip = model, opt, batches, accum, clip
        self.amp, self.device, self.no_sync, self.i = amp, device, no_sync, 0
        from accelkit.precision import make_step  # the course's one autocast + GradScaler recipe

        recipe = make_step(model, opt, device, None if amp is None else amp.dtype)
        self.autocast, self.scaler = recipe.autocast, recipe.scaler  # disabled: pass-throughs

    def batch(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``i``-th batch (lists wrap around), moved to the device."""
        b = self.batches(i) if callable(self.batches) else self.batches[i % len(self.batches)]
        return tuple(t.to(self.device, non_blocking=True) for t in b)  # type: ignore[return-value]

    def __call__(self) -> torch.Tensor:
        from torch.profiler import record_function  # labels the profiler's table and trace

        with record_function("batch"):
            x, y = self.batch(self.i)
        self.i += 1
        if x.size(0) % self.accum:
            raise ValueError(f"batch {x.size(0)} is not divisible into {self.accum} micro-batches")
        total = torch.zeros((), device=x.device)
        for j, (xm, ym) in enumerate(zip(x.chunk(self.accum), y.chunk(self.accum))):
            skip = self.no_sync is not None and j < self.accum - 1
            with self.no_sync() if skip and self.no_sync is not None else nullcontext():
                with record_function("forward"), self.autocast:
                    _, loss = self.model(xm, ym)
                    loss = loss / self.accum
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


#: The autocast rung's floor where this machine's own bf16 matmul measurement decided the path:
#: a step whose matmuls run clearly faster is faster as a whole ("faster", not a size).
AMP_STEP_FLOOR = 1.0


def amp_step_claim(path: Any) -> Any:
    """Return the autocast rung's :class:`accelkit.claims.Claim` on this machine (notebook 06).

    Where the hardware class decides (GPUs, ``cpu-avx2``, ``cpu-amx``) it is the class's
    ``gpt_amp`` claim.  Where the class's CPUs disagree and a short bf16 matmul measurement on
    this machine decided (:func:`accelkit.precision.amp_path`, ``decided_by ==
    "measurement"``): a machine whose bf16 matmul was clearly faster (a Zen 4, ~4x) must also
    run the whole bf16 step faster than fp32 — the matmuls are most of the step — so the floor
    is :data:`AMP_STEP_FLOOR`, decided by the same sequential rule as every claim; a machine
    where it was not (the Xeon VM of the class, 0.55x) gets no claim.

    Args:
        path: an :class:`accelkit.precision.AmpPath`.

    Returns:
        The ``Claim`` (``floor is None``: no claim; the rung is shown, not asserted).

    Example: ``AMPC = amp_step_claim(ak.precision.amp_path(dev))``
    """
    from accelkit.claims import Claim

    if path.decided_by != "measurement":
        return path.claim("gpt_amp")
    if not path.use:
        return Claim(None, f"{path.reason}: bf16 is not clearly faster here, so the step makes "
                     "no claim")
    return Claim(AMP_STEP_FLOOR, f"{path.reason}: this machine's bf16 matmul is clearly faster, "
                 "and matmuls are most of this step, so the bf16 step must be faster than fp32")


@torch.no_grad()
def evaluate(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> float:
    """The mean cross-entropy of ``model`` on one ``(x, y)`` batch, in fp32, eval mode."""
    was = model.training
    model.eval()
    _, loss = model(*batch)
    model.train(was)
    return float(loss)


def trace_spans(path: str | Path, categories: Sequence[str] = ("user_annotation", "cpu_op",
                                                                 "kernel", "gpu_memcpy")
                ) -> list[tuple[str, str, float, float]]:
    """Read the outermost spans of a Chrome trace (``prof.export_chrome_trace``) per thread.

    Returns ``(row, name, start_us, duration_us)`` for each complete event (``"ph": "X"``)
    of ``categories`` not nested inside another of its category on the same thread or
    stream; ``row`` is ``"<category> <tid>"``.  For :func:`accelkit.plot.timeline`.
    """
    import json

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


def keras_gpt(cfg: GPTConfig, *, policy: str | None = None) -> Any:
    """The same GPT in Keras 3 (TensorFlow backend), for notebook 06's side-by-side.

    Same blocks (pre-norm, causal ``MultiHeadAttention``, GELU MLP), learned position
    embedding; two differences: the output head is a separate ``Dense`` (not tied, so
    ``V·d`` more parameters) and attention is Keras's (on TensorFlow it computes the scores
    like :func:`manual_attention`; Keras has no fused attention kernel there).  The logits
    are float32 under a mixed ``policy``.

    **Shape** ``(B, T)`` int32 -> logits ``(B, T, vocab_size)``.
    """
    import keras
    from keras import layers

    class PositionEmbedding(layers.Layer):
        def build(self, input_shape: Any) -> None:
            self.w = self.add_weight(shape=(cfg.block_size, cfg.n_embd), name="wpe",
                                     initializer=keras.initializers.RandomNormal(stddev=0.02))

        def call(self, x: Any) -> Any:
            return x + keras.ops.cast(self.w[: keras.ops.shape(x)[1]], x.dtype)

    old = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy or "float32")
    try:
        idx = keras.Input((cfg.block_size,), dtype="int32")
        x = PositionEmbedding()(layers.Embedding(cfg.vocab_size, cfg.n_embd)(idx))
        for _ in range(cfg.n_layer):
            h = layers.LayerNormalization(epsilon=1e-5)(x)
            x = x + layers.MultiHeadAttention(cfg.n_head, cfg.n_embd // cfg.n_head)(
                h, h, use_causal_mask=True)
            h = layers.LayerNormalization(epsilon=1e-5)(x)
            h = layers.Dense(4 * cfg.n_embd, activation="gelu")(h)
            x = x + layers.Dense(cfg.n_embd)(h)
        x = layers.LayerNormalization(epsilon=1e-5)(x)
        logits = layers.Dense(cfg.vocab_size, dtype="float32")(x)
        return keras.Model(idx, logits)
    finally:
        keras.config.set_dtype_policy(old)


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


# ----------------------------------------------------------------------------- sizing
#: GPT-2 small's shape on bytes (vocabulary 256): notebook 06's ``full``-profile model.
GPT2_SMALL = GPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=1024)
#: (T, batch) pairs the ``full`` profile tries for :data:`GPT2_SMALL`, largest first.  Batches
#: are multiples of 8: rung 7 splits the batch into 4 micro-batches, and rung 8 gives each of
#: 2 ranks half of it in 4 micro-batches.
CAPSTONE_SIZES = ((1024, 16), (1024, 8), (512, 16), (512, 8), (256, 16), (256, 8))


def param_counts(cfg: GPTConfig) -> tuple[int, int]:
    """Return ``(parameters, largest parameter)`` of :class:`GPT` ``cfg`` from its shape.

    Parameters count shared ones once (the head is the token embedding) and include the
    position embedding; the largest tensor is usually an MLP weight, ``4·d·d``.  The same
    numbers as summing ``GPT(cfg).parameters()`` (tested), without building the model.
    """
    d, L = cfg.n_embd, cfg.n_layer
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    total = cfg.vocab_size * d + cfg.block_size * d + L * block + 2 * d
    return total, max(cfg.vocab_size * d, cfg.block_size * d, 4 * d * d)


def step_peak(cfg: GPTConfig, batch: int, *, attention: str | None = None,
              optimizer_impl: str = "for-loop") -> memory.PeakEstimate:
    """Predict the peak bytes of one fp32 AdamW step of :class:`GPT` ``cfg`` on ``batch``.

    :func:`accelkit.memory.gpt_step_peak` at T = ``cfg.block_size`` with this model's
    parameter counts (:func:`param_counts`).  Autocast, checkpointing and accumulation only
    lower the activations, so this bounds those rungs too (up to autocast's weight copies).

    Raises:
        ValueError: as :func:`accelkit.memory.gpt_step_peak`.
    """
    n, largest = param_counts(cfg)
    return memory.gpt_step_peak(n, largest, batch=batch, seq_len=cfg.block_size,
                                n_layer=cfg.n_layer, n_head=cfg.n_head, n_embd=cfg.n_embd,
                                vocab_size=cfg.vocab_size,
                                attention=attention or cfg.attention,
                                optimizer_impl=optimizer_impl)


def capstone_phases(cfg: GPTConfig, batch: int) -> dict[str, float]:
    """Predict notebook 06's peak device bytes in each phase that holds the most memory.

    06 keeps the base weights (``4·N`` bytes) all along and at most two rungs' models and
    AdamW states (``12·N`` each) while rungs 0-5 are compared in pairs, three while rungs 6
    and 7 run next to the top rung (the others are freed).  Each phase adds one step's peak
    (:func:`step_peak`): rungs 0-1 with the hand-written attention (the ``B·H·T²`` scores, the
    largest), rungs 2-7 with SDPA.  The Keras cell trains the same model in TensorFlow
    (attention like the hand-written one) while PyTorch keeps the base and the top rung.

    Args:
        cfg: the model (T = ``cfg.block_size``).
        batch: sequences per step.

    Returns:
        ``{phase: predicted peak bytes}``.
    """
    n, _ = param_counts(cfg)
    states = memory.per_device(n, "single", 1, optimizer="adamw")
    kept = states.params_bytes + states.optimizer_bytes  # a rung between its steps
    manual = step_peak(cfg, batch, attention="manual").total_bytes
    fused = step_peak(cfg, batch, attention="sdpa").total_bytes
    base = states.params_bytes
    return {"rungs 0-1: hand-written attention, 2 rungs alive": base + kept + manual,
            "rungs 2-7: SDPA, up to 3 rungs alive": base + 2 * kept + fused,
            "Keras side by side (TensorFlow) + PyTorch's top rung": base + kept + manual}


@dataclass(frozen=True)
class CapstoneSize:
    """Notebook 06's ``full``-profile size for one device, and its predicted peak.

    Attributes:
        cfg: the model (T = ``cfg.block_size``).
        batch: sequences per optimizer step.
        device_gib: the device's memory in GiB (the hardware class's ``memory_gib``), or
            ``None`` when unknown.
        headroom: the fraction of it the size may use (:data:`accelkit.memory.HEADROOM`).
        phases: :func:`capstone_phases` of this size.
    """

    cfg: GPTConfig
    batch: int
    device_gib: float | None
    headroom: float
    phases: Mapping[str, float]

    @classmethod
    def of(cls, cfg: GPTConfig, batch: int, memory_gib: float | None,
           headroom: float = memory.HEADROOM) -> CapstoneSize:
        """The predicted peak of notebook 06 at ``cfg`` (T = ``cfg.block_size``) and ``batch``
        on a device of ``memory_gib`` GiB (``None``: unknown).

        Raises:
            ValueError: for ``batch < 1``, ``memory_gib <= 0`` or ``headroom`` outside (0, 1].
        """
        if not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be an int >= 1, got {batch!r}")
        if memory_gib is not None and memory_gib <= 0:
            raise ValueError(f"memory_gib must be > 0 (or None when unknown), got {memory_gib}")
        if not 0 < headroom <= 1:
            raise ValueError(f"headroom must be in (0, 1], got {headroom}")
        return cls(cfg, batch, memory_gib, headroom, capstone_phases(cfg, batch))

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

    def smaller(self) -> CapstoneSize | None:
        """The largest size of :data:`CAPSTONE_SIZES` predicted below this one that fits, or
        ``None``."""
        for t, b in CAPSTONE_SIZES:
            size = CapstoneSize.of(replace(self.cfg, block_size=t), b, self.device_gib,
                                   self.headroom)
            if size.peak_bytes < self.peak_bytes and size.fits:
                return size
        return None

    def __str__(self) -> str:
        where = ("device memory unknown" if self.device_gib is None else
                 f"{self.headroom:.0%} of {self.device_gib:g} GiB = "
                 f"{(self.budget_bytes or 0) / 2**30:.1f} GiB")
        return (f"L={self.cfg.n_layer}, d={self.cfg.n_embd}, T = {self.cfg.block_size}, "
                f"batch {self.batch}: predicted peak {self.peak_bytes / 2**30:.1f} GiB "
                f"({where})")


def capstone_size(memory_gib: float | None, *, headroom: float = memory.HEADROOM,
                  cfg: GPTConfig = GPT2_SMALL) -> CapstoneSize:
    """Pick notebook 06's ``full`` size for a device of ``memory_gib`` GiB.

    Tries :data:`CAPSTONE_SIZES` (T and batch for the shape ``cfg``, largest first) and
    returns the first whose predicted peak over the notebook (:func:`capstone_phases`) stays
    under ``headroom`` of the memory: on a T4 (16 GiB) GPT-2 small at T = 1024 with batch 8,
    from an A100 40 GB up batch 16.  Unknown memory (``None``: a CPU, whose memory is the
    machine's RAM) gets the largest size.  When even the smallest does not fit, that one
    is returned with ``fits`` False: run the ``ci`` profile there.

    Args:
        memory_gib: device memory in GiB (``HardwareClass.memory_gib``), or ``None``.
        headroom: the fraction of the memory to plan for, in (0, 1].
        cfg: the model's shape (its ``block_size`` is replaced by each size's T).

    Returns:
        A :class:`CapstoneSize`.

    Raises:
        ValueError: for ``memory_gib <= 0`` or ``headroom`` outside (0, 1].

    Example: ``size = capstone_size(ak.hardware.get("t4").memory_gib); size.batch  # 8``
    """
    size = None
    for t, b in CAPSTONE_SIZES:
        size = CapstoneSize.of(replace(cfg, block_size=t), b, memory_gib, headroom)
        if size.fits:
            return size
    assert size is not None  # CAPSTONE_SIZES is not empty
    return size


class RungOutOfMemory(torch.OutOfMemoryError):
    """A capstone rung ran out of device memory; the message says what to run instead."""


def guard_oom(fn: Callable[[], T_], rung: str, size: CapstoneSize, *,
              attention: str = "sdpa", profile: str = "full") -> T_:
    """Return ``fn()``; turn an out-of-memory error in it into one that says what to do.

    Catches ``torch.OutOfMemoryError`` (CUDA's, and any backend's that raises it), frees what
    the failed step held (the finished frames of its traceback, ``gc.collect``, the CUDA
    cache: build the model *inside* ``fn`` so this frees it) and raises
    :class:`RungOutOfMemory` (a ``torch.OutOfMemoryError``) naming the rung, the bytes the
    memory model predicts for its step and for the notebook, the device's budget, and the
    size to use instead (:meth:`CapstoneSize.smaller`) or the ``ci`` profile.

    Args:
        fn: builds and runs the rung.
        rung: the rung's name, e.g. ``"0 baseline"``.
        size: the size the notebook runs (:meth:`CapstoneSize.of`, :func:`capstone_size`).
        attention: the rung's attention (its predicted step peak depends on it).
        profile: the size profile's name, for the message.

    Returns:
        What ``fn`` returns.

    Raises:
        RungOutOfMemory: in place of a ``torch.OutOfMemoryError`` raised by ``fn``.

    Example: ``r = gpt.guard_oom(lambda: build("0 baseline"), "0 baseline", RUN)``
    """
    try:
        return fn()
    except RungOutOfMemory:
        raise
    except torch.OutOfMemoryError as e:
        first = (str(e).strip().splitlines() or ["out of memory"])[0]
        traceback.clear_frames(e.__traceback__)  # let the failed step's tensors go
        del e
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    step = step_peak(size.cfg, size.batch, attention=attention).total_bytes
    budget = size.budget_bytes
    device = ("a device of unknown memory" if budget is None else
              f"a device of {size.device_gib:g} GiB ({size.headroom:.0%}: "
              f"{budget / 2**30:.1f} GiB)")
    smaller = size.smaller()
    instead = (f"T = {smaller.cfg.block_size} and batch {smaller.batch} (predicted "
               f"{smaller.peak_bytes / 2**30:.1f} GiB): set them in the cell that defines CFG "
               "and BATCH; or " if smaller is not None else "")
    raise RungOutOfMemory(
        f"rung {rung!r} ran out of device memory ({first}). The memory model predicts "
        f"{step / 2**30:.1f} GiB for one step of this rung and {size.peak_bytes / 2**30:.1f} "
        f"GiB at the notebook's peak ({size}; profile {profile}) on {device}. Use instead: "
        f"{instead}the ci profile (ACCELKIT_PROFILE=ci). If the model says it fits, another "
        "process holds memory (nvidia-smi) or earlier cells kept tensors alive: restart the "
        "kernel. What this rung held was freed.")


def decode(tokens: torch.Tensor) -> str:
    """Bytes -> text (invalid UTF-8 sequences are replaced)."""
    return bytes(tokens.flatten().tolist()).decode("utf-8", errors="replace")


__all__ = [
    "ATTENTIONS",
    "CAPSTONE_SIZES",
    "GPT",
    "GPT2_SMALL",
    "CapstoneSize",
    "RungOutOfMemory",
    "Stepper",
    "GPTConfig",
    "capstone_phases",
    "capstone_size",
    "decode",
    "evaluate",
    "flops_per_token",
    "generate",
    "keras_gpt",
    "manual_attention",
    "mfu",
    "guard_oom",
    "param_counts",
    "recompute_flops_per_token",
    "n_params",
    "step_peak",
    "trace_spans",
]
