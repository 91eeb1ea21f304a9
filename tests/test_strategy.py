"""accelkit.strategy: TPU → TPUStrategy, several GPUs → MirroredStrategy, else the default.

The TPU and multi-GPU branches run against a fake ``tf`` module that records the calls, so
they are tested without the hardware; the default branch also runs against real TensorFlow.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from accelkit import device, strategy
from accelkit import tf as tf_device


class FakeStrategy:
    def __init__(self, kind, replicas, arg=None):
        self.kind, self.num_replicas_in_sync, self.arg = kind, replicas, arg


class NotFoundError(Exception):
    pass


def fake_tf(*, tpu_cores=8, gpus=(), init_error=None):
    """A stand-in for the bits of TensorFlow that choose_strategy touches."""
    calls: list[tuple] = []

    def resolver(tpu=None):
        calls.append(("resolver", tpu))
        return SimpleNamespace(tpu=tpu)

    def initialize(r):
        calls.append(("initialize", r.tpu))
        if init_error:
            raise init_error

    tf = SimpleNamespace(
        calls=calls,
        distribute=SimpleNamespace(
            cluster_resolver=SimpleNamespace(TPUClusterResolver=resolver),
            TPUStrategy=lambda r: calls.append(("TPUStrategy", r.tpu))
            or FakeStrategy("tpu", tpu_cores, r),
            MirroredStrategy=lambda devices: calls.append(("MirroredStrategy", devices))
            or FakeStrategy("mirrored", len(devices), devices),
            get_strategy=lambda: FakeStrategy("default", 1),
        ),
        config=SimpleNamespace(
            experimental_connect_to_cluster=lambda r: calls.append(("connect", r.tpu)),
            list_logical_devices=lambda kind: [SimpleNamespace(name=g) for g in gpus]
            if kind == "GPU" else [],
        ),
        tpu=SimpleNamespace(experimental=SimpleNamespace(initialize_tpu_system=initialize)),
    )
    return tf


@pytest.fixture(autouse=True)
def _fresh_tpu_cache(monkeypatch):
    monkeypatch.setattr(strategy, "_TPU_RESOLVERS", {})


def test_tpu_branch_follows_the_documented_sequence():
    tf = fake_tf(tpu_cores=8, gpus=["/device:GPU:0", "/device:GPU:1"])
    choice = strategy.choose_strategy(tpu_probe=lambda: "local", tf=tf)
    assert (choice.kind, choice.replicas) == ("tpu", 8)
    assert choice.strategy.kind == "tpu"
    assert tf.calls == [("resolver", "local"), ("connect", "local"), ("initialize", "local"),
                        ("TPUStrategy", "local")]
    assert "TPU found" in choice.reason and "8 cores" in choice.reason


def test_tpu_is_initialised_once():
    tf = fake_tf()
    strategy.choose_strategy(tpu_probe=lambda: "local", tf=tf)
    strategy.choose_strategy(tpu_probe=lambda: "local", tf=tf)
    assert [c for c in tf.calls if c[0] == "initialize"] == [("initialize", "local")]


def test_broken_tpu_falls_back_with_the_reason():
    tf = fake_tf(gpus=[], init_error=NotFoundError("TPUs not found in the cluster.\nmore"))
    choice = strategy.choose_strategy(tpu_probe=lambda: "local", tf=tf)
    assert (choice.kind, choice.replicas) == ("default", 1)
    assert "NotFoundError: TPUs not found in the cluster." in choice.reason
    assert "more" not in choice.reason
    assert strategy._TPU_RESOLVERS == {}  # a failed connection is not cached


def test_several_gpus_give_mirrored():
    gpus = ["/device:GPU:0", "/device:GPU:1", "/device:GPU:2", "/device:GPU:3"]
    tf = fake_tf(gpus=gpus)
    choice = strategy.choose_strategy(tpu_probe=lambda: None, tf=tf)
    assert (choice.kind, choice.replicas) == ("mirrored", 4)
    assert tf.calls == [("MirroredStrategy", gpus)]
    assert "4 GPUs" in choice.reason


def test_gpu_probe_is_injectable():
    choice = strategy.choose_strategy(tpu_probe=lambda: None, gpu_probe=lambda: ["a", "b"],
                                      tf=fake_tf(gpus=[]))
    assert (choice.kind, choice.replicas) == ("mirrored", 2)


def test_one_gpu_gives_default_on_that_gpu():
    choice = strategy.choose_strategy(tpu_probe=lambda: None, tf=fake_tf(gpus=["/GPU:0"]))
    assert (choice.kind, choice.replicas) == ("default", 1)
    assert "1 GPU(s)" in choice.reason and "/GPU:0" in choice.reason
    assert strategy.choose_strategy(tpu_probe=lambda: None, min_gpus=1,
                                    tf=fake_tf(gpus=["/GPU:0"])).kind == "mirrored"


def test_allow_flags_skip_branches():
    tf = fake_tf(gpus=["g0", "g1"])
    choice = strategy.choose_strategy(allow_tpu=False, allow_mirrored=False,
                                      tpu_probe=lambda: pytest.fail("TPU probed"), tf=tf)
    assert choice.kind == "default" and tf.calls == []


def test_min_gpus_validated():
    with pytest.raises(ValueError, match="min_gpus"):
        strategy.choose_strategy(min_gpus=0, tf=fake_tf())


def test_tpu_address_from_hardware_probe(monkeypatch):
    for var in ("TPU_NAME", "COLAB_TPU_ADDR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(device, "has_tpu", lambda: False)
    assert strategy.tpu_address() is None
    monkeypatch.setattr(device, "has_tpu", lambda: True)
    assert strategy.tpu_address() == "local"
    monkeypatch.setenv("COLAB_TPU_ADDR", "10.0.0.2:8470")
    assert strategy.tpu_address() == "grpc://10.0.0.2:8470"
    monkeypatch.setenv("TPU_NAME", "my-tpu")
    assert strategy.tpu_address() == "my-tpu"


def test_default_tpu_probe_is_used(monkeypatch):
    """Without tpu_probe, the cheap hardware probe (device.has_tpu) decides."""
    monkeypatch.setattr(device, "has_tpu", lambda: True)
    for var in ("TPU_NAME", "COLAB_TPU_ADDR"):
        monkeypatch.delenv(var, raising=False)
    assert strategy.choose_strategy(tf=fake_tf(tpu_cores=4)).replicas == 4


def test_global_and_per_replica_batch():
    tpu = strategy.StrategyChoice(FakeStrategy("tpu", 8), "tpu", 8, "")
    assert strategy.global_batch(128, tpu) == 1024
    assert strategy.global_batch(128, FakeStrategy("default", 1)) == 128
    assert strategy.per_replica_batch(1024, tpu) == 128
    with pytest.raises(ValueError, match="split evenly over 8"):
        strategy.per_replica_batch(1001, tpu)
    with pytest.raises(ValueError, match="per_replica"):
        strategy.global_batch(0, tpu)
    with pytest.raises(TypeError):
        strategy.global_batch(8, object())


@pytest.mark.skipif(not tf_device.has_tf(), reason="TensorFlow not installed")
@pytest.mark.skipif(device.has_tpu(), reason="this machine has a TPU")
def test_real_tf_without_tpu_is_default_and_fast():
    tf = tf_device.import_tf()
    start = time.perf_counter()
    choice = strategy.choose_strategy()
    detect_s = time.perf_counter() - start
    assert choice.kind in ("default", "mirrored")
    if not tf.config.list_logical_devices("GPU"):
        assert (choice.kind, choice.replicas) == ("default", 1)
        assert choice.strategy is tf.distribute.get_strategy()
        assert "no TPU attached" in choice.reason and "/CPU:0" in str(choice)
    assert detect_s < 10, f"detecting 'no TPU here' took {detect_s:.1f} s"
