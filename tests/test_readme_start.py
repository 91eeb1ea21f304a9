"""README.md's start box: the three ways in point at things that exist and agree with the repo."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("colab_tool", ROOT / "tools" / "colab.py")
colab = importlib.util.module_from_spec(_spec)
sys.modules["colab_tool"] = colab
_spec.loader.exec_module(colab)

README = (ROOT / "README.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def start_box() -> str:
    """The block quote right after the opening paragraph (the start box)."""
    m = re.search(r"^> \*\*Start here.*?(?=^## )", README, flags=re.M | re.S)
    assert m, "README.md has no '> **Start here' box before its first ## heading"
    assert README.index(m.group(0)) < README.index("\n## "), "the start box must come first"
    return m.group(0)


def test_colab_path_opens_notebook_00_like_its_own_badge():
    badge = colab.badge_line(colab.repo_url(ROOT / "pyproject.toml"), "00_device_setup.ipynb")
    assert badge in start_box(), f"the start box's badge is not {badge}"
    assert "T4 GPU" in start_box() and "estimate" in start_box()


def test_laptop_path_is_a_learner_install_without_dev_extras():
    box = start_box()
    (cmd,) = [ln for ln in box.splitlines() if "pip install" in ln]
    assert "-c constraints.txt" in cmd and "[dev]" not in cmd, cmd
    extras = re.search(r'-e "\.\[([\w,]+)\]"', cmd).group(1).split(",")
    optional = PYPROJECT["project"]["optional-dependencies"]
    assert set(extras) <= set(optional) - {"dev"}, extras
    installed = " ".join(pkg for e in extras for pkg in optional[e]) + " " + cmd
    assert "jupyterlab" in installed and "ipywidgets" in installed, cmd  # a learner can open the lab
    floor = PYPROJECT["project"]["requires-python"].removeprefix(">=")
    assert f"Python ≥ {floor}" in box, f"the box must state requires-python ({floor})"


def test_classroom_path_and_links_exist():
    box = start_box()
    for target in re.findall(r"\]\(((?!https?:|#)[^)]+)\)", box):
        assert (ROOT / target).exists(), f"the start box links {target}, which does not exist"
    assert "(TEACHING.md)" in box and "(docs/RECIPES.md)" in box
    assert "00 → 02 → 03 → 06" in box and "<!-- course-time:start -->" in box
