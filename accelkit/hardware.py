"""Hardware classes as data: the one table every per-hardware decision of the course reads.

A *hardware class* is a kind of machine a learner meets (a CPU without bf16 units, a Colab T4,
an H200, a TPU v5e ...).  :data:`CLASSES` (``hardware.toml``, with datasheets) says what each
has and every decision taken on it: autocast dtype, GradScaler, Keras policy, size profile,
SDPA backend, each speedup claim's floor (:mod:`accelkit.claims`).  Owns the table, mapping
probed facts to a class (:func:`classify_cpu`, :func:`classify_gpu`, :func:`for_device`) and
``$ACCELKIT_HARDWARE`` (the class decided as; on a CPU :func:`apply_emulation` caps oneDNN's and
ATen's instruction sets).  Probes: :mod:`accelkit.device`; a class's card: :mod:`accelkit.env`.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelkit import claims
from accelkit.claims import CLAIMS, Claim

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HARDWARE_ENV = "ACCELKIT_HARDWARE"
#: The classes and their datasheets: data, not code (package data).
DATA_FILE = Path(__file__).with_name("hardware.toml")


@dataclass(frozen=True)
class HardwareClass:
    """One kind of machine and every decision the course takes on it.

    Attributes:
        name: the short key (``"t4"``), as ``$ACCELKIT_HARDWARE`` names it; ``title``: readable.
        kind: ``"cpu"``, ``"cuda"``, ``"rocm"``, ``"mps"`` or ``"tpu"``.
        bf16_units, fp16_units, tf32, fp8: native matrix units / tensor-core formats.
        memory_gib: device memory (``None`` for CPUs).
        peak_tflops: dense datasheet peaks per dtype, TFLOP/s; ``bandwidth_gbps``: GB/s
            (10**9 B/s); ``source``: where these numbers come from.
        amp_dtype: autocast dtype; ``grad_scaler``: fp16 training needs loss scaling.
        keras_policy: ``mixed_bfloat16`` or ``mixed_float16`` (with ``LossScaleOptimizer``).
        profile: the size profile ``auto`` resolves to.
        claims: floor and reason per entry of :data:`CLAIMS`.
        emulate_env: oneDNN/ATen ISA caps that make an x86 CPU compute like this class.
        compute_capability: the NVIDIA ``(major, minor)``, or ``None``.
        note: what a learner should know about this class.
        sdpa_backends: ``SDPBackend`` names PyTorch tries for 16-bit attention, in its order.
        bf16_measured: the class's CPUs disagree on bf16 speed, so a measurement on the
            learner's machine decides the bf16 claims (:func:`accelkit.precision.amp_path`).
    """

    name: str
    title: str
    kind: str
    bf16_units: bool
    fp16_units: bool
    tf32: bool = False
    fp8: bool = False
    memory_gib: float | None = None
    peak_tflops: Mapping[str, float] = field(default_factory=dict)
    bandwidth_gbps: float | None = None
    source: str = ""
    amp_dtype: str = "bfloat16"
    grad_scaler: bool = False
    keras_policy: str = "mixed_bfloat16"
    profile: str = "full"
    claims: Mapping[str, Claim] = field(default_factory=dict)
    emulate_env: Mapping[str, str] = field(default_factory=dict)
    compute_capability: tuple[int, int] | None = None
    note: str = ""
    sdpa_backends: tuple[str, ...] = ()
    bf16_measured: bool = False

    def claim(self, name: str) -> Claim:
        """Return the :class:`Claim` for ``name`` (a key of :data:`CLAIMS`).

        Raises:
            KeyError: for a claim name not in :data:`CLAIMS`, listing the known ones.
        """
        if name not in CLAIMS:
            raise KeyError(f"unknown claim {name!r}; known: {', '.join(CLAIMS)}")
        return self.claims.get(name, Claim(None, f"no measurement backs a claim on {self.name}"))

    def floor(self, name: str) -> float | None:
        """Return the floor of claim ``name`` on this class, or ``None`` for no claim."""
        return self.claim(name).floor

    def native(self, dtype: str) -> bool:
        """True when ``dtype`` (``"bfloat16"``/``"float16"``) runs on native units here."""
        return self.bf16_units if dtype == "bfloat16" else self.fp16_units

    def peak(self, dtype: Any) -> float | None:
        """Return the dense datasheet peak for ``dtype`` (``"bf16"``, ``torch.bfloat16`` ...) in
        TFLOP/s; ``None`` for CPUs, generic GPU classes (none borrowed) and unlisted dtypes."""
        return self.peak_tflops.get(claims.short(dtype))

    def datasheet_peak(self, dtype: Any) -> PeakChoice:
        """Return the :class:`PeakChoice` an MFU divides by (PaLM, appendix B): this class's
        dense datasheet peak in ``dtype``, or (``.tflops`` ``None``) why there is none."""
        short = claims.short(dtype)
        peak = self.peak(short)
        if peak is not None:
            return PeakChoice(peak, f"{self.name} datasheet, dense {short}: {self.source}")
        if self.kind == "cpu":
            why = "CPUs have no datasheet peak the course trusts: measure a matmul (ak.roofline)"
        elif not self.peak_tflops:
            why = f"{self.title}: {NO_DATASHEET}"
        else:
            why = f"the {self.name} datasheet lists no dense {short} peak ({self.source})"
        return PeakChoice(None, why)

    def sdpa_backend(self, dtype: Any = "bfloat16", *,
                     cudnn_version: int | None = None) -> SdpaChoice:
        """Return the :class:`SdpaChoice` PyTorch makes for causal attention here in ``dtype``.

        From ``sdpa_backends`` (PyTorch's order, ``sdp_utils.cpp``) for inputs every kernel
        takes (dense, head dim a multiple of 8 up to 128, no dropout): flash and cuDNN need
        fp16/bf16; cuDNN comes first (sm_90, sm_100) only where the runtime cuDNN
        (``cudnn_version``, e.g. ``91501``; ``None``: unknown, kept) is newer than 9.15.

        Raises:
            ValueError: for a class without SDPA data.
        """
        order = list(self.sdpa_backends)
        if not order:
            raise ValueError(f"{self.name} has no SDPA backend data (sdpa_backends is empty)")
        short = claims.short(dtype)
        if self.kind == "cuda" and short not in ("fp16", "bf16"):  # flash, cuDNN: 16-bit only
            order = [b for b in order if b not in ("FLASH_ATTENTION", "CUDNN_ATTENTION")]
        cudnn_note = ""
        if "CUDNN_ATTENTION" in order:
            if cudnn_version is not None and cudnn_version <= 91500:
                order.remove("CUDNN_ATTENTION")
                cudnn_note = f" (cuDNN {cudnn_version} is not newer than 9.15: flash comes first)"
            elif cudnn_version is None:
                cudnn_note = (" where PyTorch's cuDNN is newer than 9.15, else FlashAttention-2 "
                              "(torch.backends.cudnn.version(); TORCH_CUDNN_SDPA_DEPRIORITIZED=1 "
                              "turns it off)")
        first = order[0]
        what = SDPA_KERNELS["cpu_flash" if self.kind == "cpu" and first == "FLASH_ATTENTION"
                            else first]
        reason = (f"{self.name}, {short}: scaled_dot_product_attention runs {what}{cudnn_note}; "
                  f"PyTorch's order here: {' -> '.join(order)}")
        return SdpaChoice(first, tuple(order), reason)

    @property
    def tensor_cores(self) -> bool:
        """True for a GPU with fp16 matrix units: NVIDIA sm_70+ (Volta on), or AMD CDNA."""
        if self.kind == "rocm":
            return True
        return self.kind == "cuda" and (self.compute_capability or (0, 0)) >= (7, 0)

    def __str__(self) -> str:
        return f"{self.name} ({self.title})"


@dataclass(frozen=True)
class PeakChoice:
    """A peak (``tflops``, dense; ``None``: none known) and its ``source`` or why there is none."""

    tflops: float | None
    source: str

    def __str__(self) -> str:
        return (f"{self.tflops:g} TFLOP/s ({self.source})" if self.tflops is not None
                else f"no peak known: {self.source}")


@dataclass(frozen=True)
class SdpaChoice:
    """The ``SDPBackend`` name PyTorch is expected to pick (``backend``), every one allowed here
    in its ``order``, and the ``reason`` in one sentence."""

    backend: str
    order: tuple[str, ...]
    reason: str

    def __str__(self) -> str:
        return self.reason


#: SDPA on CPUs: PyTorch's C++ flash kernel, then math (``priority_order_cpp`` in
#: ``sdp_utils_cpp.cpp``).  What each backend is: ``hardware.toml``'s ``[sdpa]`` table.
_SDPA_CPU = ("FLASH_ATTENTION", "MATH")


def _sdpa_cuda(cc: tuple[int, int]) -> tuple[str, ...]:
    """PyTorch's SDPA backends for fp16/bf16 on an NVIDIA GPU of compute capability ``cc``
    (``cuda/sdp_utils.cpp``: flash sm_80+, memory-efficient sm_50+, cuDNN first on sm_90 and
    sm_100/103 by ``check_prefer_cudnn_attention``)."""
    if cc < (5, 0):
        return ("MATH",)
    if cc < (8, 0):
        return ("EFFICIENT_ATTENTION", "MATH")
    cudnn = ("CUDNN_ATTENTION",) if cc in ((9, 0), (10, 0), (10, 3)) else ()
    return cudnn + ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


def _build(name: str, row: dict[str, Any], text: Mapping[str, str]) -> HardwareClass:
    """Build one class from its ``hardware.toml`` table plus what its kind implies (NVIDIA:
    fp16 tensor cores from sm_70, bf16 and TF32 from sm_80, FP8 from sm_89; ROCm: from the
    listed peaks; a GPU's claims from its own peaks; MPS and TPUs list every field)."""
    row = {k: v.format_map(text) if isinstance(v, str) else v for k, v in row.items()
           if k != "match"}
    kind = row.setdefault("kind", "cuda")
    if kind == "cpu":
        return HardwareClass(name, fp16_units=False, profile="ci", claims=claims.for_cpu(name),
                             source=text["cpu_source"], sdpa_backends=_SDPA_CPU,
                             bf16_measured=name in claims.MEASURED_BF16_CLASSES, **row)
    if kind not in ("cuda", "rocm"):
        row["claims"] = {k: Claim(None if math.isnan(v["floor"]) else v["floor"], v["why"])
                         for k, v in row.get("claims", {}).items()}
        return HardwareClass(name, **(row | {"sdpa_backends": tuple(row["sdpa_backends"])}))
    cc = tuple(row.pop("compute_capability", (0, 0)))
    peaks = row.get("peak_tflops", {})
    if kind == "cuda":
        fp16, bf16, tf32, fp8 = cc >= (7, 0), cc >= (8, 0), cc >= (8, 0), cc >= (8, 9)
    else:
        fp16, bf16 = True, "bf16" in peaks or not peaks
        tf32, fp8 = "tf32" in peaks, "fp8" in peaks
    return HardwareClass(
        name, bf16_units=bf16, fp16_units=fp16, tf32=tf32, fp8=fp8,
        amp_dtype="bfloat16" if bf16 else "float16", grad_scaler=not bf16,
        keras_policy="mixed_bfloat16" if bf16 else "mixed_float16",
        claims=claims.for_gpu(kind, cc, bf16=bf16, tf32=tf32, peaks=peaks),
        compute_capability=cc if kind == "cuda" else None,
        sdpa_backends=_sdpa_cuda(cc) if kind == "cuda" else
        ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH"), **row)


_DATA = tomllib.loads(DATA_FILE.read_text(encoding="utf-8"))
_TEXT = _DATA.pop("text") | {"xeon_vm_bf16": claims.XEON_VM_BF16, "zen4_bf16": claims.ZEN4_BF16}
#: What each ``torch.nn.attention.SDPBackend`` is (and ``cpu_flash``: flash on a CPU).
SDPA_KERNELS: dict[str, str] = _DATA.pop("sdpa")
#: The hardware classes, CPUs first, in ``hardware.toml``'s order.
CLASSES = {name: _build(name, row, _TEXT) for name, row in _DATA.items()}
#: Each GPU class's product-name pattern, in the file's order (most specific first).
_GPU_NAMES = tuple((row["match"], name) for name, row in _DATA.items() if "match" in row)
#: The ``source`` of a generic GPU class: its product is not in the table.
NO_DATASHEET = _TEXT["no_datasheet"]


def get(name: str) -> HardwareClass:
    """Return the class called ``name`` (case-insensitive).

    Raises:
        KeyError: for an unknown name, listing the known ones.
    """
    key = name.strip().lower()
    if key not in CLASSES:
        raise KeyError(f"unknown hardware class {name!r}; known: {', '.join(CLASSES)}")
    return CLASSES[key]


def classify_cpu(features: Mapping[str, bool], machine: str = "x86_64") -> HardwareClass:
    """Return the CPU class for ISA ``features`` (:func:`accelkit.device.cpu_features`) on
    ``machine`` (``platform.machine()``; Arm gets ``cpu-arm64``)."""
    if machine.lower() in ("arm64", "aarch64"):
        return CLASSES["cpu-arm64"]
    flag = next((f for f in ("amx_bf16", "avx512_bf16", "avx512f") if features.get(f)), "")
    return CLASSES[{"amx_bf16": "cpu-amx", "avx512_bf16": "cpu-avx512-bf16",
                    "avx512f": "cpu-avx512"}.get(flag, "cpu-avx2")]


def _class_by_name(name: str, memory_bytes: int | None = None) -> HardwareClass | None:
    """Return the GPU class whose ``match`` pattern (touched by no letter or digit) ``name``
    contains, or ``None``; an A100 under 60 GiB whose name gives no size is the 40 GB part."""
    for pattern, cls in _GPU_NAMES:
        if re.search(r"(?<![A-Za-z0-9])" + pattern + r"(?![A-Za-z0-9])", name, re.IGNORECASE):
            if (cls == "a100" and memory_bytes and memory_bytes < 60 * 2**30
                    and not re.search(r"80\s?GB", name, re.IGNORECASE)):
                return CLASSES["a100-40gb"]
            return CLASSES[cls]
    return None


#: The generic NVIDIA classes: ``(lowest compute capability, class name)``, newest last.
_GENERIC_CUDA = (((0, 0), "cuda-pre-volta"), ((7, 0), "cuda-volta-turing"),
                 ((8, 0), "cuda-ampere-plus"))


def classify_gpu(name: str, compute_capability: Sequence[int] | None,
                 kind: str = "cuda", memory_bytes: int | None = None) -> HardwareClass:
    """Return the GPU class of product ``name`` (``"NVIDIA H200"``), else the generic class of
    its architecture (``cuda-pre-volta``, ``cuda-volta-turing``, ``cuda-ampere-plus``;
    ``rocm-other``): its decisions, but no peak, memory or bandwidth.

    Args:
        compute_capability: ``(major, minor)``, or ``None`` when unknown (NVIDIA: pre-Volta).
        kind: ``"cuda"`` or ``"rocm"``.
        memory_bytes: tells an A100 40 GB from an 80 GB where its name does not.
    """
    by_name = _class_by_name(name, memory_bytes)
    if by_name is not None:
        return by_name
    if kind == "rocm":
        return CLASSES["rocm-other"]
    cc = tuple(compute_capability) if compute_capability else (0, 0)
    return CLASSES[[c for low, c in _GENERIC_CUDA if cc >= low][-1]]


def from_env() -> HardwareClass | None:
    """Return the class named by ``$ACCELKIT_HARDWARE``, or ``None`` when unset.

    Raises:
        KeyError: for an unknown name in the variable.
    """
    value = os.environ.get(HARDWARE_ENV, "").strip()
    return get(value) if value else None


def probed_cpu() -> HardwareClass:
    """Return the class of this machine's CPU from its ISA flags (``$ACCELKIT_HARDWARE`` ignored)."""
    from accelkit import device as _dev

    return classify_cpu(_dev.cpu_features(), _dev.machine())


def for_device(device: Any = None) -> HardwareClass:
    """Return the hardware class of PyTorch ``device`` here (``"cpu"``, ``"cuda:0"``, ``"mps"``,
    ``"xla"``; default the best one); ``$ACCELKIT_HARDWARE`` overrides a CPU's probe."""
    from accelkit import device as _dev

    kind = _dev.device_type(device)
    override = from_env()
    if kind == "cpu":
        if override is not None and override.kind == "cpu":
            return override
        return probed_cpu()
    if kind == "mps":
        return CLASSES["apple-mps"]
    if kind == "xla":
        return CLASSES["tpu-v5e"]
    import torch

    gpus = _dev.nvidia_or_rocm_gpus()
    if not gpus:
        return CLASSES["cuda-pre-volta"]
    index = torch.device(device).index if device is not None else None
    info = gpus[min(index or 0, len(gpus) - 1)]
    return classify_gpu(info.description, info.compute_capability, info.kind, info.memory_bytes)


def datasheet_tflops(device_name: str, dtype: Any) -> float | None:
    """Return the dense datasheet peak in TFLOP/s of the GPU named ``device_name`` (matched as
    in :func:`classify_gpu`) for ``dtype``, or ``None`` (not in the table, or not listed)."""
    cls = _class_by_name(device_name)
    return None if cls is None else cls.peak(dtype)


# ----------------------------------------------------------------------------- emulation
def emulated() -> tuple[HardwareClass, HardwareClass] | None:
    """Return ``(emulated, real)`` CPU classes while ``$ACCELKIT_HARDWARE`` names another CPU
    class; ``None`` when unset, this CPU's own class, or a non-CPU class."""
    named = from_env()
    if named is None or named.kind != "cpu":
        return None
    real = probed_cpu()
    return None if named == real else (named, real)


def emulation_note() -> str:
    """Say what ``$ACCELKIT_HARDWARE`` emulates here, and what it does not ("" when inactive)."""
    pair = emulated()
    if pair is None:
        return ""
    named, real = pair
    if not named.emulate_env:
        return (f"deciding as {named.name} on a {real.name} CPU: only the course's decisions "
                "change (this class's instruction set cannot be imposed on this CPU)")
    caps = " ".join(f"{k}={v}" for k, v in named.emulate_env.items())
    return (f"running as {named.name}, emulated on a {real.name} CPU with {caps}: models the "
            "instruction set of PyTorch's kernels (vector width, no bf16 units); not XLA's CPU "
            "code (TensorFlow/JAX jit_compile still target this CPU), the core count, caches, "
            "clocks or other vendors' kernels")


def apply_emulation(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Put ``$ACCELKIT_HARDWARE``'s CPU-class ISA caps (``ONEDNN_MAX_CPU_ISA``,
    ``ATEN_CPU_CAPABILITY``; read at first compute, so ``import accelkit`` is early enough)
    into ``environ`` (default ``os.environ``), leaving set variables alone.  A capped ATen gets
    its own ``TORCHINDUCTOR_CACHE_DIR``: the shared cache does not key on the vector ISA
    (docs/notes/inductor-cache-vector-isa.md).  Returns the variables set."""
    env = os.environ if environ is None else environ
    pair = emulated()
    if pair is None:
        return {}
    done = {}
    for key, value in pair[0].emulate_env.items():
        if key not in env:
            env[key] = value
            done[key] = value
    if "ATEN_CPU_CAPABILITY" in pair[0].emulate_env and "TORCHINDUCTOR_CACHE_DIR" not in env:
        # named after the capability in force (a learner may have set it), not the class
        import getpass
        import tempfile

        user = "".join(c for c in getpass.getuser() if c.isalnum()) or "user"
        isa = "".join(c for c in env["ATEN_CPU_CAPABILITY"].lower() if c.isalnum()) or "default"
        done["TORCHINDUCTOR_CACHE_DIR"] = env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(
            tempfile.gettempdir(), f"torchinductor_{user}_isa_{isa}")
    return done
