"""What this machine is, what the notebooks need, and ``python -m accelkit doctor``.

The machine: :func:`hardware_summary` / :func:`hardware_card` (a copy-pasteable report of the
probes and library versions), :func:`capabilities` (what it has that a notebook may need: bf16
units, NCCL and two GPUs, a compiler ...) and :func:`class_card` / :func:`class_list` (every
decision the course takes on a hardware class).  The notebooks: each declares what it needs in
its own metadata (one source; nothing here lists the notebooks)::

    {"accelkit": {"requires": ["jax"], "needs": {"tpu": "TPU-only cells skip with a message"}}}

``requires``: modules without which it cannot run (``make run`` and ``make verify`` skip it,
:func:`missing_modules`); ``needs``: keys of :data:`CAPABILITIES` whose absence makes some cells
skip or fall back (the value says what runs instead).  :func:`check_needs` is the only place
where a notebook's needs meet a machine; :func:`doctor` is the report.  Elsewhere: the class
table in :mod:`accelkit.hardware`, the probes in :mod:`accelkit.device`, executing notebooks in
``tools/run_notebooks.py``.  Nothing here initialises CUDA or imports TensorFlow unless asked.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelkit import device, hardware
from accelkit import tf as tf_device

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
    """Return the hardware card as a JSON-friendly dict: Python, platform, CPU (name, usable
    cores, ISA flags), RAM in bytes, TPU, torch's devices (with what each can do) and best
    device, the hardware class, any emulation, library versions; with ``tf=True`` also
    TensorFlow's devices (imports TensorFlow)."""
    info: dict[str, Any] = {
        "python": sys.version.split()[0], "platform": platform.platform(),
        "machine": device.machine(), "cpu": device.cpu_name(), "cpu_count": device.cpu_count(),
        "cpu_features": {k: v for k, v in device.cpu_features().items() if v},
        "memory_bytes": device.system_memory_bytes(), "tpu_attached": device.has_tpu(),
        "hardware_class": None}
    if importlib.util.find_spec("torch") is not None:
        import torch

        choice = device.best_torch_device()
        info |= {"torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                 "torch_devices": [dataclasses.asdict(d) for d in torch_devices()],
                 "torch_best": {"device": str(choice.device), "reason": choice.reason},
                 "hardware_class": hardware.for_device(choice.device).name}
    info["emulated"] = hardware.emulation_note()
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
    installed packages (``importlib.util.find_spec``).

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


def _units(cls: hardware.HardwareClass) -> str:
    return ", ".join(u for u, has in (("bf16", cls.bf16_units), ("fp16", cls.fp16_units),
                                      ("tf32", cls.tf32), ("fp8", cls.fp8)) if has)


def class_list() -> str:
    """Return a Markdown table of every hardware class (``doctor --hardware list``)."""
    lines = ["| class | what | matrix units | autocast | GradScaler | Keras policy | profile |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| `{c.name}` | {c.title} | {_units(c) or 'fp32 only'} | {c.amp_dtype} | "
              f"{'yes' if c.grad_scaler else 'no'} | {c.keras_policy} | {c.profile} |"
              for c in hardware.CLASSES.values()]
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
    peaks = ", ".join(f"{k} {v:g}" for k, v in cls.peak_tflops.items())
    lines = [heading or f"## Hardware class: {cls.name}", "", f"- {cls.title} (kind {cls.kind})",
             f"- native matrix units: {_units(cls) or 'none beyond fp32'}"]
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
        lines.append(f"- attention: {cls.sdpa_backend(amp.dtype)}")
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


# ----------------------------------------------------------------------------- the notebooks
_PATTERN = "[0-9][0-9]_*.ipynb"


@dataclass(frozen=True)
class Requirement:
    """One thing a notebook needs to run in full, and whether this machine has it.

    Attributes:
        notebook: the notebook, e.g. ``"02 mixed precision"``.
        need: what is needed, e.g. ``"bf16 fast units (CPU AVX512-BF16/AMX or GPU sm_80+)"``.
        met: whether this machine has it.
        note: what was found, and what runs instead when it is missing.
    """

    notebook: str
    need: str
    met: bool
    note: str


def find_notebooks(folder: str | os.PathLike[str] = "notebooks") -> list[Path]:
    """Return the course notebooks in ``folder``, in order (``NN_name.ipynb``).

    Raises:
        FileNotFoundError: when the folder does not exist or holds no notebook.
    """
    root = Path(folder)
    found = sorted(root.glob(_PATTERN))
    if not found:
        raise FileNotFoundError(f"no NN_*.ipynb notebooks in {root.resolve()}")
    return found


def declared(source: str | os.PathLike[str]) -> dict[str, Any]:
    """Return what a notebook declares in its metadata: ``{"requires": [...], "needs": {...}}``.

    Args:
        source: the ``.ipynb`` file.

    Returns:
        ``requires``: a list of module names; ``needs``: ``{capability: what runs instead}``,
        in the notebook's order.  Both empty when the notebook declares nothing.

    Raises:
        ValueError: for a capability not in :data:`CAPABILITIES` (lists the known ones) or a
            malformed declaration.
    """
    import nbformat

    meta = nbformat.read(source, as_version=4).metadata.get("accelkit", {})
    requires, needs = meta.get("requires", []), meta.get("needs", {})
    if not isinstance(requires, list) or not all(isinstance(m, str) for m in requires) \
            or not isinstance(needs, dict) or not all(isinstance(v, str) for v in needs.values()):
        raise ValueError(f"{source}: metadata accelkit.requires must be a list of module names "
                         "and accelkit.needs a {capability: what runs instead} mapping")
    unknown = sorted(set(needs) - set(CAPABILITIES))
    if unknown:
        raise ValueError(f"{source}: unknown capability {', '.join(unknown)} in metadata "
                         f"accelkit.needs; known: {', '.join(CAPABILITIES)}")
    return {"requires": list(requires), "needs": dict(needs)}


def missing_modules(source: str | os.PathLike[str]) -> list[str]:
    """Return the modules a notebook requires (metadata ``accelkit.requires``) that are not importable.

    Notebook 05 requires JAX and Keras; a machine without them skips the notebook instead of
    failing (TensorFlow is only a need of 05's: its TensorFlow parts skip without it).
    """
    return _missing(declared(source)["requires"])


def _missing(modules: list[str]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _label(path: Path) -> str:
    return path.stem.replace("_", " ")


def check_needs(paths: list[Path], caps: dict[str, Any] | None = None) -> list[Requirement]:
    """Match each notebook's declared needs against this machine's capabilities.

    Args:
        paths: the notebooks (:func:`find_notebooks`).
        caps: :func:`capabilities`' dict; default: this machine's.

    Returns:
        One :class:`Requirement` per declared module and capability, in notebook order.

    Raises:
        ValueError: for a malformed declaration (see :func:`declared`).
    """
    caps = caps if caps is not None else capabilities()
    rows: list[Requirement] = []
    for path in paths:
        decl = declared(path)
        missing = _missing(decl["requires"])
        for mod in decl["requires"]:
            rows.append(Requirement(_label(path), f"{mod} installed (required)", mod not in missing,
                                    "installed" if mod not in missing else
                                    "not installed: make run and make verify skip this notebook"))
        for name, instead in decl["needs"].items():
            cap = caps[name]
            note = cap.found if cap.has or not instead else f"{cap.found}; {instead}"
            rows.append(Requirement(_label(path), cap.what, cap.has, note))
    return rows


def readiness(rows: list[Requirement]) -> list[str]:
    """Return one verdict line per notebook from :func:`check_needs`' rows, in notebook order.

    ``ready: runs in full here`` when every need is met; ``ready; falls back where it needs:
    ...`` naming the unmet needs (what runs instead is in the table above); ``cannot run: ...`` when a
    required module is missing (``make run`` and ``make verify`` then skip the notebook).
    """
    by_nb: dict[str, list[Requirement]] = {}
    for r in rows:
        by_nb.setdefault(r.notebook, []).append(r)
    lines = []
    for nb, reqs in by_nb.items():
        missing = [r.need for r in reqs if not r.met and r.need.endswith("(required)")]
        unmet = [r.need for r in reqs if not r.met and not r.need.endswith("(required)")]
        verdict = (f"cannot run: {'; '.join(missing)}" if missing else
                   f"ready; falls back where it needs: {'; '.join(unmet)}" if unmet else
                   "ready: runs in full here")
        lines.append(f"- {nb}: {verdict}")
    return lines


def default_folder() -> Path:
    """Return ``./notebooks`` when it holds notebooks, else the checkout's ``notebooks/`` folder."""
    here = Path("notebooks")
    if any(here.glob(_PATTERN)):
        return here
    return Path(__file__).resolve().parents[1] / "notebooks"


def doctor(hardware_name: str | None = None,
           notebooks: str | os.PathLike[str] | None = None) -> str:
    """Return the doctor report: this machine, or the decisions for a named hardware class.

    Used by ``python -m accelkit doctor [--hardware NAME|list]``.  Does not import TensorFlow
    or initialise CUDA; with ``hardware_name`` it does not probe the device at all.

    Args:
        hardware_name: ``None`` for this machine (hardware card, notebook requirements, the
            class and its decisions); ``"list"`` for the table of classes; a class name
            (``"t4"``) for that class's card and decisions.
        notebooks: the folder whose notebooks' requirements are checked; default
            :func:`default_folder`.  Without notebooks the table says so.

    Returns:
        Markdown text.

    Raises:
        KeyError: for an unknown class name, listing the known ones.
        ValueError: for a notebook with a malformed declaration.

    Example: ``print(ak.env.doctor("t4"))``
    """
    from accelkit import config, precision

    if hardware_name == "list":
        return class_list()
    if hardware_name is not None:
        return class_card(hardware.get(hardware_name))
    info = hardware_summary()
    folder = Path(notebooks) if notebooks is not None else default_folder()
    lines = [hardware_card_markdown(info), "", "## Notebook requirements", ""]
    rows: list[Requirement] = []
    try:
        rows = check_needs(find_notebooks(folder), capabilities(info))
    except FileNotFoundError as exc:
        lines.append(f"{exc} (pass --notebooks FOLDER)")
    else:
        lines += ["| notebook | needs | here | note |", "|---|---|---|---|"]
        lines += [f"| {r.notebook} | {r.need} | {'yes' if r.met else 'no'} | {r.note} |"
                  for r in rows]
    lines += ["", f"Size profile: {config.profile()}", "",
              class_card(hardware.for_device(), heading="## This machine's hardware class",
                             path=precision.amp_path())]  # a class whose CPUs disagree: measured
    if rows:  # last, so the end of the output answers "is this machine ready?"
        lines += ["", "## Ready? (one line per notebook, for this machine)", ""] + readiness(rows)
    return "\n".join(lines)
