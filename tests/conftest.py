"""Shared test settings: keep torch single-threaded and results off disk."""

import pytest


@pytest.fixture(autouse=True)
def _no_results_file(monkeypatch):
    """Tests never append to a real run's results file."""
    monkeypatch.delenv("ACCELKIT_RESULTS", raising=False)
    monkeypatch.delenv("ACCELKIT_NOTEBOOK", raising=False)
    monkeypatch.delenv("ACCELKIT_HARDWARE", raising=False)
