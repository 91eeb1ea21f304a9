"""accelkit.precision: formats, AMP choice and path, make_step, dtype traces, Keras activation
bytes; the dtype names (accelkit.claims) and the modules that read them."""

import importlib.util
import math

import numpy as np
import pytest
import torch
from torch import nn

from accelkit import claims, hardware, precision, roofline


# ----------------------------------------------------------------------------- formats
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_ieee_formula_matches_torch_finfo(dtype):
    """The formula used for tf32 must reproduce finfo for the formats finfo knows."""
    (fmt,) = precision.float_formats(dtype).values()
    fi = torch.finfo(dtype)
    assert (fmt.bits, fmt.mantissa_bits) == (fi.bits, -math.log2(fi.eps))
    assert (fmt.max, fmt.smallest_normal, fmt.eps) == (fi.max, fi.smallest_normal, fi.eps)
    assert fmt.smallest_subnormal == fi.smallest_normal * fi.eps  # one ulp above 0
    assert torch.tensor(fmt.smallest_subnormal, dtype=dtype) > 0
    assert torch.tensor(fmt.smallest_subnormal / 2, dtype=dtype) == 0  # half of it: 0


def test_float_format_values_and_aliases():
    fp16 = precision.float_formats("fp16")["fp16"]
    assert (fp16.name, fp16.bits, fp16.max, fp16.smallest_normal) == ("float16", 16, 65504.0,
                                                                       2.0**-14)
    assert fp16.smallest_subnormal == 2.0**-24
    assert precision.float_formats("half") == {"fp16": fp16}
    tf32 = precision.float_formats("tf32")["tf32"]
    assert (tf32.exponent_bits, tf32.mantissa_bits, tf32.eps) == (8, 10, 2.0**-10)
    assert tf32.smallest_normal == torch.finfo(torch.float32).smallest_normal
    assert tf32.max == (2 - 2.0**-10) * 2.0**127
    bf16, fp32 = precision.float_formats(torch.bfloat16, "fp32").values()
    assert bf16.smallest_normal == fp32.smallest_normal  # fp32's range
    assert bf16.max == pytest.approx(fp32.max, rel=1e-2)
    assert bf16.decimal_digits == pytest.approx(8 * math.log10(2))
    assert bf16.short == "bf16"


def test_unknown_format_raises():
    with pytest.raises(ValueError, match="unknown float format"):
        precision.float_formats("fp8")


def test_format_table_lists_every_format():
    fmts = precision.float_formats()
    assert list(fmts) == ["fp32", "tf32", "fp16", "bf16"]
    text = fmts.markdown()
    for short in fmts:
        assert f"| {short} |" in text
    assert "65504" in text.replace("6.55e+04", "65504")


TF32 = precision.float_formats("tf32")["tf32"]


def test_round_to_tf32_is_round_to_nearest_even():
    x = torch.tensor([1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-10, -(1 + 3 * 2.0**-11),
                      1 + 2.0**-11 + 2.0**-20])
    got = TF32.round(x).tolist()
    assert got == [1.0, 1 + 2 * 2.0**-10, 1 + 2.0**-10, -(1 + 2 * 2.0**-10), 1 + 2.0**-10]


def test_round_to_keeps_specials_and_shape():
    x = torch.tensor([[float("inf"), float("-inf")], [float("nan"), 0.0]])
    out = TF32.round(x)
    assert out.shape == x.shape
    assert out[0, 0] == float("inf") and out[0, 1] == float("-inf") and out[1, 0].isnan()


def test_round_to_fp16_underflows_bf16_does_not():
    tiny = torch.tensor([1e-8])
    fmts = precision.float_formats()
    assert fmts["fp16"].round(tiny).item() == 0.0
    assert fmts["bf16"].round(tiny).item() == pytest.approx(1e-8, rel=1e-2)
    assert fmts["fp16"].round(torch.tensor([70000.0])).item() == float("inf")
    assert torch.equal(fmts["fp32"].round(tiny), tiny)
    with pytest.raises(TypeError):
        fmts["fp16"].round(torch.tensor([1.0], dtype=torch.float64))


# ----------------------------------------------------------------------------- AMP choice
def test_amp_choice_cpu_bf16_follows_the_cpu_class(monkeypatch):
    from accelkit import hardware

    monkeypatch.setattr(hardware, "probed_cpu", lambda: hardware.get("cpu-amx"))
    fast = precision.amp_choice("cpu")
    assert (fast.device_type, fast.dtype, fast.needs_scaler, fast.native) == (
        "cpu", torch.bfloat16, False, True)
    monkeypatch.setattr(hardware, "probed_cpu", lambda: hardware.get("cpu-avx2"))
    slow = precision.amp_choice("cpu")
    assert not slow.native and "slower" in slow.reason


def test_amp_choice_fp16_needs_a_scaler():
    choice = precision.amp_choice("cpu", "fp16")
    assert choice.dtype == torch.float16 and choice.needs_scaler
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        precision.amp_choice("cpu", torch.float32)


# ----------------------------------------------------------------------------- make_step
def _tiny_gradient_problem():
    """A linear layer whose true weight gradients (8e-9) are below fp16's smallest subnormal."""
    lin = nn.Linear(4, 1, bias=False)
    nn.init.ones_(lin.weight)
    x, y = torch.full((8, 4), 1e-4), torch.zeros(8)
    return lin, torch.optim.SGD(lin.parameters(), lr=1.0), x, y


def _small_loss(out, y):
    return (out.float().squeeze(1) - y).sum() * 1e-5  # d loss / d w = 8 * 1e-4 * 1e-5


@pytest.mark.parametrize("dtype, enabled", [(torch.float16, True), ("fp16", True),
                                            (torch.bfloat16, False), (None, False)])
def test_make_step_enables_the_scaler_exactly_for_fp16(dtype, enabled):
    lin, opt, x, y = _tiny_gradient_problem()
    step = precision.make_step(lin, opt, "cpu", dtype, loss_fn=_small_loss)
    assert step.scaler.is_enabled() is enabled
    loss = step(x, y)
    assert loss.dtype == torch.float32 and not loss.requires_grad


def test_make_step_fp16_keeps_gradients_that_underflow_without_scaling():
    lin, opt, x, y = _tiny_gradient_problem()
    step = precision.make_step(lin, opt, "cpu", torch.float16, loss_fn=_small_loss)
    step(x, y)
    assert step.scaler.get_scale() == 2.0**16  # the default start, no overflow
    torch.testing.assert_close(lin.weight.grad, torch.full((1, 4), 8e-9), rtol=2e-2, atol=0)
    # the same step without loss scaling (what `GradScaler(enabled=False)` did): all lost
    lin2, opt2, _, _ = _tiny_gradient_problem()
    off = precision.AmpStep(lin2, opt2, torch.float16, torch.amp.GradScaler("cpu", enabled=False),
                            _small_loss, torch.autocast("cpu", dtype=torch.float16))
    off(x, y)
    assert (lin2.weight.grad == 0).all()


def test_make_step_rejects_a_disabled_scaler_for_fp16_and_keeps_a_given_one():
    lin, opt, _, _ = _tiny_gradient_problem()
    with pytest.raises(ValueError, match="enabled GradScaler"):
        precision.make_step(lin, opt, "cpu", torch.float16,
                            scaler=torch.amp.GradScaler("cpu", enabled=False))
    mine = torch.amp.GradScaler("cpu", init_scale=2.0**12)
    assert precision.make_step(lin, opt, "cpu", torch.float16, scaler=mine).scaler is mine


def test_make_step_fp32_baseline_runs_without_autocast():
    lin, opt, x, y = _tiny_gradient_problem()
    step = precision.make_step(lin, opt, "cpu", None, loss_fn=lambda out, y: out.sum())
    with step.autocast:
        assert lin(x).dtype == torch.float32
    assert step.dtype is None
    amp = precision.make_step(lin, opt, "cpu", torch.bfloat16)
    with amp.autocast:
        assert lin(x).dtype == torch.bfloat16


@pytest.mark.parametrize("name", ["cpu-avx2", "cpu-avx512"])
def test_cpus_without_bf16_units_decide_from_the_table(name):
    """The classes a laptop lands in: bf16 not native, no bf16 floor, the fp32 knobs claimed."""
    from accelkit import hardware

    cls = hardware.get(name)
    amp = precision.amp_choice(hw=cls)
    assert (amp.dtype, amp.native, amp.needs_scaler) == (torch.bfloat16, False, False)
    assert cls.floor("bf16_matmul") is None and cls.floor("amp_step_torch") is None
    # the fp32 knobs' gains depend on the load on 2 cores: measured and shown, never a floor
    # that only rules out a slowdown (issue 25)
    assert cls.floor("batch_throughput") is None and "illustration" in cls.claim("batch_throughput").why


def test_mps_path_decisions_with_a_faked_device(monkeypatch):
    """02's MPS path: fp16 autocast with an enabled GradScaler('mps'), chosen without a Mac."""
    from accelkit import device as _dev

    monkeypatch.setattr(_dev, "device_type", lambda d=None: "mps")
    amp = precision.amp_choice("mps")
    assert (amp.device_type, amp.dtype, amp.needs_scaler, amp.native) == (
        "mps", torch.float16, True, True)
    assert torch.amp.is_autocast_available("mps"), "torch's autocast accepts device_type='mps'"
    scaler = torch.amp.GradScaler("mps", enabled=amp.needs_scaler)  # constructible off a Mac
    assert scaler.is_enabled() and scaler.get_scale() == 2.0**16


# ----------------------------------------------------------------------------- the AMP path
def _fake_probe(fp32_s, bf16_s, calls=None):
    """A faked bf16 vs fp32 matmul measurement: one Comparison from per-pair times."""
    from accelkit import bench

    def probe():
        if calls is not None:
            calls.append(1)
        return bench.Comparison(bench.Timing("fp32", tuple(fp32_s)),
                                bench.Timing("bf16", tuple(bf16_s)))
    return probe


ZEN4_LIKE = _fake_probe([0.0200, 0.0210, 0.0190, 0.0205, 0.0198, 0.0202, 0.0201, 0.0199],
                        [0.0070, 0.0071, 0.0069, 0.0072, 0.0070, 0.0068, 0.0071, 0.0070])  # 2.9x
XEON_LIKE = _fake_probe([0.0140, 0.0141, 0.0139, 0.0142, 0.0140, 0.0138, 0.0141, 0.0140],
                        [0.0255, 0.0254, 0.0256, 0.0253, 0.0255, 0.0257, 0.0254, 0.0255])  # 0.55x
NOISY = _fake_probe([0.010, 0.030, 0.012, 0.028, 0.011, 0.029, 0.010, 0.030],
                    [0.020, 0.010, 0.021, 0.011, 0.020, 0.010, 0.022, 0.011])  # 0.5x-3x


def test_amp_path_a_zen4_like_cpu_takes_the_bf16_path_and_claims_it():
    from accelkit import hardware

    cls = hardware.get("cpu-avx512-bf16")
    assert cls.bf16_measured and cls.floor("bf16_matmul") is None  # the class claims nothing
    path = precision.amp_path(hw=cls, probe=ZEN4_LIKE)
    assert (path.use, path.decided_by, path.dtype) == (True, "measurement", torch.bfloat16)
    assert path.probe.speedup == pytest.approx(2.9, rel=0.05)
    assert path.floor("bf16_matmul") == 1.0  # the notebooks re-check it on fresh pairs
    assert f"{path.probe.speedup:.2f}x" in path.claim("bf16_matmul").why  # this run's figure
    for name in ("amp_step_torch", "amp_step_tf", "gpt_amp"):  # steps: shown, not asserted
        assert path.floor(name) is None and "faster on this CPU" in path.claim(name).why
    assert path.claim("compile_chain") == cls.claim("compile_chain")  # others: the class's
    assert "Zen 4" in path.claim("bf16_matmul").why and "Xeon" in path.claim("bf16_matmul").why


def test_amp_path_a_xeon_like_cpu_makes_no_claim():
    from accelkit import hardware

    path = precision.amp_path(hw=hardware.get("cpu-avx512-bf16"), probe=XEON_LIKE)
    assert (path.use, path.decided_by) == (False, "measurement")
    assert path.probe.speedup == pytest.approx(0.55, rel=0.05)
    for name in ("bf16_matmul", "amp_step_torch", "amp_step_tf", "gpt_amp"):
        assert path.floor(name) is None and "not clearly faster" in path.claim(name).why
    noisy = precision.amp_path(hw=hardware.get("cpu-avx512-bf16"), probe=NOISY)
    assert not noisy.use and noisy.floor("bf16_matmul") is None
    assert "too noisy" in noisy.claim("bf16_matmul").why


def test_amp_path_uniform_classes_decide_without_measuring(monkeypatch):
    from accelkit import hardware

    calls = []
    probe = _fake_probe([1.0] * 8, [0.1] * 8, calls)
    for name, use in (("cpu-amx", True), ("cpu-avx2", False), ("cpu-avx512", False),
                      ("t4", True), ("h200", True), ("p100", False), ("tpu-v5e", True)):
        cls = hardware.get(name)
        path = precision.amp_path(hw=cls, probe=probe)
        assert (path.use, path.decided_by) == (use, "class"), name
        assert vars(precision.amp_choice(hw=cls)).items() <= vars(path).items(), name
        assert path.floor("bf16_matmul") == cls.floor("bf16_matmul")
        assert path.floor("gpt_amp") == cls.floor("gpt_amp")
    assert not calls, "a uniform class must not be measured"


def test_amp_path_under_cpu_avx2_emulation_takes_the_no_bf16_path(monkeypatch):
    from accelkit import hardware

    monkeypatch.setenv(hardware.HARDWARE_ENV, "cpu-avx2")
    calls = []
    path = precision.amp_path("cpu", probe=_fake_probe([1.0] * 8, [0.1] * 8, calls))
    assert (path.hardware, path.use, path.floor("bf16_matmul")) == ("cpu-avx2", False, None)
    assert not calls


def test_amp_path_is_measured_once_per_process(monkeypatch):
    from accelkit import hardware

    calls = []
    monkeypatch.setattr(precision, "_PATHS", {})
    monkeypatch.setattr(precision, "_probe_bf16", lambda dev: (calls.append(dev), ZEN4_LIKE())[1])
    cls = hardware.get("cpu-avx512-bf16")
    first = precision.amp_path("cpu", hw=cls)
    assert precision.amp_path("cpu", hw=cls) is first and len(calls) == 1
    assert precision.amp_path("cpu", hw=cls, refresh=True) is not first and len(calls) == 2


def test_amp_choice_reason_on_a_gpu_without_units():
    from accelkit import hardware

    amp = precision.amp_choice(hw=hardware.get("p100"))
    assert (amp.dtype, amp.needs_scaler, amp.native) == (torch.float16, True, False)
    assert "tensor cores" in amp.reason and "converted to compute" not in amp.reason


# ----------------------------------------------------------------------------- dtype names
@pytest.mark.parametrize(("given", "name", "short"), [
    (torch.bfloat16, "bfloat16", "bf16"), ("bf16", "bfloat16", "bf16"),
    ("BFloat16", "bfloat16", "bf16"), (torch.float16, "float16", "fp16"),
    ("half", "float16", "fp16"), ("float", "float32", "fp32"), (np.dtype("float32"), "float32", "fp32"),
    ("tf32", "tfloat32", "tf32"), ("double", "float64", "fp64"), (torch.float64, "float64", "fp64")])
def test_every_spelling_reads_to_one_name(given, name, short):
    assert claims.canonical(given) == name
    assert claims.short(given) == short


def test_unknown_names_pass_through_for_the_caller_to_reject():
    assert claims.canonical(torch.int8) == "int8"
    assert claims.short("fp8") == "fp8"


def test_every_alias_and_short_key_names_a_canonical_dtype():
    assert set(claims.ALIASES.values()) <= set(claims.SHORT)
    assert all(claims.canonical(s) == name for name, s in claims.SHORT.items())


def test_the_users_agree_on_names():
    for given in ("bf16", torch.bfloat16, "bfloat16"):
        assert precision.format_name(given) == "bfloat16"
        assert roofline.dtype_key(given) == "bf16"
        assert claims.tolerance(given) == claims.tolerance("bfloat16")
    assert hardware.datasheet_tflops("NVIDIA H200", "half") == 989.4
    with pytest.raises(ValueError, match="no default tolerance"):
        claims.tolerance(torch.int32)


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 8 * 8, 10))


def test_trace_shows_what_autocast_lowers_and_keeps():
    model, x, y = _cnn(), torch.randn(2, 1, 8, 8), torch.tensor([0, 1])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, ops = precision.trace(lambda: nn.functional.cross_entropy(model(x), y))
    out = {r.op: r.output for r in ops}
    assert out["conv2d"] == "bfloat16" and out["linear"] == "bfloat16"
    assert out["cross_entropy"] == "float32" and loss.dtype == torch.float32
    conv = next(r for r in ops if r.op == "conv2d")
    assert conv.inputs == ("float32", "float32", "float32")  # as given, before the cast
    _, plain = precision.trace(lambda: model(x))
    assert {r.output for r in plain} == {"float32"}
    assert "| conv2d | float32, float32, float32 | bfloat16 | 1 |" in ops.table()


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow absent")
def test_keras_activation_bytes_counts_layer_outputs():
    import keras

    def build(policy):
        return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, dtype=policy),
                                 keras.layers.Dense(4, dtype=policy)])

    fp32 = build("float32")
    assert precision.keras_activation_bytes(fp32, 10) == 10 * (16 + 4) * 4
    mixed = keras.Sequential([build("mixed_bfloat16"),  # nested, as notebook 02's model
                              keras.layers.Activation("linear", dtype="float32")])
    # two bf16 layer outputs, then the float32 output activation
    assert precision.keras_activation_bytes(mixed, 10) == 10 * (16 + 4) * 2 + 10 * 4 * 4
    with pytest.raises(ValueError):
        precision.keras_activation_bytes(fp32, 0)
