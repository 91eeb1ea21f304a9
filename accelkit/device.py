"""Hardware probes: the only module that asks what devices exist.

It tells what PyTorch and TensorFlow each see (CUDA/ROCm GPUs, Apple MPS, TPU, CPU),
chooses the best device per framework with the reason, synchronises devices, and sets
TensorFlow's GPU memory growth.  It never prints or plots.

Probes avoid side effects: NVIDIA GPU facts (name, memory, compute capability) come from
NVML (``nvidia-ml-py``), never from a CUDA context, so a later fork-based launch still works;
``torch.cuda`` is asked only where NVML is absent (ROCm).  TensorFlow is imported only by the
``tf_*`` functions.  What a device *can do* (fast bf16/fp16 units) is not decided here: it is
read from the hardware-class table, :mod:`accelkit.hardware`.
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


class TFAlreadyInitializedError(RuntimeError):
    """TensorFlow's devices were configured after TensorFlow had initialised them."""


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
        supports_fp16: fp16 arithmetic is fast (tensor cores / native units).
        supports_bf16: bf16 arithmetic is supported natively.
    """

    framework: str
    kind: str
    name: str
    description: str
    memory_bytes: int | None = None
    compute_capability: tuple[int, int] | None = None
    supports_fp16: bool = False
    supports_bf16: bool = False


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


def cpu_has_fast_bf16() -> bool:
    """True when this CPU's hardware class has bf16 matrix/dot units (AVX512-BF16 or AMX).

    On such CPUs oneDNN runs bf16 matmuls faster than fp32; without them bf16 is converted
    and computed by a slow fallback.  Read from :mod:`accelkit.hardware` (so
    ``$ACCELKIT_HARDWARE`` applies).
    """
    from accelkit import hardware

    return hardware.for_device("cpu").bf16_units


def machine() -> str:
    """Return the machine architecture (``"x86_64"``, ``"arm64"``, ``"aarch64"``)."""
    return platform.machine()


def cpu_count() -> int:
    """Return the number of CPUs this process may use (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS/Windows
        return os.cpu_count() or 1


def _memory_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:  # pragma: no cover
        return None


# ----------------------------------------------------------------------------- torch
def _has_torch_xla() -> bool:
    return importlib.util.find_spec("torch_xla") is not None


def has_tpu() -> bool:
    """True when a TPU is attached (TPU VM device files or Colab's TPU address).

    Cheap: looks for ``/dev/accel*``/``/dev/vfio`` devices and ``TPU_NAME``/``COLAB_TPU_ADDR``
    without importing TensorFlow or torch_xla.
    """
    if os.environ.get("COLAB_TPU_ADDR") or os.environ.get("TPU_NAME"):
        return True
    try:
        # TPU VMs expose /dev/accel0, /dev/accel1, ... (the kernel's DRM "accel" class for
        # NPUs lives in the /dev/accel/ folder instead, which does not count).
        return any(n.startswith("accel") and n[5:].isdigit() for n in os.listdir("/dev"))
    except OSError:  # pragma: no cover
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
    """Return the CUDA/ROCm GPUs PyTorch can use, without initialising CUDA where NVML answers."""
    import torch

    from accelkit import hardware

    hip = getattr(torch.version, "hip", None)
    if not (getattr(torch.version, "cuda", None) or hip):
        return []  # a CPU-only build of PyTorch
    kind = "rocm" if hip else "cuda"
    facts = None if hip else nvml_gpus()
    if facts is None:  # ROCm, or no NVML: ask torch (this initialises the driver)
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        facts = [(f"{kind.upper()} GPU {i}", None, None) for i in range(n)]
    out = []
    for i, (name, mem, cc) in enumerate(facts):
        cls = hardware.classify_gpu(name, cc, kind)
        out.append(DeviceInfo("torch", kind, f"cuda:{i}", name, mem,
                              cc if kind == "cuda" else None,
                              supports_fp16=cls.fp16_units, supports_bf16=cls.bf16_units))
    return out


def torch_devices() -> list[DeviceInfo]:
    """List the devices PyTorch can use, accelerators first and the CPU last.

    GPU facts come from NVML (no CUDA context); what each device can do from the
    hardware-class table (:mod:`accelkit.hardware`).

    Returns:
        One :class:`DeviceInfo` per CUDA/ROCm GPU, then MPS, then ``cpu``.
    """
    import torch

    from accelkit import hardware

    out = nvidia_or_rocm_gpus()
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        cls = hardware.get("apple-mps")
        out.append(DeviceInfo("torch", "mps", "mps", "Apple GPU (MPS)", _memory_bytes(),
                              supports_fp16=cls.fp16_units, supports_bf16=cls.bf16_units))
    cpu = hardware.for_device("cpu")
    out.append(DeviceInfo("torch", "cpu", "cpu", cpu_name(), _memory_bytes(),
                          supports_fp16=cpu.fp16_units, supports_bf16=cpu.bf16_units))
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


# ----------------------------------------------------------------------------- TF
def tf_devices() -> list[DeviceInfo]:
    """List the devices TensorFlow sees, accelerators first and the CPU last.

    Imports TensorFlow (seconds).  Uses ``tf.config.list_physical_devices``, which does not
    allocate GPU memory.

    Returns:
        One :class:`DeviceInfo` per TPU/GPU, then the CPU(s).

    Raises:
        ImportError: when TensorFlow is not installed (with how to install it).
    """
    from accelkit import hardware

    tf = import_tf()
    out: list[DeviceInfo] = []
    for kind in ("TPU", "GPU"):
        for i, d in enumerate(tf.config.list_physical_devices(kind)):
            details = tf.config.experimental.get_device_details(d) if kind == "GPU" else {}
            cc = details.get("compute_capability")
            name = details.get("device_name", d.name)
            cls = hardware.get("tpu-v5e") if kind == "TPU" else hardware.classify_gpu(name, cc)
            out.append(DeviceInfo("tf", kind.lower() if kind == "TPU" else "cuda",
                                  f"/{kind}:{i}", name, None, cc,
                                  supports_fp16=cls.fp16_units, supports_bf16=cls.bf16_units))
    for i, _ in enumerate(tf.config.list_physical_devices("CPU")):
        out.append(DeviceInfo("tf", "cpu", f"/CPU:{i}", cpu_name(), _memory_bytes(),
                              supports_bf16=cpu_has_fast_bf16()))
    return out


def best_tf_device() -> DeviceChoice:
    """Choose the device TensorFlow should place work on: TPU, then GPU, then CPU.

    Returns:
        A :class:`DeviceChoice` whose ``device`` is a string such as ``"/GPU:0"``.
    """
    devs = tf_devices()
    first = devs[0]
    if first.kind == "tpu":
        return DeviceChoice(first.name, "tpu", "TPU found; use TPUStrategy (notebook 05)")
    if first.kind == "cuda":
        n = sum(d.kind == "cuda" for d in devs)
        return DeviceChoice(first.name, "cuda", f"{n} GPU(s) found; using {first.description}")
    return DeviceChoice("/CPU:0", "cpu", "no GPU or TPU visible to TensorFlow; using the CPU")


def import_tf() -> Any:
    """Import TensorFlow quietly and return the module.

    Sets ``TF_CPP_MIN_LOG_LEVEL`` (unless already set) so C++ logs do not flood the notebook:
    ``2`` (info and warnings hidden, errors kept) on machines with an NVIDIA driver, ``3`` on
    machines without one, where the only C++ "error" is the harmless ``failed call to cuInit``.
    The few ``I0000`` lines TensorFlow prints before its logging starts cannot be silenced.

    Raises:
        ImportError: when TensorFlow is not installed, saying how to install it.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2" if os.path.exists("/dev/nvidiactl") else "3")
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise ImportError(
            "TensorFlow is not installed in this environment; install it with "
            "`pip install 'accelkit[tf]'` (or skip the TensorFlow cells)"
        ) from exc
    return tf


def has_tf() -> bool:
    """True when TensorFlow is importable (checked without importing it)."""
    return importlib.util.find_spec("tensorflow") is not None


def tf_enable_memory_growth() -> list[str]:
    """Make TensorFlow allocate GPU memory on demand instead of grabbing all of it.

    Must run before TensorFlow initialises its devices (before the first tensor, model or
    ``tf.config.list_logical_devices`` call).

    Returns:
        The names of the GPUs configured (empty on a machine without GPUs: nothing to do).

    Raises:
        TFAlreadyInitializedError: when TensorFlow has already initialised its devices;
            the message says to restart the kernel and call this first.  The underlying
            ``RuntimeError`` is chained, never swallowed.
    """
    tf = import_tf()
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return []
    try:
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
    except RuntimeError as exc:
        raise TFAlreadyInitializedError(
            "TensorFlow already initialised its GPUs, so memory growth can no longer be set. "
            "Restart the kernel and call accelkit.device.tf_enable_memory_growth() right "
            f"after importing TensorFlow, before creating any tensor or model. ({exc})"
        ) from exc
    return [g.name for g in gpus]


def tf_set_logical_cpus(n: int) -> list[str]:
    """Split the physical CPU into ``n`` logical TensorFlow devices (for MirroredStrategy demos).

    Must run before TensorFlow initialises its devices.

    Args:
        n: number of logical CPUs, >= 1.

    Returns:
        The logical device names, ``["/device:CPU:0", ...]``.

    Raises:
        ValueError: if ``n < 1``.
        TFAlreadyInitializedError: when TensorFlow has already initialised its devices
            and the existing split differs from ``n``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    tf = import_tf()
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
    except RuntimeError as exc:
        have = tf.config.list_logical_devices("CPU")
        if len(have) != n:
            raise TFAlreadyInitializedError(
                f"TensorFlow already initialised {len(have)} logical CPU(s); "
                f"restart the kernel and call tf_set_logical_cpus({n}) first. ({exc})"
            ) from exc
    return [d.name for d in tf.config.list_logical_devices("CPU")]


def summary() -> dict[str, Any]:
    """Return a JSON-friendly description of the CPU, the torch devices and the best choice.

    Does not import TensorFlow (see :func:`tf_devices` for that).
    """
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": machine(),
        "cpu": cpu_name(),
        "cpu_count": cpu_count(),
        "cpu_features": {k: v for k, v in cpu_features().items() if v},
        "memory_bytes": _memory_bytes(),
        "tpu_attached": has_tpu(),
    }
    if importlib.util.find_spec("torch") is not None:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        info["torch_devices"] = [d.__dict__ | {} for d in torch_devices()]
        choice = best_torch_device()
        info["torch_best"] = {"device": str(choice.device), "reason": choice.reason}
    return info


__all__ = [
    "DeviceChoice",
    "DeviceInfo",
    "DeviceNotAvailableError",
    "TFAlreadyInitializedError",
    "accelerator_name",
    "best_tf_device",
    "best_torch_device",
    "cpu_count",
    "cpu_features",
    "cpu_has_fast_bf16",
    "cpu_name",
    "device_type",
    "get_torch_device",
    "has_tf",
    "has_tpu",
    "import_tf",
    "machine",
    "nvidia_or_rocm_gpus",
    "nvml_gpus",
    "summary",
    "synchronize",
    "tf_devices",
    "tf_enable_memory_growth",
    "tf_set_logical_cpus",
    "torch_devices",
]
