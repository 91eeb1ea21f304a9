"""This machine, the notebooks' needs, the size profile; ``python -m accelkit.env`` (the doctor).

Owns the hardware card, what this machine has (:func:`capabilities`), a class's decisions
(:func:`class_card`), the notebooks' needs and the doctor, and the size profile, seeding and
scratch folder.  A notebook declares in its metadata ``{"accelkit": {"requires": ["jax"],
"needs": {"tpu": "what runs instead"}}}``: ``requires``, modules it cannot run without (``make
run``/``make verify`` skip it); ``needs``, keys of :data:`CAPABILITIES` whose absence makes
cells fall back.  Elsewhere: the class table (:mod:`accelkit.hardware`), the probes
(:mod:`accelkit.device`).  Nothing here initialises CUDA or imports TensorFlow unless asked.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import importlib.util
import os
import platform
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from accelkit import device, hardware
from accelkit import tf as tf_device

_LIBS = ("accelkit", "torch", "tensorflow", "keras", "numpy", "torch_xla")
T = TypeVar("T")

# ----------------------------------------------------------------------------- size profile
PROFILE_ENV = "ACCELKIT_PROFILE"
SCRATCH_ENV = "ACCELKIT_SCRATCH"
PROFILES = ("ci", "full")


@dataclass(frozen=True)
class Profile:
    """A resolved size profile: ``name`` (``"ci"``: a 2-core CPU runs a notebook in about a
    minute; ``"full"``: sizes that keep a GPU/TPU busy) and ``reason`` (why it was chosen)."""

    name: str
    reason: str

    @property
    def is_full(self) -> bool:
        """True in the ``full`` profile."""
        return self.name == "full"

    def pick(self, ci: T, full: T) -> T:
        """Return ``ci`` in the ``ci`` profile, ``full`` in ``full`` (``P.pick(ci=8, full=64)``)."""
        return full if self.is_full else ci

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"


def profile(name: str | None = None) -> Profile:
    """Resolve the size profile: ``name`` (``"ci"``, ``"full"``, ``"auto"``) or ``$ACCELKIT_PROFILE``
    (default ``"auto"``: ``full`` when :func:`accelkit.device.accelerator_name` finds a GPU/TPU,
    else ``ci``).  Resolve it once (``P = ak.env.profile()``) and pass it on.

    Raises:
        ValueError: for an unknown profile name (lists the valid ones).
    """
    raw = name if name is not None else os.environ.get(PROFILE_ENV, "auto")
    value = raw.strip().lower()
    if value in PROFILES:
        return Profile(value, f"set by {'argument' if name is not None else '$' + PROFILE_ENV}")
    if value != "auto":
        raise ValueError(f"unknown size profile {raw!r}; use one of 'ci', 'full' or 'auto' "
                         f"(e.g. {PROFILE_ENV}=ci)")
    accel = device.accelerator_name()
    return Profile("full", f"auto: {accel} found") if accel else Profile(
        "ci", "auto: no accelerator found")


def seed_everything(seed: int = 0) -> int:
    """Seed Python, NumPy, PyTorch (if imported) and TensorFlow/Keras (if imported); return ``seed``.

    Raises:
        ValueError: if ``seed`` is negative.
    """
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    import numpy as np

    np.random.seed(seed)
    if "torch" in sys.modules:
        import torch

        torch.manual_seed(seed)
    if "tensorflow" in sys.modules or "keras" in sys.modules:
        import keras

        keras.utils.set_random_seed(seed)
    return seed


def scratch_dir(name: str = "") -> Path:
    """Return a writable folder (created) for files a notebook makes: ``$ACCELKIT_SCRATCH`` (set by
    ``make run``) or ``<tmp>/accelkit-scratch``, with the optional sub-folder ``name``."""
    root = Path(os.environ.get(SCRATCH_ENV) or Path(tempfile.gettempdir()) / "accelkit-scratch")
    path = root / name if name else root
    path.mkdir(parents=True, exist_ok=True)
    return path


# ----------------------------------------------------------------------------- hardware card
def library_versions() -> dict[str, str | None]:
    """Return installed versions of the course's libraries (None when absent); imports none."""
    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {name: version(name) for name in _LIBS}


def torch_devices() -> list[device.DeviceInfo]:
    """Return :func:`accelkit.device.torch_devices` with each device's ``supports_*`` from its
    hardware class (the CPU's from :func:`accelkit.hardware.for_device`)."""
    out = []
    for d in device.torch_devices():
        if d.kind in ("cuda", "rocm"):
            cls = hardware.classify_gpu(d.description, d.compute_capability, d.kind, d.memory_bytes)
        else:
            cls = hardware.get("apple-mps") if d.kind == "mps" else hardware.for_device("cpu")
        out.append(dataclasses.replace(d, supports_fp16=cls.fp16_units, supports_bf16=cls.bf16_units))
    return out


def hardware_summary(tf: bool = False) -> dict[str, Any]:
    """Return the hardware card as a JSON-friendly dict: Python, platform, CPU (name, cores,
    ISA flags), RAM in bytes, TPU, torch's devices and best device, the hardware class, any
    emulation, library versions; ``tf=True`` adds TensorFlow's devices (imports it)."""
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
    info |= {"emulated": hardware.emulation_note(), "libraries": library_versions()}
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
                     "(`python -m accelkit.env --hardware NAME` shows its decisions)")
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
    """One thing a notebook may need: ``name`` (a key of :data:`CAPABILITIES`), ``what`` it is,
    whether this machine ``has`` it, and what was ``found`` here (``"no GPU"``)."""

    name: str
    what: str
    has: bool
    found: str


#: Every capability :func:`capabilities` reports (the keys notebooks name in ``needs``).
CAPABILITIES = {
    "cpu": "a CPU (any accelerator is optional)", "tensorflow": "TensorFlow installed",
    "gloo": "torch.distributed with gloo (CPU processes)", "nccl_multi_gpu": "NCCL and >= 2 GPUs",
    "bf16_units": "bf16 fast units (CPU AVX512-BF16/AMX or GPU sm_80+)",
    "fp16_tensor_cores": "GPU fp16 tensor cores (sm_70+)",
    "torch_compile": "torch.compile backend (C++ compiler on CPU, Triton on GPU)",
    "tpu": "a TPU attached", "torch_xla": "torch_xla installed"}


def _dist_backends() -> tuple[bool, bool]:
    """Return ``(gloo, nccl)`` availability in this torch build (no process group is made)."""
    if importlib.util.find_spec("torch") is None:
        return False, False
    import torch.distributed as dist

    return (dist.is_gloo_available(), dist.is_nccl_available()) if dist.is_available() \
        else (False, False)


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
    """Return ``{name: Capability}`` for every key of :data:`CAPABILITIES`, in order, from
    ``info`` (a :func:`hardware_summary` dict; default this machine's) and cheap probes
    (``torch.distributed`` backends, a C++ compiler on ``PATH``, installed packages)."""
    info = info or hardware_summary()
    libs = info.get("libraries", {})
    gpus = [d for d in info.get("torch_devices", []) if d["kind"] in ("cuda", "rocm")]
    cpu_cls = hardware.classify_cpu(info.get("cpu_features", {}), info.get("machine", "x86_64"))
    gpu_cls = [hardware.classify_gpu(g["description"], g.get("compute_capability"), g["kind"],
                                     g.get("memory_bytes")) for g in gpus]
    gloo, nccl = _dist_backends()
    compiles, compiler = _compile_backend(gpus)
    tpu, n_gpu, cpu_bf16 = bool(info.get("tpu_attached")), len(gpus), cpu_cls.bf16_units
    first = gpus[0]["description"] if gpus else ""
    found = {
        "cpu": (True, f"{info['cpu_count']} CPU cores" + (f"; GPU: {first}" if gpus else "")),
        "tensorflow": (bool(libs.get("tensorflow")), f"tensorflow {libs['tensorflow']}"
                       if libs.get("tensorflow") else "TensorFlow not installed"),
        "gloo": (gloo, f"gloo {'built' if gloo else 'absent'}"),
        "nccl_multi_gpu": (nccl and n_gpu >= 2, f"NCCL {'built' if nccl else 'absent'}, "
                           f"{n_gpu} GPU(s)"),
        "bf16_units": (cpu_bf16 or any(c.bf16_units for c in gpu_cls), f"CPU class "
                       f"{cpu_cls.name}: {'bf16 units present' if cpu_bf16 else 'no bf16 units'}"
                       + "".join(f"; GPU class {c.name}" for c in gpu_cls)),
        "fp16_tensor_cores": (any(c.tensor_cores for c in gpu_cls), first or "no GPU"),
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
    """Return hardware class ``cls``'s card and every decision the course takes on it (Markdown).

    Nothing is probed.  ``heading``: the first line (default ``"## Hardware class: <name>"``);
    ``path``: this machine's :class:`accelkit.precision.AmpPath`, whose measured claims
    replace the class's bf16 rows (shown only when given).
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
                     "matmul measurement (`ak.precision.amp_path()`), because this class's CPUs disagree")
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
    """One need of a ``notebook`` (``"02 mixed precision"``): the ``need``, whether it is
    ``met`` here, and a ``note``: what was found, and what runs instead when missing."""

    notebook: str
    need: str
    met: bool
    note: str


def find_notebooks(folder: str | os.PathLike[str] = "notebooks") -> list[Path]:
    """Return the course notebooks (``NN_name.ipynb``) in ``folder``, in order.

    Raises:
        FileNotFoundError: when the folder does not exist or holds no notebook.
    """
    found = sorted(Path(folder).glob(_PATTERN))
    if not found:
        raise FileNotFoundError(f"no NN_*.ipynb notebooks in {Path(folder).resolve()}")
    return found


def declared(source: str | os.PathLike[str]) -> dict[str, Any]:
    """Return what notebook ``source`` declares: ``{"requires": [module, ...], "needs":
    {capability: what runs instead}}`` (both empty when it declares nothing).

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
    """Return the modules notebook ``source`` requires (``accelkit.requires``) that are not importable."""
    return [m for m in declared(source)["requires"] if importlib.util.find_spec(m) is None]


def check_needs(paths: list[Path], caps: dict[str, Any] | None = None) -> list[Requirement]:
    """Return one :class:`Requirement` per module and capability the notebooks ``paths``
    declare, in order, matched against ``caps`` (default: this machine's :func:`capabilities`).

    Raises:
        ValueError: for a malformed declaration (see :func:`declared`).
    """
    caps = caps if caps is not None else capabilities()
    rows: list[Requirement] = []
    for path in paths:
        decl, label = declared(path), path.stem.replace("_", " ")
        for mod in decl["requires"]:
            has = importlib.util.find_spec(mod) is not None
            rows.append(Requirement(label, f"{mod} installed (required)", has, "installed" if has
                                    else "not installed: make run and make verify skip this notebook"))
        for name, instead in decl["needs"].items():
            cap = caps[name]
            note = cap.found if cap.has or not instead else f"{cap.found}; {instead}"
            rows.append(Requirement(label, cap.what, cap.has, note))
    return rows


def readiness(rows: list[Requirement]) -> list[str]:
    """Return one verdict line per notebook from :func:`check_needs`' rows: ``ready: runs in full
    here``, ``ready; falls back where it needs: ...`` or ``cannot run: <missing module>``."""
    lines = []
    for nb in dict.fromkeys(r.notebook for r in rows):
        reqs = [r for r in rows if r.notebook == nb and not r.met]
        missing = [r.need for r in reqs if r.need.endswith("(required)")]
        unmet = [r.need for r in reqs if not r.need.endswith("(required)")]
        verdict = (f"cannot run: {'; '.join(missing)}" if missing else
                   f"ready; falls back where it needs: {'; '.join(unmet)}" if unmet else
                   "ready: runs in full here")
        lines.append(f"- {nb}: {verdict}")
    return lines


def default_folder() -> Path:
    """Return ``./notebooks`` when it holds notebooks, else the checkout's ``notebooks/`` folder."""
    here = Path("notebooks")
    return here if any(here.glob(_PATTERN)) else Path(__file__).resolve().parents[1] / "notebooks"


def doctor(hardware_name: str | None = None,
           notebooks: str | os.PathLike[str] | None = None) -> str:
    """Return the doctor report (Markdown; imports no TensorFlow, initialises no CUDA).

    Args:
        hardware_name: ``None``: this machine (card, notebook requirements in ``notebooks``,
            default :func:`default_folder`, its class and decisions); ``"list"``: the table of
            classes; a class name (``"t4"``): that class's card, nothing probed.

    Raises:
        KeyError: for an unknown class name, listing the known ones.
        ValueError: for a notebook with a malformed declaration.
    """
    from accelkit import precision

    if hardware_name is not None:
        return class_list() if hardware_name == "list" else class_card(hardware.get(hardware_name))
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
    lines += ["", f"Size profile: {profile()}", "",
              class_card(hardware.for_device(), heading="## This machine's hardware class",
                             path=precision.amp_path())]  # a class whose CPUs disagree: measured
    if rows:  # last, so the end of the output answers "is this machine ready?"
        lines += ["", "## Ready? (one line per notebook, for this machine)", ""] + readiness(rows)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m accelkit.env [--hardware NAME|list] [--notebooks DIR] [--roofline]``: print
    the doctor report (or the measured roofline); return the exit status (0 ok, 2 usage)."""
    parser = argparse.ArgumentParser(prog="python -m accelkit.env", description="the doctor: "
                                     "this machine's card and readiness, or a class's decisions")
    parser.add_argument("--hardware", metavar="NAME", help="a class (t4, h200, cpu-avx2 ...) "
                        "or 'list'; nothing is probed")
    parser.add_argument("--notebooks", help="the notebooks to check (default: ./notebooks)")
    parser.add_argument("--roofline", action="store_true", help="print the measured roofline")
    parser.add_argument("--profile", help=f"for --roofline: ci, full or auto (${PROFILE_ENV})")
    args = parser.parse_args(argv)
    if args.roofline:
        from accelkit import roofline

        print(roofline.report(profile=profile(args.profile)))
        return 0
    try:
        print(doctor(args.hardware, args.notebooks))
    except KeyError as exc:
        print(f"accelkit doctor: {exc.args[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
