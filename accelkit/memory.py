"""Training memory per device: the model (DP, ZeRO-1/2/3/FSDP, TP, PP, a step's peak) and its
measurements (:func:`measured`, :func:`saved_activation_bytes`, :func:`measured_peak_bytes`).

The model follows Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
Parameter Models", SC 2020, section 3: parameters ``Ψ·p`` (p bytes each: 4 fp32, 2 bf16),
gradients ``Ψ·g``, optimizer states ``Ψ·k`` (Adam: two fp32 moments, k = 8; mixed precision adds
an fp32 master copy, k = 12) and the activations saved for backward (they grow with the batch).
Per device, of N:

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

Steady-state sizes; :func:`per_device` with ``largest_param`` adds a step's transients.  Not
counted: allocator rounding and fragmentation, communication buffers, the framework's own
memory, and for TP the replicated biases/norms and sharded intermediate activations
(Megatron-LM, Shoeybi et al. 2019): the TP row is an estimate.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

STRATEGIES = ("single", "dp", "zero1", "zero2", "zero3", "tp", "pp")
#: ``torch.optim.Adam``/``AdamW`` step implementations: ``foreach=False`` (PyTorch's default on
#: CPU/MPS), ``foreach=True`` (its default on CUDA/ROCm/XPU), ``fused=True`` (never the default).
ADAM_IMPLS = ("for-loop", "foreach", "fused")
#: The fraction of a device's memory the course plans to use (the rest: framework context,
#: allocator rounding and fragmentation, other processes).
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
    """Bytes one device holds for one strategy (:data:`STRATEGIES`) on ``world_size`` devices.

    Attributes:
        params_bytes, grads_bytes, optimizer_bytes, activations_bytes: parameters, gradients,
            optimizer states (and master weights), activations saved for backward.
        bucket_bytes: DDP's reducer buckets, a second copy of the gradients (0 with
            ``gradient_as_bucket_view=True``).
        gathered_bytes: ZeRO-3/FSDP's largest all-gathered unit and its full gradient.
        optimizer_temp_bytes: the optimizer step's temporaries (:func:`adam_temp_bytes`).
        backward_temp_bytes: activation gradients alive at once in the backward, on top of
            the saved activations (:func:`gpt_step_peak`).  These four: 0 without
            ``largest_param`` in :func:`per_device`.
    """

    strategy: str
    world_size: int
    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    bucket_bytes: float = 0.0
    gathered_bytes: float = 0.0
    optimizer_temp_bytes: float = 0.0
    backward_temp_bytes: float = 0.0

    @property
    def resident_bytes(self) -> float:
        """Parameters, gradients and optimizer states: what lives all step long."""
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes

    @property
    def transient_bytes(self) -> float:
        """The larger of backward (activations, gathered unit, their gradients) and the step."""
        return max(self.activations_bytes + self.gathered_bytes + self.backward_temp_bytes,
                   self.optimizer_temp_bytes)

    @property
    def total_bytes(self) -> float:
        """The peak, bytes: resident + buckets + transient (no transients: the four parts' sum)."""
        return self.resident_bytes + self.bucket_bytes + self.transient_bytes

    def fits(self, device_bytes: float, headroom: float = 0.9) -> bool:
        """True when :attr:`total_bytes` fits in ``headroom * device_bytes``; ValueError for
        ``device_bytes <= 0`` or ``headroom`` outside (0, 1]."""
        if device_bytes <= 0 or not 0 < headroom <= 1:
            raise ValueError(f"need device_bytes > 0 and 0 < headroom <= 1, got {device_bytes}, {headroom}")
        return self.total_bytes <= headroom * device_bytes


class Table(list[MemoryEstimate]):
    """A list of :class:`MemoryEstimate` (from :func:`table`) that renders itself."""

    def markdown(self, unit: str = "MiB", device_bytes: float | None = None) -> str:
        """Render the rows as a Markdown table in ``unit`` (``"B"``, ``"KiB"``, ``"MiB"``, ``"GiB"``;
        else ValueError), with a "fits" column for a device of ``device_bytes`` bytes if given."""
        scale = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
        if unit not in scale:
            raise ValueError(f"unit must be one of {', '.join(scale)}, got {unit!r}")
        fit = " fits |" if device_bytes else ""
        rows = [f"| strategy | N | params | grads | optimizer | activations | total ({unit}) |"
                + fit, "|---|---|---|---|---|---|---|" + ("---|" if device_bytes else "")]
        for e in self:
            parts = (e.params_bytes, e.grads_bytes, e.optimizer_bytes, e.activations_bytes)
            cells = [e.strategy, str(e.world_size)] + [
                f"{v / scale[unit]:.3g}" for v in (*parts, e.total_bytes)]
            if device_bytes:
                cells.append("yes" if e.fits(device_bytes) else "no")
            rows.append("| " + " | ".join(cells) + " |")
        return "\n".join(rows)


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")


def per_device(n_params: int, strategy: str = "dp", world_size: int = 1, *,
               param_bytes: float = 4, grad_bytes: float | None = None,
               optimizer: str = "adam", master_bytes: float = 0, activation_bytes: float = 0.0,
               largest_param: int | None = None, bucket_view: bool = False,
               optimizer_impl: str = "for-loop") -> MemoryEstimate:
    """Estimate the bytes one device needs to train a model of ``n_params`` parameters Ψ.

    The steady state follows the module's table.  With ``largest_param`` (elements of the
    largest parameter tensor; strategies ``"single"``, ``"dp"`` = DDP, ``"zero3"`` = FSDP2
    ``fully_shard`` per layer) it also predicts the step's peak: DDP's gradient buckets (a copy
    of every gradient unless ``bucket_view``, DDP's ``gradient_as_bucket_view``), FSDP's
    all-gathered unit and its unsharded gradient, Adam's temporaries (:func:`adam_temp_bytes`
    for ``optimizer_impl``) and the activations; backward and the optimizer step do not
    overlap, so the peak holds the larger.  Checked against measured peaks in the tests and 01.

    ``param_bytes``/``grad_bytes`` (default ``param_bytes``): bytes per parameter/gradient;
    ``optimizer``: a key of :data:`OPTIMIZER_STATE_BYTES` (only Adam has temporaries);
    ``master_bytes``: an fp32 master copy per parameter (4 in mixed precision);
    ``activation_bytes``: activations of the *global* batch on one device (divided by N as in
    the table, e.g. :func:`mlp_activation_bytes`).

    Returns:
        A :class:`MemoryEstimate` (bytes).

    Raises:
        TypeError: for a non-int ``n_params``/``world_size``/``largest_param``.
        ValueError: for an unknown strategy/optimizer/``optimizer_impl``, sizes < 1, negative
            bytes, ``"single"`` with ``world_size > 1``, or ``largest_param`` with a strategy
            other than single/dp/zero3.
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
    est = MemoryEstimate(strategy, world_size, *(v / world_size if s else v
                                                 for v, s in zip(parts, _SHARDED[strategy])))
    if largest_param is None:
        return est
    if strategy not in ("single", "dp", "zero3"):
        raise ValueError(f"the peak model covers 'single', 'dp' and 'zero3', got {strategy!r}")
    _check_int("largest_param", largest_param, 1)
    n = world_size if strategy == "zero3" else 1  # FSDP shards the optimizer's work too
    temp = adam_temp_bytes(n_params / n, largest_param / n, optimizer_impl)
    bucket = est.grads_bytes if strategy == "dp" and not bucket_view else 0.0
    gathered = largest_param * (param_bytes + g) if n > 1 else 0.0  # the unit and its gradient
    return replace(est, bucket_bytes=bucket, gathered_bytes=gathered,
                   optimizer_temp_bytes=temp if optimizer in ("adam", "adamw") else 0.0)


def table(n_params: int, world_size: int, strategies: Sequence[str] = STRATEGIES,
          **kwargs: Any) -> Table:
    """Return a :class:`Table` of :func:`per_device` (its keyword arguments) for each strategy
    (``"single"`` always with N = 1)."""
    return Table(per_device(n_params, s, 1 if s == "single" else world_size, **kwargs)
                 for s in strategies)


def mlp_activation_bytes(batch: int, widths: Sequence[int], dtype_bytes: int = 4) -> int:
    """Bytes (int) an MLP (Linear → ReLU → ... → Linear) of ``widths = [d0, ..., dL]`` saves for
    backward: each Linear its input ``(B, in)``, each ReLU its output, ``B·(d0 + 2·(d1 + ... +
    d_{L-1}))`` elements.  ``ValueError`` for ``batch < 1`` or fewer than two widths."""
    _check_int("batch", batch, 1)
    if len(widths) < 2:
        raise ValueError("widths needs the input and output sizes at least")
    return batch * (widths[0] + 2 * sum(widths[1:-1])) * dtype_bytes


def adam_temp_bytes(local_params: float, largest_param: float, impl: str = "for-loop",
                    state_bytes: float = 4) -> float:
    """Predict the bytes (float) of the temporaries one Adam/AdamW step allocates on one device.

    ``local_params``: elements on this device; ``largest_param``: its largest tensor's;
    ``state_bytes``: per optimizer-state element.  From ``torch/optim/adam.py`` (PyTorch 2.x):

    * ``"for-loop"``: per parameter ``denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt)
      .add_(eps)`` makes two tensors of its size, freed before the next: ``2 · largest · b``;
    * ``"foreach"``: ``torch._foreach_sqrt(exp_avg_sqs)`` makes one tensor per parameter, all
      alive together: ``local · b`` (Adam with ``weight_decay`` > 0 also copies the gradients
      first, but frees them before the square roots);
    * ``"fused"``: one kernel updates in place: 0.

    ValueError for an ``impl`` not in :data:`ADAM_IMPLS` or negative sizes.
    """
    if impl not in ADAM_IMPLS:
        raise ValueError(f"unknown Adam implementation {impl!r}; use one of {', '.join(ADAM_IMPLS)}")
    if local_params < 0 or largest_param < 0 or state_bytes < 0:
        raise ValueError(f"sizes must be >= 0, got {local_params}, {largest_param}, {state_bytes}")
    if impl == "for-loop":
        return 2.0 * largest_param * state_bytes
    return float(local_params * state_bytes) if impl == "foreach" else 0.0


def gpt_step_peak(n_params: int, largest_param: int, *, batch: int, seq_len: int, n_layer: int,
                  n_head: int, n_embd: int, vocab_size: int, attention: str = "manual",
                  optimizer_impl: str = "for-loop") -> MemoryEstimate:
    """Predict the peak bytes of one fp32 AdamW step of :class:`accelkit.gpt.GPT` on one device.

    :func:`per_device` (``"single"``, AdamW, ``largest_param``) with the activations counted
    tensor by tensor (B = ``batch``, T = ``seq_len``, d = ``n_embd``, H = ``n_head``, V =
    ``vocab_size``, 4 bytes per element):

    * per block ``16·B·T·d·4``: LayerNorm 1's input and output, q, k, v, the attention output,
      LayerNorm 2's input and output (1 each), the MLP's hidden layer before and after GELU
      (4 each); the two LayerNorms' mean and 1/std (``4·B·T·4``); ``"manual"`` attention also
      the softmax output ``B·H·T²·4`` and the inverted mask (``T²`` bools), ``"sdpa"`` its
      log-sum-exp ``B·H·T·4``;
    * the final LayerNorm ``2·B·T·d·4 + 2·B·T·4``, the loss's log-softmax ``B·T·V·4``, int64
      inputs and targets ``2·B·T·8``, positions ``T·8``, the loss's total weight (4 B).

    ``activations_bytes`` is exact on a CPU (tested against :func:`saved_activation_bytes`;
    GPT-2 small, T = 1024, B = 16, manual: 19.4 GB).  ``backward_temp_bytes``: the largest of
    the softmax backward's two ``B·H·T²`` (manual), the MLP's two ``4·B·T·d``, the loss's two
    ``B·T·V``.  ``total_bytes`` bounds the CPU profiler's peak within 20 % (tests); cuBLAS/cuDNN
    workspaces and the CUDA context are left to :data:`HEADROOM`.

    Raises:
        TypeError, ValueError: for a non-int or < 1 size, an ``attention`` other than
            ``"manual"``/``"sdpa"``, and as :func:`per_device`.
    """
    for name, v in (("batch", batch), ("seq_len", seq_len), ("n_layer", n_layer),
                    ("n_head", n_head), ("n_embd", n_embd), ("vocab_size", vocab_size)):
        _check_int(name, v, 1)
    if attention not in ("manual", "sdpa"):
        raise ValueError(f"attention must be 'manual' or 'sdpa', got {attention!r}")
    B, T, d, H, V = batch, seq_len, n_embd, n_head, vocab_size
    block = 16 * B * T * d * 4 + 4 * B * T * 4
    block += B * H * T * T * 4 + T * T if attention == "manual" else B * H * T * 4
    act = n_layer * block + 2 * B * T * d * 4 + 2 * B * T * 4 + B * T * V * 4 + 2 * B * T * 8 \
        + T * 8 + 4
    alive = [2 * 4 * B * T * d * 4, 2 * B * T * V * 4] + (
        [2 * B * H * T * T * 4] if attention == "manual" else [])
    est = per_device(n_params, "single", 1, optimizer="adamw", activation_bytes=act,
                     largest_param=largest_param, optimizer_impl=optimizer_impl)
    return replace(est, backward_temp_bytes=float(max(alive)))


# ----------------------------------------------------------------------------- measurements
def measured(module: Any, optimizer: Any = None) -> dict[str, int]:
    """Measure the bytes this rank holds for a ``torch.nn.Module``'s parameters, gradients and
    ``optimizer`` states (after one step; scalar states such as Adam's ``step`` not counted).

    DTensor parameters (FSDP2 ``fully_shard``, tensor parallel) count only the local shard.
    Returns ``{"params_bytes", "grads_bytes", "optimizer_bytes"}`` (ints; grads 0 before backward).
    """
    def local(t: Any) -> int:
        t = t.to_local() if hasattr(t, "to_local") else t  # DTensor: this rank's shard
        return int(t.numel() * t.element_size())

    params = list(module.parameters())
    states = [v for s in (optimizer.state.values() if optimizer is not None else ())
              for v in s.values() if hasattr(v, "numel") and v.dim() > 0]
    return {"params_bytes": sum(local(p) for p in params),
            "grads_bytes": sum(local(p.grad) for p in params if p.grad is not None),
            "optimizer_bytes": sum(local(v) for v in states)}


def saved_activation_bytes(fn: Callable[[], Any], exclude: Iterable[Any] = ()) -> tuple[Any, int]:
    """Run ``fn()`` (a forward pass); return ``(result, bytes)``: its result and the bytes of the
    tensors autograd saves for backward.

    ``torch.autograd.graph.saved_tensors_hooks``: each distinct tensor (data pointer, size)
    counts once, those in ``exclude`` (pass ``model.parameters()``) not at all; exact and the
    same on every run.  Low-precision weight copies that autocast saves do count.
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
    """Run ``fn()`` and return ``(result, peak_bytes)``: the peak it allocated above the start.

    CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus what was
    allocated before.  Elsewhere: the running sum, in time order, of the CPU allocation (+) and
    free (-) events of ``torch.profiler.profile(profile_memory=True)``.  Build the model
    *inside* ``fn``.  The CPU profiler misses frees on threads it does not follow (gloo's), so
    the CPU figure can only err high; it counts tensors before the allocator's rounding.
    RuntimeError when the CPU profiler recorded nothing (another profiler running).
    """
    import torch

    from accelkit import device as _dev

    if _dev.device_type(device) == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn()
        torch.cuda.synchronize(device)
        return result, int(torch.cuda.max_memory_allocated(device) - before)
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


__all__ = ["ADAM_IMPLS", "HEADROOM", "OPTIMIZER_STATE_BYTES", "STRATEGIES", "MemoryEstimate", "Table",
           "adam_temp_bytes", "gpt_step_peak", "measured", "measured_peak_bytes",
           "mlp_activation_bytes", "per_device", "saved_activation_bytes", "table"]
