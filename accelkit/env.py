"""What this machine is: the hardware card, its capabilities, and the hardware-class cards.

Owns the description of the machine only: :func:`hardware_summary` / :func:`hardware_card`
(a copy-pasteable report of this machine and the library versions), :func:`capabilities`
(what it has that a notebook may need: bf16 units, NCCL and two GPUs, a compiler ...) and
:func:`class_card` / :func:`class_list` (every decision the course takes on a hardware class).

Lives elsewhere: what each notebook needs (its metadata), the matching and the ``doctor``
report in :mod:`accelkit.course`; the class table in :mod:`accelkit.hardware`; the probes in
:mod:`accelkit.device`; the run summary in :mod:`accelkit.report`.  Nothing here initialises
CUDA or imports TensorFlow unless asked (``tf=True``).
"""

from __future__ import annotations

import dataclasses
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


def torch_devices() -> list[device.DeviceInfo]:
    """Return :func:`accelkit.device.torch_devices` with what each device can do (``supports_*``)
    from its hardware class: a GPU's from its name and compute capability, the CPU's from
    :func:`accelkit.hardware.for_device` (``$ACCELKIT_HARDWARE`` honoured)."""
    out = []
    for d in device.torch_devices():
        if d.kind in ("cuda", "rocm"):
            cls = hardware.classify_gpu(d.description, d.compute_capability, d.kind, d.memory_bytes)
        else:
            cls = hardware.get("apple-mps") if d.kind == "mps" else hardware.for_device("cpu")
        out.append(dataclasses.replace(d, supports_fp16=cls.fp16_units, supports_bf16=cls.bf16_units))
    return out


def hardware_summary(tf: bool = False) -> dict[str, Any]:
    """Return the hardware card as a JSON-friendly dict.

    Args:
        tf: also list TensorFlow's devices (imports TensorFlow).
    """
    info = device.summary()
    if "torch_devices" in info:  # with what each can do, from its hardware class
        info["torch_devices"] = [dataclasses.asdict(d) for d in torch_devices()]
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


# ----------------------------------------------------------------------------- capabilities
@dataclass(frozen=True)
class Capability:
    """One thing a notebook may need, and whether this machine has it.

    Attributes:
        name: the key notebooks use in their metadata (``"bf16_units"``), see :data:`CAPABILITIES`.
        what: what it is, e.g. ``"bf16 fast units (CPU AVX512-BF16/AMX or GPU sm_80+)"``.
        has: whether this machine has it.
        found: what was found here (``"compiler: /usr/bin/g++"``, ``"no GPU"``).
    """

    name: str
    what: str
    has: bool
    found: str


#: Every capability :func:`capabilities` reports, with what it is.  Notebooks name these keys
#: in their metadata (``{"accelkit": {"needs": {"bf16_units": "what runs instead"}}}``).
CAPABILITIES = {
    "cpu": "a CPU (any accelerator is optional)",
    "tensorflow": "TensorFlow installed",
    "gloo": "torch.distributed with gloo (CPU processes)",
    "nccl_multi_gpu": "NCCL and >= 2 GPUs",
    "bf16_units": "bf16 fast units (CPU AVX512-BF16/AMX or GPU sm_80+)",
    "fp16_tensor_cores": "GPU fp16 tensor cores (sm_70+)",
    "torch_compile": "torch.compile backend (C++ compiler on CPU, Triton on GPU)",
    "tpu": "a TPU attached",
    "torch_xla": "torch_xla installed",
}


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


def _compile_backend(gpus: list[dict[str, Any]]) -> tuple[bool, str]:
    """Return whether ``torch.compile`` has a backend here (C++ compiler on CPU, Triton on GPU)."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")
    has_triton = importlib.util.find_spec("triton") is not None
    found = ((f"compiler: {cxx}" if cxx else "no C++ compiler on PATH")
             + (f"; triton {'installed' if has_triton else 'absent'}" if gpus else ""))
    old = [g for g in gpus if g["kind"] == "cuda" and tuple(g.get("compute_capability") or
                                                              (7, 0)) < (7, 0)]
    if old:  # Triton generates code for sm_70 and newer only
        found += f"; {old[0]['description']} is older than sm_70, which Triton needs"
    return (bool(cxx) if not gpus else has_triton and not old), found


def capabilities(info: dict[str, Any] | None = None) -> dict[str, Capability]:
    """Describe what this machine has, for matching against the notebooks' needs.

    Uses :func:`hardware_summary` (no TensorFlow import, no CUDA context) and cheap probes:
    ``torch.distributed`` backends, a C++ compiler on ``PATH`` (``torch.compile`` on the CPU),
    installed packages (``importlib.util.find_spec``).  What each notebook needs is declared
    in its metadata and matched in :mod:`accelkit.course`.

    Args:
        info: a :func:`hardware_summary` dict; default: this machine's.

    Returns:
        ``{name: Capability}`` for every key of :data:`CAPABILITIES`, in that order.
    """
    info = info or hardware_summary()
    libs = info.get("libraries", {})
    gpus = _gpus(info)
    cpu_cls = hardware.classify_cpu(info.get("cpu_features", {}), info.get("machine", "x86_64"))
    cpu_bf16 = cpu_cls.bf16_units
    gpu_cls = [hardware.classify_gpu(g["description"], g.get("compute_capability"), g["kind"],
                                     g.get("memory_bytes")) for g in gpus]
    gloo, nccl = _dist_backends()
    compiles, compiler = _compile_backend(gpus)
    tpu = bool(info.get("tpu_attached"))
    n_gpu = len(gpus)
    first = f"{gpus[0]['description']}" if gpus else ""
    found = {
        "cpu": (True, f"{info['cpu_count']} CPU cores" + (f"; GPU: {first}" if gpus else "")),
        "tensorflow": (bool(libs.get("tensorflow")), f"tensorflow {libs['tensorflow']}"
                       if libs.get("tensorflow") else "TensorFlow not installed"),
        "gloo": (gloo, f"gloo {'built' if gloo else 'absent'}"),
        "nccl_multi_gpu": (nccl and n_gpu >= 2, f"NCCL {'built' if nccl else 'absent'}, "
                           f"{n_gpu} GPU(s)"),
        "bf16_units": (cpu_bf16 or any(c.bf16_units for c in gpu_cls),
                       f"CPU class {cpu_cls.name}: " + ("bf16 units present" if cpu_bf16 else
                                                        "no bf16 units")
                       + "".join(f"; GPU class {c.name}" for c in gpu_cls)),
        "fp16_tensor_cores": (any(c.tensor_cores for c in gpu_cls),
                              first or "no GPU"),
        "torch_compile": (compiles, compiler),
        "tpu": (tpu, "TPU found" if tpu else "no TPU"),
        "torch_xla": (bool(libs.get("torch_xla")), f"torch_xla {libs['torch_xla']}"
                      if libs.get("torch_xla") else "torch_xla absent"),
    }
    return {k: Capability(k, what, *found[k]) for k, what in CAPABILITIES.items()}


def class_list() -> str:
    """Return a Markdown table of every hardware class (``doctor --hardware list``)."""
    lines = ["| class | what | autocast | GradScaler | Keras policy | profile |",
             "|---|---|---|---|---|---|"]
    lines += [f"| `{c.name}` | {c.title} | {c.amp_dtype} | {'yes' if c.grad_scaler else 'no'} "
              f"| {c.keras_policy} | {c.profile} |" for c in hardware.CLASSES.values()]
    return "\n".join(lines)


def class_card(cls: hardware.HardwareClass, heading: str = "", path: Any = None) -> str:
    """Return a class's card and every decision the course takes on it, as Markdown.

    Nothing is probed or measured: where the class lets a measurement on the learner's
    machine decide its bf16 claims (``cls.bf16_measured``), the card says so, and shows that
    machine's decision only when ``path`` is given.

    Args:
        cls: the hardware class.
        heading: the first line; default ``"## Hardware class: <name>"``.
        path: this machine's :class:`accelkit.precision.AmpPath` (from
            ``ak.precision.amp_path()``): its measurement and the claims it decided replace
            the class's bf16 rows.
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
    elif cls.kind != "cpu":
        lines.append(f"- dense peaks: no peak known ({cls.source})")
    lines += [f"- autocast: {str(amp.dtype).removeprefix('torch.')}, "
              f"{'with' if amp.needs_scaler else 'no'} GradScaler ({amp.reason})",
              f"- Keras policy: {cls.keras_policy}"
              + (" with LossScaleOptimizer" if cls.keras_policy == "mixed_float16" else ""),
              f"- size profile (auto): {cls.profile}"]
    if cls.sdpa_backends:
        lines.append(f"- attention: {hardware.sdpa_backend(cls, amp.dtype)}")
    if cls.bf16_measured:
        lines.append("- bf16 path: decided on the learner's machine by a short bf16 vs fp32 "
                     "matmul measurement (`ak.precision.amp_path()`), because this class's CPUs "
                     "disagree")
    if path is not None:
        lines.append(f"- this machine: {path}")
    if cls.emulate_env:
        lines.append("- emulated on an x86 CPU with: "
                     + " ".join(f"{k}={v}" for k, v in cls.emulate_env.items()))
    if cls.note:
        lines.append(f"- note: {cls.note}")
    lines += ["", "| claim | floor | why |", "|---|---|---|"]
    for name, what in hardware.CLAIMS.items():
        c = path.claim(name) if path is not None else cls.claim(name)
        floor = "no claim" if c.floor is None else f"≥ {c.floor:g}x"
        lines.append(f"| {what} | {floor} | {c.why} |")
    return "\n".join(lines)
