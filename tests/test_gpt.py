"""ak.gpt: the capstone's model, FLOPs formula, training step, sizing and OOM report."""

import copy

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from accelkit import gpt, memory, models

TINY = gpt.GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=16)


def _model(cfg=TINY, seed=0):
    torch.manual_seed(seed)
    return gpt.GPT(cfg)


def test_shapes_and_loss():
    model = _model()
    x = torch.randint(0, 256, (3, 16))
    with torch.no_grad():
        logits, loss = model(x, x)
    assert logits.shape == (3, 16, 256)
    assert loss.shape == () and 4.0 < loss.item() < 7.0  # ~ln 256 at initialisation
    assert model(x[:, :5])[1] is None and model(x[:, :5])[0].shape == (3, 5, 256)
    with pytest.raises(ValueError, match="longer than block_size"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_head_is_tied_to_the_token_embedding():
    model = _model()
    assert model.head.weight is model.wte.weight
    assert gpt.n_params(model, non_embedding=False) - gpt.n_params(model) == 16 * 32


@pytest.mark.parametrize("attention", gpt.ATTENTIONS)
def test_causal_no_future_leakage(attention):
    model = _model().set_attention(attention).eval()
    x = torch.randint(0, 256, (2, 16))
    x2 = x.clone()
    x2[:, 10:] = (x2[:, 10:] + 1) % 256  # change only the future of position 9
    with torch.no_grad():
        a, b = model(x)[0], model(x2)[0]
    torch.testing.assert_close(a[:, :10], b[:, :10])
    assert not torch.allclose(a[:, 10:], b[:, 10:])


def test_a_broken_mask_is_caught():
    """The leakage check can fail: with an all-True mask the past sees the future."""
    model = _model().eval()
    for block in model.blocks:
        block.attn.mask.fill_(True)
    x = torch.randint(0, 256, (2, 16))
    x2 = x.clone()
    x2[:, 10:] = (x2[:, 10:] + 1) % 256
    with torch.no_grad():
        assert not torch.allclose(model(x)[0][:, :10], model(x2)[0][:, :10])


def test_hand_attention_equals_sdpa():
    model = _model()
    other = copy.deepcopy(model).set_attention("sdpa")
    x = torch.randint(0, 256, (2, 16))
    torch.testing.assert_close(model(x, x)[1], other(x, x)[1], rtol=1e-5, atol=1e-6)


def test_flops_formula_against_a_hand_count():
    cfg = gpt.GPTConfig(n_layer=3, n_head=2, n_embd=32, block_size=16)
    L, d, T, V = 3, 32, 16, 256
    # per token, forward: qkv 2*d*3d, proj 2*d*d, MLP 2*(d*4d)*2, head 2*d*V, QK^T and AV 2*T*d each
    forward = L * (2 * d * 3 * d + 2 * d * d + 2 * 2 * d * 4 * d + 2 * 2 * T * d) + 2 * d * V
    weights = L * (3 * d * d + d * d + 8 * d * d) + V * d
    assert gpt.flops_per_token(cfg, weights) == 3 * forward  # backward = 2x forward
    model = _model(cfg)
    x = torch.randint(0, 256, (2, T))
    with FlopCounterMode(display=False) as counter:
        model(x, x)[1].backward()
    assert counter.get_total_flops() == 3 * forward * x.numel()


def test_flops_of_gpt2_small():
    # nanoGPT's estimate_mfu for GPT-2 small: 6N + 12 L H Q T with N ~ 124M (tied, minus wpe)
    cfg = gpt.GPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257)
    assert gpt.flops_per_token(cfg, 124_000_000) == 6 * 124e6 + 12 * 12 * 768 * 1024
    assert gpt.mfu(1000.0, 1e9, 1.0) == pytest.approx(1.0)  # 1e12 FLOP/s of a 1 TFLOP/s peak
    with pytest.raises(ValueError):
        gpt.mfu(1.0, 1.0, 0.0)


def test_accumulation_gives_the_same_step():
    tokens = models.load_corpus().data
    batch = models.batches(tokens, 2, 4, 16, seed=0)
    pair = [_model(), _model()]
    for model, accum in zip(pair, (1, 4)):
        gpt.Stepper(model, torch.optim.SGD(model.parameters(), lr=0.1), batch,
                    accum=accum).train(2)
    for p, q in zip(pair[0].parameters(), pair[1].parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="not divisible"):
        gpt.Stepper(pair[0], torch.optim.SGD(pair[0].parameters(), lr=0.1), batch,
                    accum=3)()


def test_stepper_takes_autocast_and_scaler_from_make_step():
    from accelkit import precision

    tokens = models.load_corpus().data
    batch = models.batches(tokens, 1, 2, 16, seed=0)
    for dtype, scaled in ((torch.float16, True), (torch.bfloat16, False), (None, False)):
        model = _model()
        amp = None if dtype is None else precision.amp_choice("cpu", dtype)
        step = gpt.Stepper(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, amp=amp)
        # fails if the Stepper builds its own scaler/autocast that disagree with make_step's
        assert step.scaler.is_enabled() == scaled, (dtype, step.scaler.is_enabled())
        assert step.autocast.fast_dtype == (dtype or step.autocast.fast_dtype), dtype
        assert step.autocast._enabled == (dtype is not None), dtype
        assert torch.isfinite(step()), dtype


def test_checkpointing_same_gradients_less_memory():
    cfg = gpt.GPTConfig(n_layer=2, n_head=2, n_embd=64, block_size=64)
    x = torch.randint(0, 256, (8, 64))
    grads, peaks = [], []
    for ckpt in (0, 2):
        model = _model(cfg)
        model.checkpoint_blocks = ckpt

        def step(model=model):
            model.zero_grad(set_to_none=True)
            model(x, x)[1].backward()

        step()
        grads.append([p.grad.clone() for p in model.parameters()])
        model.zero_grad(set_to_none=True)
        peaks.append(memory.measured_peak_bytes(step, "cpu")[1])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    assert peaks[1] < peaks[0], peaks


def test_generate_appends_tokens():
    model = _model().eval()
    out = gpt.generate(model, torch.tensor([[100, 101]]), 5)
    assert out.shape == (1, 7) and out[0, :2].tolist() == [100, 101]
    assert out.dtype == torch.int64 and 0 <= out.min() and out.max() < 256


def test_config_validation():
    with pytest.raises(ValueError, match="divisible"):
        gpt.GPTConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="attention"):
        gpt.GPTConfig(attention="flash")
    with pytest.raises(ValueError):
        _model().set_attention("nope")


@pytest.mark.slow
def test_ddp_worker_counts_one_allreduce_per_step_and_trains_like_one_process(tmp_path):
    from accelkit import launch, scripts

    k, steps, batch, seq = 2, 3, 4, 32
    args = ["--layers", 1, "--heads", 2, "--embd", 32, "--seq", seq, "--batch", batch,
            "--accum", k, "--steps", steps, "--repeats", 1]
    res = launch.torchrun(scripts.worker_script("gpt_ddp.py"), args, nproc=2, timeout_s=120,
                          out=tmp_path / "ddp.json", stream=False).read_json()
    assert res["allreduces_sync_every_micro_batch"] == k * steps
    assert res["allreduces_no_sync"] == steps
    cfg = gpt.GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=seq, attention="sdpa")
    model = _model(cfg)
    train, val = models.load_corpus().split()
    gpt.Stepper(model, torch.optim.AdamW(model.parameters(), lr=1e-3),
                models.batches(train, steps, batch, seq, seed=0)).train(steps)
    ref = gpt.evaluate(model, models.batches(val, 1, batch, seq, seed=1)[0])
    assert res["val_loss_no_sync"] == pytest.approx(ref, abs=1e-4)
    assert res["val_loss_sync_every_micro_batch"] == pytest.approx(ref, abs=1e-4)


# ----------------------------------------------------------------------------- sizing, OOM
def test_param_counts_match_the_model():
    for cfg in (gpt.GPTConfig(), gpt.GPTConfig(n_layer=3, n_head=2, n_embd=64, block_size=32)):
        model = gpt.GPT(cfg)
        n, largest = gpt.param_counts(cfg)
        assert n == sum(p.numel() for p in model.parameters())
        assert largest == max(p.numel() for p in model.parameters())


def test_capstone_size_follows_the_device_memory():
    t4, a100 = gpt.capstone_size(16), gpt.capstone_size(80)
    # 16 GiB: GPT-2 small at T = 1024 with batch 16 is ~22 GiB by the model; batch 8 fits
    assert (t4.cfg.block_size, t4.batch) == (1024, 8) and t4.fits
    assert t4.peak_bytes <= 0.85 * 16 * 2**30 < gpt.capstone_size(16, cfg=t4.cfg, batch=16).peak_bytes
    assert (a100.cfg.block_size, a100.batch) == (1024, 16) and a100.cfg.n_embd == 768
    assert gpt.capstone_size(None).batch == 16  # unknown memory: the largest size
    assert gpt.capstone_size(12).batch == 16 and gpt.capstone_size(12).cfg.block_size == 512
    tiny = gpt.capstone_size(2)
    assert not tiny.fits and (tiny.cfg.block_size, tiny.batch) == gpt.CAPSTONE_SIZES[-1]
    assert all(b % 8 == 0 for _, b in gpt.CAPSTONE_SIZES)  # rungs 7-8 split the batch by 8
    assert "batch 8" in str(t4) and "16 GiB" in str(t4)
    with pytest.raises(ValueError):
        gpt.capstone_size(0)
    with pytest.raises(ValueError):
        gpt.capstone_size(16, headroom=1.5)
    with pytest.raises(ValueError):
        gpt.capstone_size(16, batch=0)
    fixed = gpt.capstone_size(16, cfg=gpt.GPT2_SMALL, batch=16)  # a given size, fitting or not
    assert (fixed.cfg.block_size, fixed.batch, fixed.fits) == (1024, 16, False)


def test_capstone_phases_grow_with_batch_and_the_scores():
    phases = gpt.capstone_phases(gpt.GPT2_SMALL, 16)
    first = next(iter(phases))
    assert "hand-written" in first and phases[first] == max(phases.values())
    assert gpt.capstone_phases(gpt.GPT2_SMALL, 8)[first] < phases[first]


# ------------------------------------------------ clipping under a GradScaler (06)
def test_stepper_clips_the_true_gradient_norm_under_an_fp16_scaler():
    x = torch.randint(0, 256, (4, 16))
    norms = {}
    for name in ("fp32", "scaled"):
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        step = gpt.Stepper(model, opt, [(x, x)], clip=1e-3)
        if name == "scaled":  # an enabled scaler as fp16 would use, on the CPU
            step.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
        step()
        norms[name] = float(step.grad_norm)
    # fails if the norm was taken before unscale_ (then it is 2**16 x the true one)
    assert norms["scaled"] == pytest.approx(norms["fp32"], rel=1e-4)
    assert norms["fp32"] > 1e-3  # the clip bound binds: the clipped branch ran
    with pytest.raises(ValueError, match="clip"):
        gpt.Stepper(_model(), torch.optim.SGD(_model().parameters(), lr=0.1), [(x, x)], clip=0)
