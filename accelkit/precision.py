"""Mixed precision: number formats, the AMP dtype choice, and whether this machine takes it.

* **Formats** — :func:`float_formats` gives range and precision of fp32, tf32, fp16 and bf16
  (from the IEEE-754 formula, since tf32 has no storage type anywhere; the tests check it
  against ``torch.finfo`` for the others); :meth:`FloatFormat.round` rounds fp32 values to a
  format, to *see* what it keeps.
* **PyTorch AMP** — :func:`amp_choice` picks the autocast dtype for a device from the hardware
  class, says whether a ``GradScaler`` is needed and whether the hardware has native units
  for it; :func:`make_step` builds one training step (device-generic ``torch.autocast``, never
  the deprecated ``torch.cuda.amp``) whose GradScaler is enabled exactly for fp16.
* **Whether this machine takes the low-precision path** — :func:`amp_path` decides it once per
  process: from the hardware class where its machines agree, from a short bf16 vs fp32
  measurement where they do not (AVX512-BF16 CPUs: a Xeon VM 0.55x, an AMD Zen 4 2.9x-4.4x), with
  the claims the notebooks assert (:class:`AmpPath`, an :class:`AmpChoice` too).

Elsewhere: what autocast really does, op by op (:func:`accelkit.dtypes.trace`), dtype *names*
and their aliases, in :mod:`accelkit.dtypes`; which hardware has bf16/fp16 units, and datasheet
peaks, in the hardware-class table :mod:`accelkit.hardware`; memory measurements
(:func:`accelkit.memory.saved_activation_bytes`, :func:`accelkit.memory.measured_peak_bytes`)
in :mod:`accelkit.memory`.

Example::

    path = ak.precision.amp_path(device)   # bf16 on this CPU, no scaler; taken here?
    with torch.autocast(path.device_type, dtype=path.dtype, enabled=path.use):
        loss = loss_fn(model(x), y)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelkit import dtypes

# ----------------------------------------------------------------------------- formats
#: The formats the course compares, widest first.
FORMATS = ("float32", "tfloat32", "float16", "bfloat16")
# name -> (storage bits, exponent bits, explicit mantissa bits); tf32 is stored in 32 bits,
# tensor cores read 1+8+10 of them
_LAYOUT = {"float32": (32, 8, 23), "tfloat32": (32, 8, 10), "float16": (16, 5, 10),
           "bfloat16": (16, 8, 7)}


def format_name(name: Any) -> str:
    """Return the canonical format name for ``"bf16"``, ``torch.bfloat16``, ``"tf32"`` ...

    The spelling is read by :func:`accelkit.dtypes.canonical`, restricted to :data:`FORMATS`.

    Returns:
        ``"float32"``, ``"tfloat32"``, ``"float16"`` or ``"bfloat16"``.

    Raises:
        ValueError: for a format the course does not cover (lists the known ones).
    """
    key = dtypes.canonical(name)
    if key not in _LAYOUT:
        aliases = ", ".join(a for a, n in dtypes.ALIASES.items() if n in _LAYOUT)
        raise ValueError(f"unknown float format {name!r}; use one of {', '.join(FORMATS)} "
                         f"(or {aliases})")
    return key


@dataclass(frozen=True)
class FloatFormat:
    """Range and precision of one binary floating-point format, from its bit layout.

    With bias ``b = 2**(e-1) - 1``: ``max = (2 - 2**-m) * 2**b``, smallest normal ``2**(1-b)``,
    smallest subnormal ``2**(1-b-m)``, ``eps = 2**-m`` (IEEE 754-2019, §3.3; all four formats
    reserve the top exponent for inf/NaN; equal to ``torch.finfo``, tested).

    Attributes:
        name: ``"float32"``, ``"tfloat32"``, ``"float16"`` or ``"bfloat16"``.
        bits: storage bits (tf32 is stored in 32 bits; only 19 are used).
        exponent_bits: ``e``, bits of the exponent (sets the range).
        mantissa_bits: ``m``, explicit fraction bits (set the precision).
    """

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int

    @property
    def short(self) -> str:
        """The short name: ``"fp32"``, ``"tf32"``, ``"fp16"``, ``"bf16"``."""
        return dtypes.SHORT[self.name]

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

    @property
    def range_decades(self) -> float:
        """Decades between the smallest normal and the largest value, ``log10(max / min)``."""
        return math.log10(self.max / self.smallest_normal)

    def round(self, x: Any) -> Any:
        """Round float32 values to this format and return them as float32 (to see what survives).

        fp16 and bf16 round through the real dtype (``x.to(dtype).float()``); tf32 keeps the
        top 10 mantissa bits with round-to-nearest-even, as tensor cores do on input.

        Args:
            x: a float32 ``torch.Tensor`` (any shape).

        Returns:
            A float32 tensor of ``x``'s shape holding the rounded values (inf/NaN kept).

        Raises:
            TypeError: when ``x`` is not a float32 tensor.

        Example: ``float_formats("fp16")["fp16"].round(torch.tensor([1e-8]))  # tensor([0.])``
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
    """Describe formats: range, precision, smallest normal and subnormal.

    Args:
        *names: ``"float32"``/``"fp32"``, ``"tfloat32"``/``"tf32"``, ``"float16"``/``"fp16"``,
            ``"bfloat16"``/``"bf16"`` or torch dtypes; none: all of :data:`FORMATS`.

    Returns:
        :class:`Formats`, ``{short name: FloatFormat}`` in the given order; ``.markdown()``
        renders it.

    Raises:
        ValueError: for an unknown format.

    Example: ``float_formats("fp16")["fp16"].max  # 65504.0``
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
#: a coin toss; a Zen 4 measured 2.9x-4.4x, a Xeon VM of the same class 0.55x.
PROBE_AT_LEAST = 1.2
PROBE_SIZE = 1024
_PATHS: dict[tuple[str, str], AmpPath] = {}


@dataclass(frozen=True)
class AmpPath(AmpChoice):
    """The class's :class:`AmpChoice`, whether this machine takes it, and the claims with it.

    The *class* decides what the hardware can do; where the CPUs of one class disagree on
    what it does (AVX512-BF16 without AMX: a Xeon VM 0.55x of fp32, an AMD Zen 4 2.9x-4.4x), a
    short measurement on this machine decides (:func:`amp_path`).

    Attributes:
        device_type, dtype, needs_scaler, native: as :class:`AmpChoice`.
        reason: one sentence saying what decided, with the measurement where there is one.
        hardware: the hardware class's name.
        use: take the path: run the autocast rungs and keep them (the dtype has units here
            and, where measured, was clearly faster than fp32).
        decided_by: ``"class"`` (the class's units and floors) or ``"measurement"``.
        claims: the claims that follow the 16-bit matmul's speed
            (:data:`accelkit.claims.BF16_CLAIMS`), from the class or from the measurement.
        probe: the bf16 vs fp32 matmul :class:`accelkit.bench.Comparison` measured here, or
            ``None`` where the class decided.
    """

    hardware: str = ""
    use: bool = False
    decided_by: str = "class"
    claims: Any = None
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
        An :class:`AmpPath` (an :class:`AmpChoice` for autocast too);
        ``path.claim("bf16_matmul")`` is the floor the notebook asserts.

    Example: ``PATH = amp_path(dev); BF16 = PATH.claim("bf16_matmul")``
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
                          f"{cmp.finding()}; the path needs the whole interval above "
                          f"{PROBE_AT_LEAST:g}x")
        path = AmpPath(**base, use=bool(faster), decided_by="measurement",
                       claims=claims.measured_bf16(faster, cmp.finding()), probe=cmp)
    if probe is None:
        _PATHS[key] = path
    return path


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
            ...); default: one enabled exactly for fp16.
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


__all__ = ["FORMATS", "PROBE_AT_LEAST", "PROBE_SIZE", "AmpChoice", "AmpPath", "AmpStep", "FloatFormat",
           "Formats", "amp_choice", "amp_path", "float_formats", "format_name", "make_step"]
