"""tools/colab_runtime.py: Colab's package versions, one file, rebuilt as a venv for nbval."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("colab_runtime", ROOT / "tools" / "colab_runtime.py")
colab_runtime = importlib.util.module_from_spec(_spec)
sys.modules["colab_runtime"] = colab_runtime
_spec.loader.exec_module(colab_runtime)


@pytest.mark.parametrize("runtime", ["gpu", "tpu"])
def test_each_runtime_is_pinned_dated_and_sourced(runtime):
    entry = colab_runtime.load(runtime)
    names = {line.split("==")[0].lower() for line in entry["packages"]}
    assert {"torch", "keras", "jax", "jaxlib", "numpy"} <= names
    assert ("tensorflow" in names) == entry["tensorflow"]  # the TPU runtime has no TensorFlow
    assert entry["source"].startswith("googlecolab/backend-info") and entry["date"][:4] >= "2026"
    assert {"pytest", "nbval"} <= {line.split("==")[0] for line in entry["runner"]}


def test_unpinned_lines_and_unknown_runtimes_are_refused(tmp_path):
    table = tmp_path / "t.toml"
    table.write_text('[gpu]\ntitle="x"\nsource="s"\ndate="d"\npython="3.13"\ntensorflow=false\n'
                     'packages=["torch>=2"]\n')
    with pytest.raises(ValueError, match="not pinned"):
        colab_runtime.load("gpu", table)
    with pytest.raises(KeyError, match="has no runtime 'tpu'; it has gpu"):
        colab_runtime.load("tpu", table)


def test_a_missing_python_names_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setattr(colab_runtime.Path, "home", lambda: tmp_path)
    monkeypatch.setattr(colab_runtime.shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match=r"python3\.99 under ~/\.pyenv"):
        colab_runtime.find_python("3.99")


def test_the_fingerprint_changes_with_any_pin():
    entry = colab_runtime.load("gpu")
    other = {**entry, "packages": [p.replace("torch==2.11.0", "torch==2.12.0") for p in entry["packages"]]}
    assert colab_runtime._fingerprint(entry) != colab_runtime._fingerprint(other)
    assert colab_runtime._fingerprint(entry) == colab_runtime._fingerprint(dict(entry))


def test_an_uncompiled_venv_lets_the_kernels_write_their_bytecode(monkeypatch):
    """pip installs without byte-compiling; with $PYTHONDONTWRITEBYTECODE set (some CI images)
    every kernel and worker would then recompile torch and TensorFlow on import, so the pass
    clears it."""
    calls = []
    monkeypatch.setattr(colab_runtime.subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    colab_runtime._pip(Path("py"), "torch==2.11.0")
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nnbval-colab:", 1)[1].split("\n\n", 1)[0]
    if "--no-compile" in calls[0]:  # fails if the pass stops clearing it
        assert "PYTHONDONTWRITEBYTECODE= " in recipe, recipe
