import importlib.util
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import accelkit as ak
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
    from accelkit import env

    gathered = report.results(_jsonl(tmp_path / "r.jsonl", ("t.speedup", 1.0, "x", "00_good"),
                                     ("t.speedup", 1.5, "x", "00_good")))
    assert gathered == {"t.speedup": {"value": 1.5, "unit": "x", "notebook": "00_good"}}
    assert report.results(tmp_path / "missing.jsonl") == {}
    runs = {"01_bad": {"status": "error", "wall_s": 1.0, "error": "\x1b[31mRuntimeError\x1b[0m: boom"},
            "00_good": {"status": "ok", "wall_s": 2.0, "error": ""}}
    summary = rs.summary(runs, gathered, env.profile("ci"))
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
    from accelkit import env

    old = {"notebooks": {"00_a": {"status": "ok", "wall_s": 1.0, "error": ""},
                         "01_b": {"status": "error", "wall_s": 1.0, "error": "x"}},
           "results": {"t.a": {"value": 1.0, "unit": "", "notebook": "00_a"},
                       "t.stale": {"value": 9.0, "unit": "", "notebook": "01_b"}}}
    new = rs.summary({"01_b": {"status": "ok", "wall_s": 2.0, "error": ""}},
                         {"t.b": {"value": 2.0, "unit": "", "notebook": "01_b"}},
                         env.profile("ci"), previous=old)
    assert new["notebooks"]["01_b"]["status"] == "ok" and set(new["notebooks"]) == {"00_a", "01_b"}
    assert set(new["results"]) == {"t.a", "t.b"}, "results of a re-run notebook are replaced"
    md = rs.summary_markdown(new)
    assert "## Failures" not in md


def test_summary_has_a_format_version_and_an_anonymous_machine_label():
    from accelkit import env

    first = rs.summary({}, {}, env.profile("ci"))
    assert first["format"] == rs.FORMAT == 1
    label, run_id = first["machine"]["label"], first["machine"]["run_id"]
    assert re.fullmatch(r"[a-z0-9-]+-[0-9a-f]{4}", label), label
    assert label.startswith(first["hardware"]["hardware_class"] + "-"), label
    again = rs.summary({}, {}, env.profile("ci"), previous=first)
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

    from accelkit import env

    monkeypatch.setattr(platform, "node", lambda: "ana-laptop.local")
    monkeypatch.setattr(socket, "gethostname", lambda: "ana-laptop.local")
    monkeypatch.setattr(getpass, "getuser", lambda: "anakin")
    home = f"/home/anakin/work/{tmp_path.name}"
    runs = {"00_bad": {"status": "error", "wall_s": 1.0,
                       "error": f"FileNotFoundError: {home}/data.csv (on ana-laptop, user anakin)"}}
    gathered = {"t.where": {"value": f"{tmp_path}/scratch", "unit": "", "notebook": "00_bad"}}
    rs.write_summary(tmp_path, rs.summary(runs, gathered, env.profile("ci")))
    text = (tmp_path / "results.json").read_text() + (tmp_path / "summary.md").read_text()
    for leak in ("anakin", "ana-laptop", "/home/", str(tmp_path), str(Path.cwd())):
        assert leak not in text, f"{leak!r} is in results.json/summary.md"
    assert "data.csv" in text, "file names stay, for the error to make sense"


def test_hand_in_line_says_where_the_file_is_and_what_to_do(tmp_path):
    line = rs.hand_in_line(tmp_path, {"machine": {"label": "cpu-avx2-3f9a"},
                                          "profile": {"name": "ci"}})
    assert "\n" not in line and str(tmp_path / "results.json") in line
    assert "cpu-avx2-3f9a" in line and "tools/compare.py" in line


# ----------------------------------------------------------------------------- exercises
# every answer key, recomputed from the formulas the notebooks teach (not from the keys)
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _right_answers() -> dict:
    """The right answer of every keyed exercise, from the package's formulas (not the keys)."""
    zero2 = ak.memory.per_device(3_000_000_000, "zero2", 8, optimizer="adam")
    fixed = ak.memory.per_device(1_000_000_000, "dp", 1, optimizer="adamw")  # fp32 + AdamW
    # smallest normal of each format (tf32 has fp32's 8-bit exponent, so fp32's range)
    tiny = {"fp32": torch.finfo(torch.float32).tiny, "tf32": torch.finfo(torch.float32).tiny,
            "fp16": torch.finfo(torch.float16).tiny, "bf16": torch.finfo(torch.bfloat16).tiny}
    return {
        "00.1": 1 / (3 * 4),  # 1 FLOP per 3 x 4 bytes
        "00.2": 2 * 64**3 / (3 * 64 * 64 * torch.finfo(torch.bfloat16).bits // 8),  # 2 n^3 FLOP / 3 n^2 bf16
        "00.3": "synced",
        "01.1": (4 - 1) / (12 + 4 - 1),
        "01.2": 2 * (8 - 1) / 8 * 2e9 / 200e9,  # Patarasuk & Yuan: 2 (N-1)/N bytes / bus bandwidth
        "01.3": (zero2.params_bytes + zero2.grads_bytes + zero2.optimizer_bytes) / 2**30,
        "02.1": {name for name, t in tiny.items() if t <= 1e-6},
        "02.2": 2 ** math.ceil(math.log2(tiny["fp16"] / 3e-10)),
        "02.3": 256 * 64 * 8 * 8 * torch.finfo(torch.bfloat16).bits // 8,
        "03.1": (5 * (1 + 1)) / (1 + 1),  # 5 kernels of 1 read + 1 write, fused: 1 read + 1 write
        "03.2": 3,
        "03.3": math.ceil(20.0 / (0.010 - 0.005)),  # compile time / time saved per call
        "04.1": 0.05 * 8,
        "04.2": 3400 / (4 * 1000),
        "04.3": (1347 // 2 // 32) // 2,
        "05.1": 8 * 128,
        "05.2": 1 + (len(ak.models.digits().y_train) % 100 != 0),
        "06.1": ak.gpt.flops_per_token(ak.gpt.GPTConfig(n_layer=12, n_head=12, n_embd=768,
                                                        block_size=1024), 85_000_000),
        "06.2": 100 * 8,  # k all-reduce rounds per step without no_sync
        "06.3": 6 * (48 - 2),  # per checkpointed block: its activations minus its kept input
        "07.1": (80 * 2**30 - fixed.params_bytes - fixed.grads_bytes - fixed.optimizer_bytes)
        // 2**29,  # the batch whose activations (0.5 GiB each) fit beside the fixed part
    }


def _wrong(right):
    """A wrong answer of the same kind: a number off by 5 %, another string or set."""
    if isinstance(right, set):
        return right | {"fp16"}
    if isinstance(right, str):
        return "naive"
    return right * 1.05 + 1 if isinstance(right, int) else right * 1.05


RIGHT = _right_answers()
VALUED = sorted(n for n, k in report.EXERCISE_KEYS.items() if k.judge is None)


def test_every_valued_key_has_a_recomputed_answer():
    assert sorted(RIGHT) == VALUED


@pytest.mark.parametrize("name", VALUED)
def test_the_right_answer_passes_and_a_wrong_one_fails(name, capsys):
    assert report.check_exercise(name, RIGHT[name]) is True
    assert capsys.readouterr().out == f"✓ {name} correct\n"
    assert report.check_exercise(name, _wrong(RIGHT[name])) is False
    assert capsys.readouterr().out.startswith(f"✗ {name} not yet. Hint: ")
    assert report.check_exercise(name, None) is False
    assert capsys.readouterr().out.startswith(f"… {name} not answered yet. Hint: ")


@pytest.mark.parametrize("name", [n for n in VALUED if report.EXERCISE_KEYS[n].rel == 0.02])
def test_numbers_count_as_right_within_two_percent(name):
    assert report.check_exercise(name, RIGHT[name] * 1.019)
    assert report.check_exercise(name, RIGHT[name] * 0.981)
    assert not report.check_exercise(name, RIGHT[name] * 1.03)


def test_verdicts_of_the_old_checkers_are_kept(capsys):
    assert report.check_exercise("00.1", "0.0833")  # 00 compared float(answer)
    assert report.check_exercise("02.2", 262144.0) and not report.check_exercise("02.2", 262144.5)  # 02: ==
    assert not report.check_exercise("02.1", ["fp32", "tf32", "bf16"])  # a set, as 02 asked
    assert report.check_exercise("03.3", 4000.0) and not report.check_exercise("03.3", 3999)
    assert not report.check_exercise("01.1", "a fifth")  # 01 raised TypeError here
    assert "expected a number, got str" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["2.3", "02", 2, "07.2", "01.4"])
def test_unknown_names_are_value_errors(name):
    with pytest.raises(ValueError):
        report.check_exercise(name, 1)


def test_pad_batch_is_judged_by_calling_it(capsys):
    tf = pytest.importorskip("tensorflow")

    def pad_batch(x, y, size):
        n = size - x.shape[0]
        w = tf.concat([tf.ones(x.shape[0]), tf.zeros(n)], 0)
        return tf.pad(x, [[0, n], [0, 0]]), tf.pad(y, [[0, n]]), w

    assert report.check_exercise("05.3", pad_batch)
    assert not report.check_exercise("05.3", lambda x, y, size: (x, y, tf.ones(x.shape[0])))
    assert not report.check_exercise("05.3", 8)
    assert "raised TypeError" in capsys.readouterr().out


def test_the_notebooks_call_the_checker_with_names_that_have_keys():
    for nn in sorted({name[:2] for name in report.EXERCISE_KEYS}):
        (path,) = NOTEBOOKS.glob(f"{nn}_*.ipynb")
        sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
        assert not any(re.search(r"def check(_exercise)?\(", s) for s in sources), path.name
        assert any("ak.report.check_exercise(" in s for s in sources), path.name
        for src in (s for s in sources if re.search(r"ak\.report\.(check|expect)_exercise\(", s)):
            for name in re.findall(r"""["'](\d\d\.\d+)["']""", src):
                assert name.startswith(nn) and name in report.EXERCISE_KEYS, (path.name, name)
