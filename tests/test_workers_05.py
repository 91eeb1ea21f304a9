"""Notebook 05's Keras-on-JAX worker, run for real on 8 emulated CPU devices."""

import sys

import pytest

from accelkit import launch, scripts


@pytest.mark.slow
def test_keras_jax_worker_trains_like_one_device_and_shards_the_batch_and_kernel(tmp_path):
    pytest.importorskip("jax")
    r = launch.python(scripts.worker_script("keras_jax_train.py"), ["--epochs", 1],
                      timeout_s=240, stream=False, out=tmp_path / "kj.json").read_json()
    assert (r["backend"], r["devices"]) == ("jax", 8)
    single, dp, mp = r["runs"]["single"], r["runs"]["data_parallel"], r["runs"]["model_parallel"]
    assert single["kernel_devices"] == 1 and dp["kernel_devices"] == mp["kernel_devices"] == 8
    assert dp["loss"] == pytest.approx(single["loss"], rel=1e-3)  # same seed, same batches
    # the batch as the compiled train step holds it: split over the devices, or whole
    assert single["batch_sharding"] == "whole, one device"
    assert "'batch'" in dp["batch_sharding"] and "'batch'" in mp["batch_sharding"]
    assert "model" in mp["kernel_sharding"] and "model" not in dp["kernel_sharding"]
    assert (mp["compute_dtype"], mp["kernel_dtype"]) == ("bfloat16", "float32")
    assert r["n_test"] == 450 and all(run["acc"] > 0.5 for run in r["runs"].values())


def test_keras_jax_worker_blocks_tensorflow_before_keras_loads():
    text = scripts.worker_script("keras_jax_train.py").read_text()
    assert text.index('sys.modules["tensorflow"] = None') < text.index("import keras")
    assert text.index('os.environ["KERAS_BACKEND"] = "jax"') < text.index("import keras")
    assert sys.modules.get("keras_jax_train") is None  # not imported by this test
