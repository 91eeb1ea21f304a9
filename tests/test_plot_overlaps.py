"""accelkit.plot.text_overlaps: no plot of the course draws text over text (issue 14, item 7).

Each plotting function of accelkit.plot (accelkit.roofline does not draw) and each explorer's
figure (accelkit.explore) is drawn with representative data — long labels, many ticks, the
sizes the notebooks use — and must come out with no two text boxes overlapping.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from accelkit import bench, explore, plot
from accelkit.roofline import Roofline

ROOF = Roofline({"fp32": 0.21, "bf16": 0.37}, 9.5, device="cpu", device_name="Xeon", profile="ci")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _axes_plots():
    mm = bench.Timing("matmul 512", (1e-3,) * 5, flops=2 * 512**3, bytes_moved=3 * 512**2 * 4)
    add = bench.Timing("add 96 MiB", (1e-2,) * 5, flops=2**23, bytes_moved=3 * 2**23 * 4)
    spans = [(f"thread {r}", f"aten::op{k}", 100.0 * k + 7 * r, 80.0) for r in range(3)
             for k in range(12)]
    return {
        "roofline": lambda: plot.roofline(ROOF, [ROOF.place(mm), ROOF.place(add)]),
        "timeline": lambda: plot.timeline(spans, title="profiler trace", profile="ci"),
    }


@pytest.mark.parametrize("name", list(_axes_plots()))
def test_accelkit_plot_draws_no_text_over_text(name):
    ax = _axes_plots()[name]()
    overlaps = plot.text_overlaps(ax.figure)
    # fails when a plot's tick labels, labels, legend or annotations collide
    assert not overlaps, f"{name}: {overlaps}"


def _explorer_figures():
    mem = dict(n_params=1_126_410, world_size=2, batch=256, widths=[64, 1024, 1024, 10],
               largest_param=1024 * 1024)
    return {
        "roofline": lambda: explore.roofline(ROOF, op="matmul", size=512).draw(),
        "memory": lambda: explore.memory(**mem, strategy="dp", device="h100").draw(),
        "memory 7B": lambda: explore.memory(7_000_000_000, strategy="zero3", world_size=8,
                                            device="h100").draw(),
        "pipeline": lambda: explore.pipeline(2, 4, measured={1: 0.43, 2: 0.36, 4: 0.32, 8: 0.36}).draw(),
        "pipeline 8x32": lambda: explore.pipeline(8, 32).draw(),
        "mfu": lambda: explore.mfu(n_layer=2, n_head=4, n_embd=128, seq_len=256, tokens_per_s=2e4,
                                   peak_tflops=0.5, checkpoint=True).draw(),
    }


@pytest.mark.parametrize("name", list(_explorer_figures()))
def test_explorer_figures_draw_no_text_over_text(name):
    overlaps = plot.text_overlaps(_explorer_figures()[name]())
    # fails when an explorer's figure has colliding texts
    assert not overlaps, f"{name}: {overlaps}"


def test_text_overlaps_finds_a_collision():
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "first label")
    ax.text(0.5, 0.5, "second label")
    ax.set_xticks([0.5, 0.501], ["a long tick label", "another long one"])
    found = plot.text_overlaps(fig)
    assert any("first label" in a and "second label" in b for a, b in found), found
    assert any("tick" in a and "tick" in b for a, b in found), found
