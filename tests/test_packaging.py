"""The project's files agree with each other: environment.yml, pyproject, constraints, CI."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: tomli, pinned in constraints.txt for < 3.11 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;@]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _environment_python() -> str:
    return re.search(r"^\s+- python=(\d+\.\d+)$", (ROOT / "environment.yml").read_text(),
                     re.M).group(1)


def _applies(req: str, python: str | None) -> bool:
    """False for a ``; python_version < "X.Y"`` requirement when ``python`` is X.Y or later."""
    m = re.search(r";\s*python_version\s*<\s*['\"](\d+)\.(\d+)['\"]", req)
    return python is None or m is None or tuple(map(int, python.split("."))) < (
        int(m.group(1)), int(m.group(2)))


def _pyproject_packages(python: str | None = None) -> set[str]:
    """The packages pyproject names (for ``python``: those it installs there)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = meta["dependencies"] + meta["optional-dependencies"]["dev"]
    return {_name(r) for r in reqs if _applies(r, python)}


def _environment_packages() -> set[str]:
    names = set()
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"^\s{6}- (\S+)$", line)
        if m and not m.group(1).startswith(("-", ".")):
            names.add(_name(m.group(1)))
    return names


def test_environment_yml_names_the_same_packages_as_pyproject():
    assert _environment_packages() == _pyproject_packages(_environment_python())
    assert _applies("tomli; python_version < '3.11'", "3.10")
    assert not _applies("tomli; python_version < '3.11'", "3.11")


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
    assert "make ci" in readme and re.search(r"^make ci$", ci, re.M)


def test_tomllib_is_never_imported_without_its_310_fallback():
    """pyproject allows Python 3.10, which has no tomllib: every import needs the tomli fallback."""
    for path in [*ROOT.glob("accelkit/*.py"), *ROOT.glob("tests/*.py"), *ROOT.glob("tools/*.py")]:
        text = path.read_text(encoding="utf-8")
        if re.search(r"^\s*import tomllib", text, re.M):
            assert "import tomli as tomllib" in text, f"{path.name}: tomllib without fallback"


def test_pre_commit_hooks_use_the_venv_and_existing_files():
    """Hooks are local (no network) and every path they name exists."""
    text = (ROOT / ".pre-commit-config.yaml").read_text()
    assert "repo: local" in text and "https://" not in text
    for entry in re.findall(r"^\s+entry: (.+)$", text, re.M):
        for word in entry.split():
            if "/" in word:
                assert (ROOT / word).exists() or word.startswith(".venv/"), word
    assert re.search(r"^\s+- id: mypy$", text, re.M) and re.search(r"^\s+- id: ruff$", text, re.M)


def test_make_test_runs_lint_types_units_and_nbval_and_ci_adds_the_slow_tests():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: lint typecheck unit nbval\b", makefile, re.M)
    # fails if CI stops running a step of make test, the slow tests or the second passes (laptop
    # class, Colab's versions), or runs a timed pass before the background installs are waited for
    recipe = re.search(r"^ci:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "no ci target"
    steps = ["browser", "colab_runtime.py venv", "lint typecheck unit", "wait $$browser", "slow",
             "wait $$colab", "nbval nbval-laptop nbval-colab"]
    at = [recipe.group(1).find(step) for step in steps]
    assert -1 not in at and at == sorted(at), dict(zip(steps, at))
    assert '-m "not slow"' in makefile and "-m slow" in makefile


@pytest.mark.slow  # starts make
def test_nbval_targets_log_claims_to_an_absolute_path():
    """nbval runs each kernel in notebooks/: a relative ACCELKIT_CLAIMS_LOG would point there."""
    if shutil.which("make") is None:
        pytest.skip("no make here")
    for target in ("nbval", "nbval-laptop", "nbval-colab"):
        dry = subprocess.run(["make", "-n", "-C", str(ROOT), target], capture_output=True,
                             text=True, check=True).stdout
        logs = re.findall(r"ACCELKIT_CLAIMS_LOG=(\S+)", dry)
        assert logs and all(Path(p).is_absolute() for p in logs), (target, logs)
        assert "tools/claim_margins.py" in dry, target  # the table is printed, passed or failed


def test_claims_data_ships_with_the_package_and_names_only_known_claims():
    """The floors and their measurements live in accelkit/claims.toml (package data), not in code."""
    import ast

    from accelkit import claims

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # fails if a wheel (Colab's non-editable install) would ship without claims.toml
    assert "*.toml" in pyproject["tool"]["setuptools"]["package-data"]["accelkit"]
    data = tomllib.loads(claims.DATA_FILE.read_text(encoding="utf-8"))
    names: set[str] = set()

    def claim_names(table: dict) -> None:  # a claim: {floor, why}, or a re-measurement string
        for key, value in table.items():
            if isinstance(value, dict) and "floor" not in value:
                claim_names(value)  # per class, or [remeasured] per class and source
            else:
                names.add(key)

    claim_names({k: v for k, v in data.items() if k != "text"})
    assert len(names) > 15  # fails if the walk above stops finding the claims
    # fails if a floor is filed under a misspelt claim (it would never be checked)
    assert names <= set(claims.CLAIMS), names - set(claims.CLAIMS)
    tree = ast.parse((ROOT / "accelkit" / "claims.py").read_text(encoding="utf-8"))
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
            and isinstance(node.body[0], ast.Expr)}
    asserts = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)  # their messages
               and f.name in ("assert_close", "assert_speedup", "tolerance") for n in ast.walk(f)}
    literal = sum(len(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
                  and isinstance(n.value, str) and id(n) not in docs | asserts)
    # fails if measurement history drifts back into string literals (11.4k characters before
    # it moved to claims.toml; what is left: CLAIMS' descriptions and computed GPU reasons)
    assert literal < 4_000, literal


def test_hardware_table_ships_with_the_package():
    """The hardware classes live in accelkit/hardware.toml (package data), loaded by accelkit.hardware."""
    from fnmatch import fnmatch

    from accelkit import hardware

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["accelkit"]
    # fails if a wheel (Colab's non-editable install) would ship without hardware.toml
    assert any(fnmatch(hardware.DATA_FILE.name, p) for p in patterns)
    assert hardware.DATA_FILE.parent == ROOT / "accelkit" and hardware.CLASSES
