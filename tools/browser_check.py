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

``--check bootstrap`` (issue 13) checks a learner's first screen instead, on a checkout that
has been set up (a fresh clone after ``make setup``):

1. starts the lab with the course's own command in ``--repo``: ``make lab`` (``--start make``)
   or ``python tools/setup_course.py lab`` (``--start script``, the Windows path), with
   ``LAB_ARGS`` / further options for port, token and ``--no-browser``;
2. opens ``notebooks/00_device_setup.ipynb`` in headless Chromium;
3. checks that the first code cell (the Colab bootstrap) shows JupyterLab's collapsed-input
   placeholder instead of its source, that the notebook's title heading and the next code
   cell's source are on screen, and screenshots the page (``notebook00.png``);
4. writes ``bootstrap_check.json`` with what it saw.

Usage (Playwright in any Python; JupyterLab, ipywidgets and accelkit in ``--python``)::

    python tools/browser_check.py --python .venv/bin/python --out build/browser_check
    python tools/browser_check.py --check bootstrap --repo /tmp/fresh-clone --start make \
        --out build/browser_check

Needs ``/usr/bin/chromium`` (Debian's ``chromium`` package) or ``--chromium PATH``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
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


def lab_options(port: int, token: str) -> list[str]:
    """JupyterLab options for a scripted start: loopback, this port and token, no browser."""
    return ["--no-browser", f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}"]


def own_lab_command(python: str, folder: Path, port: int, token: str) -> list[str]:
    """JupyterLab on ``folder`` with ``python`` (the memory check's two-cell notebook)."""
    return [python, "-m", "jupyter", "lab", "--allow-root", *lab_options(port, token),
            f"--ServerApp.root_dir={folder}"]


def course_lab_command(repo: Path, start: str, port: int, token: str) -> list[str]:
    """The course's own start command in ``repo`` (``make lab`` or the set-up script)."""
    if start == "make":
        return ["make", "-C", str(repo), "lab", "LAB_ARGS=" + " ".join(lab_options(port, token))]
    return [sys.executable, str(repo / "tools" / "setup_course.py"), "lab", *lab_options(port, token)]


@contextlib.contextmanager
def running_lab(cmd: list[str], folder: Path, port: int, token: str, *,
                env: dict[str, str] | None = None) -> Iterator[str]:
    """Start ``cmd`` (its output to ``folder/jupyterlab.log``), wait for JupyterLab's API, yield
    its base URL, and stop it (and what started it) on leaving.

    Raises SystemExit naming the log when nothing answers on ``port`` within 120 s or the
    command exits first.
    """
    with (folder / "jupyterlab.log").open("wb") as log:
        lab = subprocess.Popen(cmd, stdout=log, stderr=log, env=env, start_new_session=True)
        try:
            for _ in range(240):
                if lab.poll() is not None:
                    raise SystemExit(f"{' '.join(cmd[:4])} exited ({lab.returncode}); "
                                     f"see {log.name}")
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}",
                                           timeout=2)
                    break
                except OSError:
                    time.sleep(0.5)
            else:
                raise SystemExit(f"JupyterLab did not answer on port {port}; see {log.name}")
            yield f"http://127.0.0.1:{port}/lab/tree/{{}}?token={token}"
        finally:
            stop_lab(lab)


def stop_lab(lab: subprocess.Popen[bytes]) -> None:
    """Stop the lab and whatever started it (``make`` starts JupyterLab as its child)."""
    killpg = getattr(os, "killpg", None)  # POSIX; elsewhere the started process alone
    try:
        killpg(lab.pid, signal.SIGTERM) if killpg else lab.terminate()
        lab.wait(timeout=30)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        killpg(lab.pid, signal.SIGKILL) if killpg else lab.kill()


def on_screen(page: Any, locator: Any) -> bool:
    """Whether ``locator``'s element is visible inside the viewport (not merely in the page)."""
    box = locator.bounding_box() if locator.count() and locator.first.is_visible() else None
    height = page.viewport_size["height"]
    return box is not None and box["y"] < height and box["y"] + box["height"] > 0


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


def first_screen(page: Any, url: str, out: Path) -> dict[str, Any]:
    """Bootstrap check, steps 2-3 of the module docstring; returns what was seen."""
    page.goto(url)
    cells = page.locator(".jp-Notebook .jp-Cell")
    cells.first.wait_for(timeout=60_000)
    page.wait_for_timeout(2000)  # let the cells render their editors
    code = page.locator(".jp-Notebook .jp-CodeCell")
    boot, nxt = code.nth(0), code.nth(1)
    placeholder = boot.locator(".jp-InputPlaceholder").first
    title = page.locator(".jp-Notebook h1").first
    next_line = nxt.locator(".jp-InputArea-editor .cm-line").first
    seen = {
        "bootstrap_placeholder_visible": on_screen(page, placeholder),
        "bootstrap_placeholder_text": placeholder.inner_text() if placeholder.count() else "",
        "bootstrap_editor_visible": boot.locator(".jp-InputArea-editor").first.is_visible(),
        "title": title.inner_text() if on_screen(page, title) else "",
        "next_cell_first_line": next_line.inner_text() if on_screen(page, next_line) else "",
    }
    page.screenshot(path=str(out / "notebook00.png"))
    return seen


def check_memory(args: argparse.Namespace, browser: Any) -> dict[str, Any]:
    """The memory explorer check (the module docstring's first list)."""
    write_notebook(args.out / "explore_memory.ipynb")
    port, token = free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k != "ACCELKIT_EXPLORE"}
    env["PYTHONPATH"] = str(ROOT)
    cmd = own_lab_command(args.python, args.out, port, token)
    with running_lab(cmd, args.out, port, token, env=env) as url:
        seen = run_page(browser, args.out, drive, url.format("explore_memory.ipynb"))
    seen["ok"] = ("N = 2:" in seen["readout_before"] and "N = 8:" in seen["readout_after"]
                  and "world_size=8" in seen["readout_after"]
                  and seen["figure_before"] != seen["figure_after"])
    return seen


def check_bootstrap(args: argparse.Namespace, browser: Any) -> dict[str, Any]:
    """The first-screen check (the module docstring's second list)."""
    port, token = free_port(), secrets.token_hex(16)
    cmd = course_lab_command(args.repo.resolve(), args.start, port, token)
    with running_lab(cmd, args.out, port, token) as url:
        seen = run_page(browser, args.out, first_screen, url.format("00_device_setup.ipynb"))
    seen["started_with"] = " ".join(cmd[:4] if args.start == "make" else cmd[1:3])
    seen["ok"] = (seen["bootstrap_placeholder_visible"] and not seen["bootstrap_editor_visible"]
                  and seen["title"].startswith("00") and bool(seen["next_cell_first_line"].strip()))
    return seen


#: ``--check`` name -> (the check, the JSON file it writes into ``--out``).
CHECKS = {"memory": (check_memory, "browser_check.json"),
          "bootstrap": (check_bootstrap, "bootstrap_check.json")}


def run_page(browser: Any, out: Path, step: Any, url: str) -> dict[str, Any]:
    """Run ``step(page, url, out)`` on a new page; a failure leaves ``failure.png``."""
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    try:
        return dict(step(page, url, out))
    except Exception:
        page.screenshot(path=str(out / "failure.png"), full_page=True)
        raise
    finally:
        page.close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--check", choices=sorted(CHECKS), default="memory")
    ap.add_argument("--python", default=sys.executable, help="Python with JupyterLab + accelkit")
    ap.add_argument("--repo", type=Path, default=ROOT, help="bootstrap: the set-up checkout")
    ap.add_argument("--start", choices=["make", "script"], default="make",
                    help="bootstrap: make lab, or tools/setup_course.py lab")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "browser_check")
    ap.add_argument("--timeout", type=int, default=220,
                    help="seconds for the whole check; then the lab is stopped and it fails")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    def too_long(*_: Any) -> None:  # raised here, so every finally below stops what it started
        raise TimeoutError(f"browser check not done after {args.timeout} s")

    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, too_long)
        signal.alarm(args.timeout)

    args.out.mkdir(parents=True, exist_ok=True)
    check, name = CHECKS[args.check]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        try:
            seen = check(args, browser)
            seen["browser"] = browser.version
        finally:
            browser.close()
    (args.out / name).write_text(json.dumps(seen, indent=1) + "\n")
    print(json.dumps(seen, indent=1))
    return 0 if seen["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
