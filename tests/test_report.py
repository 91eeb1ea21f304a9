import json

import numpy as np
import pytest
import torch

from accelkit import report


def test_record_in_memory_and_returns_value():
    v = report.record("unit.speedup", np.float64(2.5), "x")
    assert v == 2.5
    r = report.recorded()["unit.speedup"]
    assert r.value == 2.5 and isinstance(r.value, float) and r.unit == "x"


def test_record_appends_to_results_file(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    monkeypatch.setenv("ACCELKIT_RESULTS", str(path))
    monkeypatch.setenv("ACCELKIT_NOTEBOOK", "00_test")
    report.record("unit.acc", torch.tensor(0.93), "fraction")
    (row,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert row["notebook"] == "00_test" and abs(row["value"] - 0.93) < 1e-6
    assert report.load_jsonl(path)[0].key == "unit.acc"


@pytest.mark.parametrize("key", ["nodot", "Upper.case", "a..b", ""])
def test_bad_keys(key):
    with pytest.raises(ValueError):
        report.record(key, 1.0)


def test_bad_values():
    with pytest.raises(ValueError):
        report.record("unit.nan", float("nan"))
    with pytest.raises(TypeError):
        report.record("unit.list", [1, 2])
    with pytest.raises(TypeError):
        report.record("unit.tensor", torch.ones(2))


def test_format_value():
    assert report.format_value(2.345, "x") == "2.35x"
    assert report.format_value(12.3456, "GB/s") == "12.3 GB/s"
