"""accelkit.course: notebook requirements come from the notebooks' metadata; the doctor report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from accelkit import course, env

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _nb(path, meta=None):
    nb = nbformat.v4.new_notebook()
    if meta is not None:
        nb.metadata["accelkit"] = meta
    nbformat.write(nb, path)
    return path


def _caps(**has):
    return {k: env.Capability(k, what, has.get(k, False), f"found {k}")
            for k, what in env.CAPABILITIES.items()}


def test_no_notebooks_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no NN_"):
        course.find_notebooks(tmp_path)


def test_declarations_are_read_and_checked(tmp_path):
    assert course.declared(_nb(tmp_path / "00_a.ipynb")) == {"requires": [], "needs": {}}
    path = _nb(tmp_path / "01_b.ipynb", {"requires": ["no_such_module_xyz", "json"],
                                         "needs": {"tpu": "TPU cells skip"}})
    assert course.missing_modules(path) == ["no_such_module_xyz"]
    with pytest.raises(ValueError, match="unknown capability warp_drive"):
        course.declared(_nb(tmp_path / "02_c.ipynb", {"needs": {"warp_drive": "x"}}))
    with pytest.raises(ValueError, match="list of module names"):
        course.declared(_nb(tmp_path / "03_d.ipynb", {"requires": "tensorflow"}))


def test_check_matches_needs_against_capabilities(tmp_path):
    path = _nb(tmp_path / "05_x.ipynb", {"requires": ["no_such_module_xyz"],
                                         "needs": {"tpu": "TPU cells skip", "gloo": "skip"}})
    rows = course.check([path], _caps(gloo=True))
    assert [(r.notebook, r.met) for r in rows] == [("05 x", False), ("05 x", True), ("05 x", False)]
    assert "make run and make verify skip" in rows[0].note
    assert rows[1].note == "found gloo", "a capability that is there: what was found"
    assert rows[2].need == env.CAPABILITIES["tpu"] and rows[2].note == "found tpu; TPU cells skip"


def test_every_course_notebook_declares_known_needs():
    """The metadata is the one source of the doctor's table: every notebook declares its needs."""
    for path in course.find_notebooks(NOTEBOOKS):
        assert course.declared(path)["needs"], f"{path.name} declares no accelkit.needs"
    # 05 runs without TensorFlow (Colab's TPU runtime has none): its TF parts skip, JAX runs
    assert course.declared(NOTEBOOKS / "05_tpu.ipynb")["requires"] == ["jax", "keras"]
    assert "tensorflow" in course.declared(NOTEBOOKS / "05_tpu.ipynb")["needs"]


def test_doctor_has_card_and_table():
    text = course.doctor(notebooks=NOTEBOOKS)
    assert "## Hardware card" in text and "| notebook | needs | here | note |" in text
    for nb in ("00 device setup", "01 data vs model parallelism", "02 mixed precision", "05 tpu"):
        assert nb in text
    assert "Size profile" in text
    assert "pass --notebooks" in course.doctor(notebooks=NOTEBOOKS / "nowhere")


@pytest.mark.slow
def test_doctor_neither_imports_tensorflow_nor_initialises_cuda():
    code = ("import sys, accelkit.course as c; c.doctor(); import torch; "
            "print('tensorflow' in sys.modules, torch.cuda.is_initialized())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["False", "False"]


def test_doctor_ends_with_one_readiness_line_per_notebook():
    text = course.doctor(notebooks=NOTEBOOKS)
    tail = [line for line in text.split("## Ready?", 1)[1].splitlines()[1:] if line]
    stems = [p.stem.replace("_", " ") for p in course.find_notebooks(NOTEBOOKS)]
    assert [line.split(":")[0] for line in tail] == [f"- {s}" for s in stems], tail
    assert text.rstrip().endswith(tail[-1]), "the verdicts close the report"


def test_readiness_verdicts():
    rows = [course.Requirement("00 a", "a CPU", True, ""),
            course.Requirement("01 b", "NCCL and >= 2 GPUs", False, ""),
            course.Requirement("02 c", "tensorflow installed (required)", False, ""),
            course.Requirement("02 c", "a TPU attached", False, "")]
    assert course.readiness(rows) == [
        "- 00 a: ready: runs in full here",
        "- 01 b: ready; falls back where it needs: NCCL and >= 2 GPUs",
        "- 02 c: cannot run: tensorflow installed (required)"]
