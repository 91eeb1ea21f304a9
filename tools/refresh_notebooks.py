#!/usr/bin/env python3
"""Maintainers: re-execute notebooks IN PLACE in the ci profile, so stored outputs come from
one clean top-to-bottom run (what nbval compares against).

Usage: python tools/refresh_notebooks.py [notebooks/NN_x.ipynb ...]   (default: all)

This is the only tool that writes into notebooks/; `make run` writes to build/.
"""

from __future__ import annotations

import sys
from pathlib import Path

from accelkit import env

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_notebooks as runner  # noqa: E402


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or env.find_notebooks("notebooks")
    failed = 0
    for path in paths:
        run = runner.execute(path, path, profile="ci", in_place=True, html=False)
        print(f"{path.name}: {run.status} in {run.wall_s:.1f} s" + (f"\n{run.error}" if run.error else ""))
        failed += run.status != "ok"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
