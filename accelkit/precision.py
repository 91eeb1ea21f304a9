"""Mixed precision: number formats, the AMP dtype choice, whether this machine takes it, and
what autocast does op by op.

* Formats: :func:`float_formats` (range and precision of fp32, tf32, fp16, bf16 from the
  IEEE-754 formula; tf32 has no storage type) and :meth:`FloatFormat.round`.
* PyTorch AMP: :func:`amp_choice` (autocast dtype, GradScaler, native units, from the hardware
  class) and :func:`make_step` (one ``torch.autocast`` step, GradScaler enabled exactly for fp16).
* :func:`amp_path`: whether this machine takes the bf16 path, once per process: from the class,
  or a short bf16 vs fp32 measurement where its CPUs disagree, with the claims asserted.
* Dtypes seen: :func:`trace` records the dtype each torch op returns (what autocast lowers);
  :func:`keras_activation_bytes` counts a Keras model's activation bytes per compute dtype.

Elsewhere: dtype names (:func:`accelkit.claims.canonical`, :func:`accelkit.claims.short`);
bf16/fp16 units and datasheet peaks in :mod:`accelkit.hardware`; memory peaks in :mod:`accelkit.memory`.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelkit.claims import ALIASES, SHORT, canonical

# ----------------------------------------------------------------------------- formats
#: The formats the course compares, widest first.
FORMATS = ("float32", "tfloat32", "float16", "bfloat16")
# name -> (storage bits, exponent bits, explicit mantissa bits); tensor cores read 19 of tf32's 32
_LAYOUT = {"float32": (32, 8, 23), "tfloat32": (32, 8, 10), "float16": (16, 5, 10),
           "bfloat16": (16, 8, 7)}


def format_name(name: Any) -> str:
    """Return the format name (in :data:`FORMATS`) of ``"bf16"``, ``torch.bfloat16``, ``"tf32"`` ...

    Raises:
        ValueError: for a format the course does not cover (lists the known ones).
    """
    key = canonical(name)
    if key not in _LAYOUT:
        aliases = ", ".join(a for a, n in ALIASES.items() if n in _LAYOUT)
        raise ValueError(f"unknown float format {name!r}; use one of {', '.join(FORMATS)} "
                         f"(or {aliases})")
    return key


@dataclass(frozen=True)
class FloatFormat:
    """Range and precision of one binary floating-point format, from its bit layout.

    With bias ``b = 2**(e-1) - 1``: ``max = (2 - 2**-m) * 2**b``, smallest normal ``2**(1-b)``,
    smallest subnormal ``2**(1-b-m)``, ``eps = 2**-m`` (IEEE 754-2019, §3.3; all four formats
    reserve the top exponent for inf/NaN; equal to ``torch.finfo``, tested).

    Attributes: ``name`` (in :data:`FORMATS`), ``bits`` (storage; tf32 uses 19 of its 32),
    ``exponent_bits`` ``e`` (the range), ``mantissa_bits`` ``m`` (explicit; the precision).
    """

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int

    @property
    def short(self) -> str:
        """The short name: ``"fp32"``, ``"tf32"``, ``"fp16"``, ``"bf16"``."""
        return SHORT[self.name]

    @property
    def max(self) -> float:
        """The largest finite value."""
        return (2.0 - 2.0**-self.mantissa_bits) * 2.0 ** (2 ** (self.exponent_bits - 1) - 1)

    @property
    def smallest_normal(self) -> float:
        """The smallest positive normal value; below it precision drops."""
        return 2.0 ** (2 - 2 ** (self.exponent_bits - 1))

    @property
    def smallest_subnormal(self) -> float:
        """The smallest positive value; half of it rounds to 0."""
        return self.smallest_normal * self.eps

    @property
    def eps(self) -> float:
        """The gap between 1 and the next value, ``2**-mantissa_bits``."""
        return 2.0**-self.mantissa_bits

    @property
    def decimal_digits(self) -> float:
        """Significant decimal digits, ``(mantissa_bits + 1) * log10(2)``."""
        return (self.mantissa_bits + 1) * math.log10(2)

    def round(self, x: Any) -> Any:
        """Round a float32 tensor to this format; return float32 of ``x``'s shape (inf/NaN kept).

        fp16 and bf16 round through the real dtype (``x.to(dtype).float()``); tf32 keeps the
        top 10 mantissa bits with round-to-nearest-even, as tensor cores do on input.

        Raises:
            TypeError: when ``x`` is not a float32 ``torch.Tensor``.
        """
        import torch

        if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
            raise TypeError(f"round needs a float32 torch.Tensor, got "
                            f"{getattr(x, 'dtype', type(x).__name__)}")
        if self.name == "float32":
            return x.clone()
        if self.name != "tfloat32":
            return x.to(getattr(torch, self.name)).float()
        drop = 23 - self.mantissa_bits  # tf32: 13 low mantissa bits
        bits = x.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
        lsb = (bits >> drop) & 1
        out = (bits + (1 << (drop - 1)) - 1 + lsb) & ~((1 << drop) - 1) & 0xFFFFFFFF
        out = torch.where(out >= 2**31, out - 2**32, out).to(torch.int32).view(torch.float32)
        return torch.where(torch.isfinite(x), out, x).reshape(x.shape)


class Formats(dict[str, FloatFormat]):
    """``{short name: FloatFormat}`` (from :func:`float_formats`) that renders itself."""

    def markdown(self) -> str:
        """Return a Markdown table: bits, max, smallest normal/subnormal, eps, decimal digits."""
        rows = ["| format | bits (sign/exp/mantissa) | max | smallest normal | smallest subnormal "
                "| eps | decimal digits |", "|---|---|---|---|---|---|---|"]
        rows += [f"| {f.short} | {f.bits} (1/{f.exponent_bits}/{f.mantissa_bits}) | {f.max:.4g} | "
                 f"{f.smallest_normal:.4g} | {f.smallest_subnormal:.4g} | {f.eps:.3g} | "
                 f"{f.decimal_digits:.1f} |" for f in self.values()]
        return "\n".join(rows)


def float_formats(*names: Any) -> Formats:
    """Describe formats (range, precision, smallest normal and subnormal) by name or dtype.

    ``names``: ``"fp32"``/``"float32"``, ``"tf32"``, ``"fp16"``, ``"bf16"`` or torch dtypes;
    none: all of :data:`FORMATS`.  Returns :class:`Formats`, ``{short name: FloatFormat}`` in
    the given order.  Raises ``ValueError`` for an unknown format.
    """
    out = Formats()
    for key in map(format_name, names or FORMATS):
        f = FloatFormat(key, *_LAYOUT[key])
        out[f.short] = f
    return out


# ----------------------------------------------------------------------------- torch AMP
@dataclass(frozen=True)
class AmpChoice:
    """The autocast settings for one device.

    Attributes:
        device_type: ``"cuda"``, ``"cpu"``, ``"mps"``, ``"xla"`` (for ``torch.autocast``).
        dtype: the autocast dtype (``torch.bfloat16``/``torch.float16``).
        needs_scaler: True for fp16 (gradients underflow without loss scaling).
        native: the hardware has units for ``dtype``; False: emulated, usually slower than fp32.
        reason: one sentence saying why.
    """

    device_type: str
    dtype: Any
    needs_scaler: bool
    native: bool
    reason: str

    def __str__(self) -> str:
        scaler = "with" if self.needs_scaler else "no"
        return (f"autocast {self.device_type} {str(self.dtype).replace('torch.', '')}, "
                f"{scaler} GradScaler ({self.reason})")


#: The ``torch.autocast`` device type of each hardware-class kind.
AUTOCAST_DEVICE = {"cpu": "cpu", "cuda": "cuda", "rocm": "cuda", "mps": "mps", "tpu": "xla"}


def amp_choice(device: Any = None, dtype: Any = None, *, hw: Any = None) -> AmpChoice:
    """Choose the autocast dtype for ``device`` and say whether it needs a GradScaler.

    From the hardware class (:mod:`accelkit.hardware`, not ``torch.cuda.is_bf16_supported()``,
    which counts emulation): bf16 tensor cores -> bf16, no scaler; T4/V100 and MPS -> fp16 with
    a scaler; TPU, CPU -> bf16, *native* only with bf16 units.  ``dtype`` forces one (fp16
    always with a scaler); ``hw`` (a ``HardwareClass``) decides without probing ``device``.

    Returns:
        An :class:`AmpChoice`.

    Raises:
        ValueError: for a dtype other than bf16/fp16.
    """
    import torch

    from accelkit import hardware

    cls = hw if hw is not None else hardware.for_device(device)
    name = cls.amp_dtype
    if dtype is not None:
        name = format_name(dtype)
        if name not in ("bfloat16", "float16"):
            raise ValueError(f"autocast runs in bfloat16 or float16, not {name}")
    key, native = SHORT[name], cls.native(name)
    scaler = name == "float16"
    if native:
        why = f"{cls.name} has {key} units" + (
            "; fp16's narrow range needs loss scaling" if scaler else
            " (bf16 has fp32's range: no scaler)")
    elif cls.kind == "cpu":
        why = (f"{cls.name} has no {key} units: {key} is converted to compute, slower "
               "than fp32")
    else:  # a GPU without units for it: pre-Volta fp16, or bf16 forced before Ampere
        why = (f"{cls.name} has no {key} tensor cores: {key} halves the bytes moved, but "
               "the matmuls gain nothing (bf16 before Ampere is emulated, slower)"
               + ("; fp16's narrow range needs loss scaling" if scaler else ""))
    return AmpChoice(AUTOCAST_DEVICE[cls.kind], getattr(torch, name), scaler, native, why)


# ----------------------------------------------------------------------------- the AMP path
#: Where a class's CPUs disagree, bf16 vs fp32 on a (PROBE_SIZE, PROBE_SIZE) matmul must be
#: at least PROBE_AT_LEAST times faster (whole 95 % interval) for the bf16 path; the margin
#: above 1x keeps the notebooks' re-check on fresh pairs (floor 1x) from being a coin toss
#: (a Zen 4 measured 2.9x-4.4x, a Xeon VM of the same class 0.55x).
PROBE_AT_LEAST = 1.2
PROBE_SIZE = 1024
_PATHS: dict[tuple[str, str], AmpPath] = {}


@dataclass(frozen=True)
class AmpPath(AmpChoice):
    """The class's :class:`AmpChoice`, whether this machine takes it, and the claims with it.

    Attributes (besides :class:`AmpChoice`'s; ``reason`` says what decided):
        hardware: the hardware class's name.
        use: take the path (the dtype has units here and, where measured, was clearly faster
            than fp32).
        decided_by: ``"class"`` (the class's units and floors) or ``"measurement"``.
        claims: the claims of :data:`accelkit.claims.BF16_CLAIMS`, from class or measurement.
        probe: the bf16 vs fp32 :class:`accelkit.bench.Comparison` measured here, or ``None``.
    """

    hardware: str = ""
    use: bool = False
    decided_by: str = "class"
    claims: Any = None
    probe: Any = None

    def claim(self, name: str) -> Any:
        """Return the :class:`accelkit.claims.Claim` for ``name`` on this machine: the 16-bit
        claims from this path (its measurement where there is one), every other from the class.

        Raises:
            KeyError: for a claim name not in :data:`accelkit.claims.CLAIMS`.
        """
        from accelkit import hardware

        if name in self.claims:
            return self.claims[name]
        return hardware.get(self.hardware).claim(name)

    def floor(self, name: str) -> float | None:
        """Return the floor of claim ``name`` on this machine (``None``: no claim)."""
        return self.claim(name).floor

    def __str__(self) -> str:
        low = str(self.dtype).removeprefix("torch.")
        return (f"{low} path on {self.hardware}: {'taken' if self.use else 'not taken'}, "
                f"decided by the {self.decided_by} ({self.reason})")


def _probe_bf16(device: Any) -> Any:
    """Time a (PROBE_SIZE, PROBE_SIZE) bf16 matmul against fp32 in interleaved pairs (~2-4 s;
    up to 2 s more while the interval straddles PROBE_AT_LEAST); a private generator, so the
    notebook's seeded stream is not touched."""
    import torch

    from accelkit import bench

    n = PROBE_SIZE
    gen = torch.Generator().manual_seed(0)
    a32 = torch.randn(n, n, generator=gen).to(device)
    a16 = a32.to(torch.bfloat16)
    return bench.compare(lambda: a32 @ a32, lambda: a16 @ a16, labels=("fp32", "bf16"),
                         flops=2 * n**3, device=device, min_run_time=0.5, pairs=8, warmup=1,
                         at_least=PROBE_AT_LEAST, budget_s=2.0)


def amp_path(device: Any = None, *, hw: Any = None, probe: Callable[[], Any] | None = None,
             refresh: bool = False) -> AmpPath:
    """Decide whether this machine takes the low-precision (bf16) path, once per process.

    A uniform hardware class decides alone (GPUs/TPUs with units for their dtype and
    ``cpu-amx`` take it; ``cpu-avx2`` does not).  Where the class's CPUs disagree
    (``HardwareClass.bf16_measured``) it times a 1024² bf16 vs fp32 matmul here and takes the
    path only where the whole 95 % interval is above :data:`PROBE_AT_LEAST`; the claims then
    come from :func:`accelkit.claims.measured_bf16`.

    Args:
        device: the torch device; default: the best device here.
        hw: decide for this :class:`accelkit.hardware.HardwareClass` instead of the device's.
        probe: returns the bf16 vs fp32 :class:`accelkit.bench.Comparison` (tests fake it);
            default: :func:`_probe_bf16` on ``device``.
        refresh: measure again instead of returning this process's earlier answer.

    Returns:
        An :class:`AmpPath`; ``path.claim("bf16_matmul")`` is the floor the notebook asserts.
    """
    from accelkit import claims, hardware, stats
    from accelkit import device as _device

    cls = hw if hw is not None else hardware.for_device(device)
    choice = amp_choice(hw=cls)
    kind = _device.device_type(device) if hw is None else cls.kind
    key = (cls.name, kind)
    if key in _PATHS and not refresh and probe is None:
        return _PATHS[key]
    base = {**vars(choice), "hardware": cls.name}
    if not (cls.bf16_measured and choice.native):
        path = AmpPath(**base, use=choice.native,
                       claims={n: cls.claim(n) for n in claims.BF16_CLAIMS})
    else:
        cmp = probe() if probe is not None else _probe_bf16(
            device if device is not None else "cpu")
        verdict = cmp.verdict(at_least=PROBE_AT_LEAST)
        faster = {stats.HOLDS: True, stats.REFUTED: False}.get(verdict)
        note = ""
        if hardware.emulated():
            note = f" (this CPU computes as {hardware.probed_cpu().name}: only decisions change)"
        base["reason"] = (f"{cls.name}'s CPUs disagree on bf16, so it was timed here{note}: "
                          f"{cmp.finding()}, {cmp.summary()}; the path needs the whole interval above "
                          f"{PROBE_AT_LEAST:g}x")
        path = AmpPath(**base, use=bool(faster), decided_by="measurement",
                       claims=claims.measured_bf16(faster, cmp.finding()), probe=cmp)
    if probe is None:
        _PATHS[key] = path
    return path


@dataclass
class AmpStep:
    """One training step (from :func:`make_step`); ``step(x, y)`` returns the detached loss.

    Attributes: ``model``, ``opt``; ``dtype`` (``None``: fp32, autocast disabled); ``scaler``
    (a ``torch.amp.GradScaler``, enabled exactly for fp16); ``loss_fn(output, y)`` and the
    forward pass run inside ``autocast`` (the ``torch.autocast`` context).
    """

    model: Any
    opt: Any
    dtype: Any
    scaler: Any
    loss_fn: Callable[[Any, Any], Any]
    autocast: Any

    def __call__(self, x: Any, y: Any) -> Any:
        self.opt.zero_grad(set_to_none=True)
        with self.autocast:  # forward and loss: low precision where autocast deems it safe
            loss = self.loss_fn(self.model(x), y)
        self.scaler.scale(loss).backward()  # backward outside autocast, as the docs advise
        self.scaler.step(self.opt)  # unscales; skips the update if a gradient is inf/NaN
        self.scaler.update()  # grows the scale after good steps, halves it on inf/NaN
        return loss.detach()


def make_step(model: Any, opt: Any, device: Any = None, dtype: Any = None, *,
              scaler: Any = None, loss_fn: Callable[[Any, Any], Any] | None = None) -> AmpStep:
    """Return one training step for ``dtype``: autocast + a GradScaler chosen by :func:`amp_choice`.

    ``torch.autocast`` around forward and loss (``enabled=False`` for the fp32 baseline),
    ``backward`` outside it, a ``GradScaler`` enabled exactly for fp16 (nanoGPT's shape).

    Args:
        model, opt: the module (fp32 parameters) and its optimizer.
        device: the device the step runs on; default: the best device here.
        dtype: ``torch.bfloat16``/``torch.float16`` (or ``"bf16"``/``"fp16"``); ``None``: fp32.
        scaler: a ``torch.amp.GradScaler``; default: one enabled exactly for fp16.
        loss_fn: ``loss_fn(output, y)``; default: ``torch.nn.functional.cross_entropy``.

    Returns:
        An :class:`AmpStep`.

    Raises:
        ValueError: for fp16 with a disabled ``scaler`` (fp16 gradients below 6e-8 would
            silently become 0: pass an enabled one, or none), and as :func:`amp_choice`.
    """
    import torch

    choice = amp_choice(device, dtype)  # with dtype=None: the device's dtype, autocast off
    needs = dtype is not None and choice.needs_scaler
    if scaler is None:
        scaler = torch.amp.GradScaler(choice.device_type, enabled=needs)
    elif needs and not scaler.is_enabled():
        raise ValueError(f"{choice.dtype} training needs an enabled GradScaler (gradients below "
                         "fp16's smallest subnormal become 0); pass scaler=None to get one")
    ctx = torch.autocast(device_type=choice.device_type, dtype=choice.dtype,
                         enabled=dtype is not None)
    return AmpStep(model, opt, None if dtype is None else choice.dtype, scaler,
                   loss_fn or torch.nn.functional.cross_entropy, ctx)


# ----------------------------------------------------------------------------- dtype traces
@dataclass(frozen=True)
class OpRecord:
    """One op called during a traced function: its name (``"conv2d"``, ``"__add__"``), the
    dtypes of its tensor arguments as given (before autocast casts them), and of its (first)
    tensor result."""

    op: str
    inputs: tuple[str, ...]
    output: str


class DtypeTrace(list[OpRecord]):
    """The :class:`OpRecord` of each op a traced function called, in order (a list)."""

    def table(self) -> str:
        "Return a Markdown table, one row per distinct (op, inputs, output) with its calls."""
        seen = collections.Counter((r.op, r.inputs, r.output) for r in self)
        rows = ["| op | input dtypes | output dtype | calls |", "|---|---|---|---|"]
        rows += [f"| {op} | {', '.join(ins)} | {out} | {n} |" for (op, ins, out), n in seen.items()]
        return "\n".join(rows)


def trace(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, DtypeTrace]:
    """Call ``fn(*args, **kwargs)`` and record the dtype each top-level torch op returns.

    A ``torch.overrides.TorchFunctionMode`` logs every ``torch.*``/``F.*``/tensor-method call
    made by ``fn`` or its modules (not the calls made inside an op).  Run it inside
    ``torch.autocast`` to see which ops autocast lowers and which it keeps in float32.

    Returns:
        ``(result, ops)``: ``fn``'s result and a :class:`DtypeTrace`, one :class:`OpRecord`
        per op, in order.
    """
    import torch
    from torch.overrides import TorchFunctionMode

    records = DtypeTrace()

    def tensors(obj: Any) -> list[Any]:
        if isinstance(obj, torch.Tensor):
            return [obj]
        if isinstance(obj, dict):
            obj = list(obj.values())
        return [t for o in obj for t in tensors(o)] if isinstance(obj, (list, tuple)) else []

    def dtype(t: Any) -> str:
        return str(t.dtype).replace("torch.", "")

    class _Recorder(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, a: Any = (), kw: Any = None) -> Any:
            out = func(*a, **(kw or {}))
            name = getattr(func, "__name__", str(func))
            outs = tensors(out)
            if outs and name not in ("__get__", "__set__"):  # skip attribute access
                if name.startswith("_") and not name.startswith("__"):
                    name = name[1:]  # F.max_pool2d dispatches to "_max_pool2d"
                ins = tuple(dtype(t) for t in tensors(list(a) + list((kw or {}).values())))
                records.append(OpRecord(name, ins, dtype(outs[0])))
            return out

    with _Recorder():
        result = fn(*args, **kwargs)
    return result, records


_ITEMSIZE = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}


def _leaf_layers(model: Any) -> list[Any]:
    return [leaf for layer in model.layers
            for leaf in (_leaf_layers(layer) if getattr(layer, "layers", None) else [layer])]


def keras_activation_bytes(model: Any, batch_size: int) -> int:
    """Return the bytes of every layer's output for one batch, in each layer's compute dtype.

    ``sum(batch_size * prod(output.shape[1:]) * itemsize(compute_dtype))`` over the layers of a
    built Keras model (nested models walked): the activations a step keeps for backward,
    counted from shapes (TensorFlow reports no allocator peak on a CPU).

    Raises:
        ValueError: for ``batch_size < 1`` or a layer dtype with no known size.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    total = 0
    for layer in _leaf_layers(model):
        dtype = str(getattr(layer.compute_dtype, "name", layer.compute_dtype))
        if dtype not in _ITEMSIZE:
            raise ValueError(f"layer {layer.name}: unknown size of dtype {dtype!r}")
        total += batch_size * math.prod(layer.output.shape[1:]) * _ITEMSIZE[dtype]
    return int(total)


__all__ = ["FORMATS", "PROBE_AT_LEAST", "PROBE_SIZE", "AmpChoice", "AmpPath", "AmpStep", "DtypeTrace",
           "FloatFormat", "Formats", "OpRecord", "amp_choice", "amp_path", "float_formats",
           "format_name", "keras_activation_bytes", "make_step", "trace"]
