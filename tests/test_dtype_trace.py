"""accelkit.dtype_trace: the dtype each op returns, under autocast and without."""

import torch
from torch import nn

from accelkit import dtype_trace


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 8 * 8, 10))


def test_trace_dtypes_shows_what_autocast_lowers_and_keeps():
    model, x, y = _cnn(), torch.randn(2, 1, 8, 8), torch.tensor([0, 1])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, ops = dtype_trace.trace_dtypes(lambda: nn.functional.cross_entropy(model(x), y))
    out = {r.op: r.output for r in ops}
    assert out["conv2d"] == "bfloat16" and out["linear"] == "bfloat16"
    assert out["cross_entropy"] == "float32" and loss.dtype == torch.float32
    conv = next(r for r in ops if r.op == "conv2d")
    assert conv.inputs == ("float32", "float32", "float32")  # as given, before the cast
    _, plain = dtype_trace.trace_dtypes(lambda: model(x))
    assert {r.output for r in plain} == {"float32"}
    table = dtype_trace.dtype_table(ops)
    assert "| conv2d | float32, float32, float32 | bfloat16 | 1 |" in table
