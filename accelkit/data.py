"""Small datasets that need no network: handwritten digits and synthetic tensors.

The course trains on scikit-learn's handwritten digits (1,797 greyscale 8x8 images that ship
inside scikit-learn, so CI never downloads anything), split once into train and test with a
fixed, stratified, seeded split.  The same arrays feed PyTorch (``digits_torch``, channels
first) and TensorFlow (``digits_tf``, channels last), so both frameworks see identical data.

Owns the course's data only.  Lives elsewhere: the models that train on it in
:mod:`accelkit.models`; the size profile that picks batch and problem sizes in
:mod:`accelkit.config`.

Example::

    train_dl, test_dl = ak.data.digits_torch(batch_size=64, flat=True)
    xb, yb = next(iter(train_dl))          # xb: (64, 64) float32, yb: (64,) int64
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    import torch
    from torch.utils.data import DataLoader

DIGITS_CLASSES = 10
DIGITS_SIZE = 1797

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


def _check_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
        raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")


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
    _check_seed(seed)
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    raw = load_digits()
    x = (raw.images.astype(np.float32) / 16.0)[:, None, :, :]  # (N, 1, 8, 8)
    y = raw.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_size, random_state=seed, stratify=y)
    return Digits(np.ascontiguousarray(x_tr), y_tr, np.ascontiguousarray(x_te), y_te)


def digits_torch(batch_size: int = 64, *, flat: bool = False,
                 seed: int = 0) -> tuple[DataLoader, DataLoader]:
    """Return PyTorch ``DataLoader``s over the digits split of :func:`digits`.

    The train loader reshuffles every epoch from a generator seeded with ``seed`` (the same
    batches on every run); the test loader keeps the order.

    Args:
        batch_size: samples per batch, >= 1.
        flat: give images as ``(B, 64)`` vectors (for an MLP) instead of ``(B, 1, 8, 8)``.
        seed: seeds both the split and the shuffling.

    Returns:
        ``(train_loader, test_loader)``; each batch is ``(x, y)`` with
        ``x: (B, 1, 8, 8)`` or ``(B, 64) float32`` and ``y: (B,) int64``, on the CPU
        (move them with ``.to(device)``).

    Raises:
        ValueError: for ``batch_size < 1`` or a negative ``seed``.
        TypeError: for a non-int ``batch_size`` or ``seed``.

    Example: ``train_dl, test_dl = digits_torch(64, flat=True)``
    """
    _check_batch_size(batch_size)
    _check_seed(seed)
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    d = digits(seed=seed)

    def tensors(x: np.ndarray, y: np.ndarray) -> TensorDataset:
        xt = torch.from_numpy(x.reshape(len(x), -1) if flat else x)
        return TensorDataset(xt, torch.from_numpy(y))

    gen = torch.Generator().manual_seed(seed)
    train = DataLoader(tensors(d.x_train, d.y_train), batch_size=batch_size, shuffle=True,
                       generator=gen)
    test = DataLoader(tensors(d.x_test, d.y_test), batch_size=batch_size, shuffle=False)
    return train, test


def digits_tf(batch_size: int = 64, *, flat: bool = False, seed: int = 0,
              drop_remainder: bool = False) -> tuple[Any, Any]:
    """Return ``tf.data.Dataset``s over the digits split of :func:`digits`, channels last.

    TensorFlow is imported here (lazily, through :func:`accelkit.tf_device.import_tf`).  The
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
    _check_batch_size(batch_size)
    _check_seed(seed)
    from accelkit import tf_device

    tf = tf_device.import_tf()
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


# ----------------------------------------------------------------------------- synthetic
def synthetic(shape: tuple[int, ...] | list[int], *, dtype: Any = None, device: Any = "cpu",
              seed: int = 0) -> torch.Tensor:
    """Return a reproducible tensor of standard-normal values.

    The values are drawn on the CPU from a generator seeded with ``seed`` and then moved,
    so the same call gives the same numbers on every device.

    Args:
        shape: the tensor's shape, non-negative ints.
        dtype: a floating ``torch.dtype``; default ``torch.float32``.
        device: where to put it (``"cpu"``, ``"cuda"``, a ``torch.device`` ...).
        seed: the generator's seed, >= 0.

    Returns:
        A tensor of ``shape`` and ``dtype`` on ``device``.

    Raises:
        TypeError: when ``dtype`` is not a floating-point torch dtype, or ``shape`` is not
            a sequence of ints.
        ValueError: for a negative dimension or seed.

    Example: ``x = synthetic((B, 64), device=dev)``
    """
    import torch

    dtype = torch.float32 if dtype is None else dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch dtype, got {dtype!r}")
    if not isinstance(shape, (tuple, list, torch.Size)) or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in shape):
        raise TypeError(f"shape must be a tuple of ints, got {shape!r}")
    if any(s < 0 for s in shape):
        raise ValueError(f"shape must have non-negative sizes, got {tuple(shape)}")
    _check_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(tuple(shape), generator=gen, dtype=torch.float32).to(device, dtype)


__all__ = [
    "DIGITS_CLASSES",
    "Digits",
    "digits",
    "digits_tf",
    "digits_torch",
    "synthetic",
]
