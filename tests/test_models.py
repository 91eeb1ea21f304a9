"""accelkit.models: matching torch/Keras models, parameter counts, train/eval loops."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from accelkit import data, models


def test_torch_param_counts_follow_the_formulas():
    assert models.param_count(models.torch_mlp()) == 64 * 128 + 128 + 128 * 10 + 10 == 9610
    c = 16
    assert models.param_count(models.torch_cnn()) == (
        9 * c + c + 9 * c * 2 * c + 2 * c + 8 * c * 10 + 10) == 6090


@pytest.mark.parametrize("kwargs", [{}, {"in_features": 32, "hidden": 7, "classes": 3}])
def test_mlp_param_counts_match_between_frameworks(kwargs):
    pytest.importorskip("tensorflow")
    assert models.param_count(models.torch_mlp(**kwargs)) == models.param_count(
        models.keras_mlp(**kwargs))


@pytest.mark.parametrize("kwargs", [{}, {"channels": 4, "classes": 3, "in_channels": 2}])
def test_cnn_param_counts_match_between_frameworks(kwargs):
    pytest.importorskip("tensorflow")
    assert models.param_count(models.torch_cnn(**kwargs)) == models.param_count(
        models.keras_cnn(**kwargs))


def test_output_shapes():
    assert models.torch_mlp()(torch.zeros(5, 64)).shape == (5, 10)
    assert models.torch_cnn()(torch.zeros(5, 1, 8, 8)).shape == (5, 10)
    pytest.importorskip("tensorflow")
    import numpy as np

    assert tuple(models.keras_cnn()(np.zeros((5, 8, 8, 1), "float32")).shape) == (5, 10)
    assert tuple(models.keras_mlp()(np.zeros((5, 64), "float32")).shape) == (5, 10)


@pytest.mark.parametrize("kwargs,err", [({"hidden": 0}, ValueError),
                                        ({"classes": 2.0}, TypeError)])
def test_builders_reject_bad_sizes(kwargs, err):
    with pytest.raises(err):
        models.torch_mlp(**kwargs)


def test_param_count_rejects_other_objects():
    with pytest.raises(TypeError, match="param_count"):
        models.param_count(object())


def test_train_and_evaluate_torch_learns_digits():
    torch.manual_seed(0)
    train, test = data.digits_torch(64, flat=True)
    model = models.torch_mlp()
    losses = models.train_torch(model, train, epochs=3, lr=1e-2, progress=False)
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert models.evaluate_torch(model, test) >= 0.85


class _Constant(nn.Module):
    """Always predicts class 0."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(len(x), 10) + self.w
        logits[:, 0] = 1.0
        return logits


def test_evaluate_torch_counts_correct_predictions():
    x = torch.zeros(8, 3)
    y = torch.tensor([0, 0, 0, 1, 2, 3, 4, 5])
    loader = [(x[:5], y[:5]), (x[5:], y[5:])]
    assert models.evaluate_torch(_Constant(), loader) == pytest.approx(3 / 8)


def test_train_torch_rejects_bad_input():
    model = models.torch_mlp()
    loader = [(torch.zeros(2, 64), torch.zeros(2, dtype=torch.int64))]
    with pytest.raises(ValueError, match="epochs"):
        models.train_torch(model, loader, epochs=0, lr=1e-3, progress=False)
    with pytest.raises(ValueError, match="lr"):
        models.train_torch(model, loader, epochs=1, lr=0.0, progress=False)
    with pytest.raises(TypeError, match="nn.Module"):
        models.train_torch(object(), loader, epochs=1, lr=1e-3, progress=False)
    with pytest.raises(ValueError, match="no batches"):
        models.train_torch(model, [], epochs=1, lr=1e-3, progress=False)
    with pytest.raises(ValueError, match="no samples"):
        models.evaluate_torch(model, [])


def test_compile_keras_trains_digits():
    pytest.importorskip("tensorflow")
    import keras

    keras.utils.set_random_seed(0)
    train, test = data.digits_tf(64, flat=True)
    model = models.compile_keras(models.keras_mlp(), 1e-2)
    model.fit(train, epochs=3, verbose=0)
    assert model.evaluate(test, verbose=0, return_dict=True)["accuracy"] >= 0.85
    with pytest.raises(ValueError, match="lr"):
        models.compile_keras(models.keras_mlp(), -1.0)
    with pytest.raises(TypeError, match="Keras model"):
        models.compile_keras(models.torch_mlp(), 1e-3)
