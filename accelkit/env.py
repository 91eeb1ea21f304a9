"""The hardware card: a copy-pasteable report of this machine and the library versions.

Also the ``doctor`` report: which notebooks this machine runs in full, and every decision
the course takes on a hardware class (:func:`class_card`, for ``doctor --hardware NAME``).
The class table itself lives in :mod:`accelkit.hardware`; the probes in
:mod:`accelkit.device`.  Nothing here initialises CUDA or imports TensorFlow unless asked
(``tf=True``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
from dataclasses import dataclass
from typing import Any

from accelkit import device, emulation, hardware, tf_device

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
    best = info.get("torch_best", {}).get("device")
    info["hardware_class"] = hardware.for_device(best).name if best else None
    info["emulated"] = emulation.note()
    info["libraries"] = library_versions()
    if tf and tf_device.has_tf():
        info["tf_devices"] = [d.name + " " + d.description for d in tf_device.tf_devices()]
        info["tf_best"] = str(tf_device.best_tf_device())
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
    if info.get("emulated"):
        lines.append(f"- **Emulated hardware class**: {info['emulated']}")
    if "torch_best" in info:
        lines.append(f"- PyTorch best device: `{info['torch_best']['device']}` "
                     f"({info['torch_best']['reason']})")
    if info.get("hardware_class"):
        lines.append(f"- Hardware class: `{info['hardware_class']}` "
                     "(`python -m accelkit doctor --hardware NAME` shows its decisions)")
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
    cpu_cls = hardware.classify_cpu(info.get("cpu_features", {}), info.get("machine", "x86_64"))
    cpu_bf16 = cpu_cls.bf16_units
    gpu_cls = [hardware.classify_gpu(g["description"], g.get("compute_capability"), g["kind"])
               for g in gpus]
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
                    cpu_bf16 or any(c.bf16_units for c in gpu_cls),
                    f"CPU class {cpu_cls.name}: " + ("bf16 units present" if cpu_bf16 else
                                                     "no bf16 units, bf16 is slower than fp32")),
        Requirement("02 mixed precision", "GPU fp16 tensor cores (sm_70+)",
                    any(c.tensor_cores for c in gpu_cls),
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


def doctor(hardware_name: str | None = None) -> str:
    """Return the doctor report: this machine, or the decisions for a named hardware class.

    Used by ``python -m accelkit doctor [--hardware NAME|list]``.  Does not import TensorFlow
    or initialise CUDA; with ``hardware_name`` it does not probe the device at all.

    Args:
        hardware_name: ``None`` for this machine (hardware card, notebook requirements, the
            class and its decisions); ``"list"`` for the table of classes; a class name
            (``"t4"``) for that class's card and decisions.

    Returns:
        Markdown text.

    Raises:
        KeyError: for an unknown class name, listing the known ones.

    Example: ``print(ak.env.doctor("t4"))``
    """
    if hardware_name == "list":
        return class_list()
    if hardware_name is not None:
        return class_card(hardware.get(hardware_name))
    info = hardware_summary()
    rows = requirements(info)
    lines = [hardware_card_markdown(info), "", "## Notebook requirements", "",
             "| notebook | needs | here | note |", "|---|---|---|---|"]
    lines += [f"| {r.notebook} | {r.need} | {'yes' if r.met else 'no'} | {r.note} |"
              for r in rows]
    from accelkit import config

    lines += ["", f"Size profile: {config.profile()}", "",
              class_card(hardware.for_device(), heading="## This machine's hardware class")]
    return "\n".join(lines)


def class_list() -> str:
    """Return a Markdown table of every hardware class (``doctor --hardware list``)."""
    lines = ["| class | what | autocast | GradScaler | profile |", "|---|---|---|---|---|"]
    lines += [f"| `{c.name}` | {c.title} | {c.amp_dtype} | {'yes' if c.grad_scaler else 'no'} "
              f"| {c.profile} |" for c in hardware.CLASSES.values()]
    return "\n".join(lines)


def class_card(cls: hardware.HardwareClass, heading: str = "") -> str:
    """Return a class's card and every decision the course takes on it, as Markdown.

    Args:
        cls: the hardware class.
        heading: the first line; default ``"## Hardware class: <name>"``.
    """
    from accelkit import precision

    amp = precision.amp_choice(hw=cls)
    units = [u for u, has in (("bf16", cls.bf16_units), ("fp16", cls.fp16_units),
                              ("tf32", cls.tf32), ("fp8", cls.fp8)) if has]
    peaks = ", ".join(f"{k} {v:g}" for k, v in cls.peak_tflops.items())
    lines = [heading or f"## Hardware class: {cls.name}", "", f"- {cls.title} (kind {cls.kind})",
             f"- native matrix units: {', '.join(units) or 'none beyond fp32'}"]
    if cls.memory_gib:
        lines.append(f"- memory: {cls.memory_gib:g} GB")
    if peaks:
        lines.append(f"- dense peaks, TFLOP/s: {peaks}; bandwidth {cls.bandwidth_gbps:g} GB/s "
                     f"({cls.source})")
    lines += [f"- autocast: {str(amp.dtype).removeprefix('torch.')}, "
              f"{'with' if amp.needs_scaler else 'no'} GradScaler ({amp.reason})",
              f"- Keras policy: {cls.keras_policy}", f"- size profile (auto): {cls.profile}"]
    if cls.emulate_env:
        lines.append("- emulated on an x86 CPU with: "
                     + " ".join(f"{k}={v}" for k, v in cls.emulate_env.items()))
    if cls.note:
        lines.append(f"- note: {cls.note}")
    lines += ["", "| claim | floor | why |", "|---|---|---|"]
    for name, what in hardware.CLAIMS.items():
        c = cls.claim(name)
        floor = "no claim" if c.floor is None else f"≥ {c.floor:g}x"
        lines.append(f"| {what} | {floor} | {c.why} |")
    return "\n".join(lines)
