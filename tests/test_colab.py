"""tools/colab.py: every notebook has a current Colab badge and bootstrap cell."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("colab", ROOT / "tools" / "colab.py")
colab = importlib.util.module_from_spec(_spec)
sys.modules["colab"] = colab
_spec.loader.exec_module(colab)

REPO = "https://github.com/someone/course"


def _notebook(path: Path, first_line: str, *, bootstrap: str | None = "# colab-bootstrap") -> Path:
    nb = nbformat.v4.new_notebook()
    title = nbformat.v4.new_markdown_cell(f"{first_line}\n# 99 · Test\nA promise.")
    work = nbformat.v4.new_code_cell("x = 1\nx", execution_count=2,
                                     outputs=[nbformat.v4.new_output(
                                         "execute_result", {"text/plain": "1"},
                                         execution_count=2)])
    nb.cells = [title] + ([nbformat.v4.new_code_cell(bootstrap, execution_count=1)]
                          if bootstrap is not None else []) + [work]
    nbformat.write(nb, path)
    return path


def _pyproject(path: Path, url: str = REPO) -> Path:
    path.write_text(f'[project]\nname = "x"\n\n[project.urls]\nRepository = "{url}"\n',
                    encoding="utf-8")
    return path


def test_repo_url_comes_from_pyproject():
    url = colab.repo_url()
    assert url.startswith("https://github.com/")
    assert url in colab.bootstrap_source(url)
    owner_repo = url.removeprefix("https://github.com/")
    assert colab.colab_url(url, "05_tpu.ipynb") == (
        f"https://colab.research.google.com/github/{owner_repo}/blob/main/notebooks/05_tpu.ipynb")


@pytest.mark.parametrize("bad", ["", "https://gitlab.com/a/b", "github.com/a/b"])
def test_repo_url_rejects_non_github(tmp_path, bad):
    with pytest.raises(ValueError, match="Repository"):
        colab.repo_url(_pyproject(tmp_path / "pyproject.toml", bad))


def test_repo_url_strips_git_suffix(tmp_path):
    assert colab.repo_url(_pyproject(tmp_path / "p.toml", REPO + ".git/")) == REPO


def test_every_notebook_is_current():
    """The stale-badge check: badges and bootstraps match pyproject.toml's address."""
    problems = colab.check(colab.notebooks(), colab.repo_url())
    assert not problems, ("run `python tools/colab.py --write`, then re-execute notebooks "
                          "whose bootstrap changed:\n" + "\n".join(map(str, problems)))


def test_every_notebook_has_badge_then_bootstrap():
    url = colab.repo_url()
    for path in colab.notebooks():
        nb = nbformat.read(path, as_version=4)
        assert nb.cells[0].source.split("\n")[0] == colab.badge_line(url, path.name), path.name
        assert nb.cells[1].cell_type == "code", path.name
        assert nb.cells[1].source == colab.bootstrap_source(url), path.name


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "colab.py"), *args],
                          capture_output=True, text=True, timeout=60)


def test_stale_badge_is_detected_and_fixed(tmp_path):
    pyproject = _pyproject(tmp_path / "pyproject.toml")
    old = colab.badge_line("https://github.com/old-owner/old-name", "99_test.ipynb")
    nb_path = _notebook(tmp_path / "99_test.ipynb", old,
                        bootstrap=colab.bootstrap_source(REPO))
    before = nbformat.read(nb_path, as_version=4)

    res = _run_cli("--check", "--pyproject", str(pyproject), str(nb_path))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "99_test.ipynb: badge stale" in res.stdout

    res = _run_cli("--write", "--pyproject", str(pyproject), str(nb_path))
    assert res.returncode == 0, res.stdout + res.stderr
    after = nbformat.read(nb_path, as_version=4)
    assert after.cells[0].source.split("\n")[0] == colab.badge_line(REPO, "99_test.ipynb")
    assert after.cells[0].source.split("\n")[1:] == before.cells[0].source.split("\n")[1:]
    assert after.cells[1:] == before.cells[1:]  # bootstrap and work cells, outputs untouched

    res = _run_cli("--check", "--pyproject", str(pyproject), str(nb_path))
    assert res.returncode == 0, res.stdout + res.stderr


def test_placeholders_are_replaced_keeping_outputs(tmp_path):
    nb_path = _notebook(tmp_path / "98_x.ipynb", colab.PLACEHOLDER)
    problems = colab.check([nb_path], REPO, write=True)
    assert [p.what for p in problems] == ["badge placeholder", "bootstrap stale"]
    nb = nbformat.read(nb_path, as_version=4)
    assert nb.cells[0].source.startswith(colab.badge_line(REPO, "98_x.ipynb") + "\n# 99 · Test")
    assert nb.cells[1].source == colab.bootstrap_source(REPO)
    assert nb.cells[1].execution_count == 1
    assert nb.cells[2].outputs[0]["data"]["text/plain"] == "1"
    assert colab.check([nb_path], REPO) == []  # idempotent


def test_missing_badge_and_bootstrap_are_inserted(tmp_path):
    nb_path = _notebook(tmp_path / "97_y.ipynb", "# 97 · Title", bootstrap=None)
    problems = colab.check([nb_path], REPO, write=True)
    assert [p.what for p in problems] == ["badge missing", "bootstrap missing"]
    nb = nbformat.read(nb_path, as_version=4)
    assert nb.cells[0].source.split("\n")[:3] == [colab.badge_line(REPO, "97_y.ipynb"), "",
                                                  "# 97 · Title"]
    assert nb.cells[1].source == colab.bootstrap_source(REPO)
    assert nb.cells[2].source == "x = 1\nx"
    nbformat.validate(nb)


def test_code_first_cell_is_reported_not_fixed(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("1")]
    nbformat.write(nb, tmp_path / "96_z.ipynb")
    problems = colab.check([tmp_path / "96_z.ipynb"], REPO, write=True)
    assert len(problems) == 1 and not problems[0].fixable


def _exec_bootstrap(monkeypatch, *, colab_loaded: bool, installed: set[str],
                    tpu: bool = False, cloned: bool = False) -> list[str]:
    """Run the bootstrap's IPython-transformed source with a fake ``get_ipython``.

    Returns the magics, shell commands and ``chdir`` calls it made, in order.
    """
    from IPython.core.inputtransformer2 import TransformerManager

    calls: list[str] = []

    class FakeIPython:
        def run_line_magic(self, name, line, _stack_depth=1):
            calls.append(f"%{name} {line}")

        def system(self, cmd):
            calls.append(f"!{cmd}")

    if colab_loaded:
        monkeypatch.setitem(sys.modules, "google.colab", object())
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name in installed else
                        (None if name in ("accelkit", "tensorflow") else real_find_spec(name, *a)))
    monkeypatch.setattr("os.path.exists", lambda p: tpu and p == "/dev/accel0")
    monkeypatch.setattr("os.path.isdir", lambda p: cloned and p == colab.COLAB_CLONE)
    monkeypatch.setattr("os.chdir", lambda p: calls.append(f"chdir {p}"))
    monkeypatch.delenv("COLAB_TPU_ADDR", raising=False)
    code = TransformerManager().transform_cell(colab.bootstrap_source(REPO))
    exec(compile(code, "<bootstrap>", "exec"), {"get_ipython": FakeIPython})
    return calls


def test_bootstrap_does_nothing_off_colab(monkeypatch, capsys):
    assert _exec_bootstrap(monkeypatch, colab_loaded=False, installed=set()) == []
    assert capsys.readouterr().out == ""


def test_bootstrap_clones_and_installs_on_colab(monkeypatch):
    calls = _exec_bootstrap(monkeypatch, colab_loaded=True, installed={"tensorflow"})
    clone = colab.COLAB_CLONE
    assert calls == [f"!git clone -q --depth 1 {REPO} {clone}",
                     f'%pip install -q "{clone}{{extra}}"',  # IPython expands {extra}
                     f"chdir {clone}/notebooks"]


def test_bootstrap_second_run_only_changes_folder(monkeypatch):
    calls = _exec_bootstrap(monkeypatch, colab_loaded=True, cloned=True,
                            installed={"tensorflow", "accelkit"})
    assert calls == [f"chdir {colab.COLAB_CLONE}/notebooks"]


def test_bootstrap_installs_tpu_tensorflow_on_tpu_runtime(monkeypatch):
    calls = _exec_bootstrap(monkeypatch, colab_loaded=True, installed=set(), tpu=True)
    assert len(calls) == 4
    assert "tensorflow-tpu" in calls[0] and "libtpu" in calls[0]
    assert calls[1].startswith("!git clone") and calls[2].startswith("%pip install")


def test_bootstrap_never_mounts_or_assumes_content_off_colab():
    lines = colab.bootstrap_source(REPO).splitlines()
    assert lines[0].startswith(colab.BOOTSTRAP_MARK)
    gate = lines.index('if "google.colab" in sys.modules:  # anywhere else: nothing to do')
    for i, line in enumerate(lines):
        if "/content" in line or "%pip" in line or "!git" in line or "chdir" in line:
            assert i > gate and line.startswith("    "), f"outside the Colab branch: {line}"
    assert not any("drive" in line or "!pip" in line for line in lines)


@pytest.mark.skipif(shutil.which("ruff") is None and not (Path(sys.executable).parent / "ruff")
                    .exists(), reason="ruff not installed")
def test_bootstrap_passes_ruff(tmp_path):
    nb_path = _notebook(tmp_path / "95_r.ipynb", colab.PLACEHOLDER)
    colab.check([nb_path], REPO, write=True)
    ruff = Path(sys.executable).parent / "ruff"
    res = subprocess.run([str(ruff) if ruff.exists() else "ruff", "check", "--no-cache",
                          "--config", str(ROOT / "pyproject.toml"), str(nb_path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
