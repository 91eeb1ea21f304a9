"""accelkit.scripts: find, show, diff and import worker scripts; the files they write."""

import sys
import textwrap

import pytest

from accelkit import scripts


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def test_script_regions_and_diff(tmp_path):
    a = _script(tmp_path, "a.py", "x = 1\n# region core\ny = 2\n# endregion\n")
    b = _script(tmp_path, "b.py", "x = 1\n# region core\ny = 3\n# endregion\n")
    assert scripts.script_source(a, "core") == "y = 2"
    assert scripts.script_source(a) == "x = 1\n# region core\ny = 2\n# endregion"
    with pytest.raises(ValueError, match="region nope"):
        scripts.script_source(a, "nope")
    diff = scripts.script_diff(a, b)
    assert "-y = 2" in diff and "+y = 3" in diff


def test_worker_script_and_missing_files(tmp_path):
    assert scripts.worker_script("dp_grad.py").name == "dp_grad.py"
    with pytest.raises(FileNotFoundError, match="not found"):
        scripts.worker_script("no_such_worker.py")
    with pytest.raises(FileNotFoundError, match="did not write"):
        scripts.read_json(tmp_path / "none.json")
    (tmp_path / "r.json").write_text('{"a": 1}')
    assert scripts.read_json(tmp_path / "r.json") == {"a": 1}


def test_fresh_path_clears_a_stale_file_or_folder(tmp_path):
    stale = tmp_path / "a" / "r.json"
    stale.parent.mkdir()
    stale.write_text("{}")
    assert scripts.fresh_path(stale) == stale and not stale.exists()
    folder = tmp_path / "dir"
    (folder / "x").mkdir(parents=True)
    assert not scripts.fresh_path(folder).exists()
    new = scripts.fresh_path(tmp_path / "b" / "c" / "r.json")
    assert new.parent.is_dir() and not new.exists()


def test_show_prints_without_ipython(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "IPython", None)  # no IPython: plain print
    monkeypatch.setitem(sys.modules, "IPython.display", None)  # even if imported earlier
    scripts.show(scripts.worker_script("spawn_square.py"))
    assert "def square" in capsys.readouterr().out


def test_import_worker_loads_the_file_and_registers_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "spawn_square", raising=False)
    mod = scripts.import_worker("spawn_square.py")
    assert sys.modules["spawn_square"] is mod and callable(mod.square)
    folder = str(scripts.worker_script("spawn_square.py").parent)
    path = scripts.sys_path_for(mod.square)
    assert path[0] == folder or folder in sys.path
    assert scripts.sys_path_for(test_show_prints_without_ipython) == list(sys.path)  # importable
    with pytest.raises(FileNotFoundError):
        scripts.import_worker("no_such_worker.py")


def test_show_a_diff_without_ipython(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "IPython", None)
    monkeypatch.setitem(sys.modules, "IPython.display", None)
    a = _script(tmp_path, "a.py", "x = 1\n")
    b = _script(tmp_path, "b.py", "x = 2\n")
    scripts.show(b, diff_from=a)
    out = capsys.readouterr().out
    assert out.startswith("# a.py -> b.py") and "-x = 1" in out and "+x = 2" in out
