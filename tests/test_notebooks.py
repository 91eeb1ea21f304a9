"""Notebook hygiene: stored outputs from one clean run, no errors, the house anatomy."""

import ast
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
    boot_head = _src(cells[1]).split("\n")[:2]  # a "#@title" line, then the mark (tools/colab.py)
    assert cells[1]["cell_type"] == "code" and any(
        line.startswith("# colab-bootstrap") for line in boot_head), "cell 1: the Colab bootstrap"
    text = "\n".join(_src(c) for c in cells if c["cell_type"] == "markdown")
    for heading in REQUIRED_HEADINGS:
        assert re.search(rf"^{re.escape(heading)}\b", text, re.M), f"missing {heading!r}"
    setup = "\n".join(_src(c) for c in cells[2:5] if c["cell_type"] == "code")
    assert "import accelkit as ak" in setup and "ak.env.profile()" in setup


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_banned_patterns_in_code(path):
    """Timing with time.time() and sizes chosen by ad-hoc cuda checks are not taught."""
    for i, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] != "code":
            continue
        src = _src(cell)
        assert "time.time()" not in src, f"cell {i}: time with ak.bench, not time.time()"
        assert "!pip" not in src, f"cell {i}: no !pip outside the bootstrap cell"


def _python_source(cell_source):
    """Return a code cell's source as Python: IPython magics (``%``) and shell lines (``!``)
    become ``pass`` at the same indentation, so line numbers and blocks stay valid."""
    lines = []
    for line in cell_source.splitlines():
        stripped = line.lstrip()
        lines.append(line[: len(line) - len(stripped)] + "pass" if stripped.startswith(("%", "!"))
                     else line)
    return "\n".join(lines)


def asserts_without_message(cell_source):
    """Return ``(line number, first line)`` of each ``assert`` in the cell that has no message."""
    lines = cell_source.splitlines()
    tree = ast.parse(_python_source(cell_source))
    return [(node.lineno, lines[node.lineno - 1].strip()) for node in ast.walk(tree)
            if isinstance(node, ast.Assert) and node.msg is None]


def test_asserts_without_message_finds_them():
    src = "%matplotlib inline\nif x:\n    !ls\nassert a == 1\nassert b, 'b must hold'\n"
    assert asserts_without_message(src) == [(4, "assert a == 1")]
    assert asserts_without_message("assert (\n  a\n  and b\n), f'{a}'") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_assert_has_a_failure_message(path):
    """A notebook assert that fails must say what failed: ``assert cond, "what and why"``."""
    missing = [f"cell {i}, line {n}: {line}"
               for i, cell in enumerate(_load(path)["cells"]) if cell["cell_type"] == "code"
               for n, line in asserts_without_message(_src(cell))]
    assert not missing, "asserts without a failure message:\n" + "\n".join(missing)
