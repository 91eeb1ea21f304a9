"""accelkit.models: matching torch/Keras models, their parameter counts, the Keras GPT; the
digits split, its tf.data pipeline; the byte corpus and its batches."""

from __future__ import annotations

import numpy as np
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
    assert tuple(models.keras_mlp()(np.zeros((5, 64), "float32")).shape) == (5, 10)


@pytest.mark.parametrize("kwargs,err", [({"hidden": 0}, ValueError),
                                        ({"classes": 2.0}, TypeError)])
def test_builders_reject_bad_sizes(kwargs, err):
    with pytest.raises(err):
        models.torch_mlp(**kwargs)


def test_keras_gpt_is_the_gpt_with_an_untied_head():
    pytest.importorskip("tensorflow")
    import keras

    cfg = gpt.GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8)
    before = keras.config.dtype_policy().name
    model = models.keras_gpt(cfg, policy="mixed_bfloat16")
    # fails if a layer differs from the PyTorch GPT's: only the head (V·d + V bias) is extra
    assert model.count_params() == gpt.param_counts(cfg)[0] + 256 * 16 + 256
    out = model(np.zeros((3, 8), "int32"))
    assert tuple(out.shape) == (3, 8, 256) and keras.backend.standardize_dtype(out.dtype) == "float32"
    assert keras.config.dtype_policy().name == before  # the global policy is restored

@pytest.fixture(scope="module")
def split() -> models.Digits:
    return models.digits()


def test_digits_shapes_dtypes_and_range(split):
    assert split.x_train.shape == (1347, 1, 8, 8) and split.x_test.shape == (450, 1, 8, 8)
    assert split.x_train.dtype == np.float32 and split.y_train.dtype == np.int64
    assert split.x_train.min() >= 0.0 and split.x_train.max() == pytest.approx(1.0)
    assert split.classes == 10


def test_digits_split_is_stratified(split):
    train = np.bincount(split.y_train, minlength=10) / len(split.y_train)
    test = np.bincount(split.y_test, minlength=10) / len(split.y_test)
    assert np.abs(train - test).max() < 0.01


def test_digits_split_is_seeded(split):
    again = models.digits(seed=0)
    other = models.digits(seed=1)
    np.testing.assert_array_equal(split.y_test, again.y_test)
    np.testing.assert_array_equal(split.x_test, again.x_test)
    assert not np.array_equal(split.y_test, other.y_test)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1])
def test_digits_rejects_bad_test_size(bad):
    with pytest.raises(ValueError, match="test_size"):
        models.digits(test_size=bad)


def test_digits_rejects_bad_seed():
    with pytest.raises(ValueError, match="seed"):
        models.digits(seed=-1)
    with pytest.raises(TypeError, match="seed"):
        models.digits(seed="0")


def test_digits_tf_channels_last_and_order(split):
    pytest.importorskip("tensorflow")
    train, test = models.digits_tf(50)
    xb, yb = next(iter(train))
    assert tuple(xb.shape) == (50, 8, 8, 1) and xb.dtype.name == "float32"
    assert yb.dtype.name == "int64"
    xt, yt = next(iter(test))
    np.testing.assert_array_equal(xt.numpy(), split.x_test[:50].transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(yt.numpy(), split.y_test[:50])


def test_digits_tf_flat_and_drop_remainder():
    pytest.importorskip("tensorflow")
    train, test = models.digits_tf(64, flat=True, drop_remainder=True)
    sizes = [int(x.shape[0]) for x, _ in train]
    assert sizes == [64] * (1347 // 64)
    assert all(tuple(x.shape) == (64, 64) for x, _ in test)
    with pytest.raises(ValueError, match="batch_size"):
        models.digits_tf(0)


def test_corpus_is_deterministic_and_offline():
    a, b = models.load_corpus(), models.load_corpus()
    assert a.sha256 == b.sha256 and torch.equal(a.data, b.data)
    assert a.files == models.CORPUS_FILES  # every file exists on CPython 3.10+
    assert len(a.data) > 200_000 and a.data.dtype == torch.uint8
    train, val = a.split(0.9)
    assert len(train) + len(val) == len(a.data)
    assert bytes(a.data[:18].tolist()).decode() == "# ==== textwrap.py"
    assert "standard-library files" in str(a)


def test_corpus_without_sources_says_why(tmp_path):
    with pytest.raises(FileNotFoundError, match="standard-library sources"):
        models.load_corpus(stdlib=str(tmp_path))


def test_batches_are_deterministic_shifted_and_the_same_cut_later():
    tokens = torch.arange(1000, dtype=torch.int64) % 256
    one = models.batches(tokens, 3, 4, 8, seed=5)
    two = models.batches(tokens, 3, 4, 8, seed=5)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(one, two))
    x, y = one[0]
    assert x.shape == y.shape == (4, 8) and x.dtype == torch.int64
    torch.testing.assert_close(y[:, :-1], x[:, 1:])
    cut = models.batches(tokens, 3, 4, 8, seed=5, ahead=False)  # cut when called, i mod 3
    for i in (1, 4):
        assert all(torch.equal(a, b) for a, b in zip(cut(i), one[1]))
    assert not torch.equal(models.batches(tokens, 1, 4, 8, seed=6)[0][0], x)
    with pytest.raises(ValueError, match="cannot fill"):
        models.batches(tokens[:8], 1, 1, 8)
