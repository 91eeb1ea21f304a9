"""accelkit.plot: drawing only, every figure stamped with device and profile."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from accelkit import bench, plot
from accelkit.roofline import Roofline


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _stamp(ax) -> str:
    texts = [t.get_text() for t in ax.texts if t.get_gid() == "accelkit-stamp"]
    assert len(texts) == 1, "every plot carries exactly one stamp"
    return texts[0]


def test_timing_bars_draws_medians_with_iqr():
    a = bench.Timing("eager", (1e-3, 2e-3, 3e-3, 4e-3, 5e-3), device="cuda:0")
    b = bench.Timing("fused", (1e-3, 1e-3, 1e-3))
    ax = plot.timing_bars([a, b], "eager vs fused", profile="ci")
    widths = [p.get_width() for p in ax.patches]
    assert widths == pytest.approx([3.0, 1.0])  # medians, in ms
    assert "ms" in ax.get_xlabel() and "IQR" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["eager", "fused"]
    assert _stamp(ax) == "cuda:0 · profile ci"
    assert ax.get_title() == "eager vs fused"


def test_timing_bars_rejects_bad_input():
    with pytest.raises(ValueError):
        plot.timing_bars([], "x", profile="ci")
    with pytest.raises(TypeError):
        plot.timing_bars([1.0], "x", profile="ci")


def test_roofline_plot_is_log_log_with_one_roof_per_dtype():
    roof = Roofline({"fp32": 1.0, "bf16": 4.0}, 50.0, device="cpu", profile="full")
    pt = roof.place(bench.Timing("add", (1e-3,), flops=1e6, bytes_moved=12e6))
    ax = plot.roofline(roof, [pt])
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    roofs = [line for line in ax.get_lines() if line.get_linewidth() == 2]
    assert len(roofs) == 2
    assert max(roofs[1].get_ydata()) == pytest.approx(4.0)
    # fails if two dtypes' roofs share a line style (one would hide the other where they meet)
    assert len({line.get_linestyle() for line in roofs}) == 2, "each roof needs its own style"
    # fails if a compute roof is drawn along the memory slope (there it covers the others)
    assert all(min(line.get_ydata()) == max(line.get_ydata()) for line in roofs), "roofs are flat"
    assert any("add" in t.get_text() for t in ax.texts)
    assert _stamp(ax) == "cpu · profile full"


def test_throughput_curve_and_loss_curves():
    ax = plot.throughput_curve([1, 2, 4], {"torch": [1, 2, 3], "tf": [1, 1, 1]},
                               xlabel="batch", ylabel="samples/s", device="cpu", profile="ci",
                               logx=True)
    assert len(ax.get_lines()) == 2 and ax.get_xscale() == "log"
    assert _stamp(ax) == "cpu · profile ci"
    ax = plot.loss_curves({"PyTorch": [2.0, 1.0, 0.5]}, profile="ci")
    assert list(ax.get_lines()[0].get_xdata()) == [1, 2, 3]
    assert "profile ci" in _stamp(ax)


def test_the_stamp_takes_the_profile_it_is_given_not_the_environment(monkeypatch):
    from accelkit import config

    monkeypatch.setenv(config.PROFILE_ENV, "ci")
    ax = plot.loss_curves({"PyTorch": [1.0]}, profile=config.profile("full"))
    assert _stamp(ax) == "cpu · profile full"
    with pytest.raises(TypeError):
        plot.stamp(ax, "cpu")  # type: ignore[call-arg]  # the profile is not optional


def test_curves_reject_bad_input():
    with pytest.raises(ValueError, match="3 x values"):
        plot.throughput_curve([1, 2, 3], [1, 2], xlabel="x", ylabel="y", profile="ci")
    with pytest.raises(ValueError):
        plot.loss_curves({}, profile="ci")
    with pytest.raises(ValueError, match="empty"):
        plot.loss_curves({"a": []}, profile="ci")


def test_ratios_histogram_shows_the_interval_and_the_floor():
    c = bench.Comparison(bench.Timing("fp32", (2.0, 2.2, 1.8, 2.1, 2.4, 1.9, 2.0, 2.2)),
                         bench.Timing("bf16", (1.0,) * 8))
    ax = plot.ratios(c, floor=1.5, profile="ci")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "8 pairs" in labels and "floor 1.5x" in labels
    assert any(lab.startswith("median 2.05x") for lab in labels)
    assert ax.get_xscale() == "log" and _stamp(ax)
    plt.close("all")
