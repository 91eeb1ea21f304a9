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
