"""The hardware-class table and every decision the course takes from it, per class."""

import pytest
import torch

from accelkit import course, env, hardware, precision

GPU_FP16_ONLY = ("cuda-pre-volta", "v100", "t4")
GPU_BF16 = ("a10", "l4", "a100", "h100-pcie", "h100", "h200", "mi300x")


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


@pytest.mark.parametrize("name", GPU_BF16)
def test_ampere_and_newer_get_bf16_without_a_scaler(name):
    amp = precision.amp_choice(hw=hardware.get(name))
    assert (amp.dtype, amp.needs_scaler, amp.native) == (torch.bfloat16, False, True)
    assert hardware.get(name).floor("bf16_matmul") >= 2.0


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
    assert "XLA" in course.doctor("tpu-v5e") and hardware.get("tpu-v5e").peak_tflops["bf16"] == 197


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
    ("NVIDIA RTX 4090", (8, 9), "l4"), ("NVIDIA RTX 3090", (8, 6), "a10"),
    ("NVIDIA B200", (10, 0), "h100"), ("Tesla P100", (6, 0), "cuda-pre-volta"),
    ("Quadro K2200", (5, 0), "cuda-pre-volta"), ("GPU 0", None, "cuda-pre-volta"),
])
def test_classify_gpu_by_name_then_compute_capability(name, cc, expected):
    assert hardware.classify_gpu(name, cc).name == expected


def test_rocm_gpus_are_mi300x_class():
    assert hardware.classify_gpu("ROCM GPU 0", None, "rocm").name == "mi300x"


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


def test_a_name_fragment_followed_by_a_digit_is_another_gpu():
    assert hardware.datasheet_tflops("NVIDIA L40S", "fp32") is None  # not an L4
    assert hardware.classify_gpu("NVIDIA RTX A1000", (8, 6)).name == "a10"  # not an A100
    assert hardware.classify_gpu("NVIDIA A10G", (8, 6)).name == "a10"
    assert hardware.classify_gpu("NVIDIA L40S", [8, 9]).name == "l4"  # by compute capability


@pytest.mark.parametrize(("name", "expected"), [
    ("cuda-pre-volta", False), ("v100", True), ("t4", True), ("h200", True), ("mi300x", True),
    ("apple-mps", False), ("tpu-v5e", False), ("cpu-amx", False)])
def test_tensor_cores_from_sm70_on(name, expected):
    assert hardware.get(name).tensor_cores == expected


def test_doctor_hardware_names_the_decisions():
    t4 = course.doctor("t4")
    assert "float16, with GradScaler" in t4
    assert "bf16 vs fp32 matmul (00, 02) | no claim" in t4
    for name in ("a100", "h200"):
        assert "autocast: bfloat16, no GradScaler" in course.doctor(name)
    avx2 = course.doctor("cpu-avx2")
    assert "bf16 vs fp32 matmul (00, 02) | no claim" in avx2
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in avx2
    listing = course.doctor("list")
    assert all(f"`{name}`" in listing for name in hardware.CLASSES)
