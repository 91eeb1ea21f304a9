"""accelkit.emulation: $ACCELKIT_HARDWARE's instruction-set caps, set once and seen by torch."""

import pytest

from accelkit import emulation, hardware


def test_emulation_sets_the_instruction_set_caps_once(monkeypatch):
    monkeypatch.setattr(hardware, "probed_cpu", lambda: hardware.get("cpu-amx"))
    assert emulation.active() is None and emulation.note() == ""
    monkeypatch.setenv(hardware.HARDWARE_ENV, "cpu-avx2")
    named, real = emulation.active()
    assert (named.name, real.name) == ("cpu-avx2", "cpu-amx")
    assert "emulated on a cpu-amx CPU" in emulation.note()
    assert "not XLA's CPU code" in emulation.note() and "the core count" in emulation.note()
    env = {}  # never this test process's own environment: TF and torch read it
    done = emulation.apply(env)
    assert done == env and {k: env[k] for k in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")} == {
        "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    assert env["TORCHINDUCTOR_CACHE_DIR"].endswith("_isa_avx2"), "a compile cache of its own"
    assert emulation.apply(env) == {}  # already set: left alone
    preset = {"ATEN_CPU_CAPABILITY": "avx512"}  # set by the learner: kept, and the cache follows it
    emulation.apply(preset)
    assert preset["TORCHINDUCTOR_CACHE_DIR"].endswith("_isa_avx512"), preset
    monkeypatch.setenv(hardware.HARDWARE_ENV, "cpu-amx")  # this CPU's own class: nothing emulated
    assert emulation.active() is None
    monkeypatch.setenv(hardware.HARDWARE_ENV, "t4")  # a GPU cannot be emulated on a CPU
    assert emulation.active() is None


@pytest.mark.slow
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
