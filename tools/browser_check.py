#!/usr/bin/env python3
"""Drive the memory explorer in a real browser: JupyterLab headless, Chromium via Playwright.

What it checks, step by step (each step fails the run with a message):

1. writes a two-cell notebook (``import accelkit as ak``; ``ak.explore.memory(...)`` at
   notebook 01's measured FSDP case: its MLP, 2 ranks, 64 samples each) into ``--out``;
2. starts JupyterLab on it (``--allow-root``, a free port, a random token; the kernel gets
   ``PYTHONPATH`` = this repository and no ``$ACCELKIT_EXPLORE``, so the explorer decides
   by itself that a front end is there);
3. opens the notebook in headless Chromium, runs both cells, waits for the explorer's
   readout (the ``HTML`` widget with class ``ak-explore-readout``) and its figure;
4. screenshots the page (``memory_before.png``), reads the readout, and checks that it says
   N = 2 and the total the model gives;
5. moves the "devices N" slider with the keyboard (focus its handle, six ArrowRight presses:
   2 → 8), as a learner would;
6. waits until the readout says N = 8, checks the figure's image changed, screenshots
   (``memory_after.png``) and writes ``browser_check.json`` with both readouts.

Usage (Playwright in any Python; JupyterLab, ipywidgets and accelkit in ``--python``)::

    python tools/browser_check.py --python .venv/bin/python --out build/browser_check

Needs ``/usr/bin/chromium`` (Debian's ``chromium`` package) or ``--chromium PATH``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
CALL = ("ak.explore.memory(1_126_410, strategy='zero3', world_size=2, batch=128,\n"
        "                  widths=[64, 1024, 1024, 10], largest_param=1024 * 1024)")


def write_notebook(path: Path) -> None:
    """Write the two-cell notebook the browser runs."""
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "outputs": [],
              "execution_count": None, "source": src}
             for i, src in enumerate(["import accelkit as ak", CALL])]
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                      "display_name": "Python 3"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=1) + "\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_lab(python: str, folder: Path, port: int, token: str) -> subprocess.Popen[bytes]:
    """Start JupyterLab and wait until its API answers (60 s)."""
    env = {k: v for k, v in os.environ.items() if k != "ACCELKIT_EXPLORE"}
    env["PYTHONPATH"] = str(ROOT)
    log = (folder / "jupyterlab.log").open("wb")
    lab = subprocess.Popen([python, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
                            f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}",
                            f"--ServerApp.root_dir={folder}"], stdout=log, stderr=log, env=env)
    for _ in range(120):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2)
            return lab
        except OSError:
            time.sleep(0.5)
    lab.terminate()
    raise SystemExit(f"JupyterLab did not answer on port {port}; see {folder / 'jupyterlab.log'}")


def readout(page: Any) -> str:
    return str(page.locator(".ak-explore-readout").inner_text())


def figure_hash(page: Any) -> str:
    src = page.locator(".jp-OutputArea-output img").last.get_attribute("src") or ""
    return hashlib.sha256(src.encode()).hexdigest()[:16]


def drive(page: Any, url: str, out: Path) -> dict[str, Any]:
    """Steps 3-6 of the module docstring; returns what was seen."""
    page.goto(url)
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
    page.get_by_text("| Idle").wait_for(timeout=120_000)  # the kernel is up and connected
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Escape")  # command mode
    for _ in range(2):
        page.keyboard.press("Shift+Enter")
    page.locator(".ak-explore-readout").wait_for(timeout=120_000)
    page.wait_for_function("() => /N = 2:/.test(document.querySelector('.ak-explore-readout')"
                           "?.innerText || '')", timeout=60_000)
    page.locator(".jp-OutputArea-output img").last.wait_for(timeout=60_000)
    before, fig_before = readout(page), figure_hash(page)
    page.screenshot(path=str(out / "memory_before.png"), full_page=True)
    slider = page.locator(".widget-slider", has_text="devices N")
    slider.locator(".noUi-handle").focus()
    for _ in range(6):
        page.keyboard.press("ArrowRight")
    page.wait_for_function("() => /N = 8:/.test(document.querySelector('.ak-explore-readout')"
                           ".innerText)", timeout=60_000)
    page.wait_for_timeout(1500)  # the figure is re-drawn after the readout's first update
    after, fig_after = readout(page), figure_hash(page)
    page.screenshot(path=str(out / "memory_after.png"), full_page=True)
    return {"readout_before": before, "readout_after": after, "figure_before": fig_before,
            "figure_after": fig_after, "slider_value_after": slider.locator(
                ".widget-readout").inner_text()}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="Python with JupyterLab + accelkit")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "browser_check")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    write_notebook(args.out / "explore_memory.ipynb")
    port, token = free_port(), secrets.token_hex(16)
    lab = start_lab(args.python, args.out, port, token)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            try:
                seen = drive(page, f"http://127.0.0.1:{port}/lab/tree/explore_memory.ipynb"
                                   f"?token={token}", args.out)
            except Exception:
                page.screenshot(path=str(args.out / "failure.png"), full_page=True)
                raise
            seen["browser"] = browser.version
            browser.close()
    finally:
        lab.terminate()
        lab.wait(timeout=30)
    ok = ("N = 2:" in seen["readout_before"] and "N = 8:" in seen["readout_after"]
          and "world_size=8" in seen["readout_after"]
          and seen["figure_before"] != seen["figure_after"])
    seen["ok"] = ok
    (args.out / "browser_check.json").write_text(json.dumps(seen, indent=1) + "\n")
    print(json.dumps(seen, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
