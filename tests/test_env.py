"""accelkit.env: the hardware card, the machine's capabilities, the notebooks' needs and the doctor report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from accelkit import env

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


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


def test_hardware_summary_is_json_friendly():
    import json

    info = json.loads(json.dumps(env.hardware_summary()))
    assert info["torch_devices"][-1]["kind"] == "cpu" and info["cpu_count"] >= 1


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


def _nb(path, meta=None):
    nb = nbformat.v4.new_notebook()
    if meta is not None:
        nb.metadata["accelkit"] = meta
    nbformat.write(nb, path)
    return path


def _caps(**has):
    return {k: env.Capability(k, what, has.get(k, False), f"found {k}")
            for k, what in env.CAPABILITIES.items()}


def test_no_notebooks_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no NN_"):
        env.find_notebooks(tmp_path)


def test_declarations_are_read_and_checked(tmp_path):
    assert env.declared(_nb(tmp_path / "00_a.ipynb")) == {"requires": [], "needs": {}}
    path = _nb(tmp_path / "01_b.ipynb", {"requires": ["no_such_module_xyz", "json"],
                                         "needs": {"tpu": "TPU cells skip"}})
    assert env.missing_modules(path) == ["no_such_module_xyz"]
    with pytest.raises(ValueError, match="unknown capability warp_drive"):
        env.declared(_nb(tmp_path / "02_c.ipynb", {"needs": {"warp_drive": "x"}}))
    with pytest.raises(ValueError, match="list of module names"):
        env.declared(_nb(tmp_path / "03_d.ipynb", {"requires": "tensorflow"}))


def test_check_matches_needs_against_capabilities(tmp_path):
    path = _nb(tmp_path / "05_x.ipynb", {"requires": ["no_such_module_xyz"],
                                         "needs": {"tpu": "TPU cells skip", "gloo": "skip"}})
    rows = env.check_needs([path], _caps(gloo=True))
    assert [(r.notebook, r.met) for r in rows] == [("05 x", False), ("05 x", True), ("05 x", False)]
    assert "make run and make verify skip" in rows[0].note
    assert rows[1].note == "found gloo", "a capability that is there: what was found"
    assert rows[2].need == env.CAPABILITIES["tpu"] and rows[2].note == "found tpu; TPU cells skip"


def test_every_course_notebook_declares_known_needs():
    """The metadata is the one source of the doctor's table: every notebook declares its needs."""
    for path in env.find_notebooks(NOTEBOOKS):
        assert env.declared(path)["needs"], f"{path.name} declares no accelkit.needs"
    # 05 runs without TensorFlow (Colab's TPU runtime has none): its TF parts skip, JAX runs
    assert env.declared(NOTEBOOKS / "05_tpu.ipynb")["requires"] == ["jax", "keras"]
    assert "tensorflow" in env.declared(NOTEBOOKS / "05_tpu.ipynb")["needs"]


def test_doctor_has_card_and_table():
    text = env.doctor(notebooks=NOTEBOOKS)
    assert "## Hardware card" in text and "| notebook | needs | here | note |" in text
    for nb in ("00 device setup", "01 data vs model parallelism", "02 mixed precision", "05 tpu"):
        assert nb in text
    assert "Size profile" in text
    assert "pass --notebooks" in env.doctor(notebooks=NOTEBOOKS / "nowhere")


@pytest.mark.slow
def test_doctor_neither_imports_tensorflow_nor_initialises_cuda():
    code = ("import sys, accelkit.env as c; c.doctor(); import torch; "
            "print('tensorflow' in sys.modules, torch.cuda.is_initialized())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["False", "False"]


def test_doctor_ends_with_one_readiness_line_per_notebook():
    text = env.doctor(notebooks=NOTEBOOKS)
    tail = [line for line in text.split("## Ready?", 1)[1].splitlines()[1:] if line]
    stems = [p.stem.replace("_", " ") for p in env.find_notebooks(NOTEBOOKS)]
    assert [line.split(":")[0] for line in tail] == [f"- {s}" for s in stems], tail
    assert text.rstrip().endswith(tail[-1]), "the verdicts close the report"


def test_readiness_verdicts():
    rows = [env.Requirement("00 a", "a CPU", True, ""),
            env.Requirement("01 b", "NCCL and >= 2 GPUs", False, ""),
            env.Requirement("02 c", "tensorflow installed (required)", False, ""),
            env.Requirement("02 c", "a TPU attached", False, "")]
    assert env.readiness(rows) == [
        "- 00 a: ready: runs in full here",
        "- 01 b: ready; falls back where it needs: NCCL and >= 2 GPUs",
        "- 02 c: cannot run: tensorflow installed (required)"]


# ---- the size profile, seeding, the scratch folder
def test_explicit_profiles_and_pick(monkeypatch):
    monkeypatch.setenv("ACCELKIT_PROFILE", "full")
    p = env.profile()
    assert p.name == "full" and p.is_full and p.pick(ci=1, full=2) == 2
    assert env.profile("ci").pick(ci=1, full=2) == 1


def test_auto_follows_accelerator(monkeypatch):
    from accelkit import device

    monkeypatch.setattr(device, "accelerator_name", lambda: "cuda:0 Fake GPU")
    assert env.profile("auto").name == "full"
    monkeypatch.setattr(device, "accelerator_name", lambda: None)
    p = env.profile("auto")
    assert p.name == "ci" and "no accelerator" in p.reason


def test_unknown_profile_is_a_clear_error():
    with pytest.raises(ValueError, match="'ci', 'full' or 'auto'"):
        env.profile("huge")


def test_seed_everything_makes_torch_and_numpy_repeatable():
    import numpy as np
    import torch

    env.seed_everything(3)
    a = (torch.rand(3), np.random.rand(2))
    env.seed_everything(3)
    b = (torch.rand(3), np.random.rand(2))
    assert torch.equal(a[0], b[0]) and (a[1] == b[1]).all()
    with pytest.raises(ValueError):
        env.seed_everything(-1)


def test_scratch_dir_honours_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELKIT_SCRATCH", str(tmp_path / "s"))
    d = env.scratch_dir("workers")
    assert d == tmp_path / "s" / "workers" and d.is_dir()
