"""Notebook 05's Keras-on-JAX worker: what nbval cannot see. Its findings (one device vs data and
model parallel, shardings, dtypes) are asserted by 05's evidence cells, which nbval runs."""

import sys

from accelkit import scripts


def test_keras_jax_worker_blocks_tensorflow_before_keras_loads():
    text = scripts.worker_script("keras_jax_train.py").read_text()
    assert text.index('sys.modules["tensorflow"] = None') < text.index("import keras")
    assert text.index('os.environ["KERAS_BACKEND"] = "jax"') < text.index("import keras")
    assert sys.modules.get("keras_jax_train") is None  # not imported by this test
