"""Notebook hygiene: stored outputs from one clean run, no errors, the house anatomy."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
REQUIRED_HEADINGS = ("## Setup", "## Summary", "## Exercises")


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _src(cell):
    return "".join(cell.get("source", ""))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks/NN_*.ipynb found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_executed_once_top_to_bottom_without_errors(path):
    nb = _load(path)
    assert nb["metadata"].get("kernelspec", {}).get("name") == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and _src(c).strip()]
    counts = [c.get("execution_count") for c in code]
    assert counts == list(range(1, len(code) + 1)), f"execution counts {counts[:10]}..."
    for i, cell in enumerate(code):
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", f"code cell {i} stored an error"
            if out.get("name") == "stderr":
                assert "Traceback" not in "".join(out.get("text", "")), f"code cell {i} traceback"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_anatomy(path):
    nb = _load(path)
    cells = nb["cells"]
    head = _src(cells[0])
    assert cells[0]["cell_type"] == "markdown"
    assert "colab.research.google.com" in head.splitlines()[0], "first line: Open in Colab badge"
    assert re.search(r"^# ", head, re.M), "a title"
    assert "You will learn" in head and "Runs on" in head
    assert cells[1]["cell_type"] == "code" and _src(cells[1]).startswith("# colab-bootstrap")
    text = "\n".join(_src(c) for c in cells if c["cell_type"] == "markdown")
    for heading in REQUIRED_HEADINGS:
        assert re.search(rf"^{re.escape(heading)}\b", text, re.M), f"missing {heading!r}"
    setup = "\n".join(_src(c) for c in cells[2:5] if c["cell_type"] == "code")
    assert "import accelkit as ak" in setup and "ak.config.profile()" in setup


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_banned_patterns_in_code(path):
    """Timing with time.time() and sizes chosen by ad-hoc cuda checks are not taught."""
    for i, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] != "code":
            continue
        src = _src(cell)
        assert "time.time()" not in src, f"cell {i}: time with ak.bench, not time.time()"
        assert "!pip" not in src, f"cell {i}: no !pip outside the bootstrap cell"
