"""The course's notebooks as data: which there are, what each needs, and the ``doctor`` report.

Each notebook declares what it needs in its own metadata (one source; nothing here lists the
notebooks)::

    {"accelkit": {"requires": ["tensorflow"],
                  "needs": {"tpu": "TPU-only cells skip with a message"}}}

* ``requires``: modules without which the notebook cannot run at all; ``make run`` and
  ``make verify`` skip it (:func:`missing_modules`).
* ``needs``: capabilities (keys of :data:`accelkit.env.CAPABILITIES`) whose absence makes some
  cells skip or fall back; the value says what runs instead.

Owns: finding the notebooks (:func:`find_notebooks`), reading those declarations
(:func:`declared`), matching them against what this machine has (:func:`check`, the only
place where a notebook's needs meet a machine), the verdict per notebook (:func:`readiness`) and
the ``python -m accelkit doctor`` report (:func:`doctor`).  Lives elsewhere: what the machine
has and the hardware-class cards in :mod:`accelkit.env`; executing notebooks in
``tools/run_notebooks.py``; nbval records in ``tools/verify.py``.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
        ValueError: for a capability :mod:`accelkit.env` does not know (lists the known ones)
            or a malformed declaration.
    """
    import nbformat

    from accelkit import env

    meta = nbformat.read(source, as_version=4).metadata.get("accelkit", {})
    requires, needs = meta.get("requires", []), meta.get("needs", {})
    if not isinstance(requires, list) or not all(isinstance(m, str) for m in requires) \
            or not isinstance(needs, dict) or not all(isinstance(v, str) for v in needs.values()):
        raise ValueError(f"{source}: metadata accelkit.requires must be a list of module names "
                         "and accelkit.needs a {capability: what runs instead} mapping")
    unknown = sorted(set(needs) - set(env.CAPABILITIES))
    if unknown:
        raise ValueError(f"{source}: unknown capability {', '.join(unknown)} in metadata "
                         f"accelkit.needs; known: {', '.join(env.CAPABILITIES)}")
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


def check(paths: list[Path], caps: dict[str, Any] | None = None) -> list[Requirement]:
    """Match each notebook's declared needs against this machine's capabilities.

    Args:
        paths: the notebooks (:func:`find_notebooks`).
        caps: :func:`accelkit.env.capabilities`' dict; default: this machine's.

    Returns:
        One :class:`Requirement` per declared module and capability, in notebook order.

    Raises:
        ValueError: for a malformed declaration (see :func:`declared`).
    """
    from accelkit import env

    caps = caps if caps is not None else env.capabilities()
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
    """Return one verdict line per notebook from :func:`check`'s rows, in notebook order.

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

    Example: ``print(ak.course.doctor("t4"))``
    """
    from accelkit import config, env, hardware, precision

    if hardware_name == "list":
        return env.class_list()
    if hardware_name is not None:
        return env.class_card(hardware.get(hardware_name))
    info = env.hardware_summary()
    folder = Path(notebooks) if notebooks is not None else default_folder()
    lines = [env.hardware_card_markdown(info), "", "## Notebook requirements", ""]
    rows: list[Requirement] = []
    try:
        rows = check(find_notebooks(folder), env.capabilities(info))
    except FileNotFoundError as exc:
        lines.append(f"{exc} (pass --notebooks FOLDER)")
    else:
        lines += ["| notebook | needs | here | note |", "|---|---|---|---|"]
        lines += [f"| {r.notebook} | {r.need} | {'yes' if r.met else 'no'} | {r.note} |"
                  for r in rows]
    lines += ["", f"Size profile: {config.profile()}", "",
              env.class_card(hardware.for_device(), heading="## This machine's hardware class",
                             path=precision.amp_path())]  # a class whose CPUs disagree: measured
    if rows:  # last, so the end of the output answers "is this machine ready?"
        lines += ["", "## Ready? (one line per notebook, for this machine)", ""] + readiness(rows)
    return "\n".join(lines)


__all__ = ["Requirement", "check", "declared", "default_folder", "doctor", "find_notebooks",
           "missing_modules", "readiness"]
