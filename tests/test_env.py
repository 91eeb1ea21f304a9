"""accelkit.env: the hardware card and doctor, without importing TensorFlow or starting CUDA."""

from __future__ import annotations

import subprocess
import sys

from accelkit import env


def _info(**over):
    info = {"cpu": "Test CPU", "cpu_count": 2, "python": "3.11", "cpu_features": {},
            "torch_devices": [], "tpu_attached": False,
            "libraries": {"torch": "2.0", "tensorflow": None, "torch_xla": None}}
    info.update(over)
    return info


def _row(rows, notebook, need_part):
    found = [r for r in rows if r.notebook == notebook and need_part in r.need]
    assert len(found) == 1, (notebook, need_part)
    return found[0]


def test_requirements_follow_the_hardware():
    cpu_only = env.requirements(_info())
    assert not _row(cpu_only, "02 mixed precision", "bf16").met
    assert not _row(cpu_only, "02 mixed precision", "fp16").met
    assert not _row(cpu_only, "00 device setup", "TensorFlow").met
    assert not _row(cpu_only, "05 TPU", "TPU attached").met
    amx = env.requirements(_info(cpu_features={"amx_bf16": True}))
    assert _row(amx, "02 mixed precision", "bf16").met
    gpu = {"kind": "cuda", "name": "cuda:0", "description": "Test GPU",
           "compute_capability": (7, 5), "memory_bytes": 2**34}
    turing = env.requirements(_info(torch_devices=[gpu]))
    assert _row(turing, "02 mixed precision", "fp16").met
    assert not _row(turing, "02 mixed precision", "bf16").met
    tpu = env.requirements(_info(tpu_attached=True, libraries={"torch_xla": "2.5"}))
    assert _row(tpu, "05 TPU", "TPU attached").met and _row(tpu, "05 TPU", "torch_xla").met


def test_doctor_has_card_and_table():
    text = env.doctor()
    assert "## Hardware card" in text and "| notebook | needs | here | note |" in text
    for nb in ("00 device setup", "01/04 parallelism", "02 mixed precision", "05 TPU"):
        assert nb in text
    assert "Size profile" in text


def test_doctor_neither_imports_tensorflow_nor_initialises_cuda():
    code = ("import sys, accelkit.env as e; e.doctor(); import torch; "
            "print('tensorflow' in sys.modules, torch.cuda.is_initialized())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["False", "False"]
