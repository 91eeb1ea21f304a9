"""Keras 3 on the JAX backend: the course's digits MLP on one device, DataParallel, ModelParallel.

Keras fixes its backend when it is first imported, and a notebook kernel that already imported
TensorFlow's Keras cannot switch; so notebook 05 runs this script as its own process
(``ak.launch.python``), which sets ``KERAS_BACKEND=jax`` before anything imports Keras::

    python keras_jax_train.py --devices 8 --epochs 5 --out result.json

It picks JAX devices as notebook 05's Setup does (:func:`jax_devices`), then trains
``ak.models.keras_mlp`` (Adam, cross-entropy) from the same seed three ways: one device in
float32; ``keras.distribution.DataParallel`` in float32 (batch split over all devices, weights
replicated); and ``ModelParallel`` with a ``LayoutMap`` (each Dense kernel split over the
mesh's ``model`` axis, the batch over ``batch``) under ``mixed_bfloat16``, as on a TPU.  The
training set is cut to whole batches and the test set padded to a multiple of the device count
with zero sample weight, so every batch splits evenly and compiles once.  Writes the test
accuracies, last losses, the batch's sharding inside the compiled train step (seen by an
identity layer, :func:`batch_probe`), kernel shardings, wall time and which test images it
got right (for a paired comparison) of each run to ``--out``.
"""

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import accelkit as ak

os.environ["KERAS_BACKEND"] = "jax"  # before anything imports Keras
# Keras on JAX needs no TensorFlow, but keras.utils.set_random_seed imports it when it can (to
# seed tf.data): seconds and hundreds of MB here.  An entry of None makes `import tensorflow`
# fail at once, so Keras's optional probes skip it.
sys.modules["tensorflow"] = None  # type: ignore[assignment]


def jax_devices(cpu_devices: int) -> list:
    """The devices notebook 05's Setup picks: a TPU's chips, the GPUs, else the host CPU split into
    ``cpu_devices``; with one GPU (no sharding to show) the CPU devices, and unsharded arrays go
    to the first of them too.  Call it before JAX's first operation."""
    import jax

    jax.config.update("jax_num_cpu_devices", cpu_devices)  # read when JAX's backends start
    devices = jax.devices()
    if len(devices) == 1 and devices[0].platform != "tpu":
        devices = jax.devices("cpu")
        jax.config.update("jax_default_device", devices[0])
    return devices


def load(devices: int, batch: int):
    """Digits as (x_train, y_train, x_test, y_test, w_test): whole batches, padded test set."""
    d = ak.models.digits()
    n = len(d.x_train) // batch * batch                  # drop the remainder: static shapes
    x_tr, y_tr = d.x_train.reshape(len(d.x_train), -1)[:n], d.y_train[:n]   # (n, 64), (n,)
    pad = -len(d.x_test) % devices                       # test rows to add for an even split
    x_te = np.concatenate([d.x_test.reshape(len(d.x_test), -1), np.zeros((pad, 64), np.float32)])
    y_te = np.concatenate([d.y_test, np.zeros(pad, np.int64)])
    w_te = np.concatenate([np.ones(len(d.y_test), np.float32), np.zeros(pad, np.float32)])
    return x_tr, y_tr, x_te, y_te, w_te


def distributions(keras, devices, model_axis: int):
    """The three ways to place the model: None (one device), DataParallel, ModelParallel."""
    # region distributions
    data_parallel = keras.distribution.DataParallel(devices=devices)
    mesh = keras.distribution.DeviceMesh((len(devices) // model_axis, model_axis),
                                         ("batch", "model"), devices=devices)
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map[".*dense.*kernel"] = (None, "model")      # split each kernel's output columns
    layout_map[".*dense.*bias"] = ("model",)
    model_parallel = keras.distribution.ModelParallel(layout_map=layout_map,
                                                      batch_dim_name="batch")
    # endregion
    return {"single": None, "data_parallel": data_parallel, "model_parallel": model_parallel}


def batch_probe(keras, seen: list[str]):
    """An identity layer that records how the compiled step shards its input batch.

    ``jax.debug.inspect_array_sharding`` calls back while XLA compiles the step, with the
    sharding the compiler chose: ``P('batch',)`` when each device holds a slice of the batch.
    """
    import jax

    def note(sharding) -> None:
        seen.append(str(getattr(sharding, "spec", "whole, one device")))

    class BatchSharding(keras.layers.Layer):
        def call(self, x):
            jax.debug.inspect_array_sharding(x, callback=note)
            return x

    return BatchSharding(name="batch_sharding")


def train(keras, dist, policy: str, data, args) -> dict:
    """Train the MLP under ``dist`` (or on one device) and ``policy``; return its results."""
    x_tr, y_tr, x_te, y_te, w_te = data
    start = time.perf_counter()  # one run: nothing to repeat, so a plain clock
    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(0)
    seen: list[str] = []  # the batch's sharding in each compiled step (train first)
    with dist.scope() if dist is not None else contextlib.nullcontext():
        mlp = ak.models.keras_mlp()
        model = keras.Sequential([keras.Input((64,)), batch_probe(keras, seen), *mlp.layers])
        model.compile(optimizer=keras.optimizers.Adam(args.lr),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        history = model.fit(x_tr, y_tr, batch_size=args.batch, epochs=args.epochs, verbose=0)
        logits = model.predict(x_te, batch_size=len(x_te), verbose=0)  # (n_test + pad, 10)
    right = (np.argmax(logits, axis=-1) == y_te)[w_te > 0]  # per real test image
    kernel = mlp.layers[0].kernel
    return {"acc": float(right.mean()), "loss": float(history.history["loss"][-1]),
            "wrong": np.flatnonzero(~right).tolist(),  # indices of the test images it got wrong
            "policy": policy, "batch_sharding": seen[0] if seen else "not seen",
            "kernel_sharding": str(getattr(kernel.value.sharding, "spec", "one device")),
            "kernel_devices": len(kernel.value.sharding.device_set),
            "compute_dtype": mlp.layers[0].compute_dtype, "kernel_dtype": str(kernel.dtype),
            "wall_s": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=8, help="emulated CPU devices (no TPU/GPUs)")
    ap.add_argument("--model-axis", type=int, default=2, help="devices on the model axis")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64, help="global batch size")
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--mp-policy", default="mixed_bfloat16", help="ModelParallel's dtype policy")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # on a GPU: not 75 % of it
    devices = jax_devices(args.devices)
    import keras

    platform = devices[0].platform
    print(f"Keras {keras.__version__} on {keras.backend.backend()}, {len(devices)} {platform} "
          "device(s)", flush=True)
    data = load(len(devices), args.batch)
    ways = distributions(keras, devices, args.model_axis)
    policies = {"single": "float32", "data_parallel": "float32", "model_parallel": args.mp_policy}
    runs = {name: train(keras, dist, policies[name], data, args) for name, dist in ways.items()}
    for name, r in runs.items():
        print(f"{name:>14}: accuracy {r['acc']:.3f}; batch split {r['batch_sharding']}; first "
              f"kernel {r['kernel_sharding']} on {r['kernel_devices']} device(s); computes in "
              f"{r['compute_dtype']}, keeps weights in {r['kernel_dtype']}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"devices": len(devices), "platform": platform,
                                    "backend": keras.backend.backend(),
                                    "n_test": int(data[4].sum()), "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
