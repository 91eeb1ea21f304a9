"""Small matching models in PyTorch and Keras, and the Keras twin of notebook 06's GPT.

:func:`torch_mlp` has a Keras twin, :func:`keras_mlp`, with the same layers and the *same
number of parameters* (a unit test checks), so a notebook can put the two frameworks side by
side on the same data (:mod:`accelkit.data`); notebook 02 writes :func:`torch_cnn`'s Keras
layers out itself.  Models output logits (no softmax): use
``nn.CrossEntropyLoss`` / ``SparseCategoricalCrossentropy(from_logits=True)``.  The PyTorch
GPT itself is :class:`accelkit.gpt.GPT`.

Keras is imported lazily (it imports TensorFlow), so torch-only code never pays for it.

Example::

    model = ak.models.torch_mlp().to(dev)              # 9,610 parameters
    kmodel = ak.models.keras_mlp()                     # the same layers in Keras
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

    from accelkit.gpt import GPTConfig


def _check_positive(**values: Any) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def _keras() -> Any:
    import os

    from accelkit.tf import import_tf

    if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
        import_tf()  # quiet TF logs before Keras imports TensorFlow
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

    Example: ``model = keras_mlp(); model.count_params()  # 9610``
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


def keras_gpt(cfg: GPTConfig, *, policy: str | None = None) -> Any:
    """Build the Keras 3 twin of :class:`accelkit.gpt.GPT` ``cfg`` (notebook 06's side-by-side).

    Same blocks (pre-norm, causal ``MultiHeadAttention``, GELU MLP), learned position
    embedding; two differences: the output head is a separate ``Dense`` (not tied, so
    ``V·d`` more parameters) and attention is Keras's (on TensorFlow it materialises the
    scores like the ``"manual"`` attention; Keras has no fused attention kernel there).  The
    layers follow ``policy`` (default float32; the global policy is restored afterwards); the
    logits are float32 under a mixed one.

    **Shape** ``(B, T)`` int32 -> logits ``(B, T, vocab_size)``.

    Raises:
        ImportError: when Keras is not installed.
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


__all__ = ["keras_gpt", "keras_mlp", "torch_cnn", "torch_mlp"]
