"""Training memory: the per-device model (DP, ZeRO-1/2/3/FSDP, TP, PP) and its measurements.

This module owns both the memory *model* (:func:`per_device`, :func:`table`,
:func:`markdown`, :func:`mlp_activation_bytes`, the peak of a step under DDP or FSDP,
:func:`peak_per_device`, Adam's step temporaries per implementation, :func:`adam_temp_bytes`,
and one GPT training step on one device, :func:`gpt_activation_bytes` and
:func:`gpt_step_peak`) and the memory *measurements*:
:func:`measured` (parameter, gradient and optimizer bytes of a real model),
:func:`measured_peak_bytes` (the peak of any work, on the CPU from the profiler's memory events),
:func:`saved_activation_bytes` (the bytes autograd saves for the backward pass, exact on any
device), :func:`peak_memory_bytes` (the CUDA allocator's peak) and
:func:`tf_peak_memory_bytes` (TensorFlow's GPU peak).  Elsewhere: Keras activation bytes from
layer shapes (:func:`accelkit.keras_mp.keras_activation_bytes`); time and throughput
measurements in :mod:`accelkit.bench`.

The model: memory per device when training one model under DP, ZeRO-1/2/3 (FSDP), TP and PP.

Training memory has four parts (Rajbhandari et al., "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models", SC 2020, section 3):

* parameters ``Ψ·p`` (``p`` bytes per parameter: 4 in fp32, 2 in bf16),
* gradients ``Ψ·g``,
* optimizer states ``Ψ·k`` (Adam: two fp32 moments, k = 8; with mixed precision also an fp32
  master copy, k = 12 as in the ZeRO paper),
* activations saved for the backward pass (they grow with the batch, not with Ψ).

With N devices, the strategies keep per device:

==========  ==========  ==========  ==========  ====================================
strategy    params      grads       optimizer   activations
==========  ==========  ==========  ==========  ====================================
``single``  Ψp          Ψg          Ψk          A (the whole batch)
``dp``      Ψp          Ψg          Ψk          A/N (each replica gets B/N samples)
``zero1``   Ψp          Ψg          Ψk/N        A/N
``zero2``   Ψp          Ψg/N        Ψk/N        A/N
``zero3``   Ψp/N        Ψg/N        Ψk/N        A/N (= FSDP ``fully_shard``)
``tp``      Ψp/N        Ψg/N        Ψk/N        A (every rank sees the whole batch)
``pp``      Ψp/N        Ψg/N        Ψk/N        A/N (its 1/N of the layers, GPipe)
==========  ==========  ==========  ==========  ====================================

These are the steady-state sizes.  Not counted: ZeRO-3's transient all-gathered layer,
communication buffers, the allocator's fragmentation, the framework's own memory, and for
TP the replicated biases/norms and the sharded intermediate activations (Megatron-LM,
Shoeybi et al. 2019), so the TP row is an estimate.  :func:`measured` reads the real sizes
from a model and optimizer (local shards of DTensors included) to check the calculator.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

STRATEGIES = ("single", "dp", "zero1", "zero2", "zero3", "tp", "pp")
#: Implementations of ``torch.optim.Adam``/``AdamW``'s step (``foreach=False``, ``foreach=True``,
#: ``fused=True``); see :func:`adam_temp_bytes`.
ADAM_IMPLS = ("for-loop", "foreach", "fused")
#: The fraction of a device's memory the course plans to use: the rest is the framework's
#: context, the caching allocator's rounding and fragmentation, and other processes.
HEADROOM = 0.85
#: Optimizer-state bytes per parameter (fp32 states).
OPTIMIZER_STATE_BYTES = {"sgd": 0, "momentum": 4, "adam": 8, "adamw": 8}
_SHARDED = {  # which parts are divided by N: (params, grads, optimizer, activations)
    "single": (False, False, False, False),
    "dp": (False, False, False, True),
    "zero1": (False, False, True, True),
    "zero2": (False, True, True, True),
    "zero3": (True, True, True, True),
    "tp": (True, True, True, False),
    "pp": (True, True, True, True),
}


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one device holds for one strategy.

    Attributes:
        strategy: one of :data:`STRATEGIES`.
        world_size: devices N.
        params_bytes: parameters on this device.
        grads_bytes: gradients on this device.
        optimizer_bytes: optimizer states (and master weights) on this device.
        activations_bytes: activations saved for backward on this device.
    """

    strategy: str
    world_size: int
    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float

    @property
    def total_bytes(self) -> float:
        """The sum of the four parts, bytes."""
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes + \
            self.activations_bytes

    def fits(self, device_bytes: float, headroom: float = 0.9) -> bool:
        """True when :attr:`total_bytes` fits in ``headroom * device_bytes``.

        Raises:
            ValueError: for ``device_bytes <= 0`` or ``headroom`` outside (0, 1].
        """
        return fits(self.total_bytes, device_bytes, headroom)


def fits(total_bytes: float, device_bytes: float, headroom: float = 0.9) -> bool:
    """True when ``total_bytes`` fit in ``headroom * device_bytes`` (the rest: the framework,
    the allocator's fragmentation, communication buffers).

    Raises:
        ValueError: for ``device_bytes <= 0`` or ``headroom`` outside (0, 1].
    """
    if device_bytes <= 0 or not 0 < headroom <= 1:
        raise ValueError(f"need device_bytes > 0 and 0 < headroom <= 1, got "
                         f"{device_bytes}, {headroom}")
    return total_bytes <= headroom * device_bytes


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")


def per_device(n_params: int, strategy: str = "dp", world_size: int = 1, *,
               param_bytes: float = 4, grad_bytes: float | None = None,
               optimizer: str = "adam", master_bytes: float = 0,
               activation_bytes: float = 0.0) -> MemoryEstimate:
    """Estimate the memory one device needs to train a model of ``n_params`` parameters.

    Args:
        n_params: parameters Ψ of the whole model, >= 1.
        strategy: ``"single"``, ``"dp"``, ``"zero1"``, ``"zero2"``, ``"zero3"`` (FSDP),
            ``"tp"`` or ``"pp"``.
        world_size: devices N, >= 1 (``"single"`` needs 1).
        param_bytes: bytes per parameter (4 fp32, 2 bf16/fp16).
        grad_bytes: bytes per gradient; default ``param_bytes``.
        optimizer: ``"sgd"`` (0 B), ``"momentum"`` (4 B), ``"adam"``/``"adamw"`` (8 B per
            parameter).
        master_bytes: bytes per parameter of an fp32 master copy (4 with mixed precision,
            0 in plain fp32).
        activation_bytes: activations saved for backward for the *global* batch on one
            device (see :func:`mlp_activation_bytes`).

    Returns:
        A :class:`MemoryEstimate` (bytes; see the module's table for the formulas).

    Raises:
        TypeError: for a non-int ``n_params``/``world_size``.
        ValueError: for an unknown strategy/optimizer, sizes < 1, negative bytes, or
            ``"single"`` with ``world_size > 1``.

    Example: ``per_device(1_000_000, "zero3", 4).params_bytes  # 1e6 * 4 / 4``
    """
    _check_int("n_params", n_params, 1)
    _check_int("world_size", world_size, 1)
    if strategy not in _SHARDED:
        raise ValueError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise ValueError(f"unknown optimizer {optimizer!r}; use one of "
                         f"{', '.join(OPTIMIZER_STATE_BYTES)}")
    if strategy == "single" and world_size != 1:
        raise ValueError("strategy 'single' is one device: world_size must be 1")
    g = param_bytes if grad_bytes is None else grad_bytes
    for name, v in (("param_bytes", param_bytes), ("grad_bytes", g),
                    ("master_bytes", master_bytes), ("activation_bytes", activation_bytes)):
        if v < 0:
            raise ValueError(f"{name} must be >= 0, got {v}")
    k = OPTIMIZER_STATE_BYTES[optimizer] + master_bytes
    parts = (n_params * param_bytes, n_params * g, n_params * k, float(activation_bytes))
    shard = _SHARDED[strategy]
    p, gr, o, a = (v / world_size if s else v for v, s in zip(parts, shard))
    return MemoryEstimate(strategy, world_size, p, gr, o, a)


def table(n_params: int, world_size: int, strategies: Sequence[str] = STRATEGIES,
          **kwargs: Any) -> list[MemoryEstimate]:
    """Return :func:`per_device` for each strategy (``"single"`` always with N = 1).

    Keyword arguments are those of :func:`per_device`.
    """
    return [per_device(n_params, s, 1 if s == "single" else world_size, **kwargs)
            for s in strategies]


def markdown(estimates: Iterable[MemoryEstimate], unit: str = "MiB",
             device_bytes: float | None = None) -> str:
    """Render estimates as a Markdown table in ``unit`` (``"KiB"``, ``"MiB"``, ``"GiB"``).

    Args:
        estimates: rows, e.g. from :func:`table`.
        unit: display unit (base 2).
        device_bytes: add a "fits" column for a device of this many bytes.

    Raises:
        ValueError: for an unknown unit.
    """
    scale = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    if unit not in scale:
        raise ValueError(f"unit must be one of {', '.join(scale)}, got {unit!r}")
    head = f"| strategy | N | params | grads | optimizer | activations | total ({unit}) |"
    rows = [head + (" fits |" if device_bytes else ""),
            "|---|---|---|---|---|---|---|" + ("---|" if device_bytes else "")]
    for e in estimates:
        cells = [e.strategy, str(e.world_size)] + [
            f"{v / scale[unit]:.3g}" for v in (e.params_bytes, e.grads_bytes, e.optimizer_bytes,
                                               e.activations_bytes, e.total_bytes)]
        if device_bytes:
            cells.append("yes" if e.fits(device_bytes) else "no")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def mlp_activation_bytes(batch: int, widths: Sequence[int], dtype_bytes: int = 4) -> int:
    """Estimate the activations an MLP (Linear → ReLU → ... → Linear) saves for backward.

    Each Linear saves its input ``(B, in)``; each ReLU saves its output ``(B, out)``.  For
    ``widths = [d0, d1, ..., dL]`` that is ``B * (d0 + 2*(d1 + ... + d_{L-1}))`` elements.

    Args:
        batch: samples B, >= 1.
        widths: layer widths from input to output, at least two.
        dtype_bytes: bytes per element.

    Raises:
        ValueError: for ``batch < 1`` or fewer than two widths.
    """
    _check_int("batch", batch, 1)
    if len(widths) < 2:
        raise ValueError("widths needs the input and output sizes at least")
    return batch * (widths[0] + 2 * sum(widths[1:-1])) * dtype_bytes


def _local_bytes(t: Any) -> int:
    local = t.to_local() if hasattr(t, "to_local") else t  # DTensor: this rank's shard
    return int(local.numel() * local.element_size())


def measured(module: Any, optimizer: Any = None) -> dict[str, int]:
    """Measure the bytes this rank holds for a model's parameters, gradients and optimizer.

    DTensor parameters (FSDP2 ``fully_shard``, tensor parallel) count only the local shard.

    Args:
        module: a ``torch.nn.Module``.
        optimizer: a ``torch.optim.Optimizer`` (after at least one step, so its states exist).

    Returns:
        ``{"params_bytes", "grads_bytes", "optimizer_bytes"}`` (ints; grads 0 before backward;
        scalar states such as Adam's ``step`` are not counted).
    """
    params = list(module.parameters())
    out = {"params_bytes": sum(_local_bytes(p) for p in params),
           "grads_bytes": sum(_local_bytes(p.grad) for p in params if p.grad is not None),
           "optimizer_bytes": 0}
    if optimizer is not None:
        for state in optimizer.state.values():
            for v in state.values():
                if hasattr(v, "numel") and v.dim() > 0:
                    out["optimizer_bytes"] += _local_bytes(v)
    return out


# ----------------------------------------------------------------------------- measurements
def saved_activation_bytes(fn: Callable[[], Any], exclude: Iterable[Any] = ()) -> tuple[Any, int]:
    """Run ``fn()`` and count the bytes of the tensors autograd saves for the backward pass.

    Uses ``torch.autograd.graph.saved_tensors_hooks``; each distinct tensor (same data
    pointer, same size) counts once, and the tensors in ``exclude`` (pass the model's
    parameters: they exist anyway) are not counted.  This is the activation memory of a
    training step, the part AMP shrinks; it is exact and the same on every run, unlike a
    CPU process's resident memory.  Low-precision *copies* of weights that autocast saves
    do count: they are real extra memory.

    Args:
        fn: runs a forward pass (e.g. ``lambda: loss_fn(model(x), y)``).
        exclude: tensors not to count (typically ``model.parameters()``).

    Returns:
        ``(result, bytes)``: ``fn``'s result (call ``.backward()`` on it if you like) and the
        saved bytes.

    Example: ``loss, saved = saved_activation_bytes(lambda: loss_fn(model(x), y), model.parameters())``
    """
    import torch

    skip = {(t.data_ptr(), t.numel() * t.element_size()) for t in exclude}
    seen: set[tuple[int, int]] = set()

    def pack(t: Any) -> Any:
        key = (t.data_ptr(), t.numel() * t.element_size())
        if key not in skip:
            seen.add(key)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn()
    return result, sum(size for _, size in seen)


def peak_memory_bytes(fn: Callable[[], Any], device: Any) -> int | None:
    """Return the peak device memory ``fn()`` allocates above what was allocated before.

    CUDA only (``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``); on
    other devices no allocator reports a peak, so this returns None — use
    :func:`saved_activation_bytes` there.

    Example: ``peak = peak_memory_bytes(lambda: train_step(x, y), dev)``
    """
    import torch

    from accelkit import device as _dev

    if _dev.device_type(device) != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device) - before)


@dataclass(frozen=True)
class PeakEstimate:
    """The predicted peak bytes of one training step on one device, part by part.

    Attributes:
        steady: the :class:`MemoryEstimate` (parameters, gradients, optimizer states).
        bucket_bytes: DDP's reducer buckets: a second copy of the gradients, 0 with
            ``gradient_as_bucket_view=True`` (the gradients then *are* views into them).
        gathered_bytes: ZeRO-3/FSDP's transient unit: the largest unit's full parameters
            (all-gathered for forward/backward) and its full gradient (before the
            reduce-scatter), 0 for the other strategies.
        optimizer_temp_bytes: temporaries of the optimizer step (:func:`adam_temp_bytes`:
            for-loop Adam two the size of the largest local parameter, foreach Adam one copy
            of every local parameter, fused none).
        activations_bytes: activations saved for backward on this device.
        backward_temp_bytes: gradients of activations alive at once during the backward pass
            on top of the saved activations (:func:`gpt_step_peak`); 0 where not modelled.
    """

    steady: MemoryEstimate
    bucket_bytes: float
    gathered_bytes: float
    optimizer_temp_bytes: float
    activations_bytes: float
    backward_temp_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        """The peak: what lives all step, plus the larger of the two transient phases.

        Backward holds the activations (and FSDP's gathered unit); the optimizer step
        holds its temporaries; they do not overlap, so the peak is the larger of the two.
        """
        s = self.steady
        resident = s.params_bytes + s.grads_bytes + s.optimizer_bytes + self.bucket_bytes
        return resident + max(self.activations_bytes + self.gathered_bytes
                              + self.backward_temp_bytes, self.optimizer_temp_bytes)

    def fits(self, device_bytes: float, headroom: float = 0.9) -> bool:
        """True when the peak :attr:`total_bytes` fits in ``headroom * device_bytes``
        (see :func:`fits`)."""
        return fits(self.total_bytes, device_bytes, headroom)


def adam_temp_bytes(local_params: float, largest_param: float, impl: str = "for-loop",
                    state_bytes: float = 4) -> float:
    """Predict the bytes of the temporaries one Adam/AdamW step allocates on one device.

    From ``torch/optim/adam.py`` (PyTorch 2.x; AdamW is Adam with decoupled weight decay):

    * ``"for-loop"`` (``foreach=False``, the default on a CPU): per parameter,
      ``denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`` makes two tensors the
      size of that parameter, freed before the next one: ``2 · largest · b``;
    * ``"foreach"`` (``foreach=True``, CUDA's default): ``exp_avg_sq_sqrt =
      torch._foreach_sqrt(exp_avg_sqs)`` makes one tensor per parameter, all alive together,
      and the rest runs in place: ``local · b`` (Adam with ``weight_decay`` > 0, not AdamW, also
      copies the gradients first, but frees them before the square roots);
    * ``"fused"`` (``fused=True``): one kernel updates in place: 0.

    Args:
        local_params: parameters on this device (elements), >= 0.
        largest_param: elements of its largest parameter tensor, >= 0.
        impl: one of :data:`ADAM_IMPLS`.
        state_bytes: bytes per element of the optimizer states (4: fp32).

    Returns:
        Bytes (float).

    Raises:
        ValueError: for an unknown ``impl`` or negative sizes.

    Example: ``adam_temp_bytes(1_000_000, 262_144, "foreach")  # 4e6``
    """
    if impl not in ADAM_IMPLS:
        raise ValueError(f"unknown Adam implementation {impl!r}; use one of {', '.join(ADAM_IMPLS)}")
    if local_params < 0 or largest_param < 0 or state_bytes < 0:
        raise ValueError(f"sizes must be >= 0, got {local_params}, {largest_param}, {state_bytes}")
    if impl == "for-loop":
        return 2.0 * largest_param * state_bytes
    return float(local_params * state_bytes) if impl == "foreach" else 0.0


def default_adam_impl(device_type: str) -> str:
    """Return the Adam implementation PyTorch picks without ``foreach``/``fused`` arguments.

    ``torch.optim.optimizer._default_to_fused_or_foreach``: ``"foreach"`` when every parameter
    is on a device with foreach kernels (CUDA, which ROCm builds use too; XPU), else
    ``"for-loop"`` (a CPU, MPS).  ``fused`` is never the default.

    Example: ``default_adam_impl("cuda")  # "foreach"``
    """
    return "foreach" if device_type in ("cuda", "rocm", "xpu") else "for-loop"


def peak_per_device(n_params: int, strategy: str, world_size: int, *,
                    largest_param: int, bucket_view: bool = False, param_bytes: float = 4,
                    optimizer: str = "adam", activation_bytes: float = 0.0,
                    optimizer_impl: str = "for-loop") -> PeakEstimate:
    """Predict the peak bytes of a training step under DDP (``"dp"``) or FSDP (``"zero3"``).

    The steady state of :func:`per_device` plus what only lives for part of a step:
    DDP's gradient buckets (``bucket_cap_mb`` each, a copy of every gradient unless
    ``gradient_as_bucket_view=True``); FSDP's all-gathered unit and its unsharded gradient
    (here the unit holding the largest parameter, ``fully_shard`` per layer); Adam's step
    temporaries (:func:`adam_temp_bytes`: for ``torch.optim.Adam(foreach=False)`` ``sqrt``
    and the division each make a tensor the size of the parameter being updated; with
    ``foreach=True``, CUDA's default, one copy of *every* local parameter; fused, none);
    activations saved for backward.  Not counted: the allocator's rounding and
    fragmentation, communication library buffers, autograd's small temporaries.

    Args:
        n_params: parameters of the whole model, >= 1.
        strategy: ``"dp"`` (DDP) or ``"zero3"`` (FSDP2 ``fully_shard`` per layer).
        world_size: ranks N, >= 1.
        largest_param: elements of the largest parameter tensor (and, per layer, of the
            largest FSDP unit: the weight dominates it), >= 1.
        bucket_view: DDP's ``gradient_as_bucket_view``.
        param_bytes: bytes per parameter and per gradient.
        optimizer: as :func:`per_device`; only ``"adam"``/``"adamw"`` have temporaries.
        activation_bytes: activations saved for backward on this device (its local batch).
        optimizer_impl: Adam's implementation, one of :data:`ADAM_IMPLS` (default the
            for-loop one; :func:`default_adam_impl` says which PyTorch picks on a device).

    Returns:
        A :class:`PeakEstimate`; ``.total_bytes`` is the predicted peak.

    Raises:
        ValueError: for a strategy other than ``"dp"``/``"zero3"``, ``largest_param < 1``,
            an unknown ``optimizer_impl``, and as :func:`per_device`.

    Example: ``peak_per_device(1_126_410, "dp", 2, largest_param=1024 * 1024).total_bytes``
    """
    if strategy not in ("dp", "zero3"):
        raise ValueError(f"peak_per_device models 'dp' and 'zero3', got {strategy!r}")
    _check_int("largest_param", largest_param, 1)
    steady = per_device(n_params, strategy, world_size, param_bytes=param_bytes,
                        optimizer=optimizer)
    sharded = strategy == "zero3"
    bucket = 0.0 if sharded or bucket_view else steady.grads_bytes
    gathered = 2 * largest_param * param_bytes if sharded and world_size > 1 else 0.0
    local_largest = largest_param / world_size if sharded else largest_param
    local = n_params / world_size if sharded else n_params
    temp = (adam_temp_bytes(local, local_largest, optimizer_impl)
            if optimizer in ("adam", "adamw") else 0.0)
    if optimizer_impl not in ADAM_IMPLS:
        raise ValueError(f"unknown Adam implementation {optimizer_impl!r}; use one of "
                         f"{', '.join(ADAM_IMPLS)}")
    return PeakEstimate(steady, bucket, gathered, temp, float(activation_bytes))


def gpt_activation_bytes(batch: int, seq_len: int, *, n_layer: int, n_head: int, n_embd: int,
                         vocab_size: int, attention: str = "manual",
                         dtype_bytes: float = 4) -> float:
    """Predict the bytes autograd saves for the backward pass of one GPT forward (fp32).

    For :class:`accelkit.gpt.GPT` (pre-norm blocks, GELU MLP of width 4d, tied head, the loss
    in fp32), counted tensor by tensor; with B = ``batch``, T = ``seq_len``, d = ``n_embd``,
    H = ``n_head``, L = ``n_layer``, V = ``vocab_size``, b = ``dtype_bytes``:

    * per block ``16·B·T·d·b``: LayerNorm 1's input and output, q, k, v, the attention
      output, LayerNorm 2's input and output (1 each), the MLP's hidden layer before and
      after GELU (4 each); plus the two LayerNorms' fp32 mean and 1/std (``4·B·T·4``);
    * ``"manual"`` attention also the softmax output ``B·H·T²·b`` and the inverted mask
      (``T²`` bools); ``"sdpa"`` instead its log-sum-exp ``B·H·T·4``;
    * the final LayerNorm ``2·B·T·d·b + 2·B·T·4``, the fp32 log-softmax of the loss ``B·T·V·4``,
      the int64 inputs and targets ``2·B·T·8``, positions ``T·8`` and the loss's fp32 total
      weight (4 B).

    Exact in fp32 on a CPU (:func:`saved_activation_bytes` counts the same bytes; tested).
    ``dtype_bytes = 2`` approximates autocast's saved activations (it does not add autocast's
    low-precision weight copies).  At GPT-2 small, T = 1024, B = 16, manual attention: 19.4 GB.

    Args:
        batch: sequences B, >= 1.
        seq_len: tokens per sequence T, >= 1.
        n_layer, n_head, n_embd, vocab_size: the model's shape, each >= 1.
        attention: ``"manual"`` (the T×T scores are stored) or ``"sdpa"`` (fused).
        dtype_bytes: bytes per activation element.

    Returns:
        Bytes (float).

    Raises:
        TypeError, ValueError: for a non-int or < 1 size, or an unknown ``attention``.

    Example: ``gpt_activation_bytes(16, 1024, n_layer=12, n_head=12, n_embd=768, vocab_size=256)``
    """
    for name, v in (("batch", batch), ("seq_len", seq_len), ("n_layer", n_layer),
                    ("n_head", n_head), ("n_embd", n_embd), ("vocab_size", vocab_size)):
        _check_int(name, v, 1)
    if attention not in ("manual", "sdpa"):
        raise ValueError(f"attention must be 'manual' or 'sdpa', got {attention!r}")
    B, T, d, H = batch, seq_len, n_embd, n_head
    block = 16 * B * T * d * dtype_bytes + 4 * B * T * 4
    block += B * H * T * T * dtype_bytes + T * T if attention == "manual" else B * H * T * 4
    top = (2 * B * T * d * dtype_bytes + 2 * B * T * 4 + B * T * vocab_size * 4 + 2 * B * T * 8
           + T * 8 + 4)
    return float(n_layer * block + top)


def gpt_step_peak(n_params: int, largest_param: int, *, batch: int, seq_len: int, n_layer: int,
                  n_head: int, n_embd: int, vocab_size: int, attention: str = "manual",
                  optimizer_impl: str = "for-loop") -> PeakEstimate:
    """Predict the peak bytes of one fp32 AdamW training step of a GPT on one device.

    Resident: parameters, gradients and AdamW's two states (:func:`per_device`, ``"single"``).
    Then the larger of two phases: the backward pass (the activations of
    :func:`gpt_activation_bytes` plus the gradients alive at once on top of them: for
    ``"manual"`` attention two ``B·H·T²`` fp32 tensors in the softmax's backward, else the
    MLP's two ``4·B·T·d`` ones, or the loss's two ``B·T·V``, whichever is largest) and the
    optimizer step (:func:`adam_temp_bytes`).  Checked against the CPU profiler's peak
    (:func:`measured_peak_bytes`) in the tests.  Not counted: the allocator's rounding and
    fragmentation, cuBLAS/cuDNN workspaces, the CUDA context (:data:`HEADROOM` leaves room
    for them).

    Args:
        n_params: parameters (shared ones once), >= 1.
        largest_param: elements of the largest parameter tensor, >= 1.
        batch, seq_len, n_layer, n_head, n_embd, vocab_size, attention: as
            :func:`gpt_activation_bytes`.
        optimizer_impl: one of :data:`ADAM_IMPLS`.

    Returns:
        A :class:`PeakEstimate` (``.total_bytes`` is the predicted peak).

    Raises:
        TypeError, ValueError: as :func:`per_device`, :func:`gpt_activation_bytes` and
            :func:`adam_temp_bytes`.

    Example: ``gpt_step_peak(85_000_000, 2_359_296, batch=16, seq_len=1024, n_layer=12,
    n_head=12, n_embd=768, vocab_size=256).total_bytes``
    """
    _check_int("largest_param", largest_param, 1)
    act = gpt_activation_bytes(batch, seq_len, n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                               vocab_size=vocab_size, attention=attention)
    steady = per_device(n_params, "single", 1, optimizer="adamw")
    grads_alive = [2 * 4 * batch * seq_len * n_embd * 4, 2 * batch * seq_len * vocab_size * 4]
    if attention == "manual":
        grads_alive.append(2 * batch * n_head * seq_len * seq_len * 4)
    temp = adam_temp_bytes(n_params, largest_param, optimizer_impl)
    return PeakEstimate(steady, 0.0, 0.0, temp, act, float(max(grads_alive)))


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 (C++ code's stderr too) to /dev/null inside the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def measured_peak_bytes(fn: Callable[[], Any], device: Any = "cpu") -> tuple[Any, int]:
    """Run ``fn()`` and return its result and the peak bytes it allocated above the start.

    CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus what
    was allocated before.  CPU: no allocator keeps a peak, so this runs ``fn`` under
    ``torch.profiler.profile(profile_memory=True)`` and adds up its allocation (+) and free
    (-) events in time order; the highest running sum is the peak.  Build the model *inside*
    ``fn`` so its parameters and DDP's buckets are counted.  The CPU profiler records only
    events on threads it follows: a tensor freed on a communication thread (gloo's) is never
    subtracted, so the CPU figure can only err high; and it counts the same tensors the
    CUDA allocator would, before the allocator's rounding.

    Args:
        fn: the work to measure, e.g. building a model and training it two steps.
        device: where ``fn`` allocates (``"cpu"`` or a CUDA device).

    Returns:
        ``(result, peak_bytes)``.

    Example: ``_, peak = measured_peak_bytes(lambda: train(build(), 2))``
    """
    import torch

    from accelkit import device as _dev

    if _dev.device_type(device) == "cuda":
        out: list[Any] = []
        peak = peak_memory_bytes(lambda: out.append(fn()), device)
        return out[0], int(peak or 0)
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():  # this build's Kineto prints a "USDT: profiler_start" line
        prof.start()
    try:
        result = fn()
    finally:
        with _quiet_stderr():
            prof.stop()
    # Kineto's raw events: "[memory]" ones carry the bytes allocated (+) or freed (-)
    results: Any = prof.profiler.kineto_results if prof.profiler is not None else None
    if results is None:
        raise RuntimeError("the profiler recorded nothing: is another profiler running?")
    events = sorted((e.start_ns(), e.nbytes()) for e in results.events()
                    if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    level = peak = 0
    for _, nbytes in events:
        level += nbytes
        peak = max(peak, level)
    return result, int(peak)


def tf_peak_memory_bytes(fn: Callable[[], Any], device: str = "GPU:0") -> int | None:
    """Return TensorFlow's peak memory on ``device`` while ``fn()`` runs, or None without a GPU.

    Uses ``tf.config.experimental.reset_memory_stats`` and ``get_memory_info(...)["peak"]``,
    which TensorFlow implements for GPUs (and TPUs), not for the CPU.

    Example: ``peak = tf_peak_memory_bytes(lambda: step(x, y))``
    """
    from accelkit import tf_device

    tf = tf_device.import_tf()
    if not tf.config.list_physical_devices(device.split(":")[0]):
        return None
    tf.config.experimental.reset_memory_stats(device)
    fn()
    return int(tf.config.experimental.get_memory_info(device)["peak"])


__all__ = [
    "ADAM_IMPLS",
    "HEADROOM",
    "OPTIMIZER_STATE_BYTES",
    "STRATEGIES",
    "MemoryEstimate",
    "PeakEstimate",
    "adam_temp_bytes",
    "default_adam_impl",
    "gpt_activation_bytes",
    "gpt_step_peak",
    "markdown",
    "measured",
    "measured_peak_bytes",
    "mlp_activation_bytes",
    "peak_memory_bytes",
    "peak_per_device",
    "per_device",
    "saved_activation_bytes",
    "table",
    "tf_peak_memory_bytes",
]
