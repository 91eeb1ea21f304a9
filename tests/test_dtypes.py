"""accelkit.dtypes: the one table of dtype names, and the modules that read it."""

import numpy as np
import pytest
import torch

from accelkit import claims, dtypes, hardware, precision, roofline


@pytest.mark.parametrize(("given", "name", "short"), [
    (torch.bfloat16, "bfloat16", "bf16"), ("bf16", "bfloat16", "bf16"),
    ("BFloat16", "bfloat16", "bf16"), (torch.float16, "float16", "fp16"),
    ("half", "float16", "fp16"), ("float", "float32", "fp32"), (np.dtype("float32"), "float32", "fp32"),
    ("tf32", "tfloat32", "tf32"), ("double", "float64", "fp64"), (torch.float64, "float64", "fp64")])
def test_every_spelling_reads_to_one_name(given, name, short):
    assert dtypes.canonical(given) == name
    assert dtypes.short(given) == short


def test_unknown_names_pass_through_for_the_caller_to_reject():
    assert dtypes.canonical(torch.int8) == "int8"
    assert dtypes.short("fp8") == "fp8"


def test_every_alias_and_short_key_names_a_canonical_dtype():
    assert set(dtypes.ALIASES.values()) <= set(dtypes.SHORT)
    assert all(dtypes.canonical(s) == name for name, s in dtypes.SHORT.items())


def test_the_users_agree_on_names():
    for given in ("bf16", torch.bfloat16, "bfloat16"):
        assert precision.format_name(given) == "bfloat16"
        assert roofline.dtype_key(given) == "bf16"
        assert claims.tolerance(given) == claims.tolerance("bfloat16")
    assert hardware.datasheet_tflops("NVIDIA H200", "half") == 989.4
    with pytest.raises(ValueError, match="no default tolerance"):
        claims.tolerance(torch.int32)
