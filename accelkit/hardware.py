"""Hardware classes as data: the one table every per-hardware decision of the course reads.

A *hardware class* is a kind of machine a learner meets (a CPU without bf16 units, a Colab T4,
an H200, a TPU v5e ...).  :data:`CLASSES` says what each has (native bf16/fp16 matrix units,
TF32, FP8, memory, dense datasheet peaks with their source) and every decision the course
takes from it: the autocast dtype, whether a GradScaler is needed, the Keras mixed policy,
the size profile, and the floor of each speedup claim the notebooks assert (with why it
holds, or ``None``: no claim on that class, the notebook shows the measurement only).

This module owns the table, the rules read from it and the mapping from probed facts to a
class: :func:`classify_cpu` (which CPUs have bf16 units), :func:`classify_gpu` (which GPUs
have fast fp16/bf16 units, by product name, else a *generic* class of the architecture that
knows no peak), :attr:`HardwareClass.tensor_cores`, :func:`for_device`, the datasheet peaks
(:func:`datasheet_tflops`, and :func:`datasheet_peak` for MFU: "no peak known" rather than a
borrowed one) and the attention kernel PyTorch picks (:func:`sdpa_backend`).  Where the CPUs
of one class disagree (bf16 on AVX512-BF16 without AMX: a Xeon VM 0.55x of fp32, an AMD Zen 4
2.9x), the class says what the hardware *can* do (``bf16_measured``) and
:func:`accelkit.precision.amp_path` measures what it *does* on the learner's machine.

Elsewhere: the probing itself in :mod:`accelkit.device` (which never initialises CUDA);
emulating a CPU class on this CPU (``$ACCELKIT_HARDWARE``'s instruction-set caps) in
:mod:`accelkit.emulation`; the AMP objects built from a class in :mod:`accelkit.precision`;
``doctor --hardware NAME`` in :mod:`accelkit.env`.

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
        keras_policy: the Keras mixed-precision policy: ``mixed_bfloat16`` where the class
            has bf16 units (GPUs from Ampere, sm_80, on: no loss scaling needed; CPUs, TPUs)
            and on Apple MPS machines (TensorFlow computes on the CPU there);
            ``mixed_float16`` with ``LossScaleOptimizer`` on GPUs with fp16 units only (T4,
            V100) or none (before Volta), as the TensorFlow mixed-precision guide advises.
        profile: the size profile ``auto`` resolves to.
        claims: floor and reason per entry of :data:`CLAIMS`.
        emulate_env: environment that makes this course's CI CPU compute like this class
            (oneDNN / ATen instruction-set caps), empty where it cannot.
        compute_capability: the NVIDIA ``(major, minor)``, or ``None``.
        note: what a learner should know about this class.
        sdpa_backends: the ``torch.nn.attention.SDPBackend`` names PyTorch tries for fp16/bf16
            attention on this hardware, in its order (read them with :func:`sdpa_backend`).
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
        """Return this class's dense datasheet peak for ``dtype`` in TFLOP/s, or ``None``.

        ``None`` for CPUs, for GPUs whose product is not in the table (the generic classes:
        no peak is borrowed from another GPU) and for dtypes the datasheet does not list.

        Args:
            dtype: ``"bf16"``, ``"bfloat16"``, ``torch.bfloat16`` ... (read by
                :func:`accelkit.dtypes.short`).
        """
        return self.peak_tflops.get(dtypes.short(dtype))

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
                         note=note, emulate_env=emulate, sdpa_backends=_SDPA_CPU,
                         bf16_measured=name in claims.MEASURED_BF16_CLASSES)


def _sdpa_cuda(cc: tuple[int, int]) -> tuple[str, ...]:
    """PyTorch's SDPA backends for fp16/bf16 on an NVIDIA GPU of compute capability ``cc``.

    From PyTorch's ``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``: the flash kernel
    (FlashAttention-2) needs sm_80 to sm_121, memory-efficient attention sm_50 to sm_121, the
    default order is flash, memory-efficient, math (``torch._C._get_sdp_priority_order()``),
    and ``check_prefer_cudnn_attention`` puts cuDNN attention first on sm_90 and sm_100/103
    where the runtime cuDNN is newer than 9.15 (:func:`sdpa_backend` checks the version).
    """
    if cc < (5, 0):
        return ("MATH",)
    if cc < (8, 0):
        return ("EFFICIENT_ATTENTION", "MATH")
    cudnn = ("CUDNN_ATTENTION",) if cc in ((9, 0), (10, 0), (10, 3)) else ()
    return cudnn + ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


#: SDPA on CPUs: PyTorch's C++ flash kernel (tiled, never stores the T x T scores; any float
#: dtype), then math (``priority_order_cpp`` in ``sdp_utils_cpp.cpp``).
_SDPA_CPU = ("FLASH_ATTENTION", "MATH")


def _gpu(name: str, title: str, cc: tuple[int, int], memory_gib: float | None,
         peaks: dict[str, float], bandwidth: float | None, source: str, note: str = "",
         kind: str = "cuda") -> HardwareClass:
    """Build a GPU class: its units from the architecture, its claims from its own peaks.

    NVIDIA: fp16 tensor cores from Volta (sm_70), bf16 and TF32 from Ampere (sm_80), FP8 from
    Ada/Hopper (sm_89); before Volta there are none.  ROCm (CDNA): read from the listed peaks,
    bf16 matrix cores assumed where no peak is listed.  ``peaks`` are the datasheet's dense
    figures; ``{}`` for a generic class (a GPU not in the table: no peak is borrowed).
    """
    if kind == "cuda":
        fp16, bf16, tf32, fp8 = cc >= (7, 0), cc >= (8, 0), cc >= (8, 0), cc >= (8, 9)
    else:
        fp16, bf16 = True, "bf16" in peaks or not peaks
        tf32, fp8 = "tf32" in peaks, "fp8" in peaks
    return HardwareClass(
        name, title, kind, bf16_units=bf16, fp16_units=fp16, tf32=tf32, fp8=fp8,
        memory_gib=memory_gib, peak_tflops=peaks, bandwidth_gbps=bandwidth, source=source,
        amp_dtype="bfloat16" if bf16 else "float16", grad_scaler=not bf16,
        keras_policy="mixed_bfloat16" if bf16 else "mixed_float16",
        claims=claims.for_gpu(kind, cc, bf16=bf16, tf32=tf32, peaks=peaks),
        compute_capability=cc if kind == "cuda" else None, note=note,
        sdpa_backends=_sdpa_cuda(cc) if kind == "cuda" else
        ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH"))


_AVX2_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
_AVX512_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "ATEN_CPU_CAPABILITY": "avx512"}
#: The ``source`` of a generic GPU class: its product is not in the table.
NO_DATASHEET = ("no datasheet: this GPU's product name is not in accelkit's table, so no peak "
                "is known and none is borrowed from another GPU (MFU needs one: add the class "
                "with its datasheet, or divide by a matmul measured with ak.roofline)")
_GENERIC = "decided from the compute capability; peaks unknown"

#: The hardware classes, CPUs first.  Datasheet peaks are dense (no structured sparsity): where
#: a datasheet lists only sparse tensor figures (marked *), they are halved here.
CLASSES: dict[str, HardwareClass] = {c.name: c for c in (
    _cpu("cpu-avx2", "x86 CPU with AVX2 only (most laptops: Intel Core 12th gen+, AMD before "
         "Zen 4)", False, "bf16 has no units here: the lessons show its cost and turn to what "
         "helps (fp32 threads, torch.compile, fused optimizers)", _AVX2_ENV),
    _cpu("cpu-avx512", "x86 CPU with AVX-512 but no bf16 units (Skylake-X to Ice Lake)", False,
         "AVX-512 speeds fp32; bf16 is still converted to fp32", _AVX512_ENV),
    _cpu("cpu-avx512-bf16",
         "x86 CPU with AVX512-BF16, no AMX (Cooper Lake, AMD Zen 4/5, VMs that hide AMX)", True,
         "bf16 dot products (VDPBF16PS) do twice the multiply-adds of fp32 per instruction, "
         "but how much of that oneDNN gets differs between the CPUs of this class ("
         + claims.XEON_VM_BF16 + "; " + claims.ZEN4_BF16 + "): the class says what the "
         "hardware can do, and a short measurement on your machine (ak.precision.amp_path) "
         "decides the bf16 path and its claims", {}),
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
                "conv_bn_fold": Claim(None, "one memory-bound pass saved; not measured on an "
                                      "Apple GPU by this course: an illustration")},
        note="unified memory; no NCCL (gloo, start method spawn on macOS); TensorFlow sees no "
             "Apple GPU without the tensorflow-metal plug-in (not in the pinned set), so Keras "
             "runs on the CPU with the CPU's policy", sdpa_backends=("MATH",)),
    # generic NVIDIA classes: a GPU whose product name is not in the table below
    _gpu("cuda-pre-volta", "NVIDIA GPU before Volta, not in the table (Maxwell/Pascal, sm_5x-6x: "
         "no tensor cores)", (6, 0), None, {}, None, NO_DATASHEET,
         "no tensor cores: fp16 gains come from bytes only; " + _GENERIC),
    _gpu("cuda-volta-turing", "NVIDIA GPU with fp16 tensor cores only, not in the table "
         "(Volta/Turing, sm_70-75)", (7, 0), None, {}, None, NO_DATASHEET,
         "fp16 with a GradScaler; bf16 is emulated (slow) here; " + _GENERIC),
    _gpu("cuda-ampere-plus", "NVIDIA GPU with bf16 tensor cores, not in the table (Ampere or "
         "newer, sm_80+)", (8, 0), None, {}, None, NO_DATASHEET,
         "bf16 without a scaler; " + _GENERIC),
    _gpu("p100", "NVIDIA Tesla P100 PCIe 16 GB (Pascal, sm_60: no tensor cores; Kaggle's P100)",
         (6, 0), 16, {"fp32": 9.3}, 732,
         "NVIDIA Tesla P100 PCIe datasheet (16 GB): fp32 9.3 TFLOP/s, 732 GB/s; its fp16 18.7 "
         "TFLOP/s is half2 arithmetic that sums in fp16, which PyTorch's GEMMs do not use (they "
         "sum in fp32), so no fp16 peak is listed",
         "no tensor cores: autocast (fp16 + GradScaler) halves the bytes, not the matmul time"),
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
    _gpu("rtx-4090", "NVIDIA GeForce RTX 4090 (Ada, sm_89)", (8, 9), 24,
         {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3}, 1008,
         "NVIDIA Ada GPU architecture whitepaper (v2.01), appendix: GeForce RTX 4090, tensor "
         "figures with fp32 accumulation (what PyTorch's GEMMs use; GeForce cards run them at "
         "half the fp16-accumulate rate)",
         "a GeForce card: bf16 is only 2x fp32 on its datasheet and TF32 no faster than fp32"),
    _gpu("l40s", "NVIDIA L40S (Ada, sm_89)", (8, 9), 48,
         {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0}, 864,
         "NVIDIA L40S datasheet (dense figures; the sheet's starred ones are with sparsity)"),
    _gpu("a100-40gb", "NVIDIA A100 40 GB (Ampere, sm_80; Colab's A100)", (8, 0), 40,
         {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, 1555,
         "NVIDIA A100 datasheet (40 GB, SXM and PCIe: 1,555 GB/s)"),
    _gpu("a100", "NVIDIA A100 80 GB (Ampere, sm_80)", (8, 0), 80,
         {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, 2039,
         "NVIDIA A100 datasheet (80 GB SXM)"),
    _gpu("h20", "NVIDIA H20 (Hopper, sm_90; the export part for China)", (9, 0), 96,
         {"fp32": 44.0, "tf32": 74.0, "bf16": 148.0, "fp16": 148.0, "fp8": 296.0}, 4000,
         "NVIDIA H20 specifications as OEM and cloud product pages list them (NVIDIA publishes "
         "no public datasheet): 96 GB HBM3, 4.0 TB/s, dense bf16 148 TFLOP/s",
         "Hopper with about 15% of an H100's tensor throughput: the tensor-core gains are "
         "smaller here"),
    _gpu("h100-pcie", "NVIDIA H100 PCIe (Hopper, sm_90)", (9, 0), 80,
         {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0}, 2000,
         "NVIDIA H100 datasheet (PCIe)"),
    _gpu("h100", "NVIDIA H100 SXM (Hopper, sm_90)", (9, 0), 80,
         {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, 3350,
         "NVIDIA H100 datasheet (SXM)"),
    _gpu("h200", "NVIDIA H200 (Hopper, sm_90)", (9, 0), 141,
         {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, 4800,
         "NVIDIA H200 datasheet (SXM)"),
    _gpu("b200", "NVIDIA B200 (Blackwell, sm_100)", (10, 0), 180,
         {"fp32": 75.0, "tf32": 1100.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0}, 7700,
         "NVIDIA HGX B200 specifications, per GPU at 1,000 W (180 GB HBM3e, 7.7 TB/s); the "
         "sheet's tensor figures are with sparsity, halved here"),
    _gpu("mi300x", "AMD Instinct MI300X (CDNA 3, ROCm)", (9, 4), 192,
         {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9}, 5300,
         "AMD Instinct MI300X datasheet", "PyTorch's ROCm build uses torch.cuda and RCCL",
         kind="rocm"),
    _gpu("rocm-other", "AMD GPU not in the table (ROCm)", (0, 0), None, {}, None, NO_DATASHEET,
         "bf16 matrix cores assumed (CDNA); PyTorch's ROCm build uses torch.cuda and RCCL; "
         + _GENERIC.replace("the compute capability", "ROCm"), kind="rocm"),
    HardwareClass(
        "tpu-v5e", "Google TPU v5e (Colab's TPU runtime: one chip, v5e-1)", "tpu",
        bf16_units=True, fp16_units=False, memory_gib=16, peak_tflops={"bf16": 197.0},
        bandwidth_gbps=819, source="Google Cloud TPU v5e documentation", amp_dtype="bfloat16",
        keras_policy="mixed_bfloat16",
        claims={"steps_per_execution": Claim(1.2, "each host round trip costs far more than a "
                                             "small step on a TPU")},
        note="the MXUs multiply in bf16; programs are compiled by XLA (static shapes)",
        sdpa_backends=("MATH",)),
)}

#: Product names that identify a GPU class, most specific first: a regular expression
#: (case-insensitive) per class.  A fragment matches only where no letter or digit touches it
#: (an ``"L40S"`` is not an ``"L4"``, an ``"RTX A1000"`` not an ``"A100"``, a ``"GB200"`` not a
#: ``"B200"``; an ``"A10G"`` is an ``"A10"``).  An A100 is the 40 GB part where its name (or,
#: without one, its memory) says so.
_GPU_NAMES: tuple[tuple[str, str], ...] = (
    (r"H100[ -]PCIe", "h100-pcie"), (r"H200", "h200"), (r"H100(?![ -]?NVL)", "h100"),
    (r"H20", "h20"),
    (r"B200", "b200"), (r"A100\b.*\b40\s?GB", "a100-40gb"), (r"A100", "a100"),
    (r"A10G?", "a10"), (r"L40S", "l40s"), (r"L4", "l4"), (r"RTX 4090(?! ?D\b)", "rtx-4090"),
    (r"T4", "t4"), (r"V100", "v100"), (r"P100(?![ -]SXM)", "p100"), (r"MI300X?", "mi300x"))


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


def _class_by_name(name: str, memory_bytes: int | None = None) -> HardwareClass | None:
    """Return the GPU class whose name pattern (:data:`_GPU_NAMES`) ``name`` contains, or ``None``.

    A pattern matches only where no letter or digit touches it, so an ``"L40S"`` is not an
    ``"L4"``, an ``"RTX A1000"`` not an ``"A100"`` and a ``"GB200"`` not a ``"B200"`` (an
    ``"A10G"`` is an ``"A10"``).  An A100 whose name gives no memory size is the 40 GB part
    when ``memory_bytes`` is under 60 GiB.
    """
    for pattern, cls in _GPU_NAMES:
        if re.search(r"(?<![A-Za-z0-9])" + pattern + r"(?![A-Za-z0-9])", name, re.IGNORECASE):
            if (cls == "a100" and memory_bytes and memory_bytes < 60 * 2**30
                    and not re.search(r"80\s?GB", name, re.IGNORECASE)):
                return CLASSES["a100-40gb"]
            return CLASSES[cls]
    return None


#: The generic NVIDIA classes by architecture (a GPU whose product name is not in the table):
#: ``(lowest compute capability, class name)``, newest last.
_GENERIC_CUDA = (((0, 0), "cuda-pre-volta"), ((7, 0), "cuda-volta-turing"),
                 ((8, 0), "cuda-ampere-plus"))


def classify_gpu(name: str, compute_capability: Sequence[int] | None,
                 kind: str = "cuda", memory_bytes: int | None = None) -> HardwareClass:
    """Return the GPU class from its product name, else a generic class from its architecture.

    This is the one place a GPU's fast fp16/bf16 units are decided (read them from the class:
    ``bf16_units``, ``fp16_units``, ``tensor_cores``).  A GPU whose product name is not in the
    table gets the *generic* class of its architecture (``cuda-pre-volta``,
    ``cuda-volta-turing``, ``cuda-ampere-plus``; ``rocm-other`` on ROCm): its decisions
    (autocast dtype, GradScaler, Keras policy, SDPA backend, floors that hold on every GPU of
    that architecture) but no datasheet peak, memory or bandwidth, so nothing downstream
    divides by another GPU's peak (an L40S is not an L4, a B200 not an H100).

    Args:
        name: the product name (``"NVIDIA H200"``, ``"Tesla T4"``).
        compute_capability: ``(major, minor)`` (a list from JSON is fine), or ``None`` when
            unknown (ROCm; an NVIDIA GPU without one is treated as pre-Volta: no claim).
        kind: ``"cuda"`` or ``"rocm"``.
        memory_bytes: the device's memory, which tells an A100 40 GB from an 80 GB where its
            name does not.

    Returns:
        The class.

    Example: ``classify_gpu("NVIDIA L40S", (8, 9)).name  # "l40s"``
    """
    by_name = _class_by_name(name, memory_bytes)
    if by_name is not None:
        return by_name
    if kind == "rocm":
        return CLASSES["rocm-other"]
    cc = tuple(compute_capability) if compute_capability else (0, 0)
    return CLASSES[[c for low, c in _GENERIC_CUDA if cc >= low][-1]]


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
    return classify_gpu(info.description, info.compute_capability, info.kind, info.memory_bytes)


def datasheet_tflops(device_name: str, dtype: Any) -> float | None:
    """Return a GPU's dense datasheet peak in TFLOP/s for ``dtype``, or ``None`` if unknown.

    Read from :data:`CLASSES` (``peak_tflops``, each class naming its datasheet in
    ``source``); the product name is matched as in :func:`classify_gpu`.  CPUs, GPUs not in
    the table and dtypes without a listed peak give ``None``: no peak is borrowed.

    Args:
        device_name: the product name, e.g. ``torch.cuda.get_device_name()``
            (``"NVIDIA A100-SXM4-80GB"``).
        dtype: ``"fp32"``, ``"tf32"``, ``"bf16"``, ``"fp16"``, ``"fp8"``, a long name
            (``"bfloat16"``) or a torch dtype (names read by :func:`accelkit.dtypes.short`).

    Example: ``datasheet_tflops("NVIDIA A100-SXM4-80GB", "bf16")  # 312.0``
    """
    cls = _class_by_name(device_name)
    return None if cls is None else cls.peak(dtype)


@dataclass(frozen=True)
class PeakChoice:
    """The peak an MFU divides by, or why there is none.

    Attributes:
        tflops: the dense datasheet peak in TFLOP/s, or ``None`` when none is known.
        source: where it comes from, or (``tflops is None``) why there is none, in words.
    """

    tflops: float | None
    source: str

    def __str__(self) -> str:
        return (f"{self.tflops:g} TFLOP/s ({self.source})" if self.tflops is not None
                else f"no peak known: {self.source}")


def datasheet_peak(cls: HardwareClass, dtype: Any) -> PeakChoice:
    """Return the dense datasheet peak of ``dtype`` on ``cls`` for MFU, or say why there is none.

    MFU (tokens/s x FLOPs per token / peak; PaLM, appendix B) is only meaningful against the
    peak of *this* device in the dtype the matmuls run in.  A generic class (a GPU whose
    product is not in the table) has none, and none is borrowed from a GPU of the same
    compute capability; a CPU has no datasheet the course trusts.  Callers then report "no
    peak known" or divide by a matmul measured now (:mod:`accelkit.roofline`) and say so.

    Args:
        cls: the hardware class (:func:`for_device`).
        dtype: the matmuls' dtype (``"bf16"``, ``torch.float32`` ...).

    Returns:
        A :class:`PeakChoice`; ``.tflops`` is ``None`` where no peak is known.

    Example: ``datasheet_peak(get("cuda-ampere-plus"), "bf16").tflops  # None``
    """
    short = dtypes.short(dtype)
    peak = cls.peak(short)
    if peak is not None:
        return PeakChoice(peak, f"{cls.name} datasheet, dense {short}: {cls.source}")
    if cls.kind == "cpu":
        why = "CPUs have no datasheet peak the course trusts: measure a matmul (ak.roofline)"
    elif not cls.peak_tflops:
        why = f"{cls.title}: {NO_DATASHEET}"
    else:
        why = f"the {cls.name} datasheet lists no dense {short} peak ({cls.source})"
    return PeakChoice(None, why)


#: What each ``torch.nn.attention.SDPBackend`` is, for :func:`sdpa_backend`'s sentence.
SDPA_KERNELS = {
    "CUDNN_ATTENTION": "cuDNN's fused attention (PyTorch puts it first on sm_90 and sm_100)",
    "FLASH_ATTENTION": "FlashAttention-2 (PyTorch's flash kernel: sm_80 to sm_121, fp16/bf16)",
    "EFFICIENT_ATTENTION": "memory-efficient attention (xFormers' CUTLASS kernel, sm_50 on; "
                           "flash needs sm_80+)",
    "MATH": "the math backend (the formula written out: the T x T scores are stored)",
}
_CPU_FLASH = ("PyTorch's CPU flash kernel (a tiled C++ loop that never stores the T x T "
              "scores, any float dtype)")


@dataclass(frozen=True)
class SdpaChoice:
    """The ``scaled_dot_product_attention`` backend PyTorch is expected to pick, and why.

    Attributes:
        backend: an ``SDPBackend`` name (``"FLASH_ATTENTION"``, ``"EFFICIENT_ATTENTION"``,
            ``"CUDNN_ATTENTION"``, ``"MATH"``): ``getattr(SDPBackend, choice.backend)``.
        order: every backend this hardware and dtype allow, in PyTorch's order.
        reason: one sentence for a notebook.
    """

    backend: str
    order: tuple[str, ...]
    reason: str

    def __str__(self) -> str:
        return self.reason


def sdpa_backend(cls: HardwareClass, dtype: Any = "bfloat16", *,
                 cudnn_version: int | None = None) -> SdpaChoice:
    """Return the SDPA backend PyTorch picks for causal attention on ``cls`` in ``dtype``.

    Read from the class's ``sdpa_backends`` (PyTorch's order for that architecture:
    ``sdp_utils.cpp``) for inputs every kernel takes (dense, head dim a multiple of 8 up to
    128, no dropout): flash needs sm_80+ and fp16/bf16, so a T4/V100 (and fp32 on any NVIDIA
    GPU) gets memory-efficient attention; Hopper and B200 get cuDNN attention first where the
    runtime cuDNN is newer than 9.15; CPUs run PyTorch's C++ flash kernel; MPS and TPUs the
    math backend.  Check it against what ran with ``torch.nn.attention.sdpa_kernel`` (06).

    Args:
        cls: the hardware class.
        dtype: the attention's dtype (``"bf16"``, ``torch.float16``, ``"fp32"`` ...).
        cudnn_version: ``torch.backends.cudnn.version()`` (e.g. ``91501``); ``None``: not known,
            cuDNN is kept first where the class allows it and the reason says on what it
            depends.

    Returns:
        An :class:`SdpaChoice`.

    Raises:
        ValueError: for a class without SDPA data.

    Example: ``sdpa_backend(get("t4"), "fp16").backend  # "EFFICIENT_ATTENTION"``
    """
    order = list(cls.sdpa_backends)
    if not order:
        raise ValueError(f"{cls.name} has no SDPA backend data (sdpa_backends is empty)")
    short = dtypes.short(dtype)
    if cls.kind == "cuda" and short not in ("fp16", "bf16"):  # flash and cuDNN: 16-bit only
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
    what = _CPU_FLASH if cls.kind == "cpu" and first == "FLASH_ATTENTION" else SDPA_KERNELS[first]
    reason = (f"{cls.name}, {short}: scaled_dot_product_attention runs {what}{cudnn_note}; "
              f"PyTorch's order here: {' -> '.join(order)}")
    return SdpaChoice(first, tuple(order), reason)


__all__ = [
    "CLAIMS",
    "CLASSES",
    "HARDWARE_ENV",
    "NO_DATASHEET",
    "SDPA_KERNELS",
    "Claim",
    "HardwareClass",
    "PeakChoice",
    "SdpaChoice",
    "classify_cpu",
    "classify_gpu",
    "datasheet_peak",
    "datasheet_tflops",
    "for_device",
    "from_env",
    "get",
    "probed_cpu",
    "sdpa_backend",
]
