"""tools/setup_course.py: the set-up without make (Windows), and the offline wheelhouse path."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("setup_course", ROOT / "tools" / "setup_course.py")
sc = importlib.util.module_from_spec(_spec)
sys.modules["setup_course"] = sc
_spec.loader.exec_module(sc)

#: Two small pure-Python pins from constraints.txt: the offline test installs them.
TINY = ["iniconfig", "six"]


def _pin(name: str) -> str:
    match = re.search(rf"^{name}==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert match, f"{name} is not pinned in constraints.txt; pick another pure-Python pin"
    return match.group(1)


def test_uses_only_the_standard_library():
    """Learners run it with a bare Python, before any install."""
    text = (ROOT / "tools" / "setup_course.py").read_text(encoding="utf-8")
    imported = set(re.findall(r"^(?:import|from) (\w+)", text, re.M)) - {"__future__"}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_install_is_offline_exactly_when_given_a_wheelhouse(tmp_path):
    online = sc.install_command(Path("py"), None)
    assert "--no-index" not in online and online[-2:] == ["-e", f"{ROOT}[lab]"]
    assert online[online.index("-c") + 1] == str(sc.CONSTRAINTS)
    offline = sc.install_command(Path("py"), tmp_path)
    assert offline[offline.index("--no-index") + 1:offline.index("--no-index") + 3] == [
        "--find-links", str(tmp_path)]


def test_lab_allows_root_only_as_root():
    assert "--allow-root" in sc.lab_command(Path(".venv"), root=True)
    assert "--allow-root" not in sc.lab_command(Path(".venv"), root=False)
    assert any(a.endswith("notebooks") for a in sc.lab_command(Path(".venv"), root=False))


def test_lab_passes_further_options_on_and_other_commands_refuse_them(capsys):
    cmd = sc.lab_command(Path(".venv"), root=False, extra=["--port=8899", "--no-browser"])
    assert cmd[-2:] == ["--port=8899", "--no-browser"]
    with pytest.raises(SystemExit):
        sc.main(["doctor", "--port=8899", "--dry-run"])
    assert "only lab passes options on" in capsys.readouterr().err


def test_venv_python_per_os():
    expected = "Scripts/python.exe" if os.name == "nt" else "bin/python"
    assert sc.venv_python(Path("v")) == Path("v") / expected


def test_platform_tags_add_older_linux_tags_only():
    tags = sc.platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and "manylinux_2_17_x86_64" in tags
    assert "manylinux2014_x86_64" in tags and "manylinux_2_29_x86_64" not in tags
    assert sc.platform_tags("win_amd64") == ["win_amd64"]


def test_wheelhouse_downloads_every_pin_binary_only(tmp_path):
    cmd = sc.wheelhouse_command(tmp_path, "win_amd64", "3.12.4")
    assert cmd[cmd.index("-c") + 1] == str(sc.CONSTRAINTS) and "--only-binary=:all:" in cmd
    assert "torch==2.13.0" in cmd and not any(a.startswith("playwright") for a in cmd)  # CI only
    assert cmd[cmd.index("--platform") + 1] == "win_amd64"
    assert cmd[cmd.index("--python-version") + 1] == "3.12.4"
    assert all(b in cmd for b in sc.BUILD_BACKEND)  # offline editable install needs them


def test_stamp_is_shared_with_make(tmp_path):
    assert not sc.stamp_is_current(tmp_path)
    sc.venv_python(tmp_path).parent.mkdir(parents=True)
    sc.venv_python(tmp_path).touch()
    (tmp_path / ".installed-lab").touch()
    assert sc.stamp_is_current(tmp_path)  # the Makefile's LAB_STAMP: $(VENV)/.installed-lab


@pytest.mark.slow
def test_dry_run_lab_prints_the_steps_and_creates_nothing(tmp_path):
    wheels = tmp_path / "wh"
    wheels.mkdir()
    (wheels / "x-1-py3-none-any.whl").touch()
    venv = tmp_path / "venv"
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "setup_course.py"), "lab",
                          "--dry-run", "--venv", str(venv), "--wheelhouse", str(wheels)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    steps = [line for line in res.stdout.splitlines() if line.startswith("+ ")]
    assert len(steps) == 3, res.stdout
    assert "-m venv" in steps[0] and "--no-index" in steps[1] and "jupyter lab" in steps[2]
    assert ("--allow-root" in steps[2]) == sc.is_root(), steps[2]
    assert not venv.exists()


@pytest.mark.slow
def test_offline_install_from_a_tiny_wheelhouse(tmp_path):
    """pip download of two pins into a wheelhouse, then install with --no-index into a new venv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no site-wide find-links or index: only the wheelhouse
    wheels = tmp_path / "wheelhouse"
    res = subprocess.run(sc.wheelhouse_command(wheels, None, None, extra=TINY),
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sc.has_wheels(wheels), list(wheels.iterdir())
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    offline = dict(env, PIP_NO_INDEX="1", http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9")
    res = subprocess.run(sc.install_command(sc.venv_python(venv), wheels, TINY),
                         capture_output=True, text=True, timeout=300, env=offline)
    assert res.returncode == 0, res.stdout + res.stderr
    code = f"import importlib.metadata as m; print(' '.join(m.version(n) for n in {TINY!r}))"
    out = subprocess.run([str(sc.venv_python(venv)), "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == [_pin(n) for n in TINY], out  # fails if not the pinned versions
