"""Hardware probes for PyTorch and the CPU: what devices exist, and which one to use.

This module owns the probes (CPU flags and name, NVML GPU facts, TPU device files, the oneDNN
kernel a CPU matmul runs: :func:`onednn_kernels`), what PyTorch sees (CUDA/ROCm GPUs, Apple
MPS, TPU through torch_xla, CPU), the best PyTorch device with the reason, and synchronising a
device.  It never prints, plots or imports TensorFlow.

Probes avoid side effects: NVIDIA GPU facts (name, memory, compute capability) come from
NVML (``nvidia-ml-py``), never from a CUDA context, so a later fork-based launch still works;
``torch.cuda`` is asked only where NVML is absent (ROCm).

Elsewhere: TensorFlow's devices, its quiet import and its device configuration in
:mod:`accelkit.tf`; what a device *can do* (fast bf16/fp16 units, datasheet peaks) in
the hardware-class table, :mod:`accelkit.hardware`, which probes through this module; the
devices with their class's ``supports_*`` flags and the machine's summary (the hardware card)
in :mod:`accelkit.env`.  This module imports neither (no import cycle).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


class DeviceNotAvailableError(RuntimeError):
    """A device was requested that this machine does not have."""


@dataclass(frozen=True)
class DeviceInfo:
    """One device as a framework sees it.

    Attributes:
        framework: ``"torch"`` or ``"tf"``.
        kind: ``"cuda"``, ``"rocm"``, ``"mps"``, ``"tpu"``, ``"xla"`` or ``"cpu"``.
        name: the device string the framework uses (``"cuda:0"``, ``"/GPU:0"``, ``"cpu"``).
        description: the product name (``"NVIDIA H200"``, the CPU model).
        memory_bytes: device memory in bytes (system RAM for the CPU), or None if unknown.
        compute_capability: ``(major, minor)`` for NVIDIA GPUs, else None.
        supports_fp16: fp16 arithmetic is fast (tensor cores / native units); ``None`` where
            not classified (this module probes, :func:`accelkit.env.torch_devices` classifies).
        supports_bf16: bf16 arithmetic is supported natively; ``None`` where not classified.
    """

    framework: str
    kind: str
    name: str
    description: str
    memory_bytes: int | None = None
    compute_capability: tuple[int, int] | None = None
    supports_fp16: bool | None = None
    supports_bf16: bool | None = None

    @classmethod
    def from_class(cls, hw: Any, framework: str, kind: str, name: str, description: str,
                   memory_bytes: int | None = None,
                   compute_capability: tuple[int, int] | None = None) -> DeviceInfo:
        """Return a :class:`DeviceInfo` whose ``supports_*`` flags are hardware class ``hw``'s.

        Args:
            hw: the :class:`accelkit.hardware.HardwareClass` (its ``fp16_units``/``bf16_units``).
            framework, kind, name, description, memory_bytes, compute_capability: as the
                attributes of the same names.
        """
        return cls(framework, kind, name, description, memory_bytes, compute_capability,
                   supports_fp16=hw.fp16_units, supports_bf16=hw.bf16_units)


@dataclass(frozen=True)
class DeviceChoice:
    """The device chosen for a framework, and why.

    Attributes:
        device: a ``torch.device`` (torch) or a device string like ``"/GPU:0"`` (TF).
        kind: the device kind, as in :class:`DeviceInfo`.
        reason: one sentence saying why it was chosen.
    """

    device: Any
    kind: str
    reason: str

    def __str__(self) -> str:
        return f"{self.device} ({self.reason})"


# ----------------------------------------------------------------------------- CPU
_CPU_FLAGS = {
    "avx2": "avx2",
    "fma": "fma",
    "avx512f": "avx512f",
    "avx512_vnni": "avx512_vnni",
    "avx512_bf16": "avx512_bf16",
    "avx512_fp16": "avx512_fp16",
    "amx_tile": "amx_tile",
    "amx_bf16": "amx_bf16",
    "amx_fp16": "amx_fp16",
    "neon": "asimd",
    "sve": "sve",
}


@lru_cache(maxsize=1)
def cpu_features() -> dict[str, bool]:
    """Return which SIMD/matrix ISA extensions this CPU has.

    Reads ``/proc/cpuinfo`` on Linux (no subprocess); on other systems every flag is False
    except ``neon`` on arm64.

    Returns:
        ``{"avx2": bool, "avx512f": bool, "avx512_bf16": bool, "amx_bf16": bool, ...}``.
    """
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith(("flags", "features")):
                    flags.update(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    feats = {key: flag in flags for key, flag in _CPU_FLAGS.items()}
    if platform.machine().lower() in ("arm64", "aarch64"):
        feats["neon"] = True
    return feats


@lru_cache(maxsize=1)
def cpu_name() -> str:
    """Return the CPU model name (``"Intel(R) Xeon(R) ..."``), or the architecture."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """Return the machine architecture (``"x86_64"``, ``"arm64"``, ``"aarch64"``)."""
    return platform.machine()


def cpu_count() -> int:
    """Return the number of CPUs this process may use (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS/Windows
        return os.cpu_count() or 1


def system_memory_bytes() -> int | None:
    """Return this machine's RAM in bytes (``psutil``), or None where psutil is absent."""
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:  # pragma: no cover
        return None


# ----------------------------------------------------------------------------- torch
def _has_torch_xla() -> bool:
    return importlib.util.find_spec("torch_xla") is not None


def has_tpu() -> bool:
    """True when a TPU is attached (TPU VM device files, Google's PCI devices, Colab's address).

    Cheap: imports neither TensorFlow, JAX nor torch_xla.  Checks, in order: ``$TPU_NAME`` /
    ``$COLAB_TPU_ADDR``; ``/dev/accel0, /dev/accel1, ...`` (TPU v2-v4 VMs); a PCI device of
    Google's vendor id ``0x1ae0`` in ``/sys/bus/pci/devices`` (TPU v5e and later are bound to
    VFIO and show up as ``/dev/vfio/N``, a path any VFIO pass-through also creates, so the
    vendor id decides).
    """
    if os.environ.get("COLAB_TPU_ADDR") or os.environ.get("TPU_NAME"):
        return True
    try:
        # The kernel's DRM "accel" class for NPUs lives in the /dev/accel/ folder instead,
        # which does not count.
        if any(n.startswith("accel") and n[5:].isdigit() for n in os.listdir("/dev")):
            return True
    except OSError:  # pragma: no cover
        pass
    return _pci_vendor_present(_GOOGLE_PCI_VENDOR)


_GOOGLE_PCI_VENDOR = "0x1ae0"  # Google's PCI vendor id (PCI-SIG list), used by TPU chips


def _pci_vendor_present(vendor: str, root: str = "/sys/bus/pci/devices") -> bool:
    """True when any PCI device under ``root`` reports ``vendor`` (e.g. ``"0x1ae0"``)."""
    try:
        names = os.listdir(root)
    except OSError:
        return False
    for name in names:
        try:
            with open(os.path.join(root, name, "vendor"), encoding="ascii") as f:
                if f.read().strip().lower() == vendor:
                    return True
        except OSError:
            continue
    return False


def nvml_gpus() -> list[tuple[str, int, tuple[int, int]]] | None:
    """Return ``(name, memory_bytes, compute_capability)`` per NVIDIA GPU, from NVML.

    NVML is the driver's management library: asking it creates no CUDA context, so the
    process can still fork workers afterwards.  ``$CUDA_VISIBLE_DEVICES`` is applied when it
    lists indices (or is empty).

    Returns:
        One tuple per visible GPU, or ``None`` when NVML is not usable here (no
        ``nvidia-ml-py`` or no NVIDIA driver).
    """
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else name
            cc = tuple(pynvml.nvmlDeviceGetCudaComputeCapability(h))
            gpus.append((name, int(pynvml.nvmlDeviceGetMemoryInfo(h).total), (cc[0], cc[1])))
    finally:
        pynvml.nvmlShutdown()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        picks = [v.strip() for v in visible.split(",") if v.strip()]
        if all(p.lstrip("-").isdigit() for p in picks):
            keep = []
            for p in picks:  # CUDA stops at the first invalid index
                if not 0 <= int(p) < len(gpus):
                    break
                keep.append(gpus[int(p)])
            gpus = keep
    return gpus


def nvidia_or_rocm_gpus() -> list[DeviceInfo]:
    """Return the CUDA/ROCm GPUs PyTorch can use, without initialising CUDA where NVML answers.

    Facts only (``supports_*`` are ``None``): :func:`accelkit.env.torch_devices` adds what each
    GPU's hardware class can do.
    """
    import torch

    hip = getattr(torch.version, "hip", None)
    if not (getattr(torch.version, "cuda", None) or hip):
        return []  # a CPU-only build of PyTorch
    kind = "rocm" if hip else "cuda"
    nvml = None if hip else nvml_gpus()
    facts: list[tuple[str, int | None, tuple[int, int] | None]]
    if nvml is None:  # ROCm, or no NVML: ask torch (this initialises the driver)
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        facts = [(f"{kind.upper()} GPU {i}", None, None) for i in range(n)]
    else:
        facts = list(nvml)
    return [DeviceInfo("torch", kind, f"cuda:{i}", name, mem, cc if kind == "cuda" else None)
            for i, (name, mem, cc) in enumerate(facts)]


def torch_devices() -> list[DeviceInfo]:
    """List the devices PyTorch can use, accelerators first and the CPU last.

    GPU facts come from NVML (no CUDA context).  Facts only: what each device can do (its
    hardware class's ``supports_*``) is added by :func:`accelkit.env.torch_devices`, so this
    module, which :mod:`accelkit.hardware` probes through, never imports it.

    Returns:
        One :class:`DeviceInfo` per CUDA/ROCm GPU, then MPS, then ``cpu``.
    """
    import torch

    out = nvidia_or_rocm_gpus()
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append(DeviceInfo("torch", "mps", "mps", "Apple GPU (MPS)", system_memory_bytes()))
    out.append(DeviceInfo("torch", "cpu", "cpu", cpu_name(), system_memory_bytes()))
    return out


def device_type(device: Any = None) -> str:
    """Return the type of a device (``"cpu"``, ``"cuda"``, ``"mps"``, ``"xla"``).

    Args:
        device: a ``torch.device`` or string; default: the best device here.
    """
    import torch

    if device is None:
        return best_torch_device().device.type
    return torch.device(device).type


def accelerator_name() -> str | None:
    """Return a short name of the first accelerator (``"cuda:0 NVIDIA H200"``), or None.

    Looks at CUDA/ROCm and MPS through torch (if installed) and at TPU device files; never
    imports TensorFlow.
    """
    if has_tpu():
        return "TPU"
    if importlib.util.find_spec("torch") is None:
        return None
    for info in torch_devices():
        if info.kind != "cpu":
            return f"{info.name} {info.description}"
    return None


def best_torch_device() -> DeviceChoice:
    """Choose the fastest device PyTorch can use here.

    Order: CUDA/ROCm GPU, then Apple MPS, then the XLA device (TPU, when ``torch_xla`` is
    installed and a TPU is attached), then the CPU.

    Returns:
        A :class:`DeviceChoice` whose ``device`` is a ``torch.device``.
    """
    import torch

    devs = torch_devices()
    first = devs[0]
    if first.kind in ("cuda", "rocm"):
        n = sum(d.kind == first.kind for d in devs)
        return DeviceChoice(torch.device("cuda:0"), first.kind,
                            f"{n} {first.kind.upper()} GPU(s) found; using {first.description}")
    if first.kind == "mps":
        return DeviceChoice(torch.device("mps"), "mps", "Apple GPU found (Metal backend)")
    if has_tpu() and _has_torch_xla():  # pragma: no cover - needs a TPU
        import torch_xla

        return DeviceChoice(torch_xla.device(), "xla", "TPU found and torch_xla installed")
    why = "no CUDA, ROCm or MPS device found"
    if has_tpu():
        why += " (a TPU is attached, but torch_xla is not installed)"
    return DeviceChoice(torch.device("cpu"), "cpu", why + f"; using the CPU ({cpu_count()} cores)")


def get_torch_device(spec: str | Any) -> Any:
    """Return ``torch.device(spec)`` after checking that this machine has it.

    Args:
        spec: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, ``"meta"`` or a ``torch.device``.

    Returns:
        The ``torch.device``.

    Raises:
        DeviceNotAvailableError: when the device is absent; the message lists what is here.
        ValueError: when ``spec`` is not a device string PyTorch understands.
    """
    import torch

    try:
        dev = torch.device(spec)
    except RuntimeError as exc:
        raise ValueError(f"{spec!r} is not a PyTorch device string: {exc}") from None
    if dev.type in ("cpu", "meta"):
        return dev
    available = [d.name for d in torch_devices()]
    if dev.type == "cuda":
        n = len(nvidia_or_rocm_gpus())
        if n and (dev.index is None or dev.index < n):
            return dev
    elif dev.type == "mps" and "mps" in available:
        return dev
    elif dev.type == "xla" and _has_torch_xla() and has_tpu():  # pragma: no cover
        return dev
    raise DeviceNotAvailableError(
        f"PyTorch device {str(dev)!r} is not available on this machine; "
        f"available: {', '.join(available)}. Use accelkit.device.best_torch_device() "
        "to pick one that exists."
    )


def synchronize(device: Any = None) -> None:
    """Wait until all queued work on ``device`` has finished (no-op on the CPU).

    GPUs run kernels asynchronously: without this, a timer stops when the work was
    *queued*, not when it finished.

    Args:
        device: a ``torch.device``/string; default: the current CUDA device if any.
    """
    import torch

    kind = torch.device(device).type if device is not None else (
        "cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()
    elif kind == "xla":  # pragma: no cover - needs torch_xla
        import torch_xla

        torch_xla.sync(wait=True)


#: The script :func:`onednn_kernels` runs in a fresh process: one (n, n) matmul per dtype,
#: each after a marker line, so every oneDNN verbose line is read back under its dtype.
_ONEDNN_SCRIPT = """
import sys, torch
n = int(sys.argv[1])
for name in sys.argv[2:]:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(getattr(torch, name))
    print("accelkit-dtype", name, flush=True)
    a @ a
    a @ a
"""


def _parse_onednn(text: str) -> dict[str, str | None]:
    """Read ``{dtype: implementation of its first oneDNN matmul, or None}`` from verbose output.

    oneDNN v3 prints ``onednn_verbose,v1,primitive,exec,cpu,matmul,<implementation>,...`` per
    executed primitive (older builds: ``onednn_verbose,exec,cpu,matmul,<implementation>,...``).
    """
    found: dict[str, str | None] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("accelkit-dtype "):
            current = line.split()[1]
            found[current] = None
            continue
        fields = line.split(",")
        if current is None or not fields[0].startswith(("onednn_verbose", "dnnl_verbose")) \
                or "exec" not in fields or found[current] is not None:
            continue
        i = fields.index("exec")
        if len(fields) > i + 3 and fields[i + 2] == "matmul":
            found[current] = fields[i + 3]
    return found


@lru_cache(maxsize=8)
def onednn_kernels(dtypes: tuple[str, ...] = ("bfloat16", "float32"),
                   n: int = 1024) -> dict[str, str | None]:
    """Return the oneDNN kernel that runs an ``(n, n)`` CPU matmul per dtype, from ``ONEDNN_VERBOSE``.

    Runs one matmul per dtype in a fresh Python process with ``ONEDNN_VERBOSE=1`` (this
    process's environment otherwise, so ``$ACCELKIT_HARDWARE``'s instruction-set caps apply)
    and reads the implementation oneDNN names, e.g. ``"brg_matmul:avx512_core_bf16"`` (AVX512
    bf16 dot products) or ``"brg_matmul:avx512_core_amx"`` (AMX tiles).  ``None`` means no
    oneDNN matmul ran: PyTorch computed it elsewhere (fp32 goes to MKL/OpenBLAS; bf16 on a CPU
    without bf16 units to ATen's own fallback).  Cached per process: evidence, not a decision.

    Args:
        dtypes: torch dtype names (``"bfloat16"``, ``"float32"``, ``"float16"``).
        n: the matmul's size, >= 1.

    Returns:
        ``{dtype: implementation or None}``; ``{}`` when the process failed or took over 120 s
        (a machine too busy to say).

    Raises:
        ValueError: for ``n < 1`` or a name that is not a torch floating dtype.

    Example: ``onednn_kernels(("bfloat16",))  # {"bfloat16": "brg_matmul:avx512_core_bf16"}``
    """
    import subprocess

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    bad = [d for d in dtypes if d not in ("bfloat16", "float16", "float32", "float64")]
    if bad:
        raise ValueError(f"not a torch floating dtype name: {bad}; use bfloat16, float16, "
                         "float32 or float64")
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
    try:
        done = subprocess.run([sys.executable, "-c", _ONEDNN_SCRIPT, str(n), *dtypes], env=env,
                              capture_output=True, text=True, timeout=120, check=True)
    except (subprocess.SubprocessError, OSError):
        return {}
    return _parse_onednn(done.stdout)
