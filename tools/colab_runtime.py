"""Rebuild a Colab runtime's package versions in a venv, the way the bootstrap installs accelkit.

Colab preinstalls its own torch, TensorFlow, Keras and JAX; the bootstrap cell (tools/colab.py)
then runs ``pip install /content/accelkit[tf]`` with no constraints, so pip keeps what is there.
This tool builds that situation from ``colab_runtimes.toml`` (one table per runtime, with its
source and date), so ``make nbval-colab`` can run nbval over every notebook under Colab's
versions instead of ours (``constraints.txt``).

    python tools/colab_runtime.py venv gpu     # build/colab-gpu-venv (kept while the table holds)
    python tools/colab_runtime.py python gpu   # print the venv's interpreter (for make)
    python tools/colab_runtime.py show gpu     # the versions and their source

Differences from Colab, by necessity: PyPI's torch of the same version (Colab's GPU wheel is
``+cu128``, its TPU wheel ``+cpu`` from PyTorch's index; neither index is reachable from CI),
no ``torch_xla`` on the TPU set, a CPU instead of the accelerator, and accelkit installed
editable (``-e``) so the checkout under test is what runs.  Elsewhere: the bootstrap cell itself
is ``tools/colab.py``; the Makefile target is ``nbval-colab``.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "colab_runtimes.toml"
STAMP = ".colab-runtime.json"


def load(runtime: str, table: Path = TABLE) -> dict:
    """Return one runtime's table from ``colab_runtimes.toml`` (with the runner's packages).

    Returns:
        ``{"title", "source", "date", "python", "tensorflow", "packages", "runner"}``.

    Raises:
        KeyError: for a runtime the file does not have, naming those it has.
        ValueError: when a package line is not pinned with ``==`` (the pass must be exact).
    """
    data = tomllib.loads(table.read_text(encoding="utf-8"))
    runtimes = [k for k in data if k != "runner"]
    if runtime not in runtimes:
        raise KeyError(f"{table.name} has no runtime {runtime!r}; it has {', '.join(runtimes)}")
    entry = dict(data[runtime])
    entry["runner"] = list(data.get("runner", {}).get("packages", []))
    for line in entry["packages"] + entry["runner"]:
        if "==" not in line:
            raise ValueError(f"{table.name} [{runtime}]: {line!r} is not pinned with ==")
    return entry


def find_python(version: str) -> str:
    """Return the path of a working Python ``version`` interpreter (``"3.13"``): pyenv, then PATH.

    A pyenv shim on PATH for a version that is not active fails when run, so each candidate
    is run once (``--version``) before it is returned.

    Raises:
        FileNotFoundError: naming the places looked in (install that Python, or pyenv's).
    """
    pyenv = sorted(glob.glob(str(Path.home() / f".pyenv/versions/{version}*/bin/python{version}")))
    on_path = shutil.which(f"python{version}")
    for candidate in [*reversed(pyenv), *([on_path] if on_path else [])]:
        ok = subprocess.run([candidate, "--version"], capture_output=True).returncode == 0
        if ok:
            return candidate
    raise FileNotFoundError(f"no working python{version} under ~/.pyenv/versions/{version}* or on "
                            f"PATH: install Python {version} to rebuild Colab's runtime")


def _fingerprint(entry: dict) -> str:
    text = json.dumps({k: entry[k] for k in ("python", "packages", "runner", "tensorflow")},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def venv_dir(runtime: str) -> Path:
    """Return the venv folder for ``runtime``: ``build/colab-<runtime>-venv``."""
    return ROOT / "build" / f"colab-{runtime}-venv"


def _pip(py: Path, *args: str) -> None:
    # --no-compile: pip would byte-compile all ~15,000 files (CUDA torch, TensorFlow, JAX): 123 s
    # on a loaded 2-core Zen 3, against 34 s for the ~5,400 the kernels import (written on first
    # import: make nbval-colab clears $PYTHONDONTWRITEBYTECODE for that)
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--no-compile", *args], check=True)


def build(runtime: str) -> Path:
    """Build (or reuse) the venv of ``runtime`` and return its interpreter.

    Colab's packages, pinned, with the test runner in the same install (so it cannot
    upgrade one); then accelkit as the bootstrap installs it (``[tf]`` where the runtime has
    TensorFlow), without constraints: pip keeps the preinstalled versions, as on Colab.
    A venv whose stamp matches the table is reused; accelkit is reinstalled each time.

    Raises:
        subprocess.CalledProcessError: when pip fails (its output is above the error).
    """
    entry = load(runtime)
    where = venv_dir(runtime)
    py = where / "bin" / "python"
    stamp = where / STAMP
    want = _fingerprint(entry)
    have = json.loads(stamp.read_text())["fingerprint"] if stamp.exists() else None
    if have != want:
        if where.exists():
            shutil.rmtree(where)
        subprocess.run([find_python(entry["python"]), "-m", "venv", str(where)], check=True)
        _pip(py, *entry["packages"], *entry["runner"])  # one resolve; the == pins hold the runner
    extra = "[tf]" if entry["tensorflow"] else ""
    _pip(py, "-e", f"{ROOT}{extra}")
    stamp.write_text(json.dumps({"fingerprint": want, "runtime": runtime, "date": entry["date"]}))
    return py


def main(argv: list[str] | None = None) -> int:
    """Command line: ``venv``, ``python`` or ``show`` for one runtime of the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["venv", "python", "show"])
    parser.add_argument("runtime", help="a table of colab_runtimes.toml: gpu or tpu")
    args = parser.parse_args(argv)
    if args.action == "venv":
        print(build(args.runtime))
    elif args.action == "python":
        print(venv_dir(args.runtime) / "bin" / "python")
    else:
        entry = load(args.runtime)
        print(f"{entry['title']} ({entry['source']}, {entry['date']}), Python {entry['python']}")
        print("\n".join(f"  {p}" for p in entry["packages"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
