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


def test_the_stamp_takes_the_profile_it_is_given_not_the_environment(monkeypatch):
    from accelkit import env

    monkeypatch.setenv(env.PROFILE_ENV, "ci")
    _, ax = plt.subplots()
    assert _stamp(plot.stamp(ax, "cpu", env.profile("full"))) == "cpu · profile full"
    with pytest.raises(TypeError):
        plot.stamp(ax, "cpu")  # type: ignore[call-arg]  # the profile is not optional


def test_timeline_draws_one_row_per_thread_and_colours_the_busiest_ops():
    spans = [("thread 1", "aten::mm", 0.0, 900.0), ("thread 1", "aten::add", 900.0, 100.0),
             ("thread 2", "aten::mm", 50.0, 500.0)]
    ax = plot.timeline(spans, title="trace", device="cpu", profile="ci", top=1)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["thread 1", "thread 2"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["aten::mm"]  # top=1
    assert ax.get_xlabel() == "time (ms)" and _stamp(ax) == "cpu · profile ci"
    with pytest.raises(ValueError):
        plot.timeline([], profile="ci")
