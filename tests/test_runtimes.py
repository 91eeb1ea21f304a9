"""tools/runtimes.py: README.md and each notebook's "Runs on" run time come from one record."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from accelkit import report

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("runtimes", ROOT / "tools" / "runtimes.py")
runtimes = importlib.util.module_from_spec(_spec)
sys.modules["runtimes"] = runtimes
_spec.loader.exec_module(runtimes)

RECORD = {"class": "cpu-x", "profile": "ci", "date": "2026-01-02", "hardware": {"cpu_count": 2},
          "notebooks": {"00_a": {"status": "ok", "wall_s": 29.8},
                        "01_b": {"status": "failed", "wall_s": 12.0}}}
CELL0 = ("[![Open In Colab](x)](y)\n# 00 · A\nA promise.\n\n**Runs on** CPU (about 40 s in the "
         "`ci` profile on 2 cores),\nGPUs (`full` profile).\n\n**You will learn** ...")
README = ("# x\n\n| notebook | what | run time (CI CPU) | more |\n|---|---|---|---|\n"
          "| [00 · A](notebooks/00_a.ipynb) | a | ~99 s | GPU |\n"
          "| [01 · B](notebooks/01_b.ipynb) | b | | GPU |\n\n"
          f"{runtimes.START}old{runtimes.END}\n")


@pytest.mark.parametrize("secs, text", [(0.4, "≈ 5 s"), (29.8, "≈ 30 s"), (62.5, "≈ 60 s"),
                                        (99.0, "≈ 100 s"), (100, "≈ 1.5 min"), (150, "≈ 2.5 min")])
def test_duration_reads_as_people_say_it(secs, text):
    assert runtimes.duration(secs) == text


def test_cell0_phrase_replaces_typed_time_and_is_idempotent():
    new = runtimes.update_cell0(CELL0, RECORD, "00_a")
    para = new.split("\n\n")[1]
    assert "about 40 s" not in para and "CPU (in the `ci` profile on 2 cores)" in para, para
    assert para.endswith(runtimes.START + "Measured run time: ≈ 30 s top to bottom on the CI "
                         "machine's 2-core CPU (`cpu-x`, `ci` profile, `make verify` of "
                         "2026-01-02)." + runtimes.END), para
    assert new.split("\n\n")[2] == "**You will learn** ..."
    assert runtimes.update_cell0(new, RECORD, "00_a") == new


def test_cell0_phrase_follows_a_new_record():
    new = runtimes.update_cell0(CELL0, RECORD, "00_a")
    later = dict(RECORD, notebooks={"00_a": {"status": "ok", "wall_s": 151.0}}, date="2026-02-03")
    again = runtimes.update_cell0(new, later, "00_a")
    assert "≈ 2.5 min" in again and "2026-02-03" in again and "≈ 30 s" not in again
    assert again.count(runtimes.START) == 1


def test_cell0_phrase_adds_a_real_laptop_record_and_ignores_an_emulated_one():
    laptop = {"class": "cpu-avx2", "profile": "ci", "date": "2026-01-03",
              "hardware": {"cpu_count": 2, "cpu": "AMD EPYC"},
              "notebooks": {"00_a": {"status": "ok", "wall_s": 39.0}}}
    phrase = runtimes.notebook_phrase(RECORD, "00_a", laptop)
    assert phrase.endswith(" On a 2-core CPU without bf16 units (`cpu-avx2`, AMD EPYC): ≈ 40 s."
                           + runtimes.END), phrase
    assert runtimes.notebook_phrase(RECORD, "00_a", dict(laptop, emulated=True)) == \
        runtimes.notebook_phrase(RECORD, "00_a")  # an emulated record timed another CPU
    assert "without bf16" not in runtimes.notebook_phrase(RECORD, "01_b", laptop)  # failed there
    only_laptop = dict(laptop, notebooks={"07_new": {"status": "ok", "wall_s": 88.0}})
    phrase = runtimes.notebook_phrase(RECORD, "07_new", only_laptop)  # the CI record lacks it
    assert "≈ 90 s top to bottom on a 2-core CPU without bf16 units" in phrase, phrase
    assert "not yet measured on the CI class `cpu-x`" in phrase, phrase


def test_failed_or_missing_notebook_says_not_measured():
    assert "not measured yet" in runtimes.notebook_phrase(RECORD, "01_b")
    assert "not measured yet" in runtimes.notebook_phrase(RECORD, "07_new")


def test_cell0_without_runs_on_is_an_error():
    with pytest.raises(ValueError, match="Runs on"):
        runtimes.update_cell0("# 00 · A\nno sentence", RECORD, "00_a")


def test_readme_column_and_sentence_follow_the_record():
    new = runtimes.update_readme(README, RECORD)
    rows = [line.split("|") for line in new.splitlines() if line.startswith("| [")]
    assert [r[3].strip() for r in rows] == ["≈ 30 s", "not measured yet"], rows
    assert "`verified/cpu-x.json`" in new and "old" not in new
    assert runtimes.update_readme(new, RECORD) == new


def test_readme_column_falls_back_to_a_real_laptop_record_named_by_its_class():
    laptop = {"class": "cpu-avx2", "profile": "ci", "date": "2026-01-03",
              "hardware": {"cpu_count": 2, "cpu": "AMD EPYC"},
              "notebooks": {"00_a": {"status": "ok", "wall_s": 39.0},
                            "01_b": {"status": "ok", "wall_s": 75.0}}}
    rows = [line.split("|") for line in runtimes.update_readme(README, RECORD, laptop).splitlines()
            if line.startswith("| [")]
    assert [r[3].strip() for r in rows] == ["≈ 30 s", "≈ 75 s (`cpu-avx2`)"], rows
    emulated = runtimes.update_readme(README, RECORD, dict(laptop, emulated=True))
    assert "not measured yet" in emulated  # an emulated record timed another CPU


def test_readme_without_markers_or_column_is_an_error():
    with pytest.raises(ValueError, match="markers"):
        runtimes.update_readme("| run time |\n", RECORD)
    with pytest.raises(ValueError, match="run time"):
        runtimes.update_readme(f"{runtimes.START}{runtimes.END}\n| a | b |\n", RECORD)


def test_check_reports_then_writes(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    nb_path = tmp_path / "00_a.ipynb"
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": CELL0.splitlines(True)}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    nb_path.write_text(json.dumps(nb), encoding="utf-8")
    assert [s.path.name for s in runtimes.check(readme, [nb_path], RECORD)] == ["README.md",
                                                                                 "00_a.ipynb"]
    runtimes.check(readme, [nb_path], RECORD, write=True)
    assert runtimes.check(readme, [nb_path], RECORD) == []


def test_readme_run_times_agree_with_the_ci_record():
    laptop = (report.load_record(runtimes.LAPTOP_RECORD) if runtimes.LAPTOP_RECORD.exists()
              else None)  # the fallback for a notebook the CI record lacks
    stale = runtimes.check(ROOT / "README.md", [], report.load_record(runtimes.RECORD),
                           laptop=laptop)
    assert not stale, f"run `python tools/runtimes.py --write`: {stale}"


def test_notebook_run_times_agree_with_the_ci_record():
    """Each notebook's Runs on phrase matches verified/cpu-avx512-bf16.json (no typed times)
    and, where it exists, the real verified/cpu-avx2.json."""
    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    laptop = (report.load_record(runtimes.LAPTOP_RECORD)
              if runtimes.LAPTOP_RECORD.exists() else None)
    stale = runtimes.check(ROOT / "README.md", paths, report.load_record(runtimes.RECORD), laptop=laptop)
    assert not stale, "run `python tools/runtimes.py --write`:\n" + "\n".join(map(str, stale))
