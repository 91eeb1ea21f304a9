"""Small matching models in PyTorch and Keras, and the train/eval loops notebooks share.

Each ``torch_*`` builder has a ``keras_*`` twin with the same layers and the *same number of
parameters* (a unit test checks), so a notebook can put the two frameworks side by side on
the same data (:mod:`accelkit.data`).  Models output logits (no softmax): use
``nn.CrossEntropyLoss`` / ``SparseCategoricalCrossentropy(from_logits=True)``.

Keras is imported lazily (it imports TensorFlow), so torch-only code never pays for it.

Example::

    model = ak.models.torch_mlp()                      # 9,610 parameters
    losses = ak.models.train_torch(model, train_dl, epochs=5, lr=1e-2, device=dev)
    acc = ak.models.evaluate_torch(model, test_dl, dev)
"""

from __future__ import annotations

from collections.abc import Iterable, Sized
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn


def _check_positive(**values: Any) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def _keras() -> Any:
    import os

    from accelkit import tf_device

    if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
        tf_device.import_tf()  # quiet TF logs before Keras imports TensorFlow
    import keras  # on another backend (KERAS_BACKEND=jax) TensorFlow is not imported

    return keras


# ----------------------------------------------------------------------------- builders
def torch_mlp(in_features: int = 64, hidden: int = 128, classes: int = 10) -> nn.Module:
    """Build a two-layer perceptron: Linear → ReLU → Linear.

    Parameters: ``in_features*hidden + hidden + hidden*classes + classes``
    (9,610 with the defaults).

    Args:
        in_features: input size (64 for flattened 8x8 digits).
        hidden: hidden units.
        classes: output logits.

    Returns:
        An ``nn.Sequential`` mapping ``(B, in_features) float32`` to ``(B, classes)`` logits.

    Raises:
        ValueError: for sizes < 1.  TypeError: for non-int sizes.

    Example: ``model = torch_mlp().to(device)``
    """
    _check_positive(in_features=in_features, hidden=hidden, classes=classes)
    from torch import nn

    return nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def keras_mlp(in_features: int = 64, hidden: int = 128, classes: int = 10) -> Any:
    """Build the Keras twin of :func:`torch_mlp` (same layers, same parameter count).

    Returns:
        A ``keras.Sequential`` mapping ``(B, in_features) float32`` to ``(B, classes)``
        logits, already built (``count_params`` works).

    Raises:
        ValueError: for sizes < 1.  TypeError: for non-int sizes.
        ImportError: when TensorFlow/Keras is not installed.

    Example: ``model = keras_mlp(); compile_keras(model, 1e-2)``
    """
    _check_positive(in_features=in_features, hidden=hidden, classes=classes)
    keras = _keras()
    layers = keras.layers
    return keras.Sequential([keras.Input((in_features,)), layers.Dense(hidden, activation="relu"),
                             layers.Dense(classes)], name="mlp")


def torch_cnn(channels: int = 16, classes: int = 10, in_channels: int = 1) -> nn.Module:
    """Build a small CNN for 8x8 images: two 3x3 conv blocks with 2x2 max-pooling, then Linear.

    Layout: Conv(in→c) → ReLU → MaxPool2 → Conv(c→2c) → ReLU → MaxPool2 → Flatten →
    Linear(2c·2·2 → classes).  Parameters: ``9·in·c + c + 9·c·2c + 2c + 8c·classes + classes``
    (6,090 with the defaults).

    Args:
        channels: filters in the first conv (the second has twice as many).
        classes: output logits.
        in_channels: image channels (1 for digits).

    Returns:
        An ``nn.Sequential`` mapping ``(B, in_channels, 8, 8) float32`` (channels first) to
        ``(B, classes)`` logits.

    Raises:
        ValueError: for sizes < 1.  TypeError: for non-int sizes.

    Example: ``model = torch_cnn().to(device)``
    """
    _check_positive(channels=channels, classes=classes, in_channels=in_channels)
    from torch import nn

    c = channels
    return nn.Sequential(
        nn.Conv2d(in_channels, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # (B, c, 4, 4)
        nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),         # (B, 2c, 2, 2)
        nn.Flatten(), nn.Linear(2 * c * 2 * 2, classes),
    )


def keras_cnn(channels: int = 16, classes: int = 10, in_channels: int = 1) -> Any:
    """Build the Keras twin of :func:`torch_cnn` (same layers, same parameter count).

    Returns:
        A ``keras.Sequential`` mapping ``(B, 8, 8, in_channels) float32`` (channels last, as
        Keras expects) to ``(B, classes)`` logits, already built.

    Raises:
        ValueError: for sizes < 1.  TypeError: for non-int sizes.
        ImportError: when TensorFlow/Keras is not installed.

    Example: ``model = keras_cnn(); compile_keras(model, 1e-2)``
    """
    _check_positive(channels=channels, classes=classes, in_channels=in_channels)
    keras = _keras()
    layers = keras.layers
    c = channels
    return keras.Sequential([
        keras.Input((8, 8, in_channels)),
        layers.Conv2D(c, 3, padding="same", activation="relu"), layers.MaxPooling2D(2),
        layers.Conv2D(2 * c, 3, padding="same", activation="relu"), layers.MaxPooling2D(2),
        layers.Flatten(), layers.Dense(classes),
    ], name="cnn")


def param_count(model: Any) -> int:
    """Return the number of parameters of a PyTorch module or a Keras model.

    PyTorch: the sum of ``p.numel()`` over ``model.parameters()`` (buffers such as
    BatchNorm running statistics are not parameters).  Keras: ``model.count_params()``
    (all weights, trainable or not).  For the course's models the two agree.

    Raises:
        TypeError: for anything else.
        ValueError: for a Keras model that is not built yet (give it an ``Input``).
    """
    if hasattr(model, "count_params"):  # Keras first: with the torch backend it is a Module too
        if not getattr(model, "built", True):
            raise ValueError("the Keras model is not built yet; start it with keras.Input(shape)")
        return int(model.count_params())
    try:
        from torch import nn
    except ImportError:  # pragma: no cover
        raise TypeError(f"{type(model).__name__} is not a Keras model and torch is not installed") from None
    if isinstance(model, nn.Module):
        return sum(p.numel() for p in model.parameters())
    raise TypeError(f"param_count needs a torch.nn.Module or a Keras model, got "
                    f"{type(model).__name__}")


# ----------------------------------------------------------------------------- training
def _check_train_args(epochs: int, lr: float) -> None:
    _check_positive(epochs=epochs)
    if isinstance(lr, bool) or not isinstance(lr, (int, float)):
        raise TypeError(f"lr must be a float, got {type(lr).__name__}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")


def train_torch(model: nn.Module, loader: Iterable[Any], *, epochs: int, lr: float,
                device: Any = "cpu", progress: bool = True) -> list[float]:
    """Train a classifier with Adam and cross-entropy; return the mean loss of each epoch.

    The model is moved to ``device`` and each batch follows it there (``.to(device)``).
    A ``tqdm`` progress bar counts batches over all epochs and shows the running loss.

    Args:
        model: outputs ``(B, classes)`` logits.
        loader: yields ``(x, y)`` batches; ``y: (B,) int64`` class labels.
        epochs: passes over ``loader``, >= 1.
        lr: Adam's learning rate, > 0.
        device: where to train (``torch.device`` or string).
        progress: show the progress bar.

    Returns:
        One float per epoch: the sample-weighted mean training loss (nats).

    Raises:
        ValueError: for ``epochs < 1``, ``lr <= 0`` or an empty loader.
        TypeError: for a model that is not an ``nn.Module``.

    Example: ``losses = train_torch(model, train_dl, epochs=5, lr=1e-2, device=dev)``
    """
    import torch
    from torch import nn
    from tqdm import tqdm

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    _check_train_args(epochs, lr)
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    total = epochs * len(loader) if isinstance(loader, Sized) else None
    losses: list[float] = []
    with tqdm(total=total, disable=not progress, desc="train", unit="batch") as bar:
        for epoch in range(epochs):
            loss_sum = torch.zeros((), device=device)  # summed on the device: no sync per batch
            seen = 0
            for x, y in loader:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                loss_sum += loss.detach() * len(y)
                seen += len(y)
                bar.update(1)
            if seen == 0:
                raise ValueError("the loader yielded no batches")
            losses.append(loss_sum.item() / seen)
            bar.set_postfix(epoch=epoch + 1, loss=f"{losses[-1]:.3f}")
    return losses


def evaluate_torch(model: nn.Module, loader: Iterable[Any], device: Any = "cpu") -> float:
    """Return the classification accuracy of ``model`` on ``loader``, a fraction in 0..1.

    Runs in ``eval`` mode under ``torch.inference_mode()``; prediction = argmax of the logits.

    Raises:
        ValueError: for an empty loader.
        TypeError: for a model that is not an ``nn.Module``.

    Example: ``acc = evaluate_torch(model, test_dl, dev)``
    """
    import torch
    from torch import nn

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    model.to(device).eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    seen = 0
    with torch.inference_mode():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            correct += (model(x).argmax(dim=1) == y).sum()
            seen += len(y)
    if seen == 0:
        raise ValueError("the loader yielded no samples")
    return correct.item() / seen


def compile_keras(model: Any, lr: float, *, jit_compile: bool | str = "auto") -> Any:
    """Compile a Keras classifier like :func:`train_torch` trains: Adam, cross-entropy, accuracy.

    Args:
        model: a Keras model that outputs logits.
        lr: Adam's learning rate, > 0.
        jit_compile: passed to ``model.compile`` (``"auto"``: Keras decides, XLA on GPU/TPU).

    Returns:
        ``model`` (compiled), so ``compile_keras(keras_mlp(), 1e-2).fit(...)`` works.

    Raises:
        ValueError: for ``lr <= 0``.  TypeError: for a model without ``compile``.

    Example: ``compile_keras(model, 1e-2); model.fit(train_ds, epochs=5)``
    """
    _check_train_args(1, lr)
    if not hasattr(model, "compile") or not hasattr(model, "fit"):
        raise TypeError(f"model must be a Keras model, got {type(model).__name__}")
    keras = _keras()
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=lr),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=jit_compile)
    return model


__all__ = [
    "compile_keras",
    "evaluate_torch",
    "keras_cnn",
    "keras_mlp",
    "param_count",
    "torch_cnn",
    "torch_mlp",
    "train_torch",
]
