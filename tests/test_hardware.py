"""The hardware-class table and every decision the course takes from it, per class."""

import pytest
import torch

from accelkit import env, hardware, precision

GPU_FP16_ONLY = ("cuda-pre-volta", "p100", "cuda-volta-turing", "v100", "t4")
GPU_BF16 = ("cuda-ampere-plus", "a10", "l4", "rtx-4090", "l40s", "a100-40gb", "a100", "h20",
            "h100-pcie", "h100", "h200", "b200", "mi300x", "rocm-other")
#: The GPUs the issue found borrowing another class's peak, with their datasheet (dense).
NEW_GPUS = {"l40s": ("NVIDIA L40S", (8, 9), 362.05, 48), "rtx-4090": (
    "NVIDIA GeForce RTX 4090", (8, 9), 165.2, 24), "b200": ("NVIDIA B200", (10, 0), 2250.0, 180),
    "h20": ("NVIDIA H20", (9, 0), 148.0, 96), "a100-40gb": ("NVIDIA A100-SXM4-40GB", (8, 0), 312.0,
                                                            40)}


@pytest.mark.parametrize("name", list(hardware.CLASSES))
def test_every_class_is_complete_and_consistent(name):
    cls = hardware.get(name)
    assert cls.kind in ("cpu", "cuda", "rocm", "mps", "tpu") and cls.title and cls.source
    assert cls.amp_dtype in ("bfloat16", "float16")
    assert cls.grad_scaler == (cls.amp_dtype == "float16"), "fp16 and only fp16 needs a scaler"
    assert cls.profile == ("ci" if cls.kind == "cpu" else "full")
    assert set(cls.claims) <= set(hardware.CLAIMS), "claims must be named in CLAIMS"
    for claim in hardware.CLAIMS:
        c = cls.claim(claim)
        assert c.why, f"{name}/{claim}: every floor (and every missing claim) says why"
        assert c.floor is None or 0 < c.floor <= 3
    if cls.amp_dtype == "bfloat16" and not cls.bf16_units:
        assert cls.floor("bf16_matmul") is None, "no bf16 speed claim without bf16 units"
    for dtype, peak in cls.peak_tflops.items():
        assert dtype in ("fp32", "tf32", "bf16", "fp16", "fp8") and peak > 0
    card = env.class_card(cls)
    assert cls.title in card and "| claim | floor | why |" in card


@pytest.mark.parametrize("name", GPU_FP16_ONLY)
def test_gpus_before_ampere_get_fp16_with_a_scaler_and_no_bf16_claim(name):
    amp = precision.amp_choice(hw=hardware.get(name))
    assert (amp.device_type, amp.dtype, amp.needs_scaler) == ("cuda", torch.float16, True)
    assert hardware.get(name).floor("bf16_matmul") is None
    assert hardware.get(name).keras_policy == "mixed_float16"


@pytest.mark.parametrize("name", ("cuda-pre-volta", "p100"))
def test_gpus_before_volta_have_no_fp16_units_and_no_autocast_floor(name):
    cls = hardware.get(name)
    assert not cls.fp16_units and not cls.tensor_cores and not cls.bf16_units
    assert not precision.amp_choice(hw=cls).native
    for claim in ("amp_step_torch", "amp_step_tf", "gpt_amp", "bf16_matmul"):
        assert cls.floor(claim) is None, claim
    assert "tensor cores" in cls.claim("amp_step_torch").why
    for claim in ("compile_chain", "compile_gelu", "gpt_compile"):  # Triton needs sm_70+
        assert cls.floor(claim) is None and "Triton" in cls.claim(claim).why
    assert hardware.classify_gpu("Tesla P100-PCIE-16GB", (6, 0)).name == "p100"
    assert hardware.classify_gpu("Quadro P5000", (6, 1)).name == "cuda-pre-volta"


@pytest.mark.parametrize("name", GPU_BF16)
def test_ampere_and_newer_get_bf16_without_a_scaler_and_keras_bf16(name):
    cls = hardware.get(name)
    amp = precision.amp_choice(hw=cls)
    assert (amp.dtype, amp.needs_scaler, amp.native) == (torch.bfloat16, False, True)
    assert cls.floor("bf16_matmul") >= 1.2
    assert cls.keras_policy == "mixed_bfloat16", "bf16 units: Keras needs no loss scaling"


@pytest.mark.parametrize("name", [n for n, c in hardware.CLASSES.items()
                                  if c.kind in ("cuda", "rocm")])
def test_tensor_core_reasons_quote_this_class_datasheet_ratio(name):
    cls = hardware.get(name)
    dt = "bf16" if cls.bf16_units else "fp16"
    texts = [cls.claim(c).why for c in hardware.CLAIMS]
    assert not any("8-16x" in t or "8–16x" in t for t in texts), "one ratio for every GPU"
    ratio = (cls.peak(dt) or 0) / (cls.peak("fp32") or 1)
    if cls.peak(dt) and cls.peak("fp32") and cls.fp16_units:
        key = "bf16_matmul" if cls.bf16_units else "amp_step_torch"
        assert f"{ratio:.3g}x the fp32 peak" in cls.claim(key).why, cls.claim(key).why
        if cls.bf16_units:  # a datasheet ratio under 3x cannot carry a 2x floor
            assert cls.floor("bf16_matmul") == (2.0 if ratio >= 3 else 1.2)
    if cls.tf32 and cls.kind == "cuda":
        tf32 = (cls.peak("tf32") or 0) / (cls.peak("fp32") or 1)
        assert cls.floor("tf32_matmul") == (1.3 if tf32 >= 1.9 else None), (name, tf32)


def test_a10_and_l4_are_4x_not_8_to_16x():
    for name in ("a10", "l4"):
        assert "4.01x" in hardware.get(name).claim("bf16_matmul").why \
            or "3.99x" in hardware.get(name).claim("bf16_matmul").why
    assert "16x the fp32 peak" in hardware.get("a100").claim("bf16_matmul").why
    assert hardware.get("rtx-4090").floor("tf32_matmul") is None  # TF32 peak = fp32 peak


@pytest.mark.parametrize("name", sorted(NEW_GPUS))
def test_new_gpu_classes_have_their_own_datasheet(name):
    product, cc, bf16, memory = NEW_GPUS[name]
    cls = hardware.classify_gpu(product, cc)
    assert cls.name == name and cls.compute_capability == cc
    assert cls.peak("bf16") == bf16 and cls.memory_gib == memory and cls.bandwidth_gbps
    assert hardware.datasheet_tflops(product, "bf16") == bf16
    assert any(w in cls.source for w in ("datasheet", "specifications", "whitepaper"))
    assert cls.datasheet_peak("bf16").tflops == bf16


def test_the_two_a100s_are_told_apart_by_name_or_memory():
    assert hardware.classify_gpu("NVIDIA A100-SXM4-40GB", (8, 0)).name == "a100-40gb"
    assert hardware.classify_gpu("NVIDIA A100-PCIE-40GB", (8, 0)).name == "a100-40gb"
    assert hardware.classify_gpu("NVIDIA A100-SXM4-80GB", (8, 0)).name == "a100"
    assert hardware.classify_gpu("NVIDIA A100 80GB PCIe", (8, 0), memory_bytes=80 * 2**30
                                 ).name == "a100"
    assert hardware.classify_gpu("NVIDIA A100", (8, 0), memory_bytes=40 * 2**30).name \
        == "a100-40gb"
    assert hardware.get("a100").memory_gib == 80 and hardware.get("a100-40gb").memory_gib == 40
    assert "80 GB" in hardware.get("a100").title and "40 GB" in hardware.get("a100-40gb").title


@pytest.mark.parametrize("product, cc, generic", [
    ("NVIDIA GeForce RTX 3090", (8, 6), "cuda-ampere-plus"), ("NVIDIA L40", (8, 9),
                                                               "cuda-ampere-plus"),
    ("NVIDIA GB200", (10, 0), "cuda-ampere-plus"), ("NVIDIA H100 NVL", (9, 0),
                                                    "cuda-ampere-plus"),
    ("NVIDIA GeForce RTX 5090", (12, 0), "cuda-ampere-plus"),
    ("NVIDIA TITAN RTX", (7, 5), "cuda-volta-turing"), ("Quadro K2200", (5, 0), "cuda-pre-volta"),
    ("GPU 0", None, "cuda-pre-volta")])
def test_an_unknown_gpu_gets_no_peak_instead_of_a_borrowed_one(product, cc, generic):
    cls = hardware.classify_gpu(product, cc)
    assert cls.name == generic and not cls.peak_tflops and cls.memory_gib is None
    for dtype in ("fp32", "bf16", "fp16"):
        assert hardware.datasheet_tflops(product, dtype) is None
        peak = cls.datasheet_peak(dtype)
        assert peak.tflops is None and "not in accelkit's table" in peak.source
        assert str(peak).startswith("no peak known")
    assert hardware.classify_gpu("AMD Instinct MI250X", None, "rocm").name == "rocm-other"
    assert hardware.get("rocm-other").peak("bf16") is None


def test_datasheet_peak_says_why_there_is_none():
    assert hardware.get("h200").datasheet_peak(torch.bfloat16).tflops == 989.4
    assert "CPUs have no datasheet" in hardware.get("cpu-avx2").datasheet_peak(
                                                               "fp32").source
    t4 = hardware.get("t4").datasheet_peak("bf16")
    assert t4.tflops is None and "lists no dense bf16 peak" in t4.source
    assert hardware.get("p100").datasheet_peak("fp16").tflops is None  # half2 only


@pytest.mark.parametrize("name, dtype, backend", [
    ("t4", "fp16", "EFFICIENT_ATTENTION"), ("v100", "fp16", "EFFICIENT_ATTENTION"),
    ("p100", "fp16", "EFFICIENT_ATTENTION"), ("a10", "bf16", "FLASH_ATTENTION"),
    ("l4", "bf16", "FLASH_ATTENTION"), ("a100", "bf16", "FLASH_ATTENTION"),
    ("a100", "fp32", "EFFICIENT_ATTENTION"), ("h100", "bf16", "CUDNN_ATTENTION"),
    ("h200", "bf16", "CUDNN_ATTENTION"), ("h20", "bf16", "CUDNN_ATTENTION"),
    ("b200", "bf16", "CUDNN_ATTENTION"), ("h100", "fp32", "EFFICIENT_ATTENTION"),
    ("cuda-ampere-plus", "bf16", "FLASH_ATTENTION"), ("cpu-avx2", "fp32", "FLASH_ATTENTION"),
    ("cpu-avx512-bf16", "bf16", "FLASH_ATTENTION"), ("apple-mps", "fp16", "MATH"),
    ("tpu-v5e", "bf16", "MATH"), ("mi300x", "bf16", "FLASH_ATTENTION")])
def test_sdpa_backend_per_class(name, dtype, backend):
    from torch.nn.attention import SDPBackend

    choice = hardware.get(name).sdpa_backend(dtype)
    assert choice.backend == backend and choice.order[0] == backend
    assert hasattr(SDPBackend, choice.backend), "a name SDPBackend knows"
    assert choice.order[-1] == "MATH" and name in choice.reason


def test_sdpa_cudnn_comes_first_on_hopper_only_with_a_new_cudnn():
    h100 = hardware.get("h100")
    assert h100.sdpa_backend("bf16", cudnn_version=91600).backend == "CUDNN_ATTENTION"
    old = h100.sdpa_backend("bf16", cudnn_version=91002)
    assert old.backend == "FLASH_ATTENTION" and "9.15" in old.reason
    assert "9.15" in h100.sdpa_backend("bf16").reason  # unknown: says on what
    assert "CUDNN_ATTENTION" not in hardware.get("a100").sdpa_backend("bf16").order
    assert "CPU flash kernel" in hardware.get("cpu-avx2").sdpa_backend().reason


def test_sdpa_on_this_cpu_runs_the_backend_the_table_names():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    choice = hardware.for_device("cpu").sdpa_backend("fp32")
    q = torch.randn(1, 2, 16, 8)
    with sdpa_kernel(getattr(SDPBackend, choice.backend)):  # raises if it cannot run here
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)


def test_cpu_classes():
    for name in ("cpu-avx2", "cpu-avx512", "cpu-arm64"):
        cls = hardware.get(name)
        amp = precision.amp_choice(hw=cls)
        assert amp.dtype == torch.bfloat16 and not amp.native and "slower" in amp.reason
        assert all(cls.floor(c) is None for c in ("bf16_matmul", "amp_step_torch", "amp_step_tf"))
    assert hardware.get("cpu-amx").floor("bf16_matmul") >= 1.0
    assert precision.amp_choice(hw=hardware.get("cpu-amx")).native
    assert hardware.get("cpu-avx2").emulate_env == {"ONEDNN_MAX_CPU_ISA": "AVX2",
                                                    "ATEN_CPU_CAPABILITY": "avx2"}


def test_mps_and_tpu():
    mps = precision.amp_choice(hw=hardware.get("apple-mps"))
    assert (mps.device_type, mps.dtype, mps.needs_scaler) == ("mps", torch.float16, True)
    tpu = precision.amp_choice(hw=hardware.get("tpu-v5e"))
    assert (tpu.device_type, tpu.dtype, tpu.needs_scaler) == ("xla", torch.bfloat16, False)
    assert "XLA" in env.doctor("tpu-v5e") and hardware.get("tpu-v5e").peak_tflops["bf16"] == 197


@pytest.mark.parametrize("feats, machine, expected", [
    ({"avx2": True}, "x86_64", "cpu-avx2"),
    ({"avx2": True, "avx512f": True}, "x86_64", "cpu-avx512"),
    ({"avx512f": True, "avx512_bf16": True}, "x86_64", "cpu-avx512-bf16"),
    ({"avx512f": True, "avx512_bf16": True, "amx_bf16": True}, "x86_64", "cpu-amx"),
    ({"neon": True}, "aarch64", "cpu-arm64"),
    ({}, "arm64", "cpu-arm64"),
])
def test_classify_cpu(feats, machine, expected):
    assert hardware.classify_cpu(feats, machine).name == expected


@pytest.mark.parametrize("name, cc, expected", [
    ("Tesla T4", (7, 5), "t4"), ("NVIDIA H200", (9, 0), "h200"), ("NVIDIA H100 PCIe", (9, 0),
                                                                  "h100-pcie"),
    ("NVIDIA H100 80GB HBM3", (9, 0), "h100"), ("NVIDIA A100-SXM4-80GB", (8, 0), "a100"),
    ("NVIDIA A10G", (8, 6), "a10"), ("NVIDIA L4", (8, 9), "l4"), ("Tesla V100-SXM2-16GB", (7, 0),
                                                                   "v100"),
    ("NVIDIA GeForce RTX 4090", (8, 9), "rtx-4090"), ("NVIDIA RTX 3090", (8, 6),
                                                      "cuda-ampere-plus"),
    ("NVIDIA L40S", (8, 9), "l40s"), ("NVIDIA H20", (9, 0), "h20"),
    ("NVIDIA B200", (10, 0), "b200"), ("Tesla P100", (6, 0), "p100"),
    ("Quadro K2200", (5, 0), "cuda-pre-volta"), ("GPU 0", None, "cuda-pre-volta"),
])
def test_classify_gpu_by_name_then_compute_capability(name, cc, expected):
    assert hardware.classify_gpu(name, cc).name == expected


def test_rocm_gpus_are_mi300x_class_by_name_else_generic():
    assert hardware.classify_gpu("AMD Instinct MI300X", None, "rocm").name == "mi300x"
    assert hardware.classify_gpu("ROCM GPU 0", None, "rocm").name == "rocm-other"


def test_unknown_names_are_clear_errors(monkeypatch):
    with pytest.raises(KeyError, match="known: cpu-avx2"):
        hardware.get("gtx-1080")
    with pytest.raises(KeyError, match="unknown claim"):
        hardware.get("t4").claim("warp_speed")
    monkeypatch.setenv(hardware.HARDWARE_ENV, "nope")
    with pytest.raises(KeyError, match="nope"):
        hardware.from_env()


def test_the_environment_switch_sets_the_cpu_class(monkeypatch):
    monkeypatch.setenv(hardware.HARDWARE_ENV, "cpu-avx2")
    assert hardware.for_device("cpu").name == "cpu-avx2"
    assert not precision.amp_choice("cpu").native
    monkeypatch.setenv(hardware.HARDWARE_ENV, "cpu-amx")
    assert precision.amp_choice("cpu").native
    monkeypatch.delenv(hardware.HARDWARE_ENV)
    assert hardware.for_device("cpu") == hardware.probed_cpu()


def test_datasheet_peaks_come_from_the_table():
    assert hardware.datasheet_tflops("NVIDIA A100-SXM4-80GB", "bf16") == 312.0
    assert hardware.datasheet_tflops("NVIDIA H100 PCIe", torch.float16) == 756.0
    assert hardware.datasheet_tflops("NVIDIA H200", "fp32") == 67.0
    assert hardware.datasheet_tflops("NVIDIA H200", "bfloat16") == 989.4
    assert hardware.datasheet_tflops("Tesla T4", "bf16") is None
    assert hardware.datasheet_tflops("Intel(R) Xeon(R)", "fp32") is None


# The datasheet table precision.datasheet_tflops kept before the hardware-class table existed
# (NVIDIA datasheets, dense): every name it answered must still get the same numbers.
_OLD_DATASHEET = {
    "NVIDIA H100 PCIe": {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0},
    "NVIDIA H200": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
    "NVIDIA H100 80GB HBM3": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
    "NVIDIA A100-SXM4-80GB": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    "NVIDIA L4": {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0},
    "Tesla T4": {"fp32": 8.1, "fp16": 65.0},
    "Tesla V100-SXM2-32GB": {"fp32": 15.7, "fp16": 125.0},
}


@pytest.mark.parametrize("name", list(_OLD_DATASHEET))
def test_datasheet_peaks_match_the_old_table(name):
    for dtype in ("fp32", "tf32", "bf16", "fp16"):
        assert hardware.datasheet_tflops(name, dtype) == _OLD_DATASHEET[name].get(dtype)


def test_a_name_fragment_touched_by_a_letter_or_digit_is_another_gpu():
    assert hardware.datasheet_tflops("NVIDIA L40S", "fp32") == 91.6  # its own, not an L4's
    assert hardware.classify_gpu("NVIDIA RTX A1000", (8, 6)).name == "cuda-ampere-plus"
    assert hardware.classify_gpu("NVIDIA A10G", (8, 6)).name == "a10"
    assert hardware.classify_gpu("NVIDIA L40", [8, 9]).name == "cuda-ampere-plus"  # not an L4
    assert hardware.classify_gpu("NVIDIA GeForce RTX 4090 D", (8, 9)).name == "cuda-ampere-plus"
    assert hardware.classify_gpu("NVIDIA H200 NVL", (9, 0)).name == "h200"


@pytest.mark.parametrize(("name", "expected"), [
    ("cuda-pre-volta", False), ("p100", False), ("v100", True), ("cuda-volta-turing", True),
    ("t4", True), ("h200", True), ("mi300x", True),
    ("apple-mps", False), ("tpu-v5e", False), ("cpu-amx", False)])
def test_tensor_cores_from_sm70_on(name, expected):
    assert hardware.get(name).tensor_cores == expected


def test_doctor_hardware_names_the_decisions():
    t4 = env.doctor("t4")
    assert "float16, with GradScaler" in t4
    assert "bf16 vs fp32 matmul (00, 02) | no claim" in t4
    for name in ("a100", "h200"):
        assert "autocast: bfloat16, no GradScaler" in env.doctor(name)
    avx2 = env.doctor("cpu-avx2")
    assert "bf16 vs fp32 matmul (00, 02) | no claim" in avx2
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in avx2
    listing = env.doctor("list")
    assert all(f"`{name}`" in listing for name in hardware.CLASSES)
    rows = [line.split(" | ") for line in listing.splitlines() if line.startswith("| `")]
    # the units column (06 points there for fp8): fails if it disagrees with the table
    assert {r[0].strip("| `") for r in rows if "fp8" in r[2]} == {
        c.name for c in hardware.CLASSES.values() if c.fp8}


@pytest.mark.parametrize("name", ["l40s", "b200", "h20", "p100", "a100-40gb", "rtx-4090",
                                  "cuda-ampere-plus"])
def test_doctor_hardware_prints_the_new_cards(name, capsys):
    assert env.main(["--hardware", name]) == 0
    out = capsys.readouterr().out
    cls = hardware.get(name)
    assert out.startswith(f"## Hardware class: {name}") and cls.title in out
    assert f"Keras policy: {cls.keras_policy}" in out
    assert "attention: " in out and cls.sdpa_backend(cls.amp_dtype).backend in out
    if cls.peak_tflops:
        assert not cls.bf16_units or f"bf16 {cls.peak('bf16'):g}" in out
        assert f"{cls.memory_gib:g} GB" in out
    else:
        assert "no peak known" in out
    if name == "p100":
        assert "float16, with GradScaler" in out and "mixed_float16 with LossScaleOptimizer" in out
        assert "| PyTorch autocast training step vs fp32 (02) | no claim |" in out
    if name == "b200":
        assert "bf16 2250" in out and "CUDNN_ATTENTION" in out


def test_no_floor_only_rules_out_a_slowdown_on_a_faster_lesson():
    """Issue 25: a floor states the effect the lesson teaches; where it does not hold on a class
    the claim is None (an illustration, and its reason says so). compile_gemm's lesson is 'no
    gain on a GEMM' (its check is the ceiling), so its floor may sit below 1."""
    no_gain = {"compile_gemm"}
    low = [(c.name, n, c.floor(n)) for c in hardware.CLASSES.values() for n in hardware.CLAIMS
           if n not in no_gain and c.floor(n) is not None and c.floor(n) < 1.0]
    assert not low, low
    for c in hardware.CLASSES.values():
        for n in hardware.CLAIMS:
            why = c.claim(n).why
            assert c.floor(n) is not None or why, (c.name, n)  # an illustration says why


def test_emulation_sets_the_instruction_set_caps_once(monkeypatch):
    monkeypatch.setattr(hardware, "probed_cpu", lambda: hardware.get("cpu-amx"))
    assert hardware.emulated() is None and hardware.emulation_note() == ""
    monkeypatch.setenv(hardware.HARDWARE_ENV, "cpu-avx2")
    named, real = hardware.emulated()
    assert (named.name, real.name) == ("cpu-avx2", "cpu-amx")
    assert "emulated on a cpu-amx CPU" in hardware.emulation_note()
    assert "not XLA's CPU code" in hardware.emulation_note() and "the core count" in hardware.emulation_note()
    env = {}  # never this test process's own environment: TF and torch read it
    done = hardware.apply_emulation(env)
    assert done == env and {k: env[k] for k in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")} == {
        "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    assert env["TORCHINDUCTOR_CACHE_DIR"].endswith("_isa_avx2"), "a compile cache of its own"
    assert hardware.apply_emulation(env) == {}  # already set: left alone
    preset = {"ATEN_CPU_CAPABILITY": "avx512"}  # set by the learner: kept, and the cache follows it
    hardware.apply_emulation(preset)
    assert preset["TORCHINDUCTOR_CACHE_DIR"].endswith("_isa_avx512"), preset
    monkeypatch.setenv(hardware.HARDWARE_ENV, "cpu-amx")  # this CPU's own class: nothing emulated
    assert hardware.emulated() is None
    monkeypatch.setenv(hardware.HARDWARE_ENV, "t4")  # a GPU cannot be emulated on a CPU
    assert hardware.emulated() is None


@pytest.mark.slow  # $ACCELKIT_HARDWARE's caps, set once and seen by torch
def test_emulation_reaches_torch_in_a_fresh_process():
    import subprocess
    import sys

    code = ("import torch, accelkit, os; x = torch.ones(4) + 1; "
            "print(torch.backends.cpu.get_cpu_capability(), os.environ['ONEDNN_MAX_CPU_ISA'])")
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=env | {"ACCELKIT_HARDWARE": "cpu-avx2"})
    if hardware.probed_cpu().name == "cpu-avx2":
        pytest.skip("this CPU is AVX2-only already")
    assert out.stdout.split() == ["AVX2", "AVX2"], out.stderr[-2000:]
