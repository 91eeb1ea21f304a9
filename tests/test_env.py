"""accelkit.env: the hardware card and the machine's capabilities, without TensorFlow or CUDA."""

from __future__ import annotations

from accelkit import env


def _info(**over):
    info = {"cpu": "Test CPU", "cpu_count": 2, "python": "3.11", "cpu_features": {},
            "torch_devices": [], "tpu_attached": False,
            "libraries": {"torch": "2.0", "tensorflow": None, "torch_xla": None}}
    info.update(over)
    return info


def test_capabilities_follow_the_hardware():
    cpu_only = env.capabilities(_info())
    assert list(cpu_only) == list(env.CAPABILITIES)
    assert cpu_only["cpu"].has and cpu_only["cpu"].found == "2 CPU cores"
    assert not cpu_only["bf16_units"].has and not cpu_only["fp16_tensor_cores"].has
    assert not cpu_only["tensorflow"].has and not cpu_only["tpu"].has
    assert cpu_only["fp16_tensor_cores"].found == "no GPU"
    amx = env.capabilities(_info(cpu_features={"amx_bf16": True}))
    assert amx["bf16_units"].has and "bf16 units present" in amx["bf16_units"].found
    gpu = {"kind": "cuda", "name": "cuda:0", "description": "Test GPU",
           "compute_capability": (7, 5), "memory_bytes": 2**34}
    pascal = env.capabilities(_info(torch_devices=[dict(gpu, compute_capability=(6, 0))]))
    assert not pascal["torch_compile"].has and "sm_70" in pascal["torch_compile"].found
    assert not pascal["fp16_tensor_cores"].has
    turing = env.capabilities(_info(torch_devices=[gpu]))
    assert turing["fp16_tensor_cores"].has and not turing["bf16_units"].has
    assert "GPU: Test GPU" in turing["cpu"].found
    assert "1 GPU(s)" in turing["nccl_multi_gpu"].found and not turing["nccl_multi_gpu"].has
    tpu = env.capabilities(_info(tpu_attached=True, libraries={"torch_xla": "2.5"}))
    assert tpu["tpu"].has and tpu["torch_xla"].has and tpu["torch_xla"].found == "torch_xla 2.5"


def test_hardware_card_names_cpu_and_libraries():
    card = env.hardware_card_markdown(_info(libraries={"torch": "2.0"}))
    assert card.startswith("## Hardware card") and "Test CPU (2 cores usable)" in card
    assert "torch 2.0" in card


def test_class_card_shows_a_measured_bf16_path_only_when_given():
    from accelkit import bench, hardware, precision

    cls = hardware.get("cpu-avx512-bf16")
    card = env.class_card(cls)
    assert "decided on the learner's machine" in card
    assert "| bf16 vs fp32 matmul (00, 02) | no claim |" in card
    probe = bench.Comparison(bench.Timing("fp32", (0.02,) * 8), bench.Timing("bf16", (0.007,) * 8))
    path = precision.amp_path(hw=cls, probe=lambda: probe)
    mine = env.class_card(cls, path=path)
    assert "- this machine: bfloat16 path on cpu-avx512-bf16: taken" in mine
    assert "| bf16 vs fp32 matmul (00, 02) | ≥ 1x |" in mine
    assert "Keras policy: mixed_float16 with LossScaleOptimizer" in env.class_card(
        hardware.get("t4"))
