"""Shared test settings: keep torch single-threaded and results off disk."""

import pytest


@pytest.fixture(autouse=True)
def _no_results_file(monkeypatch):
    """Tests never append to a real run's results file."""
    monkeypatch.delenv("ACCELKIT_RESULTS", raising=False)
    monkeypatch.delenv("ACCELKIT_NOTEBOOK", raising=False)
    monkeypatch.delenv("ACCELKIT_HARDWARE", raising=False)


@pytest.fixture
def no_launcher(monkeypatch):
    """A test process that looks like no launcher started it (no torchrun variables)."""
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
              "TORCHELASTIC_ERROR_FILE"):
        monkeypatch.delenv(k, raising=False)


@pytest.fixture
def playwright_python():
    """The Python that has Playwright, for tools/browser_check.py (``$ACCELKIT_PLAYWRIGHT_PYTHON``,
    set by ``make slow``, else this one); skips without it or without Debian's chromium."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    py = os.environ.get("ACCELKIT_PLAYWRIGHT_PYTHON", sys.executable)
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("no /usr/bin/chromium (Debian: apt-get install chromium; make browser)")
    if not (Path(py).exists() or shutil.which(py)) or subprocess.run(
            [py, "-c", "import playwright"], capture_output=True).returncode:
        pytest.skip(f"no playwright in {py} (make browser, or set $ACCELKIT_PLAYWRIGHT_PYTHON)")
    return py
