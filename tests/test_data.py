"""accelkit.data: the digits split, loaders for both frameworks, MNIST files, synthetic data."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

from accelkit import data


@pytest.fixture(scope="module")
def split() -> data.Digits:
    return data.digits()


def test_digits_shapes_dtypes_and_range(split):
    assert split.x_train.shape == (1347, 1, 8, 8) and split.x_test.shape == (450, 1, 8, 8)
    assert split.x_train.dtype == np.float32 and split.y_train.dtype == np.int64
    assert split.x_train.min() >= 0.0 and split.x_train.max() == pytest.approx(1.0)
    assert split.image_shape == (1, 8, 8) and split.features == 64 and split.classes == 10


def test_digits_split_is_stratified(split):
    train = np.bincount(split.y_train, minlength=10) / len(split.y_train)
    test = np.bincount(split.y_test, minlength=10) / len(split.y_test)
    assert np.abs(train - test).max() < 0.01


def test_digits_split_is_seeded(split):
    again = data.digits(seed=0)
    other = data.digits(seed=1)
    np.testing.assert_array_equal(split.y_test, again.y_test)
    np.testing.assert_array_equal(split.x_test, again.x_test)
    assert not np.array_equal(split.y_test, other.y_test)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1])
def test_digits_rejects_bad_test_size(bad):
    with pytest.raises(ValueError, match="test_size"):
        data.digits(test_size=bad)


def test_digits_rejects_bad_seed():
    with pytest.raises(ValueError, match="seed"):
        data.digits(seed=-1)
    with pytest.raises(TypeError, match="seed"):
        data.digits(seed="0")


def test_digits_torch_shapes_and_order(split):
    train, test = data.digits_torch(32)
    xb, yb = next(iter(train))
    assert xb.shape == (32, 1, 8, 8) and xb.dtype == torch.float32 and yb.dtype == torch.int64
    xt, yt = next(iter(test))  # the test loader keeps the split's order
    np.testing.assert_array_equal(xt.numpy(), split.x_test[:32])
    np.testing.assert_array_equal(yt.numpy(), split.y_test[:32])
    assert sum(len(y) for _, y in test) == 450


def test_digits_torch_flat_and_seeded_shuffle(split):
    (train_a, _), (train_b, _) = data.digits_torch(64, flat=True), data.digits_torch(64, flat=True)
    xa, ya = next(iter(train_a))
    xb, yb = next(iter(train_b))
    assert xa.shape == (64, 64)
    torch.testing.assert_close(xa, xb)  # same seed, same batches
    assert not torch.equal(ya, torch.from_numpy(split.y_train[:64]))  # shuffled
    next_epoch = next(iter(train_a))[1]
    assert not torch.equal(next_epoch, ya)  # reshuffled every epoch


@pytest.mark.parametrize("bad,err", [(0, ValueError), (-3, ValueError), (2.5, TypeError)])
def test_digits_torch_rejects_bad_batch_size(bad, err):
    with pytest.raises(err, match="batch_size"):
        data.digits_torch(bad)


def test_digits_tf_channels_last_and_order(split):
    pytest.importorskip("tensorflow")
    train, test = data.digits_tf(50)
    xb, yb = next(iter(train))
    assert tuple(xb.shape) == (50, 8, 8, 1) and xb.dtype.name == "float32"
    assert yb.dtype.name == "int64"
    xt, yt = next(iter(test))
    np.testing.assert_array_equal(xt.numpy(), split.x_test[:50].transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(yt.numpy(), split.y_test[:50])


def test_digits_tf_flat_and_drop_remainder():
    pytest.importorskip("tensorflow")
    train, test = data.digits_tf(64, flat=True, drop_remainder=True)
    sizes = [int(x.shape[0]) for x, _ in train]
    assert sizes == [64] * (1347 // 64)
    assert all(tuple(x.shape) == (64, 64) for x, _ in test)
    with pytest.raises(ValueError, match="batch_size"):
        data.digits_tf(0)


def _write_idx(path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(s).to_bytes(4, "big") for s in array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def test_read_idx_round_trip(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    _write_idx(tmp_path / "x.gz", arr)
    np.testing.assert_array_equal(data.read_idx(tmp_path / "x.gz"), arr)


def test_read_idx_rejects_bad_files(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x00\x00\x0d\x01\x00\x00\x00\x01\x00")
    with pytest.raises(ValueError, match="not a uint8 IDX"):
        data.read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 5, 1, 2]))
    with pytest.raises(ValueError, match="truncated"):
        data.read_idx(tmp_path / "short")


def test_mnist_without_files_says_how_to_get_them(tmp_path):
    with pytest.raises(FileNotFoundError, match="download=True"):
        data.mnist(tmp_path)


def test_mnist_reads_local_files_without_network(tmp_path):
    rng = np.random.default_rng(0)
    for split_name, n in (("train", 5), ("t10k", 3)):
        _write_idx(tmp_path / f"{split_name}-images-idx3-ubyte.gz",
                   rng.integers(0, 256, (n, 28, 28)))
        _write_idx(tmp_path / f"{split_name}-labels-idx1-ubyte.gz", rng.integers(0, 10, n))
    d = data.mnist(tmp_path)
    assert d.x_train.shape == (5, 1, 28, 28) and d.x_test.shape == (3, 1, 28, 28)
    assert d.x_train.dtype == np.float32 and d.x_train.max() <= 1.0
    assert d.y_train.dtype == np.int64


def test_synthetic_is_seeded_and_typed():
    a = data.synthetic((3, 4), seed=1)
    assert a.shape == (3, 4) and a.dtype == torch.float32
    torch.testing.assert_close(a, data.synthetic((3, 4), seed=1))
    assert not torch.equal(a, data.synthetic((3, 4), seed=2))
    b = data.synthetic([3, 4], dtype=torch.bfloat16, seed=1)
    assert b.dtype == torch.bfloat16
    torch.testing.assert_close(b.float(), a, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("kwargs,err", [
    ({"shape": (2,), "dtype": torch.int64}, TypeError),
    ({"shape": (2, -1)}, ValueError),
    ({"shape": "2"}, TypeError),
    ({"shape": (2,), "seed": -1}, ValueError),
])
def test_synthetic_rejects_bad_input(kwargs, err):
    with pytest.raises(err):
        data.synthetic(**kwargs)


def test_synthetic_classification_is_learnable():
    x, y = data.synthetic_classification(400, 16, 4, seed=0)
    assert x.shape == (400, 16) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert set(y.tolist()) == {0, 1, 2, 3}
    centres = torch.stack([x[y == c].mean(0) for c in range(4)])
    nearest = torch.cdist(x, centres).argmin(1)
    assert (nearest == y).float().mean() > 0.9
    with pytest.raises(ValueError, match="classes"):
        data.synthetic_classification(10, 4, 1)
    with pytest.raises(TypeError, match="n must"):
        data.synthetic_classification(10.0, 4, 2)
