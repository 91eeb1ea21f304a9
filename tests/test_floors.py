"""tools/floors.py: evidence and deep-dive cells are titled and folded; no checks on top."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("floors", ROOT / "tools" / "floors.py")
floors = importlib.util.module_from_spec(_spec)
sys.modules["floors"] = floors
_spec.loader.exec_module(floors)


def _nb(*sources: str) -> dict:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 99 · Test")]
    nb.cells += [nbformat.v4.new_code_cell(s) for s in sources]
    return json.loads(nbformat.writes(nb))


def test_titles_decide_the_floor_and_machinery_on_top_is_found():
    nb = _nb("y = model(x)\nprint(y.shape)",
             "#@title Evidence: same result\nassert torch.equal(a, b)\nak.report.record('k', 1, 'x')",
             "#@title Deep dive (optional): the kernels\nprint(code)",
             "z = f(x)\nassert z > 0  # a check left among the lesson")
    got = floors.survey(nb, "99_test.ipynb")
    assert (got.code_cells, got.evidence, got.deep_dives) == (4, 1, 1)
    assert got.unfolded == (2, 3) and got.machinery_on_top == (4,)


def test_write_folds_titled_cells_only_and_check_then_passes(tmp_path):
    path = tmp_path / "07_training_jobs.ipynb"  # a STRICT name: machinery on top is a problem
    path.write_text(json.dumps(_nb("x = 1", "#@title Evidence: x\nassert x == 1")))
    assert floors.main(["--check", str(path)]) == 1  # titled, not folded
    assert floors.main(["--write", str(path)]) == 0
    cells = json.loads(path.read_text())["cells"]
    assert floors.is_folded(cells[2]) and not floors.is_folded(cells[1])
    assert floors.main(["--check", str(path)]) == 0
    path.write_text(json.dumps(_nb("x = 1\nassert x == 1")))
    assert floors.main(["--check", str(path)]) == 1  # an assert on the learner's floor


def test_the_course_notebooks_pass_the_check():
    found = [p for path in floors.notebooks()
             for p in floors.problems(floors.survey(json.loads(path.read_text()), path.name))]
    assert not found, "\n".join(found)
