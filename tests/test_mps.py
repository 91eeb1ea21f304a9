"""The course's decisions on an Apple-silicon Mac (MPS), with the probes faked (issue 15 item 4).

No Mac runs these tests: torch's MPS probe, the platform and the NVIDIA probe are replaced, and
each test checks what the course decides from them.  What was read against the docs and what
cannot be checked without a Mac is listed in the round's report, not here.
"""

import sys
from unittest import mock

import pytest
import torch

from accelkit import device, dist, env, hardware, precision, procs


@pytest.fixture
def mac(monkeypatch):
    """This machine as an Apple-silicon Mac: MPS available, no NVIDIA/AMD GPU, no TPU, arm64."""
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(device, "nvidia_or_rocm_gpus", lambda: [])
    monkeypatch.setattr(device, "has_tpu", lambda: False)
    monkeypatch.setattr(device, "machine", lambda: "arm64")
    monkeypatch.delenv(hardware.HARDWARE_ENV, raising=False)


def test_mps_is_chosen_before_the_cpu_with_fp16_units_and_no_bf16(mac):
    devs = env.torch_devices()
    assert [d.kind for d in devs] == ["mps", "cpu"], devs
    assert devs[0].supports_fp16 and devs[0].supports_bf16 is False
    choice = device.best_torch_device()
    assert (str(choice.device), choice.kind) == ("mps", "mps") and "Apple GPU" in choice.reason
    assert hardware.for_device(choice.device).name == "apple-mps"
    assert device.get_torch_device("mps").type == "mps"


def test_auto_profile_is_full_on_a_mac_and_says_why(mac, monkeypatch):
    monkeypatch.delenv(env.PROFILE_ENV, raising=False)
    prof = env.profile()
    assert prof.name == hardware.get("apple-mps").profile == "full"
    assert "Apple GPU" in prof.reason, prof.reason


def test_amp_on_mps_is_fp16_autocast_with_an_enabled_grad_scaler(mac):
    amp = precision.amp_choice("mps")
    assert (amp.device_type, amp.dtype, amp.needs_scaler, amp.native) == (
        "mps", torch.float16, True, True)
    lin = torch.nn.Linear(4, 1)  # built, not run: the fixture fakes the Mac
    step = precision.make_step(lin, torch.optim.SGD(lin.parameters()), "mps", amp.dtype)
    assert (step.autocast.device, step.autocast.fast_dtype) == ("mps", torch.float16)
    assert step.scaler._device == "mps" and step.scaler.is_enabled()
    bf16 = precision.make_step(lin, torch.optim.SGD(lin.parameters()), "mps", torch.bfloat16)
    assert not bf16.scaler.is_enabled(), "bf16 needs no scaler"


def test_synchronize_waits_for_the_mps_queue(mac, monkeypatch):
    calls = []
    monkeypatch.setattr(torch.mps, "synchronize", lambda: calls.append("mps"))
    device.synchronize("mps")
    assert calls == ["mps"]


def test_workers_on_a_mac_use_gloo_on_the_cpu(mac, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert dist.choose_backend("mps") == "gloo", "NCCL moves CUDA tensors only"
    assert dist.device_for(0).type == "cpu", "gloo has no MPS tensors: workers compute on the CPU"
    caps = env.capabilities(env.hardware_summary())
    assert not caps["nccl_multi_gpu"].has and not caps["fp16_tensor_cores"].has
    assert not caps["bf16_units"].has and "cpu-arm64" in caps["bf16_units"].found


def test_spawned_workers_use_the_spawn_start_method():
    from accelkit import launch

    with mock.patch("torch.multiprocessing.start_processes") as start:
        launch.spawn(print, nprocs=2, timeout_s=5)
    assert start.call_args.kwargs["start_method"] == "spawn", start.call_args


def test_launched_workers_on_macos_bind_gloo_to_loopback(monkeypatch):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")
    assert procs.child_env()["GLOO_SOCKET_IFNAME"] == "lo0"
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "en0")
    assert procs.child_env()["GLOO_SOCKET_IFNAME"] == "en0", "the learner's choice is kept"
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
    monkeypatch.setattr(sys, "platform", "linux")
    assert "GLOO_SOCKET_IFNAME" not in procs.child_env()
