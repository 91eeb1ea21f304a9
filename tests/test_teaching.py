"""tools/teaching.py: TEACHING.md's run-time and per-class tables match their sources."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
_spec = importlib.util.spec_from_file_location("teaching", ROOT / "tools" / "teaching.py")
teaching = importlib.util.module_from_spec(_spec)
sys.modules["teaching"] = teaching
_spec.loader.exec_module(teaching)


def test_teaching_md_tables_are_current():
    text = (ROOT / "TEACHING.md").read_text(encoding="utf-8")
    assert teaching.update(text) == text, "run `python tools/teaching.py --write`"


def test_expectations_follow_the_claims_table():
    from accelkit import hardware

    table = teaching.expectations_table(["cpu-avx2", "t4"])
    row = next(line for line in table.splitlines()
               if line.startswith(f"| {hardware.CLAIMS['bf16_matmul']} |"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    expected = [f"≥ {f:g}x" if f is not None else "·"
                for f in (hardware.get("cpu-avx2").floor("bf16_matmul"),
                          hardware.get("t4").floor("bf16_matmul"))]
    assert cells == expected, (cells, expected)
    assert "float16 + GradScaler" in table  # the T4's autocast choice
    assert "| Keras policy | mixed_bfloat16 | mixed_float16 |" in table
    measured = teaching.expectations_table(["cpu-avx2", "cpu-avx512-bf16"])
    row = next(line for line in measured.splitlines()
               if line.startswith(f"| {hardware.CLAIMS['bf16_matmul']} |"))
    assert row.endswith("| · | ≥ 1x if faster here |"), row  # decided on the machine
    assert "amp_path" in measured and "amp_path" not in table
    with pytest.raises(KeyError):
        teaching.expectations_table(["no-such-class"])


def test_runtime_table_adds_a_column_per_real_record_not_emulated(tmp_path):
    base = {"format": 1, "profile": "ci", "date": "2026-01-01", "hardware": {"cpu_count": 2},
            "notebooks": {"00_a": {"status": "ok", "wall_s": 31.0}}}
    (tmp_path / "cpu-avx512-bf16.json").write_text(json.dumps(dict(base, **{"class": "cpu-avx512-bf16"})))
    assert "none yet" in teaching.runtime_table(tmp_path)
    gpu = dict(base, profile="full", notebooks={"00_a": {"status": "ok", "wall_s": 151.0}})
    (tmp_path / "t4.json").write_text(json.dumps(dict(gpu, **{"class": "t4"})))
    table = teaching.runtime_table(tmp_path)
    assert "| 00_a | ≈ 30 s | ≈ 2.5 min |" in table and "`t4` (full, 2026-01-01)" in table, table
    emulated = dict(base, emulated=True, notebooks={"00_a": {"status": "ok", "wall_s": 45.0}})
    (tmp_path / "cpu-avx2-emulated.json").write_text(json.dumps(dict(emulated, **{"class": "cpu-avx2"})))
    assert "`cpu-avx2`" not in teaching.runtime_table(tmp_path)  # it timed this CPU, not the class
    real = dict(base, notebooks={"00_a": {"status": "ok", "wall_s": 37.0}})
    (tmp_path / "cpu-avx2.json").write_text(json.dumps(dict(real, **{"class": "cpu-avx2"})))
    assert "| 00_a | ≈ 30 s | ≈ 35 s | ≈ 2.5 min |" in teaching.runtime_table(tmp_path)
