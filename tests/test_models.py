"""accelkit.models: matching torch/Keras models and their parameter counts; the Keras GPT."""

from __future__ import annotations

import pytest
import torch

from accelkit import gpt, models


def _n(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_torch_param_counts_follow_the_formulas():
    assert _n(models.torch_mlp()) == 64 * 128 + 128 + 128 * 10 + 10 == 9610
    c = 16
    assert _n(models.torch_cnn()) == (9 * c + c + 9 * c * 2 * c + 2 * c + 8 * c * 10 + 10) == 6090


@pytest.mark.parametrize("kwargs", [{}, {"in_features": 32, "hidden": 7, "classes": 3}])
def test_mlp_param_counts_match_between_frameworks(kwargs):
    pytest.importorskip("tensorflow")
    assert _n(models.torch_mlp(**kwargs)) == models.keras_mlp(**kwargs).count_params()


def test_output_shapes():
    assert models.torch_mlp()(torch.zeros(5, 64)).shape == (5, 10)
    assert models.torch_cnn()(torch.zeros(5, 1, 8, 8)).shape == (5, 10)
    pytest.importorskip("tensorflow")
    import numpy as np

    assert tuple(models.keras_mlp()(np.zeros((5, 64), "float32")).shape) == (5, 10)


@pytest.mark.parametrize("kwargs,err", [({"hidden": 0}, ValueError),
                                        ({"classes": 2.0}, TypeError)])
def test_builders_reject_bad_sizes(kwargs, err):
    with pytest.raises(err):
        models.torch_mlp(**kwargs)


def test_keras_gpt_is_the_gpt_with_an_untied_head():
    pytest.importorskip("tensorflow")
    import keras
    import numpy as np

    cfg = gpt.GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8)
    before = keras.config.dtype_policy().name
    model = models.keras_gpt(cfg, policy="mixed_bfloat16")
    # fails if a layer differs from the PyTorch GPT's: only the head (V·d + V bias) is extra
    assert model.count_params() == gpt.param_counts(cfg)[0] + 256 * 16 + 256
    out = model(np.zeros((3, 8), "int32"))
    assert tuple(out.shape) == (3, 8, 256) and keras.backend.standardize_dtype(out.dtype) == "float32"
    assert keras.config.dtype_policy().name == before  # the global policy is restored
