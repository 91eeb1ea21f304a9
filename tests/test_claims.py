"""accelkit.claims: the asserts (tensors close, a speedup against its floor) and the claims log."""
import numpy as np
import pytest
import torch

from accelkit import bench, claims


def _cmp(ratios):
    return bench.Comparison(bench.Timing("a", tuple(ratios)), bench.Timing("b", (1.0,) * len(ratios)))


def test_assert_close_passes_and_returns_error():
    a = torch.ones(4)
    err = claims.assert_close(a + 1e-7, a, what="x")
    assert 0 < err < 1e-6


def test_assert_close_fails_with_location():
    a = torch.zeros(2, 3)
    b = a.clone()
    b[1, 2] = 1.0
    with pytest.raises(AssertionError, match=r"1 of 6 values differ.*\(1, 2\)"):
        claims.assert_close(b, a, what="layer")


def test_dtype_aware_tolerance():
    x = torch.randn(100)
    claims.assert_close(x.bfloat16(), x)  # bf16 rounding is within bf16 tolerance
    with pytest.raises(AssertionError):
        claims.assert_close(x.bfloat16().float(), x)  # but not within fp32's
    with pytest.raises(ValueError):
        claims.tolerance("int32")


def test_shape_mismatch():
    with pytest.raises(AssertionError, match="shape"):
        claims.assert_close(np.zeros(3), np.zeros(4))


def test_assert_speedup_decides_from_the_interval():
    fast = _cmp([2.0, 2.1, 1.9, 2.2, 2.0, 1.95, 2.05, 2.1])
    assert claims.assert_speedup(fast, at_least=1.5, what="bf16") == pytest.approx(2.025)
    with pytest.raises(AssertionError, match="'at least 3.00x' on cpu does not hold here: "
                       "speedup 2.02x"):
        claims.assert_speedup(fast, at_least=3.0, what="bf16", hardware="cpu", why="AMX")
    noisy = _cmp([0.8, 2.5, 0.9, 2.4, 0.85, 2.6, 0.95, 2.3])
    with pytest.raises(AssertionError, match="too noisy to decide.*8 pairs, noise"):
        claims.assert_speedup(noisy, at_least=1.5, what="bf16")
    assert claims.assert_speedup(noisy, at_least=None, what="no claim here") > 1
    with pytest.raises(TypeError, match="ak.bench.Comparison"):
        claims.assert_speedup(2.0, at_least=1.0, what="a lone number")


def test_claims_log_and_margins_table(tmp_path, monkeypatch):
    import importlib.util
    import json
    from pathlib import Path

    log = tmp_path / "build" / "claims.jsonl"  # its folder is made
    monkeypatch.setenv(claims.CLAIMS_LOG_ENV, str(log))
    fast = _cmp([2.0, 2.1, 1.9, 2.2, 2.0, 1.95, 2.05, 2.1])
    claims.assert_speedup(fast, at_least=1.5, what="bf16", hardware="cpu-amx")
    with pytest.raises(AssertionError):
        claims.assert_speedup(fast, at_least=3.0, what="bf16", hardware="cpu-amx")
    claims.assert_speedup(fast, at_least=None, what="no claim: not logged")
    lines = [json.loads(t) for t in log.read_text().splitlines()]
    assert [x["verdict"] for x in lines] == ["holds", "does not hold here"]
    assert lines[0]["pairs"] == 8 and lines[0]["low"] <= lines[0]["speedup"] <= lines[0]["high"]
    assert lines[0]["looks"] == 1 and lines[0]["level"] is None  # one look at 95 %
    spec = importlib.util.spec_from_file_location(
        "claim_margins", Path(__file__).parents[1] / "tools" / "claim_margins.py")
    margins = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(margins)
    assert margins.margin(lines[0]) == pytest.approx(lines[0]["low"] / 1.5)
    lines.append(dict(lines[0], low=1.6))  # a second run of the 1.5x claim
    rows = margins.table(lines).splitlines()[2:]
    # the two bounds are two rows, the smallest margin first (low / 3.0 < 1: not held)
    assert rows[0].startswith("| bf16 | cpu-amx | ≥ 3x | 1 | 1 | 2.02x | 0.6")
    assert rows[1].startswith("| bf16 | cpu-amx | ≥ 1.5x | 2 | 0 | 2.02x | 1.0")


def test_an_unwritable_claims_log_warns_and_keeps_the_verdict(tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv(claims.CLAIMS_LOG_ENV, str(tmp_path / "a_file" / "claims.jsonl"))
    fast = _cmp([2.0, 2.1, 1.9, 2.2, 2.0, 1.95, 2.05, 2.1])
    with pytest.warns(UserWarning, match="claim not logged"):
        assert claims.assert_speedup(fast, at_least=1.5, what="bf16") > 1.5


def test_a_sequential_claim_is_asserted_from_its_last_looks_interval(tmp_path, monkeypatch):
    import json

    log = tmp_path / "claims.jsonl"
    monkeypatch.setenv(claims.CLAIMS_LOG_ENV, str(log))
    ratios = [2.0, 2.1, 1.9, 2.2, 2.0, 1.95, 2.05, 2.1] * 2  # 16 pairs: (v_(4), v_(13)) at 95 %
    c = bench.Comparison(bench.Timing("a", tuple(ratios)), bench.Timing("b", (1.0,) * 16),
                         level=0.9987, extra={"looks": (8, 16)})  # ...but (v_(2), v_(15)) here
    assert c.interval == (1.9, 2.2)
    with pytest.raises(AssertionError, match="too noisy.*16 pairs in 2 looks"):
        claims.assert_speedup(c, at_least=1.92, what="seq")  # the 95 % one would start at 1.95
    line = json.loads(log.read_text())
    assert line["looks"] == 2 and line["level"] == 0.9987 and line["low"] == 1.9
