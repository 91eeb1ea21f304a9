"""Keras training with MultiWorkerMirroredStrategy: one process per worker, via TF_CONFIG.

Run once per worker, each with its own ``TF_CONFIG`` (notebook 04 starts them with
``ak.launch.python(..., n=2, tf=True)``)::

    TF_CONFIG='{"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
                "task": {"type": "worker", "index": 0}}' python tf_multiworker.py --out DIR

Every worker builds the model and optimizer inside ``strategy.scope()``; gradients are
all-reduced between the workers each step, so the weights stay identical.  The loop is
written out (``strategy.run``) because ``model.fit`` fails under this strategy with Keras 3
(keras-team/keras#20585: "Attempt to convert a value (PerReplica ...)").  Each worker writes a
summary of its final weights, and the losses, to ``DIR/worker<i>.json``.
"""

import argparse
import json
import os
from pathlib import Path

import accelkit as ak


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64, help="global batch size")
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    tf = ak.tf.import_tf()
    import keras

    # region mwms
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG
    with strategy.scope():  # variables created here are mirrored on every worker
        keras.utils.set_random_seed(0)
        model = ak.models.keras_mlp()
        optimizer = keras.optimizers.SGD(args.lr)
    # endregion
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    print(f"worker {task['index']}: {strategy.num_replicas_in_sync} replicas in sync", flush=True)

    d = ak.models.digits()
    x = d.x_train.reshape(len(d.x_train), -1)[: args.samples]   # (S, 64)
    y = d.y_train[: args.samples]                               # (S,)
    opts = tf.data.Options()  # split every global batch between the workers
    opts.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch).with_options(opts)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    # region step
    @tf.function
    def train_step(x, y):  # runs on each replica, on its part of the global batch
        with tf.GradientTape() as tape:
            per_sample = loss_fn(y, model(x, training=True))
            loss = tf.nn.compute_average_loss(per_sample, global_batch_size=args.batch)
        grads = tape.gradient(loss, model.trainable_variables)  # all-reduced across workers
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    # endregion

    losses = []
    for _ in range(args.epochs):
        total, n = 0.0, 0
        for xb, yb in strategy.experimental_distribute_dataset(ds):
            per_replica = strategy.run(train_step, args=(xb, yb))
            total += float(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None))
            n += 1
        losses.append(total / n)
        print(f"worker {task['index']}: epoch loss {losses[-1]:.4f}", flush=True)
    weights = [w.numpy() for w in model.weights]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"worker{task['index']}.json").write_text(json.dumps({
        "replicas": strategy.num_replicas_in_sync, "losses": losses,
        "weights_flat_head": [float(v) for w in weights for v in w.reshape(-1)[:64]],
        "weights_sum": float(sum(w.sum() for w in weights)),
    }))


if __name__ == "__main__":
    main()
