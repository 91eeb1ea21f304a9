"""tools/compare.py: reading run files, comparing only what is comparable, the report and its errors."""

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from accelkit import env

_spec = importlib.util.spec_from_file_location(
    "tools_run_summary", Path(__file__).resolve().parents[1] / "tools" / "run_summary.py")
rs = importlib.util.module_from_spec(_spec)
sys.modules["tools_run_summary"] = rs
_spec.loader.exec_module(rs)  # the run summary a learner hands in: tools/run_summary.py

ROOT = Path(__file__).resolve().parents[1]


def _tool(name):
    """Import tools/<name>.py (a maintainer's tool, not part of the package) as tools_<name>."""
    spec = importlib.util.spec_from_file_location(f"tools_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


compare = _tool("compare")
VERIFIED = ROOT / "verified" / "cpu-avx512-bf16.json"


def _res(**values):
    """``{key: {"value", "unit", "notebook"}}``; a key's unit follows its name (speedup: x)."""
    unit = {"roofline.copy_gbps": "GB/s"}
    return {k.replace("__", "."): {"value": v, "unit": unit.get(k.replace("__", "."),
                                                                  "TFLOP/s" if "tflops" in k else "x"),
                                   "notebook": "00_x"} for k, v in values.items()}


def _build(tmp_path, name, profile="ci", cls="cpu-avx2", **values):
    """Write a build folder with a results.json as `make run` writes it; return the folder."""
    summary = rs.summary({"00_x": {"status": "ok", "wall_s": 1.0, "error": ""}},
                             _res(**values), env.profile(profile))
    summary["hardware"]["hardware_class"] = cls
    summary["machine"]["label"] = rs.machine_label(summary["hardware"])
    out = tmp_path / name
    out.mkdir()
    rs.write_summary(out, summary)
    return out


ROOF = {"roofline__matmul_fp32_tflops": 0.2, "roofline__matmul_bf16_tflops": 0.1,
        "roofline__copy_gbps": 20.0}


def test_reads_a_build_folder_a_results_file_and_a_verification_record(tmp_path):
    build = _build(tmp_path, "b", **ROOF, amp__matmul_bf16_speedup=0.5)
    by_folder, by_file = compare.load(build), compare.load(build / "results.json")
    assert by_folder == by_file, "a build/ folder is read through its results.json"
    assert by_folder.kind == "run" and by_folder.profile == "ci" and by_folder.notebooks_ok == "1 of 1"
    assert by_folder.label.startswith("cpu-avx2-") and "cores" in by_folder.card
    rec = compare.load(VERIFIED)
    assert rec.kind == "verified" and rec.hardware_class == "cpu-avx512-bf16"
    assert rec.origin.startswith("make verify 20") and "roofline.copy_gbps" in rec.results


def _write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("content, message", [
    ("{not json", "not JSON"),
    ("[]", "not an accelkit results file"),
    ('{"results": {}}', "not an accelkit results file"),
    ('{"format": 99, "hardware": {}, "profile": {"name": "ci"}, "notebooks": {}, '
     '"results": {"a.b": {"value": 1, "unit": "", "notebook": ""}}}', "results format 99 is unknown"),
    ('{"format": 7, "class": "t4", "profile": "full", "hardware": {}, "results": {}}',
     "verification record format 7 is unknown"),
    ('{"format": 1, "hardware": {}, "profile": {"name": "ci"}, "notebooks": {}, "results": {}}',
     "holds no results"),
    ('{"format": 1, "hardware": {}, "profile": {"name": "ci"}, "notebooks": {}, '
     '"results": {"a.b": 3}}', "malformed"),
    ('{"format": 1, "hardware": {}, "profile": {"name": "ci"}, "notebooks": {"00": 1}, '
     '"results": {"a.b": {"value": 1, "unit": ""}}}', "malformed"),
])
def test_bad_files_are_named_in_one_line(tmp_path, content, message):
    bad = _write(tmp_path / "bad.json", content)
    with pytest.raises(compare.CompareError) as err:
        compare.load(bad)
    text = str(err.value)
    assert message in text and str(bad) in text and "\n" not in text, text


def test_missing_paths_and_an_empty_list_are_clear_errors(tmp_path):
    with pytest.raises(compare.CompareError, match="no such file"):
        compare.load(tmp_path / "nowhere.json")
    with pytest.raises(compare.CompareError, match="no results.json in this folder"):
        compare.load(tmp_path)
    with pytest.raises(compare.CompareError, match="no RUN given"):
        compare.load_all([])


def test_cli_exits_2_with_one_line_and_no_traceback(tmp_path, capsys):
    bad = _write(tmp_path / "r.json", "{oops")
    assert compare.cli([str(VERIFIED), str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("compare: ") and str(bad) in err[-1], err
    assert not any("Traceback" in line for line in err), err
    assert compare.cli([]) == 2
    assert "no RUN given" in capsys.readouterr().err


def test_compares_within_a_profile_and_roofs_across_profiles(tmp_path):
    a = _build(tmp_path, "a", **ROOF, amp__matmul_bf16_speedup=0.5, fusion__compile_speedup=3.0)
    b = _build(tmp_path, "b", cls="cpu-avx512-bf16", **ROOF, amp__matmul_bf16_speedup=0.6,
               digits__only_here=1.0)
    g = _build(tmp_path, "g", profile="full", cls="h200", **ROOF, amp__matmul_bf16_speedup=9.0)
    cmp = compare.compare(compare.load_all([a, b, g]))
    assert [k for k, _, _ in cmp.machine_rows] == sorted(k.replace("__", ".") for k in ROOF)
    assert len(cmp.machine_rows[0][2]) == 3, "machine properties span every run"
    members, rows = cmp.groups["ci"]
    assert [r.profile for r in members] == ["ci", "ci"] and "full" not in cmp.groups
    assert dict((k, cells) for k, _, cells in rows) == {"amp.matmul_bf16_speedup": ["0.5", "0.6"]}
    why = "\n".join(cmp.left_out)
    assert "different size profiles" in why and "only run" in why
    assert "`fusion.compile_speedup`" in why and "`digits.only_here`" in why


def test_units_that_differ_are_left_out(tmp_path):
    a = _build(tmp_path, "a", t__speed=1.0)
    b = _build(tmp_path, "b", t__speed=2.0)
    data = json.loads((b / "results.json").read_text())
    data["results"]["t.speed"]["unit"] = "s"
    (b / "results.json").write_text(json.dumps(data))
    cmp = compare.compare(compare.load_all([a, b]))
    assert cmp.groups["ci"][1] == [] and "different units" in " ".join(cmp.left_out)


def test_labels_are_made_unique_and_paths_stay_out_of_the_report(tmp_path):
    a = _build(tmp_path, "learner_ana", **ROOF)
    runs = compare.load_all([a, a])
    assert runs[1].label == runs[0].label + " #2"
    md = compare.markdown(compare.compare(runs))
    assert "learner_ana" not in md and str(tmp_path) not in md


def test_old_results_without_a_format_version_are_read(tmp_path):
    build = _build(tmp_path, "old", **ROOF)
    data = json.loads((build / "results.json").read_text())
    del data["format"], data["machine"]
    (build / "results.json").write_text(json.dumps(data))
    run = compare.load(build)
    assert run.label == rs.machine_label(data["hardware"]) and run.origin == "make run"


@pytest.mark.slow
def test_writes_markdown_and_html_with_both_plots(tmp_path):
    a = _build(tmp_path, "a", **ROOF, amp__matmul_bf16_speedup=0.5)
    out = compare.main([str(a), str(VERIFIED)], str(tmp_path / "cmp"))
    md, page = (tmp_path / "cmp" / "compare.md").read_text(), (tmp_path / "cmp" / "compare.html").read_text()
    assert md == out and "## Machines" in md and "cpu-avx512-bf16" in md and "cpu-avx2-" in md
    assert len(re.findall(r"data:image/png;base64,", page)) == 2, "rooflines + speedups embedded"
    assert "<table>" in page and "Left out, and why" in page
    assert compare.roofline_figure(compare.load_all([_build(tmp_path, "n", t__x=1.0)])) is None


def test_a_folder_of_hand_ins_and_an_unexpanded_pattern_are_read(tmp_path, monkeypatch):
    hand_ins = tmp_path / "hand_ins"
    hand_ins.mkdir()
    for name in ("a", "b"):
        build = _build(tmp_path, name, **ROOF)
        (hand_ins / f"{name}.json").write_text((build / "results.json").read_text())
    assert compare.expand([hand_ins]) == [hand_ins / "a.json", hand_ins / "b.json"]
    monkeypatch.chdir(tmp_path)
    assert compare.expand(["hand_ins/*.json"]) == [Path("hand_ins/a.json"), Path("hand_ins/b.json")]
    assert len(compare.load_all([str(hand_ins / "*.json")])) == 2, "an absolute pattern too"
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    with pytest.raises(compare.CompareError, match="no results.json in this folder"):
        compare.load_all([empty])
