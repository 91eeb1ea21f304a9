"""Hardware classes as data: the one table every per-hardware decision of the course reads.

A *hardware class* is a kind of machine a learner meets (a CPU without bf16 units, a Colab T4,
an H200, a TPU v5e ...).  :data:`CLASSES` says what each has (native bf16/fp16 matrix units,
TF32, FP8, memory, dense datasheet peaks with their source) and every decision the course
takes from it: the autocast dtype, whether a GradScaler is needed, the Keras mixed policy,
the size profile, and the floor of each speedup claim the notebooks assert (with why it
holds, or ``None``: no claim on that class, the notebook shows the measurement only).

This module owns the table, the rules read from it and the mapping from probed facts to a
class: :func:`classify_cpu` (which CPUs have bf16 units), :func:`classify_gpu` (which GPUs
have fast fp16/bf16 units, by product name, else by compute capability),
:attr:`HardwareClass.tensor_cores`, :func:`for_device`, and the datasheet peaks
(:func:`datasheet_tflops`).  Elsewhere: the probing itself in :mod:`accelkit.device` (which
never initialises CUDA); emulating a CPU class on this CPU (``$ACCELKIT_HARDWARE``'s
instruction-set caps) in :mod:`accelkit.emulation`; the AMP objects built from a class in
:mod:`accelkit.precision`; ``doctor --hardware NAME`` in :mod:`accelkit.env`.

The claims themselves (each claim's floor and reason per kind of hardware) are written in
:mod:`accelkit.claims`; a class holds the ones that apply to it (:meth:`HardwareClass.claim`).
``Claim`` and ``CLAIMS`` are re-exported here.

Floors are re-derived from measurements, never from one good run: a floor must hold in every
mode of its class (this course's CI CPU switches between two bf16 speeds, 0.37 and 1.05
TFLOP/s on a 1024² matmul, while fp32 stays at 0.21), and it is checked against the
confidence interval of interleaved pairs (:func:`accelkit.bench.compare`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelkit import claims, dtypes
from accelkit.claims import CLAIMS, Claim

HARDWARE_ENV = "ACCELKIT_HARDWARE"


@dataclass(frozen=True)
class HardwareClass:
    """One kind of machine and every decision the course takes on it.

    Attributes:
        name: the short key (``"t4"``), for ``doctor --hardware`` and ``$ACCELKIT_HARDWARE``.
        title: a readable name with its architecture.
        kind: ``"cpu"``, ``"cuda"``, ``"rocm"``, ``"mps"`` or ``"tpu"``.
        bf16_units, fp16_units: native matrix units for that dtype (a speedup is expected).
        tf32, fp8: TF32 / FP8 tensor-core formats.
        memory_gib: device memory (``None`` for CPUs: it is the machine's RAM).
        peak_tflops: dense (no sparsity) datasheet peaks per dtype, TFLOP/s.
        bandwidth_gbps: datasheet memory bandwidth, GB/s (10**9 B/s).
        source: where the datasheet numbers come from.
        amp_dtype: autocast dtype, ``"bfloat16"`` or ``"float16"``.
        grad_scaler: fp16 training needs loss scaling (``torch.amp.GradScaler``).
        keras_policy: the Keras mixed-precision policy (``mixed_float16`` on every GPU, as
            the TensorFlow mixed-precision guide advises; ``mixed_bfloat16`` on CPUs/TPUs and
            on Apple MPS machines, where TensorFlow computes on the CPU).
        profile: the size profile ``auto`` resolves to.
        claims: floor and reason per entry of :data:`CLAIMS`.
        emulate_env: environment that makes this course's CI CPU compute like this class
            (oneDNN / ATen instruction-set caps), empty where it cannot.
        compute_capability: the NVIDIA ``(major, minor)``, or ``None``.
        note: what a learner should know about this class.
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

    @property
    def tensor_cores(self) -> bool:
        """True for a GPU with fp16 matrix units: NVIDIA sm_70+ (Volta on), or AMD CDNA."""
        if self.kind == "rocm":
            return True
        return self.kind == "cuda" and (self.compute_capability or (0, 0)) >= (7, 0)

    def __str__(self) -> str:
        return f"{self.name} ({self.title})"


def _cpu(name: str, title: str, bf16: bool, note: str, emulate: dict[str, str],
         fp16: bool = False) -> HardwareClass:
    return HardwareClass(name, title, "cpu", bf16, fp16, profile="ci",
                         claims=claims.for_cpu(name),
                         source="measured by ak.roofline (CPUs vary too much for one datasheet)",
                         note=note, emulate_env=emulate)


def _gpu(name: str, title: str, cc: tuple[int, int], memory_gib: float,
         peaks: dict[str, float], bandwidth: float, source: str, note: str = "",
         kind: str = "cuda") -> HardwareClass:
    bf16 = "bf16" in peaks
    return HardwareClass(
        name, title, kind, bf16_units=bf16, fp16_units=True, tf32="tf32" in peaks,
        fp8="fp8" in peaks, memory_gib=memory_gib, peak_tflops=peaks, bandwidth_gbps=bandwidth,
        source=source, amp_dtype="bfloat16" if bf16 else "float16", grad_scaler=not bf16,
        keras_policy="mixed_float16",
        claims=claims.for_gpu(kind, cc, bf16=bf16, tf32="tf32" in peaks),
        compute_capability=cc if kind == "cuda" else None, note=note)


_AVX2_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
_AVX512_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "ATEN_CPU_CAPABILITY": "avx512"}

#: The hardware classes, CPUs first.  Datasheet peaks are dense (no structured sparsity).
CLASSES: dict[str, HardwareClass] = {c.name: c for c in (
    _cpu("cpu-avx2", "x86 CPU with AVX2 only (most laptops: Intel Core 12th gen+, AMD before "
         "Zen 4)", False, "bf16 has no units here: the lessons show its cost and turn to what "
         "helps (fp32 threads, torch.compile, fused optimizers)", _AVX2_ENV),
    _cpu("cpu-avx512", "x86 CPU with AVX-512 but no bf16 units (Skylake-X to Ice Lake)", False,
         "AVX-512 speeds fp32; bf16 is still converted to fp32", _AVX512_ENV),
    _cpu("cpu-avx512-bf16",
         "x86 CPU with AVX512-BF16, no AMX (Cooper Lake, AMD Zen 4/5, VMs that hide AMX)", True,
         "bf16 dot products (VDPBF16PS) do twice the multiply-adds of fp32 per instruction, "
         "but how much of that oneDNN gets varies: measure before you switch", {}),
    _cpu("cpu-amx", "x86 CPU with AMX (Intel Sapphire Rapids and newer)", True,
         "AMX tiles multiply bf16 (and with AMX-FP16, fp16) many times faster than fp32; on "
         "shared VMs the speed can switch between modes", {}),
    _cpu("cpu-arm64", "64-bit Arm CPU (Graviton, Ampere, Linux on Apple silicon)", False,
         "bf16 units exist on some (Graviton 3: BF16 extension); the course makes no bf16 "
         "claim on Arm CPUs", {}),
    HardwareClass(
        "apple-mps", "Apple M-series GPU (Metal Performance Shaders)", "mps", bf16_units=False,
        fp16_units=True, amp_dtype="float16", grad_scaler=True, keras_policy="mixed_bfloat16",
        source="Apple does not publish per-dtype peaks; ak.roofline measures them",
        claims={"bf16_matmul": Claim(None, "bf16 on MPS needs macOS 14+ and has no fast path "
                                     "on M1/M2"),
                "amp_step_torch": Claim(None, "fp16 autocast on MPS is new; no measurement backs "
                                        "a floor"),
                "pinned_copy": Claim(None, "unified memory: nothing to pin"),
                "conv_bn_fold": Claim(0.7, "one memory-bound pass saved: rules out a slowdown")},
        note="unified memory; no NCCL (gloo, start method spawn on macOS); TensorFlow sees no "
             "Apple GPU without the tensorflow-metal plug-in (not in the pinned set), so Keras "
             "runs on the CPU with the CPU's policy"),
    _gpu("cuda-pre-volta", "NVIDIA GPU before Volta (Pascal sm_6x, no tensor cores)", (6, 0),
         16, {"fp32": 10.6}, 732, "NVIDIA P100 datasheet (SXM2)",
         "no tensor cores: fp16 gains come from bytes only"),
    _gpu("v100", "NVIDIA V100 (Volta, sm_70)", (7, 0), 32,
         {"fp32": 15.7, "fp16": 125.0}, 900, "NVIDIA V100 datasheet (SXM2)"),
    _gpu("t4", "NVIDIA T4 (Turing, sm_75; Colab's free GPU)", (7, 5), 16,
         {"fp32": 8.1, "fp16": 65.0}, 320, "NVIDIA T4 datasheet",
         "fp16 tensor cores only; torch.cuda.is_bf16_supported() says True because it counts "
         "emulation, but bf16 is slow here"),
    _gpu("a10", "NVIDIA A10 / A10G (Ampere, sm_86)", (8, 6), 24,
         {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}, 600,
         "NVIDIA A10 datasheet"),
    _gpu("l4", "NVIDIA L4 (Ada, sm_89)", (8, 9), 24,
         {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5}, 300,
         "NVIDIA L4 datasheet"),
    _gpu("a100", "NVIDIA A100 (Ampere, sm_80)", (8, 0), 80,
         {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, 2039,
         "NVIDIA A100 datasheet (80 GB SXM)"),
    _gpu("h100-pcie", "NVIDIA H100 PCIe (Hopper, sm_90)", (9, 0), 80,
         {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0}, 2000,
         "NVIDIA H100 datasheet (PCIe)"),
    _gpu("h100", "NVIDIA H100 SXM (Hopper, sm_90)", (9, 0), 80,
         {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, 3350,
         "NVIDIA H100 datasheet (SXM)"),
    _gpu("h200", "NVIDIA H200 (Hopper, sm_90)", (9, 0), 141,
         {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, 4800,
         "NVIDIA H200 datasheet (SXM)"),
    _gpu("mi300x", "AMD Instinct MI300X (CDNA 3, ROCm)", (9, 4), 192,
         {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9}, 5300,
         "AMD Instinct MI300X datasheet", "PyTorch's ROCm build uses torch.cuda and RCCL",
         kind="rocm"),
    HardwareClass(
        "tpu-v5e", "Google TPU v5e (Colab's TPU runtime: one chip, v5e-1)", "tpu",
        bf16_units=True, fp16_units=False, memory_gib=16, peak_tflops={"bf16": 197.0},
        bandwidth_gbps=819, source="Google Cloud TPU v5e documentation", amp_dtype="bfloat16",
        keras_policy="mixed_bfloat16",
        claims={"steps_per_execution": Claim(1.2, "each host round trip costs far more than a "
                                             "small step on a TPU")},
        note="the MXUs multiply in bf16; programs are compiled by XLA (static shapes)"),
)}

# Name fragments that identify a GPU class from its product name, most specific first.
_GPU_NAMES = (("H100 PCIe", "h100-pcie"), ("H200", "h200"), ("H100", "h100"),
              ("A100", "a100"), ("A10", "a10"), ("L4", "l4"), ("T4", "t4"), ("V100", "v100"),
              ("MI300", "mi300x"))


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
    """Return the CPU class for a set of ISA flags (from :func:`accelkit.device.cpu_features`).

    Args:
        features: ``{"avx2": bool, "avx512f": bool, "avx512_bf16": bool, "amx_bf16": bool}``.
        machine: ``platform.machine()``; Arm machines get ``cpu-arm64``.
    """
    if machine.lower() in ("arm64", "aarch64"):
        return CLASSES["cpu-arm64"]
    if features.get("amx_bf16"):
        return CLASSES["cpu-amx"]
    if features.get("avx512_bf16"):
        return CLASSES["cpu-avx512-bf16"]
    if features.get("avx512f"):
        return CLASSES["cpu-avx512"]
    return CLASSES["cpu-avx2"]


def _class_by_name(name: str) -> HardwareClass | None:
    """Return the GPU class whose name fragment ``name`` contains, or ``None``.

    A fragment matches only where no digit follows it, so an ``"L40S"`` is not an ``"L4"``
    and an ``"RTX A1000"`` not an ``"A100"`` (an ``"A10G"`` is an ``"A10"``).
    """
    for fragment, cls in _GPU_NAMES:
        if re.search(re.escape(fragment) + r"(?![0-9])", name, re.IGNORECASE):
            return CLASSES[cls]
    return None


def classify_gpu(name: str, compute_capability: Sequence[int] | None,
                 kind: str = "cuda") -> HardwareClass:
    """Return the GPU class from its product name, else from its compute capability.

    This is the one place a GPU's fast fp16/bf16 units are decided (read them from the class:
    ``bf16_units``, ``fp16_units``, ``tensor_cores``).

    Args:
        name: the product name (``"NVIDIA H200"``, ``"Tesla T4"``).
        compute_capability: ``(major, minor)`` (a list from JSON is fine), or ``None`` when
            unknown (ROCm).
        kind: ``"cuda"`` or ``"rocm"``.

    Returns:
        The class; an unknown NVIDIA GPU gets the class of the newest architecture at or
        below its compute capability (a newer GPU is treated as an H100).
    """
    by_name = _class_by_name(name)
    if by_name is not None:
        return by_name
    if kind == "rocm":
        return CLASSES["mi300x"]
    cc = tuple(compute_capability) if compute_capability else (0, 0)
    by_cc = sorted((c.compute_capability, c.name) for c in CLASSES.values()
                   if c.kind == "cuda" and c.compute_capability and c.name != "h100-pcie")
    chosen = "cuda-pre-volta"
    for c_cc, c_name in by_cc:
        if c_cc <= cc and c_name != "h200":
            chosen = c_name
    return CLASSES[chosen]


def from_env() -> HardwareClass | None:
    """Return the class named by ``$ACCELKIT_HARDWARE``, or ``None`` when it is unset.

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
    """Return the hardware class of a PyTorch device on this machine.

    ``$ACCELKIT_HARDWARE`` overrides the probe for a CPU device (the course's decisions then
    follow that class).  Probing goes through :mod:`accelkit.device`, which reads GPU facts
    from NVML and never initialises CUDA.

    Args:
        device: ``"cpu"``, ``"cuda:0"``, ``"mps"``, ``"xla"`` or a ``torch.device``; default:
            the best device here.
    """
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
    return classify_gpu(info.description, info.compute_capability, info.kind)


def datasheet_tflops(device_name: str, dtype: Any) -> float | None:
    """Return a GPU's dense datasheet peak in TFLOP/s for ``dtype``, or ``None`` if unknown.

    Read from :data:`CLASSES` (``peak_tflops``, each class naming its datasheet in
    ``source``); the product name is matched as in :func:`classify_gpu`.  CPUs, GPUs not in
    the table and dtypes without a listed peak give ``None``.

    Args:
        device_name: the product name, e.g. ``torch.cuda.get_device_name()``
            (``"NVIDIA A100-SXM4-80GB"``).
        dtype: ``"fp32"``, ``"tf32"``, ``"bf16"``, ``"fp16"``, ``"fp8"``, a long name
            (``"bfloat16"``) or a torch dtype (names read by :func:`accelkit.dtypes.short`).

    Example: ``datasheet_tflops("NVIDIA A100-SXM4-80GB", "bf16")  # 312.0``
    """
    cls = _class_by_name(device_name)
    return None if cls is None else cls.peak_tflops.get(dtypes.short(dtype))


__all__ = [
    "CLAIMS",
    "CLASSES",
    "HARDWARE_ENV",
    "Claim",
    "HardwareClass",
    "classify_cpu",
    "classify_gpu",
    "datasheet_tflops",
    "for_device",
    "from_env",
    "get",
    "probed_cpu",
]
