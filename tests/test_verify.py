"""make verify: records per hardware class and the README table generated from them."""

import importlib.util
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

from accelkit import report

ROOT = Path(__file__).resolve().parents[1]
# the writing side (make verify, README's table) is a maintainer's tool: tools/verify.py
_spec = importlib.util.spec_from_file_location("tools_verify", ROOT / "tools" / "verify.py")
vtool = importlib.util.module_from_spec(_spec)
sys.modules["tools_verify"] = vtool
_spec.loader.exec_module(vtool)


def test_readme_verified_table_is_generated_from_the_records():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split(vtool.START, 1)[1].split(vtool.END, 1)[0].strip()
    assert table == vtool.readme_table(ROOT / "verified"), (
        "README's 'Verified on' table is stale: run `make verify` or "
        "`python -c 'import sys; sys.path.insert(0, \"tools\"); import verify; verify.update_readme()'`")


def _record(**over):
    rec = {"format": 1, "date": "2026-12-01", "class": "cpu-avx2", "class_title": "x",
           "emulated": False, "profile": "ci", "versions": {"torch": "2.13.0"}, "hardware": {},
           "notebooks": {"00_a": {"status": "ok"}, "01_b": {"status": "failed"},
                         "05_c": {"status": "skipped"}},
           "results": {"fusion.compile_speedup": {"value": 4.2, "unit": "x", "notebook": "03"}}}
    rec.update(over)
    return rec


def test_table_rows_and_bad_records(tmp_path):
    (tmp_path / "cpu-avx2.json").write_text(json.dumps(_record()))
    (tmp_path / "t4-emulated.json").write_text(json.dumps(_record(**{"class": "t4",
                                                                       "emulated": True})))
    table = vtool.readme_table(tmp_path)
    assert "| `cpu-avx2` | 2026-12-01 | ci | 1 of 2 | 2.13.0 | – | 4.2x | – | – |" in table
    assert "`t4` (emulated)" in table
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: not JSON"):
        report.load_records(tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps({"format": 99}))
    with pytest.raises(ValueError, match="bad.json: not an accelkit verification record"):
        report.load_records(tmp_path)
    (tmp_path / "bad.json").unlink()
    assert [r["class"] for r in report.load_records(tmp_path)] == ["cpu-avx2", "t4"]
    assert [r["class"] for r in report.load_records(tmp_path, real_only=True)] == ["cpu-avx2"]
    with pytest.raises(ValueError, match="none.json: cannot read"):
        report.load_record(tmp_path / "none.json")


def test_update_readme_rewrites_only_between_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{vtool.START}\nold\n{vtool.END}\nend\n")
    assert vtool.update_readme(readme, tmp_path / "none")
    assert readme.read_text().startswith("intro\n") and readme.read_text().endswith("end\n")
    assert "no record yet" in readme.read_text() and not vtool.update_readme(readme, tmp_path)
    (tmp_path / "plain.md").write_text("no markers")
    with pytest.raises(ValueError, match="markers"):
        vtool.update_readme(tmp_path / "plain.md", tmp_path)


@pytest.mark.slow
def test_verify_runs_nbval_and_writes_a_record(tmp_path, monkeypatch, capsys):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    (nbdir / "sanitize.cfg").write_text("")
    for name, src in (("00_ok", "import accelkit as ak\nak.report.record('t.speed', 2.0, 'x')"),
                      ("01_bad", "assert False, 'claim refuted'")):
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell(src)]
        nbformat.write(nb, nbdir / f"{name}.ipynb")
    monkeypatch.setenv("ACCELKIT_SCRATCH", str(tmp_path / "scratch"))
    rec, path = vtool.verify(nbdir, tmp_path / "verified", profile="ci", readme=None, timeout_s=300)
    # fails if verify reports a file other than the one it wrote
    assert [path] == list((tmp_path / "verified").glob("*.json"))
    written = json.loads(path.read_text())
    assert written == rec and rec["profile"] == "ci" and rec["versions"]["torch"]
    assert rec["notebooks"]["00_ok"]["status"] == "ok"
    assert rec["notebooks"]["01_bad"]["status"] == "failed"
    assert rec["notebooks"]["01_bad"]["cells_failed"] == 1
    assert rec["notebooks"]["01_bad"]["errors"] == ["AssertionError: claim refuted"]
    assert rec["notebooks"]["00_ok"]["errors"] == [] and "log" not in rec["notebooks"]["01_bad"]
    printed = capsys.readouterr().out
    assert "    AssertionError: claim refuted" in printed
    log = tmp_path / "scratch" / "verify" / "01_bad.nbval.log"
    assert f"nbval's whole output: {log}" in printed and "claim refuted" in log.read_text()
    assert rec["results"]["t.speed"] == {"value": 2.0, "unit": "x", "notebook": "00_ok"}


def test_references_name_the_class_and_date_and_skip_this_machine(tmp_path):
    (tmp_path / "cpu-avx2.json").write_text(json.dumps(_record()))
    (tmp_path / "h100.json").write_text(json.dumps(_record(**{"class": "h100", "date": "2026-11-30"})))
    refs = report.references("fusion.compile_speedup", tmp_path, exclude_class="cpu-avx2")
    assert [(r["class"], r["date"], r["value"]) for r in refs] == [("h100", "2026-11-30", 4.2)]
    lines = report.reference_lines("fusion.compile_speedup", "cpu-avx2", tmp_path)
    assert lines == ["fusion.compile_speedup on h100 (2026-11-30, ci profile): 4.2x"]
    assert report.references("fusion.compile_speedup", tmp_path / "absent") == []


# ----------------------------------------------------------------- quoted reference figures
_QUOTE = {"key": "fusion.compile_speedup", "hardware": "1x Some GPU", "value": 2.4, "unit": "x",
          "match": "same", "measured": "a 3-op chain, eager vs compiled", "source": "https://example.org/a",
          "date": "2026-08-09"}


def _toml(quotes):
    """A quoted.toml with these [[quote]] tables (strings and numbers only)."""
    out = []
    for q in quotes:
        out.append("[[quote]]")
        out += [f"{k} = {json.dumps(v)}" for k, v in q.items()]
    return "\n".join(out) + "\n"


def test_quoted_figures_follow_our_records_and_are_labelled(tmp_path):
    (tmp_path / "h100.json").write_text(json.dumps(_record(**{"class": "h100"})))
    close = dict(_QUOTE, hardware="1x Other GPU", value=0.98, match="close",
                 measured="a whole model, not the chain", source="https://example.org/b", date="2019-12")
    other = dict(_QUOTE, key="ddp.scaling_efficiency", unit="fraction", value=0.9)
    (tmp_path / report.QUOTED).write_text(_toml([_QUOTE, other, close]))
    lines = report.reference_lines("fusion.compile_speedup", "cpu-avx2", tmp_path)
    assert lines == [
        "fusion.compile_speedup on h100 (2026-12-01, ci profile): 4.2x",
        "fusion.compile_speedup on 1x Some GPU: 2.4x, quoted, not measured by this course: "
        "a 3-op chain, eager vs compiled (source: https://example.org/a, 2026-08-09)",
        "fusion.compile_speedup on 1x Other GPU: 0.98x, quoted, not measured by this course, "
        "a close quantity: a whole model, not the chain (source: https://example.org/b, 2019-12)"]
    # this machine's own record is left out, the quoted figures are not
    assert len(report.reference_lines("fusion.compile_speedup", "h100", tmp_path)) == 2
    assert [q["value"] for q in report.quotes("ddp.scaling_efficiency", tmp_path / report.QUOTED)] == [0.9]


def test_a_key_with_neither_gets_the_constructive_line(tmp_path):
    (tmp_path / report.QUOTED).write_text(_toml([_QUOTE]))
    for folder in (tmp_path, tmp_path / "absent"):
        lines = report.reference_lines("no.such_key", None, folder)
        assert lines == [report.ONLY_HERE.format(key="no.such_key")]
        assert "make verify" in lines[0] and "no verified record" not in lines[0]


def test_quoted_figures_need_toml_and_say_so(tmp_path, monkeypatch):
    (tmp_path / report.QUOTED).write_text(_toml([_QUOTE]))

    def no_toml(text):
        raise ImportError("reading quoted figures needs Python 3.11+ or `pip install tomli`")

    monkeypatch.setattr(report, "_toml_loads", no_toml)
    lines = report.reference_lines("fusion.compile_speedup", None, tmp_path)
    assert lines == ["fusion.compile_speedup: published figures not shown (reading quoted figures "
                     "needs Python 3.11+ or `pip install tomli`)"]


@pytest.mark.parametrize("change, error", [
    ({"source": None}, "missing source"),
    ({"date": None}, "missing date"),
    ({"value": None}, "missing value"),
    ({"unit": None}, "missing unit"),
    ({"source": "  "}, "source must be a non-empty string"),
    ({"value": "2.4"}, "value must be a number"),
    ({"value": True}, "value must be a number"),
    ({"match": "similar"}, "match must be one of"),
    ({"date": "2024-13"}, "date must be"),
    ({"date": "2023-02-30"}, "date must be"),
    ({"date": "August 2024"}, "date must be"),
    ({"seen": "yesterday"}, "unknown field"),
    ({"key": "fusion.no_such_key"}, "no notebook records the key 'fusion.no_such_key'"),
    ({"unit": "GB/s"}, "unit 'GB/s', but the notebooks record fusion.compile_speedup in 'x'"),
])
def test_load_quotes_rejects_a_bad_figure(tmp_path, change, error):
    quote = {k: v for k, v in dict(_QUOTE, **change).items() if v is not None}
    path = tmp_path / report.QUOTED
    path.write_text(_toml([_QUOTE, quote]))
    keys = {"fusion.compile_speedup": "x", "ddp.scaling_efficiency": "fraction"}
    with pytest.raises(ValueError, match=f"quoted.toml: quote 2 .*{re.escape(error)}"):
        report.load_quotes(path, keys)


def test_load_quotes_rejects_bad_files_and_allows_close_units(tmp_path):
    path = tmp_path / report.QUOTED
    path.write_text(_toml([dict(_QUOTE, value=float("nan"))]).replace("NaN", "nan"))
    with pytest.raises(ValueError, match="value must be finite"):
        report.load_quotes(path)
    path.write_text("[[quote]\nkey = 1")
    with pytest.raises(ValueError, match="quoted.toml: not TOML"):
        report.load_quotes(path)
    path.write_text('title = "figures"\n' + _toml([_QUOTE]))
    with pytest.raises(ValueError, match=r"expected only \[\[quote\]\] tables"):
        report.load_quotes(path)
    with pytest.raises(ValueError, match="cannot read"):
        report.load_quotes(tmp_path / "none.toml")
    # a close quantity may come in another unit; without keys, any key is accepted
    path.write_text(_toml([dict(_QUOTE, match="close", unit="ms"), dict(_QUOTE, key="x.y")]))
    assert [q["unit"] for q in report.load_quotes(path)] == ["ms", "x"]


def test_the_course_quotes_are_valid_for_the_keys_the_notebooks_record():
    """Every figure in verified/quoted.toml names a recorded key, its source and its date."""
    keys = vtool.notebook_result_keys(ROOT / "notebooks")
    quotes = report.load_quotes(ROOT / "verified" / report.QUOTED, keys)
    assert quotes, "verified/quoted.toml holds no figures"
    for q in quotes:
        assert q["source"].startswith("https://"), q
        pinned = re.search(r"/(blob/[0-9a-f]{40}|pull|issues)/", q["source"])
        assert "github.com" not in q["source"] or pinned, f"pin repository files to a commit: {q['source']}"
    printed = set()  # the keys notebooks print reference_lines for
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                         if c["cell_type"] == "code")
        printed |= set(re.findall(r"reference_lines\(\s*\"([a-z0-9_.]+)\"", code))
    assert printed and printed <= set(keys), printed - set(keys)
    lines = [line for key in sorted(printed) for line in report.reference_lines(key, "no-such-class")]
    assert not any("no verified record" in line for line in lines)


def test_notebook_result_keys_reads_keys_and_literal_units(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('x = ak.report.record("a.speedup", f(1, "s"), "x")\n'
                                          "ak.report.record('b.gbps', bw,\n                 'GB/s')\n"
                                          'ak.report.record("c.count", n)\nak.report.record("d.s", t, "s")'),
                nbformat.v4.new_markdown_cell('ak.report.record("e.not_code", 1, "x")')]
    nbformat.write(nb, tmp_path / "00_a.ipynb")
    assert vtool.notebook_result_keys(tmp_path) == {"a.speedup": "x", "b.gbps": "GB/s", "c.count": None,
                                                     "d.s": "s"}


def test_records_folder_finds_a_clone_from_its_notebooks_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "RECORDS", tmp_path / "site-packages" / "verified")  # a pip install
    (tmp_path / "clone" / "verified").mkdir(parents=True)
    (tmp_path / "clone" / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "clone" / "notebooks")
    assert report.records_folder() == tmp_path / "clone" / "verified"
    monkeypatch.chdir(tmp_path / "clone")
    assert report.records_folder() is None
    assert report.records_folder(tmp_path / "x") == tmp_path / "x"
    assert report.reference_lines("a.b") == [report.ONLY_HERE.format(key="a.b")]


def test_a_zen4_record_does_not_overwrite_the_xeon_record_of_its_class():
    from accelkit import hardware

    both = hardware.get("cpu-avx512-bf16")  # its CPUs disagree on bf16: one record per vendor
    assert vtool.record_name(both, "AMD EPYC", False) == "cpu-avx512-bf16-amd"
    assert vtool.record_name(both, "Intel(R) Xeon(R) Platinum", False) == "cpu-avx512-bf16"
    assert vtool.record_name(hardware.get("cpu-avx2"), "AMD EPYC", False) == "cpu-avx2"
    assert vtool.record_name(hardware.get("cpu-avx2"), "AMD EPYC", True) == "cpu-avx2-emulated"
