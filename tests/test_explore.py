"""accelkit.explore: each explorer's numbers and figure equal the course's model; the mode rule;
the static fallback (also as a notebook cell's last expression); the widgets re-render when a
control moves."""

from __future__ import annotations

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

import accelkit as ak
from accelkit import comm, explore, gpt, hardware, memory
from accelkit.roofline import Roofline

ROOF = Roofline({"fp32": 0.2, "bf16": 0.4}, 10.0, device="cpu", profile="ci")
MLP = dict(n_params=1_126_410, world_size=2, batch=256, widths=[64, 1024, 1024, 10],
           largest_param=1024 * 1024)


@pytest.fixture(autouse=True)
def _static_and_closed(monkeypatch):
    monkeypatch.setenv(explore.MODE_ENV, "static")
    yield
    plt.close("all")


# ----------------------------------------------------------------------------- the mode rule
def test_mode_rule(monkeypatch):
    assert not explore.is_interactive()  # static by the environment
    monkeypatch.setenv(explore.MODE_ENV, "auto")
    assert not explore.is_interactive()  # no IPython kernel in pytest
    monkeypatch.setenv(explore.MODE_ENV, "interactive")
    assert explore.is_interactive()  # ipywidgets is pinned in constraints.txt
    monkeypatch.setenv(explore.MODE_ENV, "sometimes")
    with pytest.raises(ValueError, match="ACCELKIT_EXPLORE"):
        explore.is_interactive()


def test_runner_and_nbval_force_the_static_fallback():
    import importlib.util
    from pathlib import Path

    tool = Path(__file__).parents[1] / "tools" / "run_notebooks.py"
    spec = importlib.util.spec_from_file_location("tools_run_notebooks", tool)
    runner = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = runner  # its dataclasses look their module up while it loads
    spec.loader.exec_module(runner)
    assert runner.EXPLORE_ENV == explore.MODE_ENV
    conftest = (Path(__file__).parents[1] / "notebooks" / "conftest.py").read_text()
    assert f'"{explore.MODE_ENV}", "static"' in conftest


def test_settings_print_as_a_call_that_reproduces_them():
    code = explore.as_code("memory", {"n_params": 10, "strategy": "zero3", "bus": 0.123456789,
                                 "measured": {1: 0.5112072229}, "widths": [64, 10],
                                 "roof": ROOF})  # an object: written as its name
    assert code == ("ak.explore.memory(n_params=10, strategy='zero3', bus=0.123457, "
                    "measured={1: 0.511207}, widths=[64, 10], roof=roof)")


# ----------------------------------------------------------------------------- memory
def test_memory_numbers_are_the_memory_model():
    view = explore.memory(**MLP, strategy="zero3", device="h100")
    act = memory.mlp_activation_bytes(256, [64, 1024, 1024, 10])
    want = memory.table(1_126_410, 2, [s for s in memory.STRATEGIES if s != "single"],
                        optimizer="adam", activation_bytes=act)
    assert view.estimates == want
    assert view.chosen == memory.per_device(1_126_410, "zero3", 2, activation_bytes=act)
    peak = memory.per_device(1_126_410, "zero3", 2, largest_param=1024 * 1024,
                             activation_bytes=act)
    assert view.peak == peak
    assert view.device_bytes == 80 * 2**30 and view.fits == peak.fits(80 * 2**30)


def test_memory_bars_are_the_parts_and_fits_follows_the_device():
    view = explore.memory(7_000_000_000, strategy="dp", world_size=8,
                          precision="bf16 mixed (fp32 master)", device="h100")
    assert view.peak is None and not view.fits  # 16 bytes/parameter: 104 GiB on 80 GiB
    want = memory.per_device(7_000_000_000, "zero3", 8, param_bytes=2, master_bytes=4)
    assert explore.memory(7_000_000_000, strategy="zero3", world_size=8,
                          precision="bf16 mixed (fp32 master)", device="h100").fits == \
        want.fits(80 * 2**30) is True
    ax = view.draw().axes[0]
    heights = [[p.get_height() for p in c] for c in ax.containers]  # one container per part
    for i, e in enumerate(view.estimates):
        got = [h[i] * 2**30 for h in heights[:4]]
        assert got == pytest.approx([e.params_bytes, e.grads_bytes, e.optimizer_bytes,
                                     e.activations_bytes])
    with pytest.raises(ValueError):
        explore.memory(10, strategy="single", world_size=4)
    with pytest.raises(ValueError):
        explore.device_bytes("cpu-avx2")


def test_memory_peak_bar_is_the_peak_model():
    view = explore.memory(**MLP, strategy="dp")
    ax = view.draw().axes[0]
    total = sum(c[-1].get_height() for c in ax.containers)  # the last bar: the peak
    assert total * 2**20 == pytest.approx(view.peak.total_bytes)


# ----------------------------------------------------------------------------- roofline
def test_roofline_numbers_are_the_roofline():
    mm = explore.roofline(ROOF, op="matmul", size=512, dtype="fp32")
    assert mm.intensity == pytest.approx(512 / 6)
    assert mm.attainable_tflops == ROOF.attainable_tflops(512 / 6, "fp32") == 0.2
    assert mm.predicted_s == pytest.approx(2 * 512**3 / 0.2e12) and mm.bound == "compute"
    add = explore.roofline(ROOF, op="add", size=2**20, dtype="bf16")
    assert add.intensity == pytest.approx(1 / 6) and add.bound == "memory"  # 2-byte elements
    assert add.predicted_s == pytest.approx(3 * 2**20 * 2 / 10e9)
    fig = mm.draw()
    star = next(ln for ln in fig.axes[0].lines if ln.get_gid() == "explore-point")
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (mm.intensity, mm.attainable_tflops)
    with pytest.raises(ValueError):
        explore.roofline(ROOF, dtype="fp16")  # not measured on this roof


def test_roofline_counts_bytes_as_the_placed_kernels():
    # fails if the explorer counts bytes another way than roof.traffic (notebook 00's points):
    # with write-allocate a 512 matmul is 2·512/16 = 64 FLOP/B, not 2·512/12 = 85.3
    wa = Roofline({"fp32": 0.2}, 10.0, device="cpu", write_allocate=True)
    n = 512
    placed = wa.place(ak.bench.Timing("mm", (1e-3,), flops=2 * n**3,
                                      bytes_moved=wa.traffic(2 * n * n * 4, n * n * 4)))
    assert explore.roofline(wa, size=n).intensity == pytest.approx(placed.intensity) == 64
    assert explore.roofline(wa, op="add", size=n).bytes_moved == wa.traffic(8 * n, 4 * n)


def test_roofline_place_uses_the_same_bound():
    t = ak.bench.Timing("mm", (1e-3,), flops=2e9, bytes_moved=1e9)
    assert ROOF.place(t).bound == ROOF.bound(2.0) == "memory"


# ----------------------------------------------------------------------------- pipeline
def test_pipeline_numbers_are_the_pipeline_model():
    v = explore.pipeline(4, 12)
    assert v.bubble == comm.bubble_fraction(4, 12) == pytest.approx(0.2)
    fig = explore.pipeline(4, 12, measured={1: 0.7, 12: 0.25}).draw()
    assert len(fig.axes[0].collections) == 2 * 4 * 12  # one box per forward/backward slot
    curve = next(ln for ln in fig.axes[1].lines if ln.get_gid() == "explore-bubble")
    for m, b in zip(curve.get_xdata(), curve.get_ydata()):
        assert b == pytest.approx(comm.bubble_fraction(4, int(m)))


# ----------------------------------------------------------------------------- MFU
def test_mfu_numbers_are_the_gpt_model():
    cfg = gpt.GPTConfig(n_layer=2, n_head=4, n_embd=128, block_size=64)
    model = gpt.GPT(cfg)
    n = gpt.n_params(model)
    blocks = sum(p.numel() for p in model.blocks.parameters())
    v = explore.mfu(n_layer=2, n_head=4, n_embd=128, seq_len=64, tokens_per_s=5e4,
                    peak_tflops=0.5, checkpoint=True)
    assert v.n_params == n  # the meta-device count equals a real model's
    assert v.mfu == gpt.mfu(5e4, gpt.flops_per_token(cfg, n), 0.5)
    assert v.hfu == gpt.mfu(5e4, gpt.flops_per_token(cfg, n)
                            + gpt.recompute_flops_per_token(cfg, blocks), 0.5)
    h100 = explore.mfu(n_layer=2, n_head=4, n_embd=128, seq_len=64, tokens_per_s=5e4,
                       peak_tflops=0.5, peak="h100 bf16")
    assert h100.peak_tflops == hardware.get("h100").peak_tflops["bf16"]
    assert h100.hfu == h100.mfu  # no checkpointing: nothing recomputed
    widths = [p.get_width() for p in v.draw().axes[0].patches]
    assert widths == pytest.approx([100 * v.mfu, 100 * v.hfu])


# ----------------------------------------------------------------------------- front end
def test_static_fallback_draws_and_prints_the_call(capsys):
    ak.explore.memory(**MLP, strategy="zero3").show()
    ak.explore.pipeline(2, 4)._ipython_display_()  # a notebook cell's last expression
    out = capsys.readouterr().out
    assert "ZeRO-3/FSDP on N = 2" in out and "ak.explore.memory(n_params=1126410" in out
    assert "ak.explore.pipeline(stages=2, microbatches=4, measured=None)" in out
    assert plt.get_fignums() == []  # every figure shown and closed


def test_widgets_rerender_when_a_control_moves(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setenv(explore.MODE_ENV, "interactive")
    monkeypatch.setattr(IPython.display, "display", shown.append)
    ak.explore.memory(**MLP, strategy="zero3").show()
    (root,) = shown
    controls, readout, _ = root.children
    slider = next(c for c in controls.children if c.description == "devices N")
    assert "N = 2:" in readout.value and explore.READOUT_CLASS in readout._dom_classes
    slider.value = 8
    want = memory.per_device(1_126_410, "zero3", 8,
                             activation_bytes=memory.mlp_activation_bytes(256, [64, 1024, 1024, 10]))
    assert "N = 8:" in readout.value and "world_size=8" in readout.value
    assert f"{want.total_bytes / 2**20:.3g} MiB" in readout.value


@pytest.mark.slow
def test_memory_explorer_in_a_real_browser(tmp_path, playwright_python):
    """tools/browser_check.py: JupyterLab + headless Chromium move the N slider (issue 17)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    py = playwright_python
    tool = Path(__file__).parents[1] / "tools" / "browser_check.py"
    run = subprocess.run([py, str(tool), "--python", sys.executable, "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    seen = json.loads((tmp_path / "browser_check.json").read_text())
    for n, text in ((2, seen["readout_before"]), (8, seen["readout_after"])):
        view = explore.memory(1_126_410, strategy="zero3", world_size=n, batch=128,
                                   widths=[64, 1024, 1024, 10], largest_param=1024 * 1024)
        # fails when the page shows another number than the model's for this N
        assert f"N = {n}: steady {view.chosen.total_bytes / 2**20:.3g} MiB" in text, text
        assert f"peak of a step {view.peak.total_bytes / 2**20:.3g} MiB" in text, text
    assert seen["figure_before"] != seen["figure_after"], "the figure was not redrawn"
