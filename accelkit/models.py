"""The small models and the datasets they train on (offline, seeded, the same on every machine).

Models output logits: :func:`torch_mlp` and its Keras twin :func:`keras_mlp` (same layers and
parameter count), :func:`torch_cnn`, :func:`keras_gpt` (the twin of :class:`accelkit.gpt.GPT`);
Keras (and TensorFlow) is imported only when asked for.  Data: scikit-learn's 1,797 8x8
handwritten digits (shipped inside it) with a fixed stratified split (:func:`digits`,
:func:`digits_tf`), and notebook 06's byte corpus, the source of fixed standard-library modules
(:func:`load_corpus`, :func:`batches`).  The size profile lives in :mod:`accelkit.env`.
"""

from __future__ import annotations

import hashlib
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

    from accelkit.gpt import GPTConfig


def _check_int(name: str, value: Any, least: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < least:
        raise ValueError(f"{name} must be >= {least}, got {value}")


def _check_sizes(**values: Any) -> None:
    for name, value in values.items():
        _check_int(name, value)


def _keras() -> Any:
    import os

    from accelkit.tf import import_tf

    if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
        import_tf()  # quiet TF logs before Keras imports TensorFlow
    import keras  # on another backend (KERAS_BACKEND=jax) TensorFlow is not imported

    return keras


# ----------------------------------------------------------------------------- models
def torch_mlp(in_features: int = 64, hidden: int = 128, classes: int = 10) -> nn.Module:
    """Build Linear → ReLU → Linear, ``in_features*hidden + hidden + hidden*classes + classes``
    parameters (9,610 by default): an ``nn.Sequential``, ``(B, in_features) float32`` to
    ``(B, classes)`` logits.  ValueError for sizes < 1, TypeError for non-int sizes."""
    _check_sizes(in_features=in_features, hidden=hidden, classes=classes)
    from torch import nn

    return nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def keras_mlp(in_features: int = 64, hidden: int = 128, classes: int = 10) -> Any:
    """Build the Keras twin of :func:`torch_mlp` (same layers, same parameter count): a built
    ``keras.Sequential``, ``(B, in_features) float32`` to ``(B, classes)`` logits.  ValueError for
    sizes < 1, TypeError for non-int sizes, ImportError without TensorFlow/Keras."""
    _check_sizes(in_features=in_features, hidden=hidden, classes=classes)
    keras = _keras()
    layers = keras.layers
    return keras.Sequential([keras.Input((in_features,)), layers.Dense(hidden, activation="relu"),
                             layers.Dense(classes)], name="mlp")


def torch_cnn(channels: int = 16, classes: int = 10, in_channels: int = 1) -> nn.Module:
    """Build a small CNN for 8x8 images: an ``nn.Sequential``, ``(B, in_channels, 8, 8) float32``
    to ``(B, classes)`` logits.

    Conv3x3(in→c) → ReLU → MaxPool2 → Conv3x3(c→2c) → ReLU → MaxPool2 → Flatten → Linear(8c →
    classes), c = ``channels``: ``9·in·c + c + 9·c·2c + 2c + 8c·classes + classes`` parameters
    (6,090 by default).  ValueError for sizes < 1, TypeError for non-int sizes.
    """
    _check_sizes(channels=channels, classes=classes, in_channels=in_channels)
    from torch import nn

    c = channels
    return nn.Sequential(
        nn.Conv2d(in_channels, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # (B, c, 4, 4)
        nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),         # (B, 2c, 2, 2)
        nn.Flatten(), nn.Linear(2 * c * 2 * 2, classes),
    )


def keras_gpt(cfg: GPTConfig, *, policy: str | None = None) -> Any:
    """Build the Keras 3 twin of :class:`accelkit.gpt.GPT` ``cfg``: ``(B, T)`` int32 -> logits
    ``(B, T, vocab_size)``.

    Same blocks and learned position embedding, but an untied ``Dense`` head (``V·d + V`` more
    parameters), and Keras's attention (on TensorFlow it materialises the scores, as ``"manual"``).
    Layers follow ``policy`` (default float32; the global policy is restored), logits are float32.
    ImportError without Keras.
    """
    keras = _keras()
    layers, base = keras.layers, keras.layers.Layer

    class PositionEmbedding(base):  # type: ignore[misc,valid-type]
        def build(self, input_shape: Any) -> None:
            self.w = self.add_weight(shape=(cfg.block_size, cfg.n_embd), name="wpe",
                                     initializer=keras.initializers.RandomNormal(stddev=0.02))

        def call(self, x: Any) -> Any:
            return x + keras.ops.cast(self.w[: keras.ops.shape(x)[1]], x.dtype)

    old = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy or "float32")
    try:
        idx = keras.Input((cfg.block_size,), dtype="int32")
        x = PositionEmbedding()(layers.Embedding(cfg.vocab_size, cfg.n_embd)(idx))
        for _ in range(cfg.n_layer):
            h = layers.LayerNormalization(epsilon=1e-5)(x)
            x = x + layers.MultiHeadAttention(cfg.n_head, cfg.n_embd // cfg.n_head)(
                h, h, use_causal_mask=True)
            h = layers.LayerNormalization(epsilon=1e-5)(x)
            h = layers.Dense(4 * cfg.n_embd, activation="gelu")(h)
            x = x + layers.Dense(cfg.n_embd)(h)
        x = layers.LayerNormalization(epsilon=1e-5)(x)
        logits = layers.Dense(cfg.vocab_size, dtype="float32")(x)
        return keras.Model(idx, logits)
    finally:
        keras.config.set_dtype_policy(old)


# ----------------------------------------------------------------------------- digits
@dataclass(frozen=True)
class Digits:
    """The digits split: ``x_*`` ``(N, 1, 8, 8) float32`` in ``[0, 1]``, ``y_*`` ``(N,) int64``."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int = 10


def digits(test_size: float = 0.25, seed: int = 0) -> Digits:
    """Load scikit-learn's handwritten digits, scaled to ``[0, 1]``, with a stratified split.

    ``train_test_split(stratify=y)`` keeps each class's share in train and test; the same ``seed``
    gives the same split everywhere (``test_size=0.25``: 1,347 train, 450 test images).  Returns a
    :class:`Digits`.  ValueError for ``test_size`` outside ``(0, 1)`` or a negative ``seed``,
    TypeError for a non-int ``seed``.
    """
    if not isinstance(test_size, (float, int)) or isinstance(test_size, bool):
        raise TypeError(f"test_size must be a float, got {type(test_size).__name__}")
    if not 0.0 < test_size < 1.0:
        raise ValueError(f"test_size must be a fraction in (0, 1), got {test_size}")
    _check_int("seed", seed, 0)
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    raw = load_digits()
    x = (raw.images.astype(np.float32) / 16.0)[:, None, :, :]  # values 0..16 -> (N, 1, 8, 8)
    y = raw.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_size, random_state=seed, stratify=y)
    return Digits(np.ascontiguousarray(x_tr), y_tr, np.ascontiguousarray(x_te), y_te)


def digits_tf(batch_size: int = 64, *, flat: bool = False, seed: int = 0,
              drop_remainder: bool = False) -> tuple[Any, Any]:
    """Return prefetching ``tf.data.Dataset``s ``(train_ds, test_ds)`` over :func:`digits`'s split.

    They yield ``(x, y)``: ``x`` ``(B, 8, 8, 1)`` (channels last) or, with ``flat``, ``(B, 64)``
    float32; ``y`` ``(B,) int64``.  Train reshuffles every epoch (seeded), test keeps its order;
    ``drop_remainder`` drops the last, smaller batch (for replicas or XLA/TPU).  ValueError for
    ``batch_size < 1`` or a negative ``seed``, TypeError for non-ints, ImportError without TF.
    """
    _check_int("batch_size", batch_size)
    _check_int("seed", seed, 0)
    from accelkit.tf import import_tf

    tf = import_tf()
    d = digits(seed=seed)

    def ds(x: np.ndarray, y: np.ndarray) -> Any:
        x = x.reshape(len(x), -1) if flat else np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        return tf.data.Dataset.from_tensor_slices((x, y))

    def batched(dataset: Any) -> Any:
        return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)

    train = ds(d.x_train, d.y_train).shuffle(len(d.y_train), seed=seed,
                                             reshuffle_each_iteration=True)
    return batched(train), batched(ds(d.x_test, d.y_test))


# ----------------------------------------------------------------------------- byte corpus
#: Standard-library modules present as plain ``.py`` files in every CPython from 3.10 on
#: (none removed by PEP 594), in this order.
CORPUS_FILES: tuple[str, ...] = (
    "textwrap.py", "heapq.py", "bisect.py", "string.py", "fnmatch.py", "shlex.py", "glob.py",
    "queue.py", "sched.py", "contextlib.py", "functools.py", "random.py", "statistics.py",
    "fractions.py", "dataclasses.py", "abc.py", "copy.py", "difflib.py", "csv.py",
    "argparse.py",
)


@dataclass(frozen=True)
class Corpus:
    """The byte-level corpus (vocabulary 256): ``data``, a ``(n_bytes,)`` uint8 tensor of the
    ``files`` concatenated, each after a line ``# ==== name ====``; ``sha256``, the hex digest of
    the bytes (it differs between Python versions)."""

    data: torch.Tensor
    files: tuple[str, ...]
    sha256: str

    def split(self, train_fraction: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(train, val)``: the first ``train_fraction`` of the bytes, and the rest."""
        n = int(len(self.data) * train_fraction)
        return self.data[:n], self.data[n:]

    def __str__(self) -> str:
        return (f"{len(self.data):,} bytes from {len(self.files)} standard-library files "
                f"(sha256 {self.sha256[:12]}...)")


def load_corpus(files: Sequence[str] = CORPUS_FILES, stdlib: str | None = None) -> Corpus:
    """Read the standard-library ``files`` (under ``stdlib``, default this interpreter's
    ``sysconfig.get_paths()["stdlib"]``; missing ones skipped) into a :class:`Corpus`.
    FileNotFoundError when none exists (a Python without its sources)."""
    import torch

    root = Path(stdlib or sysconfig.get_paths()["stdlib"])
    found = [f for f in files if (root / f).is_file()]
    if not found:
        raise FileNotFoundError(f"none of {list(files)} under {root}: this Python has no "
                                "standard-library sources; install a full CPython")
    blob = b"".join(f"# ==== {f} ====\n".encode() + (root / f).read_bytes() for f in found)
    data = torch.frombuffer(bytearray(blob), dtype=torch.uint8).clone()
    return Corpus(data, tuple(found), hashlib.sha256(blob).hexdigest())


_Batch = tuple["torch.Tensor", "torch.Tensor"]


def batches(data: torch.Tensor, n: int, batch: int, seq_len: int, *, seed: int = 0,
            ahead: bool = True) -> list[_Batch] | Callable[[int], _Batch]:
    """Return ``n`` batches of ``batch`` random windows of ``data``, the same for the same ``seed``.

    Starts in ``[0, len(data) - seq_len)`` from a seeded CPU generator.  ``ahead=False`` returns
    ``i -> (x, y)`` instead, cutting the ``(i mod n)``-th batch when called (in a training step).
    Each ``(x, y)``: ``(batch, seq_len)`` int64, ``y`` = ``x`` shifted by one token.  ValueError
    when ``data`` is not longer than ``seq_len``.
    """
    import torch

    if len(data) <= seq_len:
        raise ValueError(f"{len(data)} tokens cannot fill a window of {seq_len} + 1")
    g = torch.Generator().manual_seed(seed)
    starts = [torch.randint(len(data) - seq_len, (batch,), generator=g).tolist()
              for _ in range(n)]

    def cut(i: int) -> _Batch:
        rows = torch.stack([data[s:s + seq_len + 1] for s in starts[i % n]]).long()
        return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()

    return [cut(i) for i in range(n)] if ahead else cut


__all__ = ["CORPUS_FILES", "Corpus", "Digits", "batches", "digits", "digits_tf", "keras_gpt",
           "keras_mlp", "load_corpus", "torch_cnn", "torch_mlp"]
