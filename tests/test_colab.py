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


def _notebook(path: Path, first_line: str, *, bootstrap: str | None = "# colab-bootstrap",
              folded: bool = False) -> Path:
    nb = nbformat.v4.new_notebook()
    title = nbformat.v4.new_markdown_cell(f"{first_line}\n# 99 · Test\nA promise.")
    work = nbformat.v4.new_code_cell("x = 1\nx", execution_count=2,
                                     outputs=[nbformat.v4.new_output(
                                         "execute_result", {"text/plain": "1"},
                                         execution_count=2)])
    boot = [] if bootstrap is None else [nbformat.v4.new_code_cell(
        bootstrap, execution_count=1, metadata=dict(colab.FOLDED_METADATA) if folded else {})]
    nb.cells = [title] + boot + [work]
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
        assert nb.cells[1].metadata.get("cellView") == "form", f"{path.name}: bootstrap not folded"


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "colab.py"), *args],
                          capture_output=True, text=True, timeout=60)


def test_stale_badge_is_detected_and_fixed(tmp_path):
    pyproject = _pyproject(tmp_path / "pyproject.toml")
    old = colab.badge_line("https://github.com/old-owner/old-name", "99_test.ipynb")
    nb_path = _notebook(tmp_path / "99_test.ipynb", old,
                        bootstrap=colab.bootstrap_source(REPO), folded=True)
    before = nbformat.read(nb_path, as_version=4)

    res = _run_cli("--check", "--pyproject", str(pyproject), str(nb_path))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "99_test.ipynb: badge stale" in res.stdout

    # the CLI's wiring (exit status, output) is checked above; the rest runs in this process
    assert colab.main(["--write", "--pyproject", str(pyproject), str(nb_path)]) == 0
    after = nbformat.read(nb_path, as_version=4)
    assert after.cells[0].source.split("\n")[0] == colab.badge_line(REPO, "99_test.ipynb")
    assert after.cells[0].source.split("\n")[1:] == before.cells[0].source.split("\n")[1:]
    assert after.cells[1:] == before.cells[1:]  # bootstrap and work cells, outputs untouched

    assert colab.main(["--check", "--pyproject", str(pyproject), str(nb_path)]) == 0


def test_placeholders_are_replaced_keeping_outputs(tmp_path):
    nb_path = _notebook(tmp_path / "98_x.ipynb", colab.PLACEHOLDER)
    problems = colab.check([nb_path], REPO, write=True)
    assert [p.what for p in problems] == ["badge placeholder", "bootstrap stale",
                                          "bootstrap not folded"]
    nb = nbformat.read(nb_path, as_version=4)
    assert nb.cells[0].source.startswith(colab.badge_line(REPO, "98_x.ipynb") + "\n# 99 · Test")
    assert nb.cells[1].source == colab.bootstrap_source(REPO)
    assert nb.cells[1].execution_count == 1
    assert nb.cells[2].outputs[0]["data"]["text/plain"] == "1"
    assert colab.check([nb_path], REPO) == []  # idempotent


def test_missing_badge_and_bootstrap_are_inserted(tmp_path):
    nb_path = _notebook(tmp_path / "97_y.ipynb", "# 97 · Title", bootstrap=None)
    problems = colab.check([nb_path], REPO, write=True)
    assert [p.what for p in problems] == ["badge missing", "bootstrap missing",
                                          "bootstrap not folded"]
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
                    tpu: str | None = None, cloned: bool = False,
                    tick_tensorflow_tpu: bool = False) -> list[str]:
    """Run the bootstrap's IPython-transformed source with a fake ``get_ipython``.

    ``tpu`` names the TPU device file that exists (``/dev/vfio/0`` on a v5e); with
    ``tick_tensorflow_tpu`` the form's checkbox is ticked (Colab rewrites the ``#@param`` line).
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
    monkeypatch.setattr("os.path.exists", lambda p: tpu is not None and p == tpu)
    monkeypatch.setattr("os.path.isdir", lambda p: cloned and p == colab.COLAB_CLONE)
    monkeypatch.setattr("os.chdir", lambda p: calls.append(f"chdir {p}"))
    monkeypatch.delenv("COLAB_TPU_ADDR", raising=False)
    source = colab.bootstrap_source(REPO)
    if tick_tensorflow_tpu:
        source = source.replace("INSTALL_TENSORFLOW_TPU = False", "INSTALL_TENSORFLOW_TPU = True")
    code = TransformerManager().transform_cell(source)
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


@pytest.mark.parametrize("device", ["/dev/vfio/0", "/dev/accel0"])  # v5e; older TPU VMs
def test_bootstrap_on_tpu_uses_the_runtime_and_skips_tensorflow(monkeypatch, capsys, device):
    calls = _exec_bootstrap(monkeypatch, colab_loaded=True, installed=set(), tpu=device)
    clone = colab.COLAB_CLONE
    assert calls == [f"!git clone -q --depth 1 {REPO} {clone}",
                     f'%pip install -q "{clone}{{extra}}"', f"chdir {clone}/notebooks"], calls
    assert not any("tensorflow" in c for c in calls), calls
    assert "INSTALL_TENSORFLOW_TPU" in capsys.readouterr().out


def test_bootstrap_installs_tensorflow_tpu_only_when_ticked_with_the_warning(monkeypatch, capsys):
    calls = _exec_bootstrap(monkeypatch, colab_loaded=True, installed=set(), tpu="/dev/vfio/0",
                            tick_tensorflow_tpu=True)
    assert len(calls) == 4, calls
    assert "tensorflow-tpu" in calls[0] and "libtpu" in calls[0], calls
    assert calls[1].startswith("!git clone") and calls[2].startswith("%pip install"), calls
    out = capsys.readouterr().out
    assert out.startswith("warning: ") and "#5174" in out and "#5419" in out, out


def test_bootstrap_installs_accelkit_without_tf_extra_on_tpu(monkeypatch):
    """On a TPU the install line gets extra == "" (pip then adds only what the runtime lacks)."""
    from IPython.core.inputtransformer2 import TransformerManager

    code = TransformerManager().transform_cell(colab.bootstrap_source(REPO))
    assert 'extra = "" if on_tpu else "[tf]"' in code


def test_bootstrap_is_folded_with_a_title(tmp_path):
    lines = colab.bootstrap_source(REPO).splitlines()
    assert lines[0].startswith("#@title ") and len(lines[0]) < 110, lines[0]
    assert lines[1].startswith(colab.BOOTSTRAP_MARK), lines[1]
    assert any(line.startswith("INSTALL_TENSORFLOW_TPU = False  #@param") for line in lines)
    nb_path = _notebook(tmp_path / "94_f.ipynb", colab.PLACEHOLDER)
    colab.check([nb_path], REPO, write=True)
    meta = nbformat.read(nb_path, as_version=4).cells[1].metadata
    assert meta["cellView"] == "form" and meta["jupyter"]["source_hidden"] is True, meta


def test_unfolded_bootstrap_is_reported_and_folded_keeping_other_metadata(tmp_path):
    nb_path = _notebook(tmp_path / "93_g.ipynb", colab.badge_line(REPO, "93_g.ipynb"),
                        bootstrap=colab.bootstrap_source(REPO))
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells[1].metadata["tags"] = ["keep"]
    nbformat.write(nb, nb_path)
    assert [p.what for p in colab.check([nb_path], REPO)] == ["bootstrap not folded"]
    colab.check([nb_path], REPO, write=True)
    nb = nbformat.read(nb_path, as_version=4)
    assert nb.cells[1].metadata["tags"] == ["keep"]
    nbformat.validate(nb)
    assert colab.check([nb_path], REPO) == []


def test_old_bootstrap_without_title_is_recognised_and_replaced(tmp_path):
    old = colab.bootstrap_source(REPO).split("\n", 1)[1]  # the mark on the first line
    nb_path = _notebook(tmp_path / "92_h.ipynb", colab.badge_line(REPO, "92_h.ipynb"), bootstrap=old)
    problems = colab.check([nb_path], REPO, write=True)
    assert [p.what for p in problems] == ["bootstrap stale", "bootstrap not folded"], problems
    assert len(nbformat.read(nb_path, as_version=4).cells) == 3  # replaced, not inserted


def test_bootstrap_never_mounts_or_assumes_content_off_colab():
    lines = colab.bootstrap_source(REPO).splitlines()
    assert lines[1].startswith(colab.BOOTSTRAP_MARK)
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


@pytest.mark.slow
def test_bootstrap_is_folded_when_make_lab_opens_notebook_00(tmp_path, playwright_python):
    """tools/browser_check.py --check bootstrap: `make lab` in this checkout, headless Chromium
    on notebook 00, the bootstrap cell collapsed to its #@title line (issue 13)."""
    import json

    py = playwright_python
    if shutil.which("make") is None:
        pytest.skip("no make")
    tool = ROOT / "tools" / "browser_check.py"
    run = subprocess.run([py, str(tool), "--check", "bootstrap", "--repo", str(ROOT), "--start",
                          "make", "--python", sys.executable, "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    seen = json.loads((tmp_path / "bootstrap_check.json").read_text())
    assert seen["bootstrap_placeholder_text"].strip() == colab.TITLE, seen  # the folded line
    assert not seen["bootstrap_editor_visible"] and seen["title"].startswith("00"), seen
