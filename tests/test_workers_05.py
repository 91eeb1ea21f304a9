"""Notebook 05's Keras-on-JAX worker: what nbval cannot see. Its findings (one device vs data and
model parallel, shardings, dtypes) are asserted by 05's evidence cells, which nbval runs."""

import subprocess
import sys

import pytest

from accelkit import scripts


def test_keras_jax_worker_blocks_tensorflow_before_keras_loads():
    text = scripts.worker_script("keras_jax_train.py").read_text()
    assert text.index('sys.modules["tensorflow"] = None') < text.index("import keras")
    assert text.index('os.environ["KERAS_BACKEND"] = "jax"') < text.index("import keras")
    assert sys.modules.get("keras_jax_train") is None  # not imported by this test


# The worker picks devices as 05's Setup does; run in a fresh process (importing the worker
# blocks TensorFlow for the whole process), with a fake `jax` for the hardware this has not.
PICK = """
import sys, types
from accelkit import scripts
worker = scripts.import_worker("keras_jax_train.py")
dev = lambda platform, i: types.SimpleNamespace(platform=platform, id=i)
for kind, n in CASES:
    calls, default = [], [dev(kind, i) for i in range(n)]
    sys.modules["jax"] = types.SimpleNamespace(  # what `import jax` in jax_devices finds
        config=types.SimpleNamespace(update=lambda name, value: calls.append(name)),
        devices=lambda platform=None: [dev("cpu", i) for i in range(8)] if platform == "cpu" else default)
    picked = worker.jax_devices(8)
    print(len(picked), picked[0].platform, calls)
"""


@pytest.mark.slow
def test_keras_jax_worker_picks_devices_like_05s_setup():
    want = {("cpu", 8): "8 cpu ['jax_num_cpu_devices']",
            ("gpu", 4): "4 gpu ['jax_num_cpu_devices']",   # several GPUs: all of them
            ("tpu", 1): "1 tpu ['jax_num_cpu_devices']",   # a v5e-1: a mesh of one chip
            ("gpu", 1): "8 cpu ['jax_num_cpu_devices', 'jax_default_device']"}  # one GPU: the CPUs
    code = f"CASES = {list(want)!r}\n{PICK}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == list(want.values())


@pytest.mark.slow
def test_keras_jax_worker_splits_the_cpu_into_eight_real_jax_devices():
    pytest.importorskip("jax")
    code = ("from accelkit import scripts; import jax; "
            "d = scripts.import_worker('keras_jax_train.py').jax_devices(8); "
            "m = jax.make_mesh((4, 2), ('data', 'model'), devices=d); "
            "print(d[0].platform, len(d), dict(m.shape))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "cpu 8 {'data': 4, 'model': 2}" in out.stdout
