"""The hardware card: a copy-pasteable report of this machine and the library versions.

Nothing here initialises CUDA or imports TensorFlow unless asked (``tf=True``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
from dataclasses import dataclass
from typing import Any

from accelkit import device

_LIBS = ("accelkit", "torch", "tensorflow", "keras", "numpy", "torch_xla")


def library_versions() -> dict[str, str | None]:
    """Return installed versions of the course's libraries (None when absent), without importing them."""
    out: dict[str, str | None] = {}
    for name in _LIBS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def hardware_summary(tf: bool = False) -> dict[str, Any]:
    """Return the hardware card as a JSON-friendly dict.

    Args:
        tf: also list TensorFlow's devices (imports TensorFlow).
    """
    info = device.summary()
    info["libraries"] = library_versions()
    if tf and device.has_tf():
        info["tf_devices"] = [d.name + " " + d.description for d in device.tf_devices()]
        info["tf_best"] = str(device.best_tf_device())
    return info


def hardware_card_markdown(info: dict[str, Any] | None = None) -> str:
    """Render :func:`hardware_summary` as a short Markdown block."""
    info = info or hardware_summary()
    mem = info.get("memory_bytes")
    feats = ", ".join(k for k in ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16",
                                  "neon") if info.get("cpu_features", {}).get(k)) or "none"
    lines = ["## Hardware card", "",
             f"- CPU: {info['cpu']} ({info['cpu_count']} cores usable"
             + (f", {mem / 2**30:.0f} GiB RAM" if mem else "") + f"); ISA: {feats}"]
    for d in info.get("torch_devices", []):
        if d["kind"] != "cpu":
            gib = f", {d['memory_bytes'] / 2**30:.0f} GiB" if d.get("memory_bytes") else ""
            cc = f", sm_{d['compute_capability'][0]}{d['compute_capability'][1]}" \
                if d.get("compute_capability") else ""
            lines.append(f"- GPU {d['name']}: {d['description']}{gib}{cc}")
    if info.get("tpu_attached"):
        lines.append("- TPU: attached")
    if "torch_best" in info:
        lines.append(f"- PyTorch best device: `{info['torch_best']['device']}` "
                     f"({info['torch_best']['reason']})")
    if "tf_best" in info:
        lines.append(f"- TensorFlow best device: {info['tf_best']}")
    libs = ", ".join(f"{k} {v}" for k, v in info.get("libraries", {}).items() if v)
    lines.append(f"- Python {info['python']}; {libs}")
    return "\n".join(lines)


def hardware_card(tf: bool = False) -> str:
    """Return the hardware card as Markdown text (print it, or paste it into a bug report)."""
    return hardware_card_markdown(hardware_summary(tf=tf))


# ----------------------------------------------------------------------------- doctor
@dataclass(frozen=True)
class Requirement:
    """One thing a notebook needs to run in full, and whether this machine has it.

    Attributes:
        notebook: the notebook(s), e.g. ``"02 mixed precision"``.
        need: what is needed, e.g. ``"bf16 fast units"``.
        met: whether this machine has it.
        note: what was found, or what runs instead when it is missing.
    """

    notebook: str
    need: str
    met: bool
    note: str


def _gpus(info: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in info.get("torch_devices", []) if d["kind"] in ("cuda", "rocm")]


def _dist_backends() -> tuple[bool, bool]:
    """Return ``(gloo, nccl)`` availability in this torch build (no process group is made)."""
    if importlib.util.find_spec("torch") is None:
        return False, False
    import torch.distributed as dist

    if not dist.is_available():
        return False, False
    return dist.is_gloo_available(), dist.is_nccl_available()


def requirements(info: dict[str, Any] | None = None) -> list[Requirement]:
    """Check which notebooks' requirements this machine meets.

    Uses :func:`hardware_summary` (no TensorFlow import, no CUDA context) and cheap probes:
    ``torch.distributed`` backends, a C++ compiler on ``PATH`` (``torch.compile`` on the CPU),
    installed packages (``importlib.util.find_spec``).

    Args:
        info: a :func:`hardware_summary` dict; default: this machine's.

    Returns:
        One :class:`Requirement` per row, in notebook order.
    """
    info = info or hardware_summary()
    libs = info.get("libraries", {})
    gpus = _gpus(info)
    gpu_cc = [tuple(g["compute_capability"] or (0, 0)) for g in gpus]
    feats = info.get("cpu_features", {})
    cpu_bf16 = bool(feats.get("avx512_bf16") or feats.get("amx_bf16"))
    gloo, nccl = _dist_backends()
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")
    has_triton = importlib.util.find_spec("triton") is not None
    tpu = bool(info.get("tpu_attached"))
    n_gpu = len(gpus)
    first = f"{gpus[0]['description']}" if gpus else ""
    rows = [
        Requirement("00 device setup", "a CPU (any accelerator is optional)", True,
                    f"{info['cpu_count']} CPU cores" + (f"; GPU: {first}" if gpus else "")),
        Requirement("00 device setup", "TensorFlow installed", bool(libs.get("tensorflow")),
                    "TF cells run" if libs.get("tensorflow") else "TF cells skip with a message"),
        Requirement("01/04 parallelism", "torch.distributed with gloo (CPU processes)", gloo,
                    "multi-process runs on the CPU" if gloo else "distributed cells skip"),
        Requirement("01/04 parallelism", "NCCL and >= 2 GPUs", nccl and n_gpu >= 2,
                    f"NCCL {'built' if nccl else 'absent'}, {n_gpu} GPU(s); "
                    + ("runs on GPUs" if nccl and n_gpu >= 2 else "falls back to gloo on CPU")),
        Requirement("02 mixed precision", "bf16 fast units (CPU AVX512-BF16/AMX or GPU sm_80+)",
                    cpu_bf16 or any(cc >= (8, 0) for cc in gpu_cc) or any(
                        g["kind"] == "rocm" for g in gpus),
                    "CPU: " + ("AVX512-BF16/AMX-BF16 present" if cpu_bf16 else
                               "no bf16 units, bf16 is emulated (slower than fp32)")),
        Requirement("02 mixed precision", "GPU fp16 tensor cores (sm_70+)",
                    any(cc >= (7, 0) for cc in gpu_cc) or any(g["kind"] == "rocm" for g in gpus),
                    first or "no GPU: the fp16 GPU path is explained, not run"),
        Requirement("03 operator fusion", "torch.compile backend (C++ compiler on CPU, "
                    "Triton on GPU)", bool(cxx) if not gpus else has_triton,
                    (f"compiler: {cxx}" if cxx else "no C++ compiler on PATH")
                    + (f"; triton {'installed' if has_triton else 'absent'}" if gpus else "")),
        Requirement("05 TPU", "a TPU attached", tpu,
                    "TPU found" if tpu else "no TPU: TPU-only cells skip with a message"),
        Requirement("05 TPU", "torch_xla installed", bool(libs.get("torch_xla")),
                    f"torch_xla {libs['torch_xla']}" if libs.get("torch_xla") else
                    "torch_xla absent (PyTorch/XLA cells skip)"),
    ]
    return rows


def doctor() -> str:
    """Return the hardware card, library versions and which notebooks can run in full here.

    Used by ``python -m accelkit doctor``.  Does not import TensorFlow or initialise CUDA.

    Returns:
        Markdown text: the hardware card, then a table *notebook | needs | here | note*.

    Example: ``print(ak.env.doctor())``
    """
    info = hardware_summary()
    rows = requirements(info)
    lines = [hardware_card_markdown(info), "", "## Notebook requirements", "",
             "| notebook | needs | here | note |", "|---|---|---|---|"]
    lines += [f"| {r.notebook} | {r.need} | {'yes' if r.met else 'no'} | {r.note} |"
              for r in rows]
    from accelkit import config

    lines += ["", f"Size profile: {config.profile()}"]
    return "\n".join(lines)
