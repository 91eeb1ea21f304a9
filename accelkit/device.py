"""Hardware probes for PyTorch and the CPU: what devices exist, and which one to use.

Owns the probes (CPU flags and name, NVML GPU facts, TPU device files, the oneDNN kernel a CPU
matmul runs), what PyTorch sees (CUDA/ROCm, MPS, TPU through torch_xla, CPU), the best PyTorch
device with the reason, and synchronising a device.  NVIDIA GPU facts come from NVML, never
from a CUDA context, so a later fork-based launch still works (``torch.cuda`` only where NVML
is absent: ROCm).  Elsewhere, importing nothing of this module's (no cycle): TensorFlow's
devices (:mod:`accelkit.tf`), what a device can do (:mod:`accelkit.hardware`), the devices
with their class's ``supports_*`` and the hardware card (:mod:`accelkit.env`).
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
        name: the framework's device string (``"cuda:0"``, ``"/GPU:0"``, ``"cpu"``).
        description: the product name (``"NVIDIA H200"``, the CPU model).
        memory_bytes: device memory in bytes (system RAM for the CPU), or None if unknown.
        compute_capability: ``(major, minor)`` for NVIDIA GPUs, else None.
        supports_fp16, supports_bf16: native fast units for that dtype (its hardware class's);
            ``None`` where not classified (:func:`accelkit.env.torch_devices` classifies).
    """

    framework: str
    kind: str
    name: str
    description: str
    memory_bytes: int | None = None
    compute_capability: tuple[int, int] | None = None
    supports_fp16: bool | None = None
    supports_bf16: bool | None = None


@dataclass(frozen=True)
class DeviceChoice:
    """The device chosen for a framework: ``device`` (a ``torch.device``, or a TF string like
    ``"/GPU:0"``), its ``kind`` (as in :class:`DeviceInfo`), and the ``reason``, one sentence."""

    device: Any
    kind: str
    reason: str

    def __str__(self) -> str:
        return f"{self.device} ({self.reason})"


# ----------------------------------------------------------------------------- CPU
#: Our key -> the ``/proc/cpuinfo`` flag.
_CPU_FLAGS = {k: k for k in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16",
                             "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16", "sve")} | {
    "neon": "asimd"}


@lru_cache(maxsize=1)
def cpu_features() -> dict[str, bool]:
    """Return ``{"avx2": bool, "avx512f": bool, "avx512_bf16": bool, "amx_bf16": bool, ...}``,
    the CPU's SIMD/matrix ISA extensions from ``/proc/cpuinfo`` (elsewhere all False but
    ``neon`` on arm64)."""
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
    """True when a TPU is attached; imports no framework.

    Checks ``$TPU_NAME`` / ``$COLAB_TPU_ADDR``; ``/dev/accel0, ...`` (TPU v2-v4 VMs; the
    ``/dev/accel/`` folder of NPUs does not count); a PCI device of Google's vendor id
    ``0x1ae0`` (TPU v5e and later sit behind VFIO, whose ``/dev/vfio/N`` any pass-through makes).
    """
    if os.environ.get("COLAB_TPU_ADDR") or os.environ.get("TPU_NAME"):
        return True
    try:
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
    """Return ``(name, memory_bytes, compute_capability)`` per visible NVIDIA GPU, from NVML
    (no CUDA context; ``$CUDA_VISIBLE_DEVICES`` applied when it lists indices), or ``None``
    where NVML is not usable (no ``nvidia-ml-py`` or no NVIDIA driver)."""
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
    """Return the CUDA/ROCm GPUs PyTorch can use (facts only, ``supports_*`` ``None``), without
    initialising CUDA where NVML answers."""
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
    """Return one :class:`DeviceInfo` per CUDA/ROCm GPU, then MPS, then ``cpu`` (facts only:
    :func:`accelkit.env.torch_devices` adds what each can do)."""
    import torch

    out = nvidia_or_rocm_gpus()
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append(DeviceInfo("torch", "mps", "mps", "Apple GPU (MPS)", system_memory_bytes()))
    out.append(DeviceInfo("torch", "cpu", "cpu", cpu_name(), system_memory_bytes()))
    return out


def device_type(device: Any = None) -> str:
    """Return the type (``"cpu"``, ``"cuda"``, ``"mps"``, ``"xla"``) of ``device`` (a
    ``torch.device`` or string; default: the best device here)."""
    import torch

    if device is None:
        return best_torch_device().device.type
    return torch.device(device).type


def accelerator_name() -> str | None:
    """Return a short name of the first accelerator (``"cuda:0 NVIDIA H200"``, ``"TPU"``), or
    None; never imports TensorFlow."""
    if has_tpu():
        return "TPU"
    if importlib.util.find_spec("torch") is None:
        return None
    for info in torch_devices():
        if info.kind != "cpu":
            return f"{info.name} {info.description}"
    return None


def best_torch_device() -> DeviceChoice:
    """Return the fastest device PyTorch can use here as a :class:`DeviceChoice` (``device`` a
    ``torch.device``): CUDA/ROCm GPU, then MPS, then XLA (a TPU with torch_xla), then the CPU."""
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
    """Return ``torch.device(spec)`` (``"cpu"``, ``"cuda:1"``, ``"mps"``, ``"meta"`` ...) after
    checking that this machine has it.

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
    """Wait until all queued work on ``device`` (default: the current CUDA device if any) has
    finished, so a timer stops when the work finished, not when it was queued; no-op on a CPU."""
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
    """Read ``{dtype: implementation of its first oneDNN matmul, or None}`` from verbose output
    (``onednn_verbose,v1,primitive,exec,cpu,matmul,<impl>,...``; older: without ``v1,primitive``)."""
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
    """Return the oneDNN kernel an ``(n, n)`` CPU matmul runs per dtype, from ``ONEDNN_VERBOSE``.

    One matmul per dtype name (``"bfloat16"``, ``"float32"`` ...) in a fresh process with this
    one's environment (so ``$ACCELKIT_HARDWARE``'s ISA caps apply).  Cached per process.

    Returns:
        ``{dtype: implementation or None}``, e.g. ``"brg_matmul:avx512_core_bf16"`` (AVX512 bf16)
        or ``"brg_matmul:avx512_core_amx"`` (AMX); ``None``: no oneDNN matmul ran (fp32 goes
        to MKL/OpenBLAS, bf16 without bf16 units to ATen's fallback); ``{}`` when the process
        failed or took over 120 s.

    Raises:
        ValueError: for ``n < 1`` or a name that is not a torch floating dtype.
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
