"""tools/run_notebooks.py: executing notebooks headless; the summary itself is tested in test_report."""

import importlib.util
import json
import sys
from pathlib import Path

import nbformat
import pytest

from accelkit import env

ROOT = Path(__file__).resolve().parents[1]


def _tool(name):
    """Import tools/<name>.py (a maintainer's tool, not part of the package) as tools_<name>."""
    spec = importlib.util.spec_from_file_location(f"tools_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


runner = _tool("run_notebooks")


def _nb(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_run_all_gathers_results_never_writes_notebooks_and_a_partial_run_updates_it(tmp_path):
    """One full run, then ``only=["01_bad"]`` (three kernels; two tests started five)."""
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    good = _nb(nbdir / "00_good.ipynb",
               "import accelkit as ak\nak.report.record('t.speedup', 1.5, 'x')")
    bad = _nb(nbdir / "01_bad.ipynb", "import accelkit as ak\nak.report.record('t.b', 2.0)",
              "raise RuntimeError('boom')", "print('not reached')")
    nb = nbformat.read(bad, as_version=4)  # a stale output from an earlier run
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="STALE")]
    nbformat.write(nb, bad)
    before = good.read_bytes()
    summary = runner.run_all(nbdir, tmp_path / "build", profile="ci", timeout_s=120)
    assert good.read_bytes() == before
    assert summary["notebooks"]["00_good"]["status"] == "ok"
    assert summary["notebooks"]["01_bad"]["status"] == "error"
    assert "boom" in summary["notebooks"]["01_bad"]["error"]
    md = (tmp_path / "build" / "summary.md").read_text()
    assert "## Failures" in md and "boom" in md and "\x1b[" not in md, "plain text, no ANSI codes"
    data = json.loads((tmp_path / "build" / "results.json").read_text())
    assert data["results"]["t.speedup"] == {"value": 1.5, "unit": "x", "notebook": "00_good"}
    assert "Hardware card" in md and "`t.speedup`" in md
    assert (tmp_path / "build" / "00_good.html").exists()
    # the partial run keeps 00_good's entry and result, and clears the stale output
    summary = runner.run_all(nbdir, tmp_path / "build", profile="ci", only=["01_bad"])
    assert set(summary["notebooks"]) == {"00_good", "01_bad"}
    assert set(summary["results"]) == {"t.speedup", "t.b"}
    executed = nbformat.read(tmp_path / "build" / "01_bad.ipynb", as_version=4)
    assert executed.cells[2].outputs == [] and executed.cells[2].execution_count is None


def test_refuses_to_write_into_notebooks_folder(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    src = _nb(nbdir / "00_x.ipynb", "1")
    with pytest.raises(ValueError, match="never next to"):
        runner.run_all(nbdir, nbdir)
    with pytest.raises(ValueError, match="never next to"):
        runner.execute(src, src)


def test_only_matching_nothing_is_a_clear_error(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _nb(nbdir / "00_x.ipynb", "1")
    with pytest.raises(FileNotFoundError, match="matches --only 99"):
        runner.run_all(nbdir, tmp_path / "build", profile="ci", only=["99"])


def test_notebook_requiring_an_absent_package_is_skipped(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    path = _nb(nbdir / "00_needs.ipynb", "raise RuntimeError('must not run')")
    nb = nbformat.read(path, as_version=4)
    nb.metadata["accelkit"] = {"requires": ["no_such_module_xyz", "json"]}
    nbformat.write(nb, path)
    assert env.missing_modules(path) == ["no_such_module_xyz"]
    summary = runner.run_all(nbdir, tmp_path / "build", profile="ci")
    assert summary["notebooks"]["00_needs"] == {"status": "skipped", "wall_s": 0.0,
                                                "error": "not installed: no_such_module_xyz"}
    assert "## Failures" not in (tmp_path / "build" / "summary.md").read_text()


def test_a_timed_out_cell_is_named_in_one_useful_line():
    from nbclient.exceptions import CellTimeoutError
    from nbformat.v4 import new_code_cell

    exc = CellTimeoutError.error_from_timeout_and_cell(
        "Cell execution timed out", 600, new_code_cell("slow_step()\nmore()"))
    line = runner.timeout_message(exc)
    assert line.startswith("A cell timed out") and "after 600 seconds" in line, line
    assert line.endswith("Cell: slow_step()") and "\n" not in line, line
