"""Inductor's cache vs ATEN_CPU_CAPABILITY (docs/notes/inductor-cache-vector-isa.md)."""

import os
import subprocess
import sys

import pytest

from accelkit import hardware

REPRO = """
import accelkit, torch, torch.nn.functional as F
torch.set_num_threads(2)
torch.manual_seed(0)
x, b, out = torch.randn(256, 1024), torch.randn(1024), torch.empty(256, 1024)
f = torch.compile(lambda x, b, out: torch.mul(F.relu(x + b), 0.5, out=out))
print(int((f(x, b, out) != F.relu(x + b) * 0.5).sum()))
"""


def _start(tmp, **env):
    """Start the reproduction with TMPDIR=tmp (so Inductor's default cache is tmp/torchinductor_*);
    compiling in this process (no worker pool to start: the test's time is two cold compiles)."""
    clean = {k: v for k, v in os.environ.items() if k not in (
        "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "ACCELKIT_HARDWARE", "TORCHINDUCTOR_CACHE_DIR")}
    return subprocess.Popen([sys.executable, "-c", REPRO], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=clean | {"TMPDIR": str(tmp), "TORCHINDUCTOR_COMPILE_THREADS": "1"}
                            | env)


def _wrong(proc):
    """Wait for a reproduction; return how many elements its compiled kernel got wrong."""
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    return int(out.split()[-1])


@pytest.mark.slow
def test_a_cache_shared_across_capabilities_gives_wrong_values_and_the_switch_avoids_it(tmp_path):
    if hardware.probed_cpu().name in ("cpu-avx2", "cpu-arm64"):
        pytest.skip("needs a CPU with AVX-512, so that two vector widths exist")
    assert _wrong(_start(tmp_path)) == 0, "the default capability compiles and caches a correct kernel"
    # with that kernel cached, an AVX2 process and the course's switch run side by side
    switch = _start(tmp_path, ACCELKIT_HARDWARE="cpu-avx2")
    wrong = _wrong(_start(tmp_path, ATEN_CPU_CAPABILITY="avx2"))  # the same default cache folder
    switched = _wrong(switch)
    assert wrong > 0, (
        "Inductor no longer serves a kernel cached under AVX-512 to an AVX2 process: fixed "
        "upstream in this torch version; the per-class TORCHINDUCTOR_CACHE_DIR in "
        "accelkit.hardware.apply_emulation can go (docs/notes/inductor-cache-vector-isa.md)")
    assert switched == 0, "the course's switch avoids it"
