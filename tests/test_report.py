import importlib.util
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from accelkit import report

_spec = importlib.util.spec_from_file_location(
    "tools_run_summary", Path(__file__).resolve().parents[1] / "tools" / "run_summary.py")
rs = importlib.util.module_from_spec(_spec)
sys.modules["tools_run_summary"] = rs
_spec.loader.exec_module(rs)  # the run summary a learner hands in: tools/run_summary.py


def test_record_returns_the_value_and_writes_it_plain(tmp_path, monkeypatch):
    monkeypatch.delenv("ACCELKIT_RESULTS", raising=False)
    assert report.record("unit.speedup", np.float64(2.5), "x") == 2.5  # by hand: nothing written
    monkeypatch.setenv("ACCELKIT_RESULTS", str(tmp_path / "r.jsonl"))
    report.record("unit.speedup", np.float64(2.5), "x")
    (r,) = report.load_jsonl(tmp_path / "r.jsonl")
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
    summary = rs.summary(runs, gathered, config.profile("ci"))
    assert list(summary["notebooks"]) == ["00_good", "01_bad"]
    assert summary["profile"] == {"name": "ci", "reason": "set by argument"}
    assert "cpu_count" in summary["hardware"]
    rs.write_summary(tmp_path, summary)
    assert rs.load_summary(tmp_path) == summary
    md = (tmp_path / "summary.md").read_text()
    assert "Hardware card" in md and "`t.speedup` | 1.5x | 00_good" in md
    assert "## Failures" in md and "RuntimeError: boom" in md and "\x1b[" not in md
    assert rs.load_summary(tmp_path / "nowhere") is None


def test_a_partial_run_updates_the_earlier_summary():
    from accelkit import config

    old = {"notebooks": {"00_a": {"status": "ok", "wall_s": 1.0, "error": ""},
                         "01_b": {"status": "error", "wall_s": 1.0, "error": "x"}},
           "results": {"t.a": {"value": 1.0, "unit": "", "notebook": "00_a"},
                       "t.stale": {"value": 9.0, "unit": "", "notebook": "01_b"}}}
    new = rs.summary({"01_b": {"status": "ok", "wall_s": 2.0, "error": ""}},
                         {"t.b": {"value": 2.0, "unit": "", "notebook": "01_b"}},
                         config.profile("ci"), previous=old)
    assert new["notebooks"]["01_b"]["status"] == "ok" and set(new["notebooks"]) == {"00_a", "01_b"}
    assert set(new["results"]) == {"t.a", "t.b"}, "results of a re-run notebook are replaced"
    md = rs.summary_markdown(new)
    assert "## Failures" not in md


def test_summary_has_a_format_version_and_an_anonymous_machine_label():
    from accelkit import config

    first = rs.summary({}, {}, config.profile("ci"))
    assert first["format"] == rs.FORMAT == 1
    label, run_id = first["machine"]["label"], first["machine"]["run_id"]
    assert re.fullmatch(r"[a-z0-9-]+-[0-9a-f]{4}", label), label
    assert label.startswith(first["hardware"]["hardware_class"] + "-"), label
    again = rs.summary({}, {}, config.profile("ci"), previous=first)
    assert again["machine"] == {"label": label, "run_id": run_id}, "a partial run keeps its id"


def test_machine_label_hashes_hardware_facts_only():
    card = {"hardware_class": "cpu-avx2", "machine": "x86_64", "cpu": "Some CPU", "cpu_count": 4,
            "memory_bytes": 16 * 2**30, "torch_devices": [], "python": "3.11.7"}
    same_box = card | {"hardware_class": "cpu-avx512-bf16", "python": "3.12.1", "emulated": "x"}
    assert rs.machine_label(card)[-4:] == rs.machine_label(same_box)[-4:], \
        "the same machine keeps its hash under another class or Python"
    assert rs.machine_label(card) != rs.machine_label(card | {"cpu_count": 8})
    assert rs.machine_label({}).startswith("unknown-")


def test_anonymise_scrubs_paths_hosts_and_users_but_keeps_urls_and_units():
    names = {"ana-laptop": "<host>", "anakin": "<user>"}
    text = ('File "/home/anakin/course/notebooks/x.py", line 3 on ana-laptop; C:\\Users\\anakin\\x.py; '
            "see https://pytorch.org/docs/stable/amp.html: 12 GB/s, 1/2 (B, T, C) anakin's")
    out = rs.anonymise({"a": [text, 1.5, True]}, names)["a"][0]
    assert "anakin" not in out and "ana-laptop" not in out and "/home" not in out, out
    assert 'File "…/x.py"' in out and "…/x.py;" in out, out
    assert "https://pytorch.org/docs/stable/amp.html" in out and "12 GB/s, 1/2 (B, T, C)" in out, out


def test_results_json_names_no_user_host_or_path(tmp_path, monkeypatch):
    import getpass
    import platform
    import socket

    from accelkit import config

    monkeypatch.setattr(platform, "node", lambda: "ana-laptop.local")
    monkeypatch.setattr(socket, "gethostname", lambda: "ana-laptop.local")
    monkeypatch.setattr(getpass, "getuser", lambda: "anakin")
    home = f"/home/anakin/work/{tmp_path.name}"
    runs = {"00_bad": {"status": "error", "wall_s": 1.0,
                       "error": f"FileNotFoundError: {home}/data.csv (on ana-laptop, user anakin)"}}
    gathered = {"t.where": {"value": f"{tmp_path}/scratch", "unit": "", "notebook": "00_bad"}}
    rs.write_summary(tmp_path, rs.summary(runs, gathered, config.profile("ci")))
    text = (tmp_path / "results.json").read_text() + (tmp_path / "summary.md").read_text()
    for leak in ("anakin", "ana-laptop", "/home/", str(tmp_path), str(Path.cwd())):
        assert leak not in text, f"{leak!r} is in results.json/summary.md"
    assert "data.csv" in text, "file names stay, for the error to make sense"


def test_hand_in_line_says_where_the_file_is_and_what_to_do(tmp_path):
    line = rs.hand_in_line(tmp_path, {"machine": {"label": "cpu-avx2-3f9a"},
                                          "profile": {"name": "ci"}})
    assert "\n" not in line and str(tmp_path / "results.json") in line
    assert "cpu-avx2-3f9a" in line and "tools/compare.py" in line
