"""The two floors of a notebook: the lesson on top, the evidence and deep dives folded under it.

A learner reads the plain framework code, the measurement and one sentence of verdict; the
asserts, result records, intervals and margins live in folded **evidence** cells, and optional
depth in folded **deep dive** cells (HOUSE_STYLE.md, "Two floors"). A cell says which it is by
its first line, the way Colab titles a form:

    #@title Evidence: the fused result equals eager, and the speedup's interval
    #@title Deep dive (optional): what Inductor generated

Both are folded the same way as the Colab bootstrap (``tools/colab.py``): Colab's form view
(``"cellView": "form"``) and JupyterLab's hidden source (``"jupyter": {"source_hidden": true}``);
their outputs stay visible.

    python tools/floors.py --check   # exit 1: titled cells left unfolded, or machinery on top
    python tools/floors.py --write   # fold every titled cell (metadata only; outputs kept)
    python tools/floors.py --stats   # per notebook: cells, evidence, deep dives, machinery on top

*Machinery* is a line that checks or records rather than teaches (an ``assert``, an
``ak.report.record``/``ak.claims.assert_*`` call); ``--check``
lists each code cell on the learner's floor that still holds one, for the notebooks in :data:`STRICT`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from colab import NOTEBOOK_GLOB, ROOT, _source  # noqa: E402  (folding is the bootstrap's)
from colab import _fold as fold  # noqa: E402
from colab import _is_folded as is_folded  # noqa: E402

EVIDENCE = "#@title Evidence"
DEEP_DIVE = "#@title Deep dive (optional)"
MACHINERY = re.compile(r"^\s*assert\b|\bak\.(report\.record|claims\.assert_)")
#: Notebooks already written in two floors: machinery on their top floor fails ``--check``.
STRICT: frozenset[str] = frozenset({"01_data_vs_model_parallelism.ipynb", "02_mixed_precision.ipynb",
                                    "04_distributed_data_parallel.ipynb",
                                    "00_device_setup.ipynb", "05_tpu.ipynb", "06_capstone_gpt.ipynb",
                                    "03_operator_fusion.ipynb", "07_training_jobs.ipynb"})


@dataclass(frozen=True)
class Floors:
    """What one notebook holds, by floor.

    Attributes:
        notebook: the file name.
        code_cells: code cells in all.
        evidence: cells titled ``#@title Evidence``.
        deep_dives: cells titled ``#@title Deep dive (optional)``.
        unfolded: indices of titled cells whose folding metadata is missing.
        machinery_on_top: indices of untitled code cells holding a machinery line.
    """

    notebook: str
    code_cells: int
    evidence: int
    deep_dives: int
    unfolded: tuple[int, ...]
    machinery_on_top: tuple[int, ...]


def title_of(cell: dict) -> str | None:
    """Return ``"evidence"``, ``"deep dive"`` or ``None`` from a code cell's first line."""
    if cell.get("cell_type") != "code":
        return None
    first = _source(cell).lstrip().split("\n", 1)[0]
    if first.startswith(EVIDENCE):
        return "evidence"
    if first.startswith(DEEP_DIVE):
        return "deep dive"
    return None


def survey(nb: dict, name: str) -> Floors:
    """Return the :class:`Floors` of a notebook (a dict as read from its JSON)."""
    cells = nb.get("cells", [])
    code = [(i, c) for i, c in enumerate(cells) if c.get("cell_type") == "code"]
    titled = [(i, c, title_of(c)) for i, c in code]
    boot = {i for i, c in code if "# colab-bootstrap" in _source(c)}
    return Floors(
        notebook=name, code_cells=len(code),
        evidence=sum(t == "evidence" for _, _, t in titled),
        deep_dives=sum(t == "deep dive" for _, _, t in titled),
        unfolded=tuple(i for i, c, t in titled if t and not is_folded(c)),
        machinery_on_top=tuple(i for i, c, t in titled if t is None and i not in boot
                               and any(MACHINERY.search(line) for line in _source(c).split("\n"))))


def problems(floors: Floors) -> list[str]:
    """Return what ``--check`` reports for one notebook (empty: nothing to fix)."""
    out = [f"{floors.notebook}: cell {i} is titled but not folded (run tools/floors.py --write)"
           for i in floors.unfolded]
    if floors.notebook in STRICT:
        out += [f"{floors.notebook}: cell {i} checks or records on the learner's floor: move the "
                f"asserts/records into an '{EVIDENCE}: ...' cell" for i in floors.machinery_on_top]
    return out


def notebooks(folder: Path = ROOT / "notebooks") -> list[Path]:
    """Return the course's notebooks, in order."""
    return sorted(folder.glob(NOTEBOOK_GLOB))


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--check`` (default), ``--write`` or ``--stats`` over ``notebooks/``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--stats", action="store_true")
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)
    found: list[str] = []
    for path in args.paths or notebooks():
        nb = json.loads(path.read_text(encoding="utf-8"))
        if args.write:
            titled = [c for c in nb["cells"] if title_of(c) and not is_folded(c)]
            for cell in titled:
                fold(cell)
            if titled:
                path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
                print(f"{path.name}: folded {len(titled)} cell(s)")
            continue
        floors = survey(nb, path.name)
        if args.stats:
            print(f"{floors.notebook}: {floors.code_cells} code cells, {floors.evidence} evidence, "
                  f"{floors.deep_dives} deep dive(s), {len(floors.machinery_on_top)} with machinery "
                  "on top")
        found += problems(floors)
    if found:
        print("\n".join(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
