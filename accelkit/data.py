"""Offline datasets: handwritten digits (notebooks 00-05) and notebook 06's byte-level corpus.

The digits are scikit-learn's 1,797 greyscale 8x8 images (they ship inside scikit-learn, so CI
never downloads anything), split once into train and test with a fixed, stratified, seeded
split (:func:`digits`: NumPy arrays, channels first).  PyTorch wraps them in a ``TensorDataset``
(``torch.from_numpy``); :func:`digits_tf` gives the same arrays to TensorFlow (channels last),
so both frameworks see identical data.

The corpus is the source code of a fixed list of standard-library modules
(:data:`CORPUS_FILES`) read from this interpreter's ``sysconfig.get_paths()["stdlib"]``: every
machine with Python has it.  Its bytes (vocabulary 256) are the tokens; the text differs
between Python versions, so :class:`Corpus` reports its size and SHA-256 (deterministic within
one interpreter).  :func:`batches` cuts seeded batches of next-token windows from it.

Lives elsewhere: the models in :mod:`accelkit.models` and :mod:`accelkit.gpt`; the size
profile that picks batch and problem sizes in :mod:`accelkit.config`.

Example::

    d = ak.data.digits()                   # d.x_train: (1347, 1, 8, 8) float32, in [0, 1]
    train = torch.utils.data.TensorDataset(torch.from_numpy(d.x_train), torch.from_numpy(d.y_train))
"""

from __future__ import annotations

import hashlib
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    import torch

DIGITS_CLASSES = 10


@dataclass(frozen=True)
class Digits:
    """An image-classification dataset split into train and test arrays (channels first).

    Attributes:
        x_train: ``(N_train, 1, H, W) float32`` pixel values in ``[0, 1]``.
        y_train: ``(N_train,) int64`` class labels in ``0..classes-1``.
        x_test: ``(N_test, 1, H, W) float32`` pixel values in ``[0, 1]``.
        y_test: ``(N_test,) int64`` class labels.
        classes: the number of classes (10 for digits and MNIST).
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int = DIGITS_CLASSES

    @property
    def image_shape(self) -> tuple[int, ...]:
        """The shape of one image, ``(1, H, W)`` (``(1, 8, 8)`` for digits)."""
        return tuple(self.x_train.shape[1:])

    @property
    def features(self) -> int:
        """Pixels per image, the input size of an MLP (64 for digits)."""
        return int(np.prod(self.image_shape))


def _check_int(name: str, value: Any, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < least:
        raise ValueError(f"{name} must be >= {least}, got {value}")


def digits(test_size: float = 0.25, seed: int = 0) -> Digits:
    """Load scikit-learn's handwritten digits with a fixed stratified train/test split.

    The 1,797 images (values 0..16) are scaled to ``[0, 1]``; the split keeps each class's
    share equal in train and test (``sklearn.model_selection.train_test_split`` with
    ``stratify``), so the same ``seed`` gives the same split on every machine.

    Args:
        test_size: the fraction of images held out for testing, in ``(0, 1)``
            (0.25 gives 1,347 train and 450 test images).
        seed: the split's random seed, >= 0.

    Returns:
        A :class:`Digits` with ``x_*: (N, 1, 8, 8) float32`` and ``y_*: (N,) int64``.

    Raises:
        ValueError: when ``test_size`` is not in ``(0, 1)`` or ``seed`` is negative.
        TypeError: when ``seed`` is not an int.

    Example: ``d = digits(); d.x_train.shape  # (1347, 1, 8, 8)``
    """
    if not isinstance(test_size, (float, int)) or isinstance(test_size, bool):
        raise TypeError(f"test_size must be a float, got {type(test_size).__name__}")
    if not 0.0 < test_size < 1.0:
        raise ValueError(f"test_size must be a fraction in (0, 1), got {test_size}")
    _check_int("seed", seed, 0)
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    raw = load_digits()
    x = (raw.images.astype(np.float32) / 16.0)[:, None, :, :]  # (N, 1, 8, 8)
    y = raw.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_size, random_state=seed, stratify=y)
    return Digits(np.ascontiguousarray(x_tr), y_tr, np.ascontiguousarray(x_te), y_te)


def digits_tf(batch_size: int = 64, *, flat: bool = False, seed: int = 0,
              drop_remainder: bool = False) -> tuple[Any, Any]:
    """Return ``tf.data.Dataset``s over the digits split of :func:`digits`, channels last.

    TensorFlow is imported here (lazily, through :func:`accelkit.tf.import_tf`).  The
    train dataset reshuffles every epoch with a seeded shuffle; the test dataset keeps
    the order.  Both prefetch.

    Args:
        batch_size: samples per batch, >= 1.
        flat: give images as ``(B, 64)`` vectors instead of ``(B, 8, 8, 1)``.
        seed: seeds both the split and the shuffling.
        drop_remainder: drop the last, smaller batch (needed where every batch must have
            the same shape, e.g. splitting batches over replicas or XLA/TPU).

    Returns:
        ``(train_ds, test_ds)`` yielding ``(x, y)`` with ``x: (B, 8, 8, 1)`` or
        ``(B, 64) float32`` and ``y: (B,) int64``.

    Raises:
        ValueError: for ``batch_size < 1`` or a negative ``seed``.
        TypeError: for a non-int ``batch_size`` or ``seed``.
        ImportError: when TensorFlow is not installed.

    Example: ``train_ds, test_ds = digits_tf(64, flat=True)``
    """
    _check_int("batch_size", batch_size, 1)
    _check_int("seed", seed, 0)
    from accelkit.tf import import_tf

    tf = import_tf()
    d = digits(seed=seed)

    def layout(x: np.ndarray) -> np.ndarray:
        if flat:
            return x.reshape(len(x), -1)
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # (N, 1, H, W) -> (N, H, W, 1)

    train = (tf.data.Dataset.from_tensor_slices((layout(d.x_train), d.y_train))
             .shuffle(len(d.y_train), seed=seed, reshuffle_each_iteration=True)
             .batch(batch_size, drop_remainder=drop_remainder)
             .prefetch(tf.data.AUTOTUNE))
    test = (tf.data.Dataset.from_tensor_slices((layout(d.x_test), d.y_test))
            .batch(batch_size, drop_remainder=drop_remainder)
            .prefetch(tf.data.AUTOTUNE))
    return train, test


# ----------------------------------------------------------------------------- byte corpus
#: The corpus: standard-library modules present, as plain ``.py`` files, in every CPython
#: from 3.10 on (none of them was removed by PEP 594), in this order.
CORPUS_FILES: tuple[str, ...] = (
    "textwrap.py", "heapq.py", "bisect.py", "string.py", "fnmatch.py", "shlex.py", "glob.py",
    "queue.py", "sched.py", "contextlib.py", "functools.py", "random.py", "statistics.py",
    "fractions.py", "dataclasses.py", "abc.py", "copy.py", "difflib.py", "csv.py",
    "argparse.py",
)


@dataclass(frozen=True)
class Corpus:
    """The byte-level corpus.

    Attributes:
        data: ``(n_bytes,)`` uint8 tensor, the files concatenated (each preceded by a header
            line ``# ==== name ====``).
        files: the files read, in order.
        sha256: hex digest of the bytes (differs between Python versions).
    """

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
    """Read the standard-library files ``files`` into one byte tensor (a :class:`Corpus`).

    Args:
        files: file names relative to the stdlib folder (default :data:`CORPUS_FILES`).
        stdlib: the folder; default ``sysconfig.get_paths()["stdlib"]`` of this interpreter.

    Raises:
        FileNotFoundError: when none of the files exists (a Python without its source files,
            e.g. some embedded builds): install the full Python, or pass ``stdlib=``.
    """
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

    The window starts are drawn in ``[0, len(data) - seq_len)`` from a CPU generator seeded
    with ``seed``.  With ``ahead=False`` it returns instead a function ``i -> (x, y)`` that
    cuts the ``(i mod n)``-th of these batches when called (inside a training step).

    **Shape** each ``(x, y)``: ``(batch, seq_len)`` int64; ``y`` is ``x`` shifted by one
    token (next-token targets).

    Raises:
        ValueError: when ``data`` is not longer than ``seq_len``.
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


__all__ = ["CORPUS_FILES", "DIGITS_CLASSES", "Corpus", "Digits", "batches", "digits",
           "digits_tf", "load_corpus"]
