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


def test_plain_strips_ansi_colour_codes():
    assert report.plain("\x1b[0;31mRuntimeError\x1b[0m: boom\x1b[?25h") == "RuntimeError: boom"


def _jsonl(path, *rows):
    path.write_text("".join(json.dumps({"key": k, "value": v, "unit": u, "notebook": nb}) + "\n"
                            for k, v, u, nb in rows))
    return path


def test_summary_gathers_results_and_writes_json_and_markdown(tmp_path):
    from accelkit import config

    gathered = report.results(_jsonl(tmp_path / "r.jsonl", ("t.speedup", 1.0, "x", "00_good"),
                                     ("t.speedup", 1.5, "x", "00_good")))
    assert gathered == {"t.speedup": {"value": 1.5, "unit": "x", "notebook": "00_good"}}
    assert report.results(tmp_path / "missing.jsonl") == {}
    runs = {"01_bad": {"status": "error", "wall_s": 1.0, "error": "\x1b[31mRuntimeError\x1b[0m: boom"},
            "00_good": {"status": "ok", "wall_s": 2.0, "error": ""}}
    summary = report.summary(runs, gathered, config.profile("ci"))
    assert list(summary["notebooks"]) == ["00_good", "01_bad"]
    assert summary["profile"] == {"name": "ci", "reason": "set by argument"}
    assert "cpu_count" in summary["hardware"]
    report.write_summary(tmp_path, summary)
    assert report.load_summary(tmp_path) == summary
    md = (tmp_path / "summary.md").read_text()
    assert "Hardware card" in md and "`t.speedup` | 1.5x | 00_good" in md
    assert "## Failures" in md and "RuntimeError: boom" in md and "\x1b[" not in md
    assert report.load_summary(tmp_path / "nowhere") is None


def test_a_partial_run_updates_the_earlier_summary():
    from accelkit import config

    old = {"notebooks": {"00_a": {"status": "ok", "wall_s": 1.0, "error": ""},
                         "01_b": {"status": "error", "wall_s": 1.0, "error": "x"}},
           "results": {"t.a": {"value": 1.0, "unit": "", "notebook": "00_a"},
                       "t.stale": {"value": 9.0, "unit": "", "notebook": "01_b"}}}
    new = report.summary({"01_b": {"status": "ok", "wall_s": 2.0, "error": ""}},
                         {"t.b": {"value": 2.0, "unit": "", "notebook": "01_b"}},
                         config.profile("ci"), previous=old)
    assert new["notebooks"]["01_b"]["status"] == "ok" and set(new["notebooks"]) == {"00_a", "01_b"}
    assert set(new["results"]) == {"t.a", "t.b"}, "results of a re-run notebook are replaced"
    md = report.summary_markdown(new)
    assert "## Failures" not in md
