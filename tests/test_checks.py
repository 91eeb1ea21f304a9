import numpy as np
import pytest
import torch

from accelkit import checks


def test_assert_close_passes_and_returns_error():
    a = torch.ones(4)
    err = checks.assert_close(a + 1e-7, a, what="x")
    assert 0 < err < 1e-6


def test_assert_close_fails_with_location():
    a = torch.zeros(2, 3)
    b = a.clone()
    b[1, 2] = 1.0
    with pytest.raises(AssertionError, match=r"1 of 6 values differ.*\(1, 2\)"):
        checks.assert_close(b, a, what="layer")


def test_dtype_aware_tolerance():
    x = torch.randn(100)
    checks.assert_close(x.bfloat16(), x)  # bf16 rounding is within bf16 tolerance
    with pytest.raises(AssertionError):
        checks.assert_close(x.bfloat16().float(), x)  # but not within fp32's
    with pytest.raises(ValueError):
        checks.tolerance("int32")


def test_shape_mismatch():
    with pytest.raises(AssertionError, match="shape"):
        checks.assert_close(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError):
        checks.max_abs_err(np.zeros(3), np.zeros(4))


def test_speedup_and_between():
    assert checks.assert_speedup(2.0, at_least=1.5, what="bf16") == 2.0
    with pytest.raises(AssertionError, match="below the floor 1.50x expected on cpu"):
        checks.assert_speedup(1.2, at_least=1.5, what="bf16", hardware="cpu")
    with pytest.raises(AssertionError):
        checks.assert_speedup(float("nan"), at_least=1.0, what="nan")
    with pytest.raises(AssertionError, match="outside"):
        checks.assert_between(2.0, 0.0, 1.0, what="fraction")
