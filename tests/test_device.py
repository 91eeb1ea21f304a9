import pytest
import torch

from accelkit import device


def test_cpu_is_always_listed_last():
    devs = device.torch_devices()
    assert devs[-1].kind == "cpu" and devs[-1].name == "cpu"


def test_best_device_on_this_machine_has_a_reason():
    choice = device.best_torch_device()
    assert isinstance(choice.device, torch.device)
    assert choice.reason
    if not torch.cuda.is_available():
        assert choice.kind in ("cpu", "mps")


def test_absent_device_names_what_is_available():
    if torch.cuda.is_available():
        spec = f"cuda:{torch.cuda.device_count()}"
    else:
        spec = "cuda"
    with pytest.raises(device.DeviceNotAvailableError, match="available: .*cpu"):
        device.get_torch_device(spec)


def test_bad_device_string_is_value_error():
    with pytest.raises(ValueError, match="not a PyTorch device"):
        device.get_torch_device("gpu-please")


def test_cpu_and_meta_are_always_there():
    assert device.get_torch_device("cpu").type == "cpu"
    assert device.get_torch_device("meta").type == "meta"


def test_cpu_features_reads_flags(monkeypatch, tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("model name\t: Fake CPU\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    real_open = open

    def fake_open(path, *a, **k):
        return real_open(info if path == "/proc/cpuinfo" else path, *a, **k)

    monkeypatch.setattr("builtins.open", fake_open)
    device.cpu_features.cache_clear()
    try:
        feats = device.cpu_features()
        assert feats["avx2"] and feats["avx512_bf16"] and not feats["amx_bf16"]
        from accelkit import hardware

        assert hardware.probed_cpu().bf16_units  # AVX512-BF16: the class has bf16 units
    finally:
        device.cpu_features.cache_clear()


def test_tpu_detection_ignores_npu_folder(monkeypatch):
    monkeypatch.delenv("COLAB_TPU_ADDR", raising=False)
    monkeypatch.delenv("TPU_NAME", raising=False)
    monkeypatch.setattr(device.os, "listdir", lambda _: ["accel", "null"])
    assert not device.has_tpu()
    monkeypatch.setattr(device.os, "listdir", lambda _: ["accel0", "null"])
    assert device.has_tpu()


def test_synchronize_on_cpu_is_a_noop():
    device.synchronize("cpu")


def _fake_gpu_machine(monkeypatch, gpus):
    """A machine where torch was built with CUDA and NVML reports ``gpus``; CUDA init raises."""

    def no_init(*a, **k):
        raise AssertionError("a probe initialised CUDA (torch.cuda._lazy_init was called)")

    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "_lazy_init", no_init)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(gpus))
    monkeypatch.setattr(device, "nvml_gpus", lambda: list(gpus))


def test_probes_never_initialise_cuda(monkeypatch):
    from accelkit import env, hardware, launch, precision

    _fake_gpu_machine(monkeypatch, [("NVIDIA H200", 141 * 2**30, (9, 0))])
    gpu = env.torch_devices()[0]
    assert (gpu.name, gpu.compute_capability, gpu.supports_bf16) == ("cuda:0", (9, 0), True)
    assert device.torch_devices()[0].supports_bf16 is None  # device probes, env classifies
    assert device.best_torch_device().kind == "cuda"
    assert env.profile("auto").name == "full"
    assert "NVIDIA H200" in env.hardware_card() and "NVIDIA H200" in env.doctor()
    assert hardware.for_device("cuda:0").name == "h200"
    assert precision.amp_choice("cuda").dtype == torch.bfloat16
    assert launch.worker_plan(1).device == "cuda"
    assert device.get_torch_device("cuda:0").type == "cuda"


def test_a_t4_is_told_fp16_even_though_torch_says_bf16_is_supported(monkeypatch):
    from accelkit import precision

    _fake_gpu_machine(monkeypatch, [("Tesla T4", 15 * 2**30, (7, 5))])
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    amp = precision.amp_choice("cuda")
    assert (amp.dtype, amp.needs_scaler) == (torch.float16, True)
    from accelkit import env

    assert env.torch_devices()[0].supports_bf16 is False


def test_nvml_absent_means_no_nvidia_gpu_here():
    # this machine has no NVIDIA driver (CI): NVML answers None, not an exception
    if not torch.cuda.is_available():
        assert device.nvml_gpus() in (None, [])


def test_nvml_respects_cuda_visible_devices(monkeypatch):
    import sys
    import types

    handles = ["h0", "h1"]
    fake = types.SimpleNamespace(
        NVMLError=RuntimeError, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 2, nvmlDeviceGetHandleByIndex=lambda i: handles[i],
        nvmlDeviceGetName=lambda h: b"NVIDIA A100" if h == "h0" else "NVIDIA L4",
        nvmlDeviceGetCudaComputeCapability=lambda h: (8, 0) if h == "h0" else (8, 9),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=80 * 2**30))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [g[0] for g in device.nvml_gpus()] == ["NVIDIA A100", "NVIDIA L4"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert device.nvml_gpus() == [("NVIDIA L4", 80 * 2**30, (8, 9))]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert device.nvml_gpus() == []


def test_has_tpu_sees_a_v5e_by_its_pci_vendor(tmp_path, monkeypatch):
    from accelkit import device as d

    for var in ("COLAB_TPU_ADDR", "TPU_NAME"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "0000:00:04.0").mkdir()
    (tmp_path / "0000:00:04.0" / "vendor").write_text("0x10de\n")  # an NVIDIA GPU: not a TPU
    assert not d._pci_vendor_present("0x1ae0", str(tmp_path))
    (tmp_path / "0000:00:05.0").mkdir()
    (tmp_path / "0000:00:05.0" / "vendor").write_text("0x1ae0\n")
    assert d._pci_vendor_present("0x1ae0", str(tmp_path))
    assert not d._pci_vendor_present("0x1ae0", str(tmp_path / "absent"))


def test_an_a100_40gb_is_told_by_its_memory(monkeypatch):
    _fake_gpu_machine(monkeypatch, [("NVIDIA A100-SXM4-40GB", 40 * 2**30, (8, 0))])
    from accelkit import hardware

    assert hardware.for_device("cuda:0").name == "a100-40gb"
    _fake_gpu_machine(monkeypatch, [("NVIDIA L40S", 48 * 2**30, (8, 9))])
    assert hardware.for_device("cuda:0").name == "l40s"  # not the L4's peak by capability


_VERBOSE = """onednn_verbose,v1,info,oneDNN v3.7.1
accelkit-dtype bfloat16
onednn_verbose,v1,primitive,info,template:operation,engine,primitive,implementation
onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core_bf16,undef,src:bf16,,1024x1024,7.2
onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core_amx,undef,src:bf16,,1024x1024,1.1
accelkit-dtype float32
accelkit-dtype float16
dnnl_verbose,exec,cpu,matmul,gemm:jit,undef,src_f16::blocked:ab:f0,,,64x64:64x64,0.1
"""


def test_onednn_verbose_lines_are_read_per_dtype():
    assert device._parse_onednn(_VERBOSE) == {"bfloat16": "brg_matmul:avx512_core_bf16",
                                              "float32": None, "float16": "gemm:jit"}
    with pytest.raises(ValueError, match="floating dtype"):
        device.onednn_kernels(("int8",))
    with pytest.raises(ValueError, match="n must be"):
        device.onednn_kernels(n=0)


def test_onednn_kernels_on_this_cpu():
    from accelkit import hardware

    found = device.onednn_kernels(("bfloat16", "float32"), 256)
    assert set(found) == {"bfloat16", "float32"}, found
    assert found["float32"] is None  # PyTorch's fp32 CPU matmul is MKL/OpenBLAS, not oneDNN
    if hardware.for_device("cpu").name in ("cpu-avx512-bf16", "cpu-amx"):
        assert found["bfloat16"] and ("bf16" in found["bfloat16"] or "amx" in found["bfloat16"])
