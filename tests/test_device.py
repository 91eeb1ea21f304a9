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
        assert device.cpu_has_fast_bf16()
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


@pytest.mark.skipif(not device.has_tf(), reason="TensorFlow not installed")
def test_tf_too_late_configuration_raises_clear_error():
    import subprocess
    import sys

    code = (
        "import tensorflow as tf\n"
        "from accelkit import device\n"
        "tf.constant(1.0)\n"  # initialises the runtime
        "try:\n"
        "    device.tf_set_logical_cpus(3)\n"
        "except device.TFAlreadyInitializedError as e:\n"
        "    print('RAISED', 'restart the kernel' in str(e).lower())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert "RAISED True" in out.stdout, out.stderr[-2000:]


def test_summary_is_json_friendly():
    import json

    json.dumps(device.summary())
