"""Worker script files: find them, show them, diff them, import them, read what they wrote.

The committed worker scripts live in ``notebooks/workers/``.  This module finds one by name
(:func:`worker_script`), shows it or one ``# region NAME`` ... ``# endregion`` of it in a
notebook (:func:`show`, :func:`script_source`), diffs two (:func:`script_diff`), imports one
as a module so a notebook can call its ``main()`` in-process (:func:`import_worker`), and
handles the files a worker writes (:func:`fresh_path` before, :func:`read_json` after).

Starting scripts as processes lives in :mod:`accelkit.launch`; the code inside the workers
(including ``save_json``) in :mod:`accelkit.dist`.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

_REPO_WORKERS = Path(__file__).resolve().parents[1] / "notebooks" / "workers"


def worker_script(name: str) -> Path:
    """Return the path of a committed worker script in ``notebooks/workers/``.

    Looks in ``./workers`` (a notebook's own folder) and then in this checkout's
    ``notebooks/workers``.

    Raises:
        FileNotFoundError: naming the folders searched.
    """
    here = Path("workers") / name
    repo = _REPO_WORKERS / name
    for cand in (here, repo):
        if cand.is_file():
            return cand.resolve()
    raise FileNotFoundError(f"worker script {name!r} not found in {here.parent.resolve()} "
                            f"or {repo.parent}; run the notebook from the repository's notebooks/")


def import_worker(name: str) -> ModuleType:
    """Import the worker script ``name`` (found by :func:`worker_script`) as a module.

    The module is registered in ``sys.modules`` under the file's stem (``"single_train"``),
    so its functions pickle by name; :func:`accelkit.launch.spawn` puts its folder on the
    children's ``sys.path`` (:func:`sys_path_for`).  Each call runs the file afresh (an
    edited script is seen).

    Returns:
        The module; call e.g. ``module.main(["--out", path])``.

    Raises:
        FileNotFoundError: when there is no such script.
    """
    path = worker_script(name)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(path.stem, None)
        raise
    return module


def sys_path_for(fn: Callable[..., Any]) -> list[str]:
    """Return ``sys.path`` plus the folder of ``fn``'s script, for processes that import it.

    Spawned children (``multiprocessing``'s "spawn") copy the parent's ``sys.path`` and
    import ``fn``'s module by name.  A script loaded with :func:`import_worker` is not on
    ``sys.path``: its folder goes first.  Functions of ``__main__``, of packages, or of
    modules already importable leave ``sys.path`` as it is.
    """
    name = getattr(fn, "__module__", "") or ""
    file = getattr(sys.modules.get(name), "__file__", None)
    if name == "__main__" or "." in name or not file:
        return list(sys.path)
    folder = str(Path(file).resolve().parent)
    return list(sys.path) if folder in sys.path else [folder, *sys.path]


def _region(lines: list[str], name: str) -> list[str]:
    start = next((i for i, s in enumerate(lines) if s.strip() == f"# region {name}"), None)
    if start is None:
        raise ValueError(f"no '# region {name}' marker in the script")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == "# endregion"),
               len(lines))
    return lines[start + 1:end]


def script_source(path: str | os.PathLike[str], region: str | None = None) -> str:
    """Return a script's text, or only the lines of one ``# region NAME`` ... ``# endregion``.

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: when the region marker is missing.
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if region is not None:
        lines = _region(lines, region)
    return "\n".join(lines)


def show(path: str | os.PathLike[str], region: str | None = None) -> None:
    """Display a worker script (or one region of it) as highlighted code in the notebook.

    Falls back to ``print`` outside IPython.  See :func:`script_source` for ``region``.
    """
    text = script_source(path, region)
    title = Path(path).name + (f" (region {region!r})" if region else "")
    try:
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython is a dev dependency
        print(f"# {title}\n{text}")
        return
    display(Markdown(f"`{title}`\n```python\n{text}\n```"))


def script_diff(old: str | os.PathLike[str], new: str | os.PathLike[str], context: int = 1) -> str:
    """Return a unified diff from script ``old`` to script ``new`` (what changed, marked).

    Raises:
        FileNotFoundError: when a file does not exist.
    """
    a = Path(old).read_text(encoding="utf-8").splitlines()
    b = Path(new).read_text(encoding="utf-8").splitlines()
    return "\n".join(difflib.unified_diff(a, b, Path(old).name, Path(new).name, n=context,
                                          lineterm=""))


def fresh_path(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` for a worker to write, after deleting what a previous run left there.

    A stale file would otherwise pass for this run's result when a worker fails to write.
    The parent folder is created.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_dir():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)
    return p


def read_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read the JSON results a worker wrote (see :func:`accelkit.dist.save_json`).

    Raises:
        FileNotFoundError: when the worker did not write it (did it fail? see the launch log).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no results at {p}: the worker did not write them "
                                "(check the launch output above)")
    return json.loads(p.read_text(encoding="utf-8"))


__all__ = [
    "fresh_path",
    "import_worker",
    "read_json",
    "script_diff",
    "script_source",
    "show",
    "sys_path_for",
    "worker_script",
]
