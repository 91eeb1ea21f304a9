"""The project's files agree with each other: environment.yml, pyproject, constraints, CI."""

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;@]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject_packages() -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = meta["dependencies"] + meta["optional-dependencies"]["dev"]
    return {_name(r) for r in reqs}


def _environment_packages() -> set[str]:
    names = set()
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"^\s{6}- (\S+)$", line)
        if m and not m.group(1).startswith(("-", ".")):
            names.add(_name(m.group(1)))
    return names


def test_environment_yml_names_the_same_packages_as_pyproject():
    assert _environment_packages() == _pyproject_packages()


def test_every_package_is_pinned_in_constraints():
    pins = {_name(line) for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line and not line.startswith("#")}
    assert _pyproject_packages() <= pins


def test_torch_is_pinned_exactly():
    text = (ROOT / "constraints.txt").read_text()
    assert re.search(r"^torch==\d+\.\d+\.\d+$", text, re.M)


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make test" in ci
