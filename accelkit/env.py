"""The hardware card: a copy-pasteable report of this machine and the library versions.

Nothing here initialises CUDA or imports TensorFlow unless asked (``tf=True``).
"""

from __future__ import annotations

import importlib.metadata
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
