"""Mixed precision: number formats, the AMP dtype choice, autocast and GradScaler.

This module owns two things:

* **Formats** — :func:`float_format` gives range and precision of fp32, tf32, fp16 and bf16
  (from ``ml_dtypes.finfo``; tf32 has no storage type anywhere, so its limits come from the
  IEEE-754 formula :func:`ieee_limits`, which the tests check against ``finfo`` for the
  others); :func:`round_to` rounds fp32 values to a format, to *see* what it keeps.
* **PyTorch AMP** — :func:`amp_choice` picks the autocast dtype for a device and says whether
  a ``GradScaler`` is needed and whether the hardware has native units for it;
  :func:`autocast` and :func:`grad_scaler` build the device-generic ``torch.autocast`` and
  ``torch.amp.GradScaler`` from it (never the deprecated ``torch.cuda.amp``);
  :func:`make_step` builds one training step whose GradScaler is enabled exactly for fp16;
  :func:`set_fp32_precision` makes fp32 mean IEEE fp32 (or TF32) in PyTorch and TensorFlow.
* **Whether this machine takes the low-precision path** — :func:`amp_path` decides it once per
  process: from the hardware class where its machines agree, from a short bf16 vs fp32
  measurement where they do not (AVX512-BF16 CPUs: a Xeon VM 0.55x, an AMD Zen 4 2.9x), with
  the claims the notebooks assert (:class:`AmpPath`).
* **Whether a long low-precision run is worth it here** — :func:`plan_run` decides from a
  measured prediction and the hardware class's units (run it, or skip it with the measured
  reason), for CPUs without bf16 units where a bf16 job can take minutes.

Elsewhere: what autocast really does, op by op (:func:`accelkit.dtype_trace.trace_dtypes`,
:func:`accelkit.dtype_trace.dtype_table`), in :mod:`accelkit.dtype_trace`; dtype *names* and
their aliases in :mod:`accelkit.dtypes`; which hardware has bf16/fp16 units, and datasheet
peaks (:func:`accelkit.hardware.datasheet_tflops`), in the hardware-class table
:mod:`accelkit.hardware`; Keras mixed precision in :mod:`accelkit.keras_mp`; memory
measurements (:func:`accelkit.memory.saved_activation_bytes`,
:func:`accelkit.memory.peak_memory_bytes`, :func:`accelkit.memory.tf_peak_memory_bytes`) in
:mod:`accelkit.memory`.

Example::

    amp = ak.precision.amp_choice(device)        # bf16 on this CPU, no scaler
    with ak.precision.autocast(device, amp.dtype):
        loss = loss_fn(model(x), y)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from accelkit import dtypes

# ----------------------------------------------------------------------------- formats
#: The formats the course compares, widest first.
FORMATS = ("float32", "tfloat32", "float16", "bfloat16")

# name -> (storage bits, exponent bits, explicit mantissa bits)
_LAYOUT = {
    "float32": (32, 8, 23),
    "tfloat32": (32, 8, 10),  # stored in 32 bits; tensor cores read 1+8+10 of them
    "float16": (16, 5, 10),
    "bfloat16": (16, 8, 7),
}
#: The aliases :func:`format_name` accepts for those formats (from :mod:`accelkit.dtypes`).
_FORMAT_ALIASES = tuple(a for a, name in dtypes.ALIASES.items() if name in _LAYOUT)


@dataclass(frozen=True)
class FloatFormat:
    """Range and precision of one floating-point format.

    Attributes:
        name: ``"float32"``, ``"tfloat32"``, ``"float16"`` or ``"bfloat16"``.
        bits: storage bits (tf32 is stored in 32 bits; only 19 are used).
        exponent_bits: bits of the exponent (sets the range).
        mantissa_bits: explicit fraction bits (set the precision).
        max: the largest finite value.
        smallest_normal: the smallest positive normal value; below it precision drops.
        smallest_subnormal: the smallest positive value; half of it rounds to 0.
        eps: the gap between 1 and the next value, ``2**-mantissa_bits``.
        source: where the numbers come from (``"ml_dtypes.finfo"`` or ``"IEEE-754 formula"``).
    """

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int
    max: float
    smallest_normal: float
    smallest_subnormal: float
    eps: float
    source: str

    @property
    def short(self) -> str:
        """The short name: ``"fp32"``, ``"tf32"``, ``"fp16"``, ``"bf16"``."""
        return dtypes.SHORT[self.name]

    @property
    def decimal_digits(self) -> float:
        """Significant decimal digits, ``(mantissa_bits + 1) * log10(2)``."""
        return (self.mantissa_bits + 1) * math.log10(2)

    @property
    def range_decades(self) -> float:
        """Decades between the smallest normal and the largest value, ``log10(max / min)``."""
        return math.log10(self.max / self.smallest_normal)


def format_name(name: Any) -> str:
    """Return the canonical format name for ``"bf16"``, ``torch.bfloat16``, ``"tf32"`` ...

    The spelling is read by :func:`accelkit.dtypes.canonical`; this function restricts it to
    the formats the course compares (:data:`FORMATS`).

    Returns:
        ``"float32"``, ``"tfloat32"``, ``"float16"`` or ``"bfloat16"``.

    Raises:
        ValueError: for a format the course does not cover (lists the known ones).
    """
    key = dtypes.canonical(name)
    if key not in _LAYOUT:
        raise ValueError(f"unknown float format {name!r}; use one of {', '.join(FORMATS)} "
                         f"(or {', '.join(_FORMAT_ALIASES)})")
    return key


def ieee_limits(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """Return the limits of an IEEE-754-style binary format from its bit layout.

    With bias ``b = 2**(e-1) - 1``: ``max = (2 - 2**-m) * 2**b``, smallest normal
    ``2**(1-b)``, smallest subnormal ``2**(1-b-m)``, ``eps = 2**-m`` (IEEE 754-2019, §3.3).
    Holds for fp32, fp16, bf16 and tf32 (all reserve the top exponent for inf/NaN).

    Args:
        exponent_bits: exponent bits ``e``, >= 2.
        mantissa_bits: explicit fraction bits ``m``, >= 1.

    Returns:
        ``{"max", "smallest_normal", "smallest_subnormal", "eps"}`` as floats.

    Raises:
        ValueError: for ``e < 2`` or ``m < 1``.

    Example: ``ieee_limits(8, 10)["eps"]  # tf32: 2**-10``
    """
    if exponent_bits < 2 or mantissa_bits < 1:
        raise ValueError(f"need exponent_bits >= 2 and mantissa_bits >= 1, got "
                         f"{exponent_bits}, {mantissa_bits}")
    bias = 2 ** (exponent_bits - 1) - 1
    return {
        "max": (2.0 - 2.0**-mantissa_bits) * 2.0**bias,
        "smallest_normal": 2.0 ** (1 - bias),
        "smallest_subnormal": 2.0 ** (1 - bias - mantissa_bits),
        "eps": 2.0**-mantissa_bits,
    }


def float_format(name: Any) -> FloatFormat:
    """Describe one format: range, precision, smallest normal and subnormal.

    fp32, fp16 and bf16 come from ``ml_dtypes.finfo`` (the same numbers as
    ``torch.finfo``); tf32 from :func:`ieee_limits`, since no library has a tf32 dtype.

    Args:
        name: ``"float32"``/``"fp32"``, ``"tfloat32"``/``"tf32"``, ``"float16"``/``"fp16"``,
            ``"bfloat16"``/``"bf16"``, or a torch dtype.

    Raises:
        ValueError: for an unknown format.

    Example: ``float_format("fp16").max  # 65504.0``
    """
    key = format_name(name)
    bits, e, m = _LAYOUT[key]
    if key == "tfloat32":
        lim = ieee_limits(e, m)
        return FloatFormat(key, bits, e, m, lim["max"], lim["smallest_normal"],
                           lim["smallest_subnormal"], lim["eps"], "IEEE-754 formula")
    import ml_dtypes
    import numpy as np

    np_type = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[key]
    fi = ml_dtypes.finfo(np_type)
    return FloatFormat(key, int(fi.bits), int(fi.nexp), int(fi.nmant), float(fi.max),
                       float(fi.smallest_normal), float(fi.smallest_subnormal), float(fi.eps),
                       "ml_dtypes.finfo")


def format_table(names: Sequence[Any] = FORMATS) -> str:
    """Return a Markdown table of the formats: bits, max, smallest normal/subnormal, eps, digits.

    Example: ``print(format_table())``
    """
    rows = ["| format | bits (sign/exp/mantissa) | max | smallest normal | smallest subnormal "
            "| eps | decimal digits |", "|---|---|---|---|---|---|---|"]
    for n in names:
        f = float_format(n)
        rows.append(f"| {f.short} | {f.bits} (1/{f.exponent_bits}/{f.mantissa_bits}) | "
                    f"{f.max:.4g} | {f.smallest_normal:.4g} | {f.smallest_subnormal:.4g} | "
                    f"{f.eps:.3g} | {f.decimal_digits:.1f} |")
    return "\n".join(rows)


def round_to(x: Any, fmt: Any) -> Any:
    """Round float32 values to a format and return them as float32 (to see what survives).

    fp16 and bf16 round through the real dtype (``x.to(dtype).float()``); tf32 keeps the top
    10 mantissa bits with round-to-nearest-even, as tensor cores do on input.

    Args:
        x: a float32 ``torch.Tensor`` (any shape).
        fmt: the target format (names as in :func:`float_format`).

    Returns:
        A float32 tensor of ``x``'s shape holding the rounded values (inf/NaN kept).

    Raises:
        TypeError: when ``x`` is not a float32 tensor.
        ValueError: for an unknown format.

    Example: ``round_to(torch.tensor([1e-8]), "fp16")  # tensor([0.])``
    """
    import torch

    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        raise TypeError(f"round_to needs a float32 torch.Tensor, got "
                        f"{getattr(x, 'dtype', type(x).__name__)}")
    key = format_name(fmt)
    if key == "float32":
        return x.clone()
    if key in ("float16", "bfloat16"):
        return x.to(getattr(torch, key)).float()
    drop = 23 - _LAYOUT[key][2]  # tf32: 13 low mantissa bits
    bits = x.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    lsb = (bits >> drop) & 1
    rounded = (bits + (1 << (drop - 1)) - 1 + lsb) & ~((1 << drop) - 1) & 0xFFFFFFFF
    out = rounded.to(torch.int64)
    out = torch.where(out >= 2**31, out - 2**32, out).to(torch.int32).view(torch.float32)
    return torch.where(torch.isfinite(x), out, x).reshape(x.shape)


# ----------------------------------------------------------------------------- torch AMP
@dataclass(frozen=True)
class AmpChoice:
    """The autocast settings for one device.

    Attributes:
        device_type: ``"cuda"``, ``"cpu"``, ``"mps"``, ``"xla"`` (what ``torch.autocast``
            and ``torch.amp.GradScaler`` take).
        dtype: the low-precision dtype for autocast (``torch.bfloat16``/``torch.float16``).
        needs_scaler: True for fp16 (gradients underflow without loss scaling).
        native: the hardware has fast units for ``dtype`` (expect a speedup); False means
            it is emulated and usually *slower* than fp32.
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

    Read from the hardware-class table (:mod:`accelkit.hardware`): a GPU with bf16 tensor
    cores (A10/L4/A100/H100/H200, MI300) gets bf16 without a scaler; a T4 or V100 gets fp16
    with a GradScaler (``torch.cuda.is_bf16_supported()`` is not asked: it counts emulation
    and says True on a T4); Apple MPS fp16 with a scaler; a TPU bf16; a CPU bf16 (the CPU
    autocast default), *native* only where its class has bf16 units.  Passing ``dtype``
    forces it (fp16 then always needs a scaler).

    Args:
        device: a ``torch.device`` or string; default: the best device here.
        dtype: force ``torch.bfloat16``/``torch.float16`` (or ``"bf16"``/``"fp16"``).
        hw: decide for this :class:`accelkit.hardware.HardwareClass` instead of probing
            ``device`` (``doctor --hardware`` uses it; nothing is touched).

    Returns:
        An :class:`AmpChoice`.

    Raises:
        ValueError: for a dtype other than bf16/fp16.

    Example: ``amp = amp_choice("cpu"); amp.dtype  # torch.bfloat16``
    """
    import torch

    from accelkit import hardware

    cls = hw if hw is not None else hardware.for_device(device)
    name = cls.amp_dtype
    if dtype is not None:
        name = format_name(dtype)
        if name not in ("bfloat16", "float16"):
            raise ValueError(f"autocast runs in bfloat16 or float16, not {name}")
    short, native = dtypes.SHORT[name], cls.native(name)
    scaler = name == "float16"
    if native:
        why = f"{cls.name} has {short} units" + (
            "; fp16's narrow range needs loss scaling" if scaler else
            " (bf16 has fp32's range: no scaler)")
    elif cls.kind == "cpu":
        why = (f"{cls.name} has no {short} units: {short} is converted to compute, slower "
               "than fp32")
    else:  # a GPU without units for it: pre-Volta fp16, or bf16 forced before Ampere
        why = (f"{cls.name} has no {short} tensor cores: {short} halves the bytes moved, but "
               "the matmuls gain nothing (bf16 before Ampere is emulated, slower)"
               + ("; fp16's narrow range needs loss scaling" if scaler else ""))
    return AmpChoice(AUTOCAST_DEVICE[cls.kind], getattr(torch, name), scaler, native, why)


# ----------------------------------------------------------------------------- the AMP path
#: The measured path's probe: bf16 vs fp32 on a (PROBE_SIZE, PROBE_SIZE) matmul must be at
#: least PROBE_AT_LEAST times faster (the whole 95 % interval above it) before a machine of a
#: class whose CPUs disagree takes the bf16 path.  The margin above 1x keeps the notebooks'
#: later re-check on fresh pairs (floor 1x, :func:`accelkit.claims.measured_bf16`) from being
#: a coin toss; a Zen 4 measured 2.9x, a Xeon VM of the same class 0.55x.
PROBE_AT_LEAST = 1.2
PROBE_SIZE = 1024
_PATHS: dict[tuple[str, str], AmpPath] = {}


@dataclass(frozen=True)
class AmpPath:
    """Whether this machine takes the low-precision path, and the claims that come with it.

    The *class* decides what the hardware can do; where the CPUs of one class disagree on
    what it does (AVX512-BF16 without AMX: a Xeon VM 0.55x of fp32, an AMD Zen 4 2.9x), a
    short measurement on this machine decides (:func:`amp_path`).

    Attributes:
        hardware: the hardware class's name.
        dtype: the autocast dtype (``torch.bfloat16``/``torch.float16``).
        use: take the path: run the autocast rungs and keep them (the dtype has units here
            and, where measured, was clearly faster than fp32).
        decided_by: ``"class"`` (the class's units and floors) or ``"measurement"``.
        claims: the claims that follow the 16-bit matmul's speed
            (:data:`accelkit.claims.BF16_CLAIMS`), from the class or from the measurement.
        reason: one sentence saying what decided, with the measurement where there is one.
        probe: the bf16 vs fp32 matmul :class:`accelkit.bench.Comparison` measured here, or
            ``None`` where the class decided.
    """

    hardware: str
    dtype: Any
    use: bool
    decided_by: str
    claims: Any
    reason: str
    probe: Any = None

    def claim(self, name: str) -> Any:
        """Return the :class:`accelkit.claims.Claim` for ``name`` on this machine.

        The 16-bit claims (``bf16_matmul``, ``amp_step_torch``, ``amp_step_tf``, ``gpt_amp``)
        come from this path (its measurement where there is one), every other from the class.

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
    """Time a (PROBE_SIZE, PROBE_SIZE) bf16 matmul against fp32 in interleaved pairs (~2-4 s).

    Data from a private generator (the notebook's seeded random stream is not touched); the
    claim ``at_least=PROBE_AT_LEAST`` lets :func:`accelkit.bench.compare` time more pairs,
    for at most 2 s more, while the interval straddles it.
    """
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

    The one place the course decides it.  Where the hardware class is uniform it decides
    alone: GPUs and TPUs with units for their autocast dtype take it, with the class's floors;
    CPUs without bf16 units (``cpu-avx2``, also when emulated with ``ACCELKIT_HARDWARE``) do
    not; ``cpu-amx`` does.  Where the class's CPUs disagree (``cpu-avx512-bf16``:
    ``HardwareClass.bf16_measured``) it times a 1024² bf16 matmul against fp32 in interleaved
    pairs on this machine (:func:`accelkit.bench.compare`, a few seconds) and takes the path
    only where the whole 95 % interval is above :data:`PROBE_AT_LEAST`; the claims then come
    from :func:`accelkit.claims.measured_bf16`: the notebooks' bf16 matmul must be at least
    as fast as fp32 on fresh pairs (a Zen 4), or nothing is claimed (a Xeon VM, 0.55x).
    ``ak.device.onednn_kernels()`` shows which oneDNN kernel ran it.

    Args:
        device: the torch device; default: the best device here.
        hw: decide for this :class:`accelkit.hardware.HardwareClass` instead of the device's.
        probe: a callable returning the bf16 vs fp32 :class:`accelkit.bench.Comparison`
            (tests pass a faked measurement); default: :func:`_probe_bf16` on ``device``.
        refresh: measure again instead of returning this process's earlier answer.

    Returns:
        An :class:`AmpPath`; ``path.claim("bf16_matmul")`` is the floor the notebook asserts.

    Example: ``PATH = amp_path(dev); BF16 = PATH.claim("bf16_matmul")``
    """
    from accelkit import claims, emulation, hardware, stats
    from accelkit import device as _device

    cls = hw if hw is not None else hardware.for_device(device)
    choice = amp_choice(hw=cls)
    kind = _device.device_type(device) if hw is None else cls.kind
    key = (cls.name, kind)
    if key in _PATHS and not refresh and probe is None:
        return _PATHS[key]
    names = claims.BF16_CLAIMS
    if not (cls.bf16_measured and choice.native):
        path = AmpPath(cls.name, choice.dtype, choice.native, "class",
                       {n: cls.claim(n) for n in names}, choice.reason)
    else:
        cmp = probe() if probe is not None else _probe_bf16(
            device if device is not None else "cpu")
        verdict = cmp.verdict(at_least=PROBE_AT_LEAST)
        faster = {stats.HOLDS: True, stats.REFUTED: False}.get(verdict)
        note = ""
        if emulation.active():
            note = f" (this CPU computes as {hardware.probed_cpu().name}: only decisions change)"
        path = AmpPath(cls.name, choice.dtype, bool(faster), "measurement",
                       claims.measured_bf16(faster, cmp.finding()),
                       f"{cls.name}'s CPUs disagree on bf16, so it was timed here{note}: "
                       f"{cmp.finding()}; the path needs the whole interval above "
                       f"{PROBE_AT_LEAST:g}x", cmp)
    if probe is None:
        _PATHS[key] = path
    return path


def autocast(device: Any = None, dtype: Any = None, *, enabled: bool = True) -> Any:
    """Return ``torch.autocast(device_type=..., dtype=..., enabled=...)`` for ``device``.

    The device-generic API (``torch.cuda.amp.autocast`` is deprecated and does nothing on
    a CPU).  ``enabled=False`` gives the same code path in full precision.

    Args:
        device: a ``torch.device``/string; default: the best device here.
        dtype: the low-precision dtype; default: :func:`amp_choice`'s.
        enabled: False turns autocast off (fp32 baseline).

    Example: ``with autocast(dev): loss = loss_fn(model(x), y)``
    """
    import torch

    choice = amp_choice(device, dtype)
    return torch.autocast(device_type=choice.device_type, dtype=choice.dtype, enabled=enabled)


def grad_scaler(device: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    """Return a ``torch.amp.GradScaler`` for ``device``, enabled only when ``dtype`` is fp16.

    With bf16 (or fp32) the scaler is disabled and ``scale``/``step``/``update`` pass
    through, so one training loop serves every dtype.

    Args:
        device: a ``torch.device``/string; default: the best device here.
        dtype: the autocast dtype; default: :func:`amp_choice`'s.
        **kwargs: passed to ``GradScaler`` (``init_scale``, ``growth_interval`` ...).

    Example: ``scaler = grad_scaler(dev, torch.float16, init_scale=2.0**16)``
    """
    import torch

    choice = amp_choice(device, dtype)
    return torch.amp.GradScaler(choice.device_type, enabled=choice.needs_scaler, **kwargs)


@dataclass
class AmpStep:
    """One training step for a precision: autocast around forward and loss, a GradScaler.

    Built by :func:`make_step`; call it as ``step(x, y)`` to run one optimizer step and get
    the (detached) loss.

    Attributes:
        model, opt: the module trained and its optimizer.
        dtype: the autocast dtype, or ``None`` for the fp32 baseline (autocast disabled).
        scaler: the ``torch.amp.GradScaler``, *enabled* exactly when ``dtype`` is fp16.
        loss_fn: ``loss_fn(output, y)``, computed inside autocast.
        autocast: the ``torch.autocast`` context the forward pass runs in.
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

    The shape nanoGPT made familiar: ``torch.autocast`` around the forward pass and the loss
    (``enabled=False`` for the fp32 baseline, through the same code), ``backward`` outside it,
    and a ``GradScaler`` that is *enabled* whenever the dtype is fp16 (its gradients underflow
    without loss scaling) and a pass-through for bf16 and fp32.

    Args:
        model: the module (fp32 parameters: autocast casts per op).
        opt: its optimizer.
        device: the device the step runs on; default: the best device here.
        dtype: ``torch.bfloat16``/``torch.float16`` (or ``"bf16"``/``"fp16"``); ``None`` is
            the fp32 baseline.
        scaler: a ``torch.amp.GradScaler`` to use (its ``init_scale``, ``growth_interval``
            ...); default: :func:`grad_scaler` for ``dtype``.
        loss_fn: ``loss_fn(output, y)``; default: ``torch.nn.functional.cross_entropy``.

    Returns:
        An :class:`AmpStep`; ``step(x, y)`` runs one optimizer step and returns the loss.

    Raises:
        ValueError: for fp16 with a disabled ``scaler`` (fp16 gradients below 6e-8 would
            silently become 0: pass an enabled one, or none), and as :func:`amp_choice`.

    Example: ``step = make_step(model, opt, dev, torch.float16); loss = step(x, y)``
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


# ----------------------------------------------------------------------------- run or skip
@dataclass(frozen=True)
class RunPlan:
    """Whether to run a long low-precision job on this hardware, and why.

    Attributes:
        run: True to run it.
        predicted_s: the predicted wall time, seconds (``None`` when the job fails here).
        reason: one sentence with the measurement the decision came from.
    """

    run: bool
    predicted_s: float | None
    reason: str

    def __str__(self) -> str:
        return self.reason


def plan_run(what: str, *, predicted_s: float | None, budget_s: float, hw: Any, dtype: Any,
             measured: str = "", error: str = "") -> RunPlan:
    """Decide from a measurement whether a low-precision job runs here or is skipped.

    A job runs where the class has native units for ``dtype`` (its speed there *is* the
    lesson, however long) or where the measured prediction fits ``budget_s``; it is skipped
    where it failed on a trial call (``error``) or where the class has no units for ``dtype``
    and the prediction is over the budget (a CPU without bf16 units converts bf16 and
    computes it in a slow fallback: minutes of waiting that teach nothing new).

    Args:
        what: the job, for the reason (``"training in bf16"``).
        predicted_s: its predicted wall time in seconds, from a measurement made in this run
            (notebook 02: the fp32 time divided by the median of the measured step speedup).
        budget_s: the most seconds the profile allows it.
        hw: the :class:`accelkit.hardware.HardwareClass` (its ``native(dtype)`` is read).
        dtype: the low-precision dtype (``torch.bfloat16``, ``"fp16"`` ...).
        measured: what the prediction comes from, in words, for the reason.
        error: ``"TypeError: ..."`` when a trial call failed here; the job is then skipped.

    Returns:
        A :class:`RunPlan`.

    Raises:
        ValueError: for ``budget_s <= 0``, or neither ``predicted_s`` nor ``error`` given.

    Example: ``plan_run("bf16 training", predicted_s=6.0 / 0.02, budget_s=20, hw=HWC, dtype="bf16")``
    """
    if budget_s <= 0 or (predicted_s is None and not error):
        raise ValueError(f"need budget_s > 0 and a predicted_s or an error, got {budget_s}, "
                         f"{predicted_s}, {error!r}")
    name = format_name(dtype)
    short, native = dtypes.SHORT[name], hw.native(name)
    units = (f"{hw.name} has {short} units" if native else
             f"{hw.name} has no {short} units (the data is converted and a slow fallback "
             "computes it)")
    src = f" from {measured}" if measured else ""
    if error or predicted_s is None:  # (no prediction comes with an error: checked above)
        return RunPlan(False, None, f"{what}: skipped, it fails here ({error}); {units}")
    about = f"about {predicted_s:.3g} s predicted{src}"
    if native or predicted_s <= budget_s:
        within = "" if predicted_s <= budget_s else f", over the budget of {budget_s:g} s"
        return RunPlan(True, predicted_s, f"{what}: runs ({about}{within}; {units})")
    return RunPlan(False, predicted_s, f"{what}: skipped ({about}, over this profile's budget "
                   f"of {budget_s:g} s; {units})")


# ----------------------------------------------------------------------------- TF32
#: The fp32 matmul/conv modes: IEEE fp32 everywhere, or TF32 on tensor cores where they exist.
FP32_MODES = ("ieee", "tf32")


def set_fp32_precision(mode: str, *, tf: Any = None) -> None:
    """Make fp32 matmuls and convolutions compute in IEEE fp32 or TF32, in both frameworks.

    The frameworks differ by default on GPUs with TF32 (Ampere and newer, see
    :attr:`accelkit.hardware.HardwareClass.tf32`): TensorFlow runs fp32 matmuls *and*
    convolutions in TF32, PyTorch runs its convolutions in TF32
    (``torch.backends.cudnn.conv.fp32_precision == "tf32"``) but its matmuls in IEEE fp32.
    An fp32 baseline compared across frameworks must fix one.  Uses PyTorch's current API
    (``torch.backends.cuda.matmul.fp32_precision``, ``torch.backends.cudnn.conv.fp32_precision``;
    the older ``allow_tf32`` flags and ``set_float32_matmul_precision`` must not be mixed with
    it) and ``tf.config.experimental.enable_tensor_float_32_execution``.  Where there are no
    TF32 units (CPUs, older GPUs) the settings change nothing.

    Args:
        mode: ``"ieee"`` (full fp32) or ``"tf32"``.
        tf: the ``tensorflow`` module to set too, or ``None`` for PyTorch only.

    Raises:
        ValueError: for another mode.

    Example: ``set_fp32_precision("ieee", tf=tf)  # the same fp32 baseline in both``
    """
    import torch

    if mode not in FP32_MODES:
        raise ValueError(f"mode must be one of {FP32_MODES}, got {mode!r}")
    torch.backends.cuda.matmul.fp32_precision = mode
    torch.backends.cudnn.conv.fp32_precision = mode  # type: ignore[attr-defined]
    if tf is not None:
        tf.config.experimental.enable_tensor_float_32_execution(mode == "tf32")


def fp32_precision(tf: Any = None) -> dict[str, str]:
    """Return the current fp32 modes: ``{"torch matmul", "torch conv"[, "tf"]}`` -> ieee/tf32.

    Example: ``fp32_precision(tf)  # {'torch matmul': 'ieee', 'torch conv': 'ieee', 'tf': 'ieee'}``
    """
    import torch

    modes = {"torch matmul": str(torch.backends.cuda.matmul.fp32_precision),
             "torch conv": str(torch.backends.cudnn.conv.fp32_precision)}  # type: ignore[attr-defined]
    if tf is not None:
        modes["tf"] = "tf32" if tf.config.experimental.tensor_float_32_execution_enabled() else "ieee"
    return modes


__all__ = [
    "FORMATS",
    "FP32_MODES",
    "PROBE_AT_LEAST",
    "PROBE_SIZE",
    "AmpChoice",
    "AmpPath",
    "AmpStep",
    "FloatFormat",
    "RunPlan",
    "amp_choice",
    "amp_path",
    "autocast",
    "float_format",
    "format_name",
    "format_table",
    "fp32_precision",
    "grad_scaler",
    "ieee_limits",
    "make_step",
    "plan_run",
    "round_to",
    "set_fp32_precision",
]
