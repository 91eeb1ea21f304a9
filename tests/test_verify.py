"""make verify: records per hardware class and the README table generated from them."""

import json
from pathlib import Path

import nbformat
import pytest

from accelkit import verify

ROOT = Path(__file__).resolve().parents[1]


def test_readme_verified_table_is_generated_from_the_records():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split(verify.START, 1)[1].split(verify.END, 1)[0].strip()
    assert table == verify.readme_table(ROOT / "verified"), (
        "README's 'Verified on' table is stale: run `python -m accelkit verify` or "
        "`python -c 'from accelkit import verify; verify.update_readme()'`")


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
    table = verify.readme_table(tmp_path)
    assert "| `cpu-avx2` | 2026-12-01 | ci | 1 of 2 | 2.13.0 | – | 4.2x | – | – |" in table
    assert "`t4` (emulated)" in table
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: not JSON"):
        verify.load_records(tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps({"format": 99}))
    with pytest.raises(ValueError, match="bad.json: not an accelkit verification record"):
        verify.load_records(tmp_path)
    (tmp_path / "bad.json").unlink()
    assert [r["class"] for r in verify.load_records(tmp_path)] == ["cpu-avx2", "t4"]
    assert [r["class"] for r in verify.load_records(tmp_path, real_only=True)] == ["cpu-avx2"]
    with pytest.raises(ValueError, match="none.json: cannot read"):
        verify.load_record(tmp_path / "none.json")


def test_update_readme_rewrites_only_between_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{verify.START}\nold\n{verify.END}\nend\n")
    assert verify.update_readme(readme, tmp_path / "none")
    assert readme.read_text().startswith("intro\n") and readme.read_text().endswith("end\n")
    assert "no record yet" in readme.read_text() and not verify.update_readme(readme, tmp_path)
    (tmp_path / "plain.md").write_text("no markers")
    with pytest.raises(ValueError, match="markers"):
        verify.update_readme(tmp_path / "plain.md", tmp_path)


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
    rec = verify.verify(nbdir, tmp_path / "verified", profile="ci", readme=None, timeout_s=300)
    written = json.loads(next((tmp_path / "verified").glob("*.json")).read_text())
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
    refs = verify.references("fusion.compile_speedup", tmp_path, exclude_class="cpu-avx2")
    assert [(r["class"], r["date"], r["value"]) for r in refs] == [("h100", "2026-11-30", 4.2)]
    lines = verify.reference_lines("fusion.compile_speedup", "cpu-avx2", tmp_path)
    assert lines == ["fusion.compile_speedup on h100 (2026-11-30, ci profile): 4.2x"]
    assert "no verified record" in verify.reference_lines("no.such_key", None, tmp_path)[0]
    assert verify.references("fusion.compile_speedup", tmp_path / "absent") == []
