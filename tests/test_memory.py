"""accelkit.memory: the ZeRO table's formulas, and measured bytes (DTensor shards, saved
activations, allocator peaks)."""

import pytest
import torch
from torch import nn

from accelkit import memory

PSI = 1_000_000


def test_zero_paper_example_mixed_precision_adam():
    # ZeRO paper, Fig. 1: Psi = 7.5B, N = 64, K = 12 -> 120 GB (DP), 31.4 GB (ZeRO-1),
    # 16.6 GB (ZeRO-2), 1.9 GB (ZeRO-3).
    kw = {"param_bytes": 2, "optimizer": "adam", "master_bytes": 4}
    psi = 7_500_000_000
    totals = {s: memory.per_device(psi, s, 64, **kw).total_bytes / 1e9
              for s in ("dp", "zero1", "zero2", "zero3")}
    assert totals["dp"] == pytest.approx(120)
    assert totals["zero1"] == pytest.approx(31.4, abs=0.05)
    assert totals["zero2"] == pytest.approx(16.6, abs=0.05)
    assert totals["zero3"] == pytest.approx(1.9, abs=0.05)


def test_which_parts_each_strategy_divides():
    rows = memory.table(PSI, 4, activation_bytes=400.0)
    e = {s.strategy: s for s in rows}
    assert e["single"].world_size == 1 and e["single"].params_bytes == 4 * PSI
    assert e["dp"].params_bytes == 4 * PSI and e["dp"].activations_bytes == 100
    assert e["zero1"].optimizer_bytes == 8 * PSI / 4 and e["zero1"].grads_bytes == 4 * PSI
    assert e["zero2"].grads_bytes == PSI and e["zero2"].params_bytes == 4 * PSI
    assert e["zero3"].params_bytes == PSI
    assert e["tp"].params_bytes == PSI and e["tp"].activations_bytes == 400
    assert e["pp"].activations_bytes == 100
    assert e["zero3"].total_bytes == pytest.approx((4 + 4 + 8) * PSI / 4 + 100)
    assert e["zero3"].fits(5e6) and not e["dp"].fits(5e6)
    md = rows.markdown("MiB", device_bytes=5e6)
    assert md.splitlines()[0].startswith("| strategy | N |") and "| zero3 | 4 |" in md
    assert "| zero3 | 4 | 0.954 | 0.954 | 1.91 | 9.54e-05 | 3.81 | yes |" in md
    assert "| dp | 4 | 3.81 | 3.81 | 7.63 | 9.54e-05 | 15.3 | no |" in md


def test_validation():
    with pytest.raises(ValueError, match="unknown strategy"):
        memory.per_device(PSI, "zero4", 2)
    with pytest.raises(ValueError, match="unknown optimizer"):
        memory.per_device(PSI, "dp", 2, optimizer="lion")
    with pytest.raises(ValueError, match="single"):
        memory.per_device(PSI, "single", 2)
    with pytest.raises(TypeError):
        memory.per_device(1.5, "dp", 2)
    with pytest.raises(ValueError):
        memory.per_device(0, "dp", 2)
    with pytest.raises(ValueError):
        memory.per_device(PSI, "dp", 2, param_bytes=-1)
    with pytest.raises(ValueError):
        memory.Table().markdown(unit="MB")
    with pytest.raises(ValueError):
        memory.mlp_activation_bytes(8, [64])
    with pytest.raises(ValueError):
        memory.per_device(PSI).fits(0)


def test_mlp_activations_match_what_autograd_saves():
    # Linear(64,128) saves its (B,64) input; ReLU saves its (B,128) output;
    # Linear(128,10) saves its (B,128) input -> B*(64 + 2*128) floats.
    assert memory.mlp_activation_bytes(32, [64, 128, 10]) == 32 * (64 + 256) * 4


def test_measured_counts_params_grads_and_adam_states():
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    n = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters())
    assert memory.measured(model, opt) == {"params_bytes": 4 * n, "grads_bytes": 0,
                                           "optimizer_bytes": 0}
    model(torch.randn(3, 8)).sum().backward()
    opt.step()
    got = memory.measured(model, opt)
    assert got == {"params_bytes": 4 * n, "grads_bytes": 4 * n, "optimizer_bytes": 8 * n}
    assert got["params_bytes"] == memory.per_device(n, "single").params_bytes


# ----------------------------------------------------------------------------- measurements
def test_saved_activation_bytes_counts_exactly_and_excludes_parameters():
    w = nn.Parameter(torch.randn(16))
    x = torch.randn(8, 16, requires_grad=True)
    # x * w saves x (512 B) and w (excluded); relu saves its output (512 B).
    out, saved = memory.saved_activation_bytes(lambda: torch.relu(x * w), [w])
    assert saved == 8 * 16 * 4 * 2
    _, with_w = memory.saved_activation_bytes(lambda: torch.relu(x * w))
    assert with_w == saved + 16 * 4
    assert out.shape == (8, 16)


def test_saved_activation_bytes_shrink_under_bf16_autocast():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    x = torch.randn(64, 256)

    def fwd():
        return net(x).sum()

    _, fp32 = memory.saved_activation_bytes(fwd, net.parameters())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, bf16 = memory.saved_activation_bytes(fwd, net.parameters())
    # fp32: the input of layer 1 and the ReLU output (= input of layer 2); weights excluded.
    assert fp32 == 2 * 64 * 256 * 4
    # bf16: the same two activations in 2 bytes, plus the bf16 copy of layer 2's weight
    # that autocast made (layer 1's is not needed: x does not require grad).
    assert bf16 == (2 * 64 * 256 + 256 * 256) * 2


def test_the_peak_adds_buckets_gathered_unit_and_optimizer_temporaries():
    n, largest = 1_126_410, 1024 * 1024
    steady = memory.per_device(n, "dp", 2, activation_bytes=2000)
    ddp = memory.per_device(n, "dp", 2, largest_param=largest, activation_bytes=2000)
    view = memory.per_device(n, "dp", 2, largest_param=largest, bucket_view=True,
                             activation_bytes=2000)
    fsdp = memory.per_device(n, "zero3", 2, largest_param=largest, activation_bytes=2000)
    assert steady.total_bytes == steady.resident_bytes + 1000  # no transients: the four parts
    assert ddp.bucket_bytes == 4 * n and view.bucket_bytes == 0     # the copy of the gradients
    assert ddp.total_bytes - view.total_bytes == 4 * n
    # DDP: resident (params, grads, Adam, buckets) + the larger transient: Adam's two temps
    assert ddp.total_bytes == pytest.approx(4 * n * 5 + 2 * 4 * largest)
    # FSDP: 1/N of the resident + the gathered unit and its full gradient + local activations
    assert fsdp.gathered_bytes == 2 * 4 * largest
    assert fsdp.total_bytes == pytest.approx(4 * n * 4 / 2 + 2 * 4 * largest + 1000)
    with pytest.raises(ValueError, match="peak model covers"):
        memory.per_device(n, "tp", 2, largest_param=largest)
    with pytest.raises(ValueError):
        memory.per_device(n, "dp", 2, largest_param=0)


def test_measured_peak_bytes_on_cpu_sees_a_transient_tensor():
    def work():
        a = torch.empty(1 << 20)           # 4 MiB, then 8 MiB more for a moment
        b = torch.empty(2 << 20)
        del b
        return a

    a, peak = memory.measured_peak_bytes(work, "cpu")
    assert a.numel() == 1 << 20
    assert 12 << 20 <= peak < (12 << 20) + (1 << 16)   # the peak, not the 4 MiB that remain


#: The small MLP the Adam peak tests train: its parameter count and largest parameter.
MLP_PARAMS, MLP_LARGEST = 64 * 512 + 512 + 512 * 10 + 10, 64 * 512


@pytest.fixture
def mlp_adam_work():
    """Return ``make(opt_cls, **kw)``: a seeded 64-512-10 MLP trained 2 steps on 8 samples
    with ``opt_cls(params, **kw)``, as a function for :func:`memory.measured_peak_bytes`."""

    def make(opt_cls, **kw):
        torch.manual_seed(0)

        def work():
            model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 10))
            opt = opt_cls(model.parameters(), **kw)
            x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
            for _ in range(2):
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                opt.zero_grad()

        return work

    return make


def test_measured_peak_bytes_matches_the_model_for_one_process_adam(mlp_adam_work):
    _, peak = memory.measured_peak_bytes(mlp_adam_work(torch.optim.Adam, foreach=False), "cpu")
    n = MLP_PARAMS
    # one process = DP with view buckets (no copy): params, grads, 2 Adam states, 2 temps
    want = memory.per_device(n, "single", largest_param=MLP_LARGEST)
    assert peak == pytest.approx(want.total_bytes, rel=0.1)


# ----------------------------------------------------------------------------- Adam impls, GPT
def test_adam_temp_bytes_per_implementation():
    assert memory.adam_temp_bytes(1000, 300, "for-loop") == 2 * 300 * 4
    assert memory.adam_temp_bytes(1000, 300, "foreach") == 1000 * 4
    assert memory.adam_temp_bytes(1000, 300, "fused") == 0
    with pytest.raises(ValueError, match="unknown Adam implementation"):
        memory.adam_temp_bytes(1000, 300, "foreach-ish")
    with pytest.raises(ValueError, match="unknown Adam implementation"):
        memory.per_device(1000, "dp", 1, largest_param=300, optimizer_impl="x")
    with pytest.raises(ValueError):
        memory.adam_temp_bytes(-1, 300)


@pytest.mark.parametrize("impl", memory.ADAM_IMPLS)
@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW])
def test_measured_peak_matches_the_model_for_each_adam_implementation(impl, cls, mlp_adam_work):
    # the optimizer step is the peak here (tiny batch): for-loop 2 x the largest parameter,
    # foreach one copy of every parameter (CUDA's default), fused none
    kw = {"for-loop": {"foreach": False}, "foreach": {"foreach": True},
          "fused": {"fused": True}}[impl]
    _, peak = memory.measured_peak_bytes(mlp_adam_work(cls, **kw), "cpu")
    n, largest = MLP_PARAMS, MLP_LARGEST
    want = memory.per_device(n, "single", largest_param=largest, optimizer_impl=impl)
    assert peak == pytest.approx(want.total_bytes, rel=0.05)
    # the model tells the three apart: it would fail with another implementation's temps
    others = [memory.per_device(n, "single", largest_param=largest, optimizer_impl=o).total_bytes
              for o in memory.ADAM_IMPLS if o != impl]
    assert all(abs(peak - o) > 0.05 * peak for o in others)


GPT_SHAPES = [dict(n_layer=2, n_head=4, n_embd=128, block_size=128, batch=8),
              dict(n_layer=2, n_head=4, n_embd=64, block_size=256, batch=4),
              dict(n_layer=3, n_head=8, n_embd=128, block_size=64, batch=8, vocab_size=512)]


def _gpt_case(shape, attention):
    from accelkit import gpt

    shape = dict(shape)
    batch = shape.pop("batch")
    cfg = gpt.GPTConfig(attention=attention, **shape)
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=g)
            for _ in range(2))
    return gpt, cfg, batch, x, y


@pytest.mark.parametrize("attention", ["manual", "sdpa"])
@pytest.mark.parametrize("shape", GPT_SHAPES)
def test_gpt_activation_bytes_are_what_autograd_saves(shape, attention):
    gpt, cfg, batch, x, y = _gpt_case(shape, attention)
    torch.manual_seed(0)
    model = gpt.GPT(cfg)
    _, saved = memory.saved_activation_bytes(lambda: model(x, y)[1], model.parameters())
    assert saved == memory.gpt_step_peak(
        *gpt.param_counts(cfg), batch=batch, seq_len=cfg.block_size, n_layer=cfg.n_layer,
        n_head=cfg.n_head, n_embd=cfg.n_embd, vocab_size=cfg.vocab_size,
        attention=attention).activations_bytes


def test_gpt2_small_activations_at_t1024_batch16():
    # issue 23: the softmax output alone is 16*12*1024^2*4 B per layer, ~19 GB over 12 layers
    kw = dict(n_layer=12, n_head=12, n_embd=768, vocab_size=256)

    def act(batch, seq_len, **more):
        return memory.gpt_step_peak(85_000_000, 2_359_296, batch=batch, seq_len=seq_len, **kw,
                                    **more).activations_bytes

    manual, sdpa = act(16, 1024), act(16, 1024, attention="sdpa")
    assert manual == pytest.approx(19.46e9, rel=1e-3)
    assert manual - sdpa == pytest.approx(12 * 16 * 12 * 1024**2 * 4, rel=0.01)
    with pytest.raises(ValueError, match="attention"):
        act(1, 8, attention="flash")
    with pytest.raises(ValueError):
        act(0, 8)


@pytest.mark.parametrize("impl", ["for-loop", "foreach"])
@pytest.mark.parametrize("attention", ["manual", "sdpa"])
@pytest.mark.parametrize("shape", GPT_SHAPES[:2])
def test_gpt_step_peak_bounds_the_measured_peak_closely(shape, attention, impl):
    gpt, cfg, batch, x, y = _gpt_case(shape, attention)
    kw = {"foreach": impl == "foreach"}

    def work():
        torch.manual_seed(0)
        model = gpt.GPT(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **kw)
        for _ in range(2):  # the second step: AdamW's states exist all step long
            model(x, y)[1].backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    _, peak = memory.measured_peak_bytes(work, "cpu")
    n, largest = gpt.param_counts(cfg)
    want = memory.gpt_step_peak(n, largest, batch=batch, seq_len=cfg.block_size,
                                n_layer=cfg.n_layer, n_head=cfg.n_head, n_embd=cfg.n_embd,
                                vocab_size=cfg.vocab_size, attention=attention,
                                optimizer_impl=impl).total_bytes
    # an upper bound (grads counted whole during the backward), at most 20 % high:
    # measured 0.85-0.97 of it on an AMD EPYC (Zen 4)
    assert peak <= want <= 1.2 * peak, (peak, want)
