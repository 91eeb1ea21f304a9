"""Set up and start the course without ``make`` (Windows, or any machine): one command, stdlib only.

    python tools/setup_course.py setup     # create .venv and install the pinned environment + accelkit
    python tools/setup_course.py lab       # setup, then start JupyterLab on notebooks/
                                           # (further options go to JupyterLab: --port=8899)
    python tools/setup_course.py run       # setup, then execute every notebook headless into build/
    python tools/setup_course.py doctor    # setup, then the pre-flight: is this machine ready?
    python tools/setup_course.py wheelhouse --platform win_amd64 --python-version 3.12
                                           # download the pinned set into wheelhouse/ (instructors)

(on Windows write ``py`` for ``python``).  Each does what the Makefile target of the same name
does, with the same files: ``.venv/`` and its ``.venv/.installed-lab`` stamp (a later ``make lab``
finds the environment ready, and the other way round), ``constraints.txt`` for the exact
versions, ``pip install -c constraints.txt -e ".[lab]"`` (the course and JupyterLab, without the
maintainers' dev extras, which ``make setup`` adds).  ``lab`` passes ``--allow-root`` to
JupyterLab when run as root (containers, cloud VMs), as ``make lab`` does.

Offline (bad conference Wi-Fi): when a ``wheelhouse/`` folder with wheels sits in the checkout
(``--wheelhouse DIR`` names another), the install uses only it: ``pip install --no-index
--find-links wheelhouse``; nothing is downloaded.  An instructor fills it once, on a good
connection, for each platform the room has (``wheelhouse`` command; ``pip download
--only-binary=:all:`` of every pin in ``constraints.txt`` plus what that platform adds, and
the build backend).  ``--dry-run`` prints the commands instead of running them.

Owns: this command line.  Lives elsewhere: the Makefile's targets (the same steps for
machines with ``make``), the pins (``constraints.txt``), what ``doctor`` and ``run`` do
(``accelkit/env.py``, ``tools/run_notebooks.py``).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
WHEELHOUSE = ROOT / "wheelhouse"
CONSTRAINTS = ROOT / "constraints.txt"
#: What an editable install of accelkit builds with (pyproject's [build-system]); the
#: wheelhouse carries it so that build isolation works offline.
BUILD_BACKEND = ["setuptools>=68", "wheel"]
#: Pins only CI needs (the browser checks, ``make browser``): left out of a learner's wheelhouse.
CI_ONLY = ("greenlet", "playwright")
PIP_QUIET = ["--quiet", "--disable-pip-version-check"]


def venv_python(venv: Path = VENV) -> Path:
    """Return the venv's interpreter: ``Scripts\\python.exe`` on Windows, ``bin/python`` elsewhere."""
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def is_root() -> bool:
    """True when running as root (POSIX uid 0); Windows has no root, so False there."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


#: The Makefile's LAB_STAMP: a learner's install (``.[lab]``) is current.
STAMP = ".installed-lab"


def has_wheels(folder: Path) -> bool:
    """True when ``folder`` holds at least one ``.whl`` file."""
    return folder.is_dir() and any(folder.glob("*.whl"))


def install_command(python: Path, wheelhouse: Path | None,
                    targets: list[str] | None = None) -> list[str]:
    """Return the pip command that installs the pinned environment and accelkit (editable).

    Args:
        python: the venv's interpreter.
        wheelhouse: a folder of wheels to install from with no network, or ``None`` (PyPI).
        targets: what to install instead of ``-e .[lab]`` (the offline test installs two pins).
    """
    cmd = [str(python), "-m", "pip", "install", *PIP_QUIET, "-c", str(CONSTRAINTS)]
    if wheelhouse is not None:
        cmd += ["--no-index", "--find-links", str(wheelhouse)]
    return cmd + (targets if targets is not None else ["-e", f"{ROOT}[lab]"])


def stamp_is_current(venv: Path = VENV) -> bool:
    """True when ``<venv>/.installed-lab`` is newer than pyproject.toml and constraints.txt (as make)."""
    stamp = venv / STAMP
    if not stamp.exists() or not venv_python(venv).exists():
        return False
    return all(stamp.stat().st_mtime >= (ROOT / f).stat().st_mtime
               for f in ("pyproject.toml", "constraints.txt"))


def _run(cmd: list[str], *, dry_run: bool, env: dict[str, str] | None = None) -> None:
    """Print ``cmd`` and run it (not with ``dry_run``); exit with its status when it fails."""
    print("+ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    if dry_run:
        return
    rc = subprocess.call(cmd, env=env, cwd=ROOT)
    if rc != 0:
        sys.exit(f"failed (exit {rc}): {cmd[0]} ... {cmd[-1]}")


def setup(venv: Path, wheelhouse: Path, *, online: bool, dry_run: bool) -> Path:
    """Create ``venv`` and install into it unless its stamp is current; return its interpreter."""
    python = venv_python(venv)
    if stamp_is_current(venv):
        print(f"{venv} is up to date (delete {venv / STAMP} to reinstall)")
        return python
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(venv)], dry_run=dry_run)
    offline = not online and has_wheels(wheelhouse)
    print(f"installing from {wheelhouse} with no network (--online to use the index)" if offline else
          "installing from the package index (a `wheelhouse/` folder would be used offline)")
    _run(install_command(python, wheelhouse if offline else None), dry_run=dry_run)
    if not dry_run:
        (venv / STAMP).touch()
    return python


def lab_command(venv: Path, *, root: bool, extra: list[str] | None = None) -> list[str]:
    """Return the JupyterLab command (``--allow-root`` when ``root``: Jupyter refuses root otherwise).

    ``extra``: further JupyterLab options, appended (``make lab LAB_ARGS=...`` does the same).
    """
    cmd = [str(venv_python(venv)), "-m", "jupyter", "lab", f"--notebook-dir={ROOT / 'notebooks'}"]
    return cmd + (["--allow-root"] if root else []) + list(extra or [])


def platform_tags(platform: str) -> list[str]:
    """Return ``platform`` and the older tags a machine of that platform also installs.

    pip's ``--platform`` takes tags literally; a glibc 2.28 Linux (``manylinux_2_28_x86_64``)
    also runs ``manylinux_2_17``/``manylinux2014`` wheels, which most packages ship, so those
    are named too.  Other tags (``win_amd64``, ``macosx_11_0_arm64``) are returned as given.
    """
    match = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if not match:
        return [platform]
    glibc, arch = int(match.group(1)), match.group(2)
    legacy = [f"manylinux{name}_{arch}" for name in ("2014", "2010", "1")]  # glibc 2.17, 2.12, 2.5
    return [f"manylinux_2_{v}_{arch}" for v in range(glibc, 4, -1)] + legacy


def wheelhouse_command(dest: Path, platform: str | None, python_version: str | None,
                       extra: list[str] | None = None) -> list[str]:
    """Return the ``pip download`` command that fills ``dest`` with the pinned set, wheels only.

    Args:
        dest: the wheelhouse folder.
        platform: a wheel platform tag (``manylinux_2_28_x86_64``, ``win_amd64``,
            ``macosx_11_0_arm64``; :func:`platform_tags` adds the older Linux tags), or
            ``None`` for this machine's.
        python_version: the target interpreter with its patch level (``3.11.7``: some pins
            require ``>=3.11.5``, and ``3.11`` means 3.11.0 to pip), or ``None`` for this one's.
        extra: more requirement strings (tests fill a small wheelhouse from a few pins).

    Every pin in ``constraints.txt`` but :data:`CI_ONLY` is requested, with dependencies, so
    a platform that needs more than the CI machine (Windows: ``pywin32``, ``pywinpty``) gets
    it too.
    """
    cmd = [sys.executable, "-m", "pip", "download", *PIP_QUIET, "--only-binary=:all:",
           "-d", str(dest), "-c", str(CONSTRAINTS)]
    for tag in platform_tags(platform) if platform else []:
        cmd += ["--platform", tag]
    if python_version:
        cmd += ["--python-version", python_version]
    if extra is not None:
        return cmd + extra
    return cmd + learner_pins() + BUILD_BACKEND


def learner_pins(path: Path = CONSTRAINTS) -> list[str]:
    """Return the ``name==version`` lines of ``path`` without the :data:`CI_ONLY` ones."""
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")
            and ln.split("==")[0].strip().lower() not in CI_ONLY]


def main(argv: list[str] | None = None) -> int:
    """Command line; see the module docstring."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0], allow_abbrev=False)
    parser.add_argument("command", choices=["setup", "lab", "run", "doctor", "wheelhouse"])
    parser.add_argument("--venv", type=Path, default=VENV)
    parser.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE,
                        help="install from this folder with no network when it holds wheels")
    parser.add_argument("--online", action="store_true", help="ignore the wheelhouse")
    parser.add_argument("--platform", help="wheelhouse: the target platform tag")
    parser.add_argument("--python-version", help="wheelhouse: the target Python, e.g. 3.11")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "lab":
        parser.error(f"unrecognized arguments: {' '.join(extra)} (only lab passes options on)")
    if args.command == "wheelhouse":
        args.wheelhouse.mkdir(parents=True, exist_ok=True)
        _run(wheelhouse_command(args.wheelhouse, args.platform, args.python_version),
             dry_run=args.dry_run)
        return 0
    python = setup(args.venv, args.wheelhouse, online=args.online, dry_run=args.dry_run)
    if args.command == "lab":
        if is_root():
            print("running as root (a container or VM): starting JupyterLab with --allow-root")
        env = dict(os.environ, JUPYTER_PATH=str(args.venv.resolve() / "share" / "jupyter"))
        _run(lab_command(args.venv, root=is_root(), extra=extra), dry_run=args.dry_run, env=env)
    elif args.command == "run":
        _run([str(python), str(ROOT / "tools" / "run_notebooks.py"), "--out", str(ROOT / "build")],
             dry_run=args.dry_run)
    elif args.command == "doctor":
        _run([str(python), "-m", "accelkit.env"], dry_run=args.dry_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
