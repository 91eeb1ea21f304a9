"""accelkit.sharding: TPU → TPUStrategy, several GPUs → MirroredStrategy, else the default; TPU →
all chips, several GPUs → all, else emulated CPU devices for a JAX mesh; HLO collectives.

The TPU and multi-GPU branches run against fake ``tf`` and ``jax`` modules that record the
calls, so they are tested without the hardware; the default strategy also runs against real
TensorFlow, and slow tests run the real JAX in a fresh process (emulated devices need a JAX
that has not started yet).
"""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from accelkit import device, sharding
from accelkit import tf as aktf


# ----------------------------------------------------------------------------- tf.distribute
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
    monkeypatch.setattr(sharding, "_TPU_RESOLVERS", {})


def test_tpu_branch_follows_the_documented_sequence():
    tf = fake_tf(tpu_cores=8, gpus=["/device:GPU:0", "/device:GPU:1"])
    choice = sharding.choose_strategy(tpu_probe=lambda: "local", tf=tf)
    assert (choice.kind, choice.replicas) == ("tpu", 8)
    assert choice.strategy.kind == "tpu"
    assert tf.calls == [("resolver", "local"), ("connect", "local"), ("initialize", "local"),
                        ("TPUStrategy", "local")]
    assert "TPU found" in choice.reason and "8 cores" in choice.reason


def test_tpu_is_initialised_once():
    tf = fake_tf()
    sharding.choose_strategy(tpu_probe=lambda: "local", tf=tf)
    sharding.choose_strategy(tpu_probe=lambda: "local", tf=tf)
    assert [c for c in tf.calls if c[0] == "initialize"] == [("initialize", "local")]


def test_broken_tpu_falls_back_with_the_reason():
    tf = fake_tf(gpus=[], init_error=NotFoundError("TPUs not found in the cluster.\nmore"))
    choice = sharding.choose_strategy(tpu_probe=lambda: "local", tf=tf)
    assert (choice.kind, choice.replicas) == ("default", 1)
    assert "NotFoundError: TPUs not found in the cluster." in choice.reason
    assert "more" not in choice.reason
    assert sharding._TPU_RESOLVERS == {}  # a failed connection is not cached


def test_several_gpus_give_mirrored():
    gpus = ["/device:GPU:0", "/device:GPU:1", "/device:GPU:2", "/device:GPU:3"]
    tf = fake_tf(gpus=gpus)
    choice = sharding.choose_strategy(tpu_probe=lambda: None, tf=tf)
    assert (choice.kind, choice.replicas) == ("mirrored", 4)
    assert tf.calls == [("MirroredStrategy", gpus)]
    assert "4 GPUs" in choice.reason


def test_gpu_probe_is_injectable():
    choice = sharding.choose_strategy(tpu_probe=lambda: None, gpu_probe=lambda: ["a", "b"],
                                      tf=fake_tf(gpus=[]))
    assert (choice.kind, choice.replicas) == ("mirrored", 2)


def test_one_gpu_gives_default_on_that_gpu():
    choice = sharding.choose_strategy(tpu_probe=lambda: None, tf=fake_tf(gpus=["/GPU:0"]))
    assert (choice.kind, choice.replicas) == ("default", 1)
    assert "1 GPU(s)" in choice.reason and "/GPU:0" in choice.reason
    assert sharding.choose_strategy(tpu_probe=lambda: None, min_gpus=1,
                                    tf=fake_tf(gpus=["/GPU:0"])).kind == "mirrored"


def test_allow_flags_skip_branches():
    tf = fake_tf(gpus=["g0", "g1"])
    choice = sharding.choose_strategy(allow_tpu=False, allow_mirrored=False,
                                      tpu_probe=lambda: pytest.fail("TPU probed"), tf=tf)
    assert choice.kind == "default" and tf.calls == []


def test_min_gpus_validated():
    with pytest.raises(ValueError, match="min_gpus"):
        sharding.choose_strategy(min_gpus=0, tf=fake_tf())


def test_tpu_address_from_hardware_probe(monkeypatch):
    for var in ("TPU_NAME", "COLAB_TPU_ADDR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(device, "has_tpu", lambda: False)
    assert sharding.tpu_address() is None
    monkeypatch.setattr(device, "has_tpu", lambda: True)
    assert sharding.tpu_address() == "local"
    monkeypatch.setenv("COLAB_TPU_ADDR", "10.0.0.2:8470")
    assert sharding.tpu_address() == "grpc://10.0.0.2:8470"
    monkeypatch.setenv("TPU_NAME", "my-tpu")
    assert sharding.tpu_address() == "my-tpu"


def test_default_tpu_probe_is_used(monkeypatch):
    """Without tpu_probe, the cheap hardware probe (device.has_tpu) decides."""
    monkeypatch.setattr(device, "has_tpu", lambda: True)
    for var in ("TPU_NAME", "COLAB_TPU_ADDR"):
        monkeypatch.delenv(var, raising=False)
    assert sharding.choose_strategy(tf=fake_tf(tpu_cores=4)).replicas == 4


@pytest.mark.skipif(not aktf.has_tf(), reason="TensorFlow not installed")
@pytest.mark.skipif(device.has_tpu(), reason="this machine has a TPU")
def test_real_tf_without_tpu_is_default_and_fast():
    tf = aktf.import_tf()
    start = time.perf_counter()
    choice = sharding.choose_strategy()
    detect_s = time.perf_counter() - start
    assert choice.kind in ("default", "mirrored")
    if not tf.config.list_logical_devices("GPU"):
        assert (choice.kind, choice.replicas) == ("default", 1)
        assert choice.strategy is tf.distribute.get_strategy()
        assert "no TPU attached" in choice.reason and "/CPU:0" in str(choice)
    assert detect_s < 10, f"detecting 'no TPU here' took {detect_s:.1f} s"


# ----------------------------------------------------------------------------- JAX
def fake_jax(*, tpu=0, gpu=0, cpu=1, started=False):
    """A stand-in for the bits of JAX that choose_mesh touches; records config updates."""
    calls: list[tuple] = []
    state = {"cpu": cpu}

    def update(name, value):
        if started and name == "jax_num_cpu_devices":
            raise RuntimeError("jax_num_cpu_devices config should be updated before backends "
                               "are initialized")
        calls.append((name, value))
        if name == "jax_num_cpu_devices":
            state["cpu"] = value

    def devices(platform):
        n = {"tpu": tpu, "gpu": gpu, "cpu": state["cpu"]}[platform]
        if not n:
            raise RuntimeError(f"Unknown backend: '{platform}' requested")
        return [SimpleNamespace(platform=platform, id=i) for i in range(n)]

    return SimpleNamespace(calls=calls, config=SimpleNamespace(update=update), devices=devices)


def test_tpu_takes_all_chips_and_never_asks_for_emulated_cpus():
    jax = fake_jax(tpu=8)
    choice = sharding.choose_mesh(tpu_probe=lambda: True, gpu_probe=lambda: 0, jax=jax)
    assert (choice.platform, choice.n, choice.emulated) == ("tpu", 8, False)
    assert "8 chip" in choice.reason
    assert ("jax_platforms", "tpu,cpu") in jax.calls
    assert not any(name == "jax_num_cpu_devices" for name, _ in jax.calls)


def test_single_tpu_chip_is_a_mesh_of_one():
    choice = sharding.choose_mesh(tpu_probe=lambda: True, gpu_probe=lambda: 0, jax=fake_jax(tpu=1))
    assert (choice.platform, choice.n) == ("tpu", 1)


def test_several_gpus_take_all_of_them():
    jax = fake_jax(gpu=4)
    choice = sharding.choose_mesh(tpu_probe=lambda: False, gpu_probe=lambda: 4, jax=jax)
    assert (choice.platform, choice.n) == ("gpu", 4)
    assert "no TPU attached" in choice.reason


def test_one_gpu_falls_back_to_emulated_cpus_and_says_why():
    choice = sharding.choose_mesh(cpu_devices=8, tpu_probe=lambda: False, gpu_probe=lambda: 1,
                                  jax=fake_jax(gpu=1))
    assert (choice.platform, choice.n, choice.emulated) == ("cpu", 8, True)
    assert "1 GPU(s), fewer than 2" in choice.reason and "8 emulated" in choice.reason


def test_cpu_gets_the_emulated_count_it_asked_for_and_only_the_cpu_platform():
    jax = fake_jax()
    choice = sharding.choose_mesh(cpu_devices=4, tpu_probe=lambda: False, gpu_probe=lambda: 0,
                                  jax=jax)
    assert (choice.platform, choice.n, choice.emulated) == ("cpu", 4, True)
    assert ("jax_platforms", "cpu") in jax.calls and ("jax_num_cpu_devices", 4) in jax.calls


def test_gpus_that_this_jax_cannot_use_fall_back_with_the_reason():
    choice = sharding.choose_mesh(tpu_probe=lambda: False, gpu_probe=lambda: 2, jax=fake_jax())
    assert choice.platform == "cpu" and "GPU seen but JAX cannot use it" in choice.reason


def test_too_late_for_emulated_devices_says_so():
    choice = sharding.choose_mesh(cpu_devices=8, tpu_probe=lambda: False, gpu_probe=lambda: 0,
                                  jax=fake_jax(started=True))
    assert choice.n == 1 and not choice.emulated
    assert "already started with 1 CPU device" in choice.reason


@pytest.mark.parametrize("bad", [{"cpu_devices": 0}, {"min_gpus": 0}])
def test_bad_counts_raise(bad):
    with pytest.raises(ValueError):
        sharding.choose_mesh(tpu_probe=lambda: False, gpu_probe=lambda: 0, jax=fake_jax(), **bad)


HLO = "\n".join([
    "  %all-reduce.2 = (f32[128,64]{1,0}, f32[10,128]{1,0}) all-reduce(%dot.3, %dot.4), "
    "channel_id=1, replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2] {'axis_0'}, to_apply=%add",
    "  %all-reduce = f32[16,10]{1,0} all-reduce(%fusion.1), replica_groups=[4,2]<=[8], to_apply=%add",
    "  %all-gather = f32[64,128]{1,0} all-gather(%p.1), replica_groups={{0,2,4,6},{1,3,5,7}}",
    "  %reduce-scatter = f32[32,64]{1,0} reduce-scatter(%dot), replica_groups={{0,1},{2,3}}",
    "  %ars = f32[8]{0} all-reduce-start(%x), replica_groups={}",
    "  %ard = f32[8]{0} all-reduce-done(%ars)",
    '  %add = f32[8]{0} add(%a, %b), metadata={op_name="all-reduce"}',
])


def test_collectives_reads_ops_bytes_and_group_sizes_from_every_printed_form():
    found = sharding.collectives(HLO)
    assert [c.op for c in found] == ["all-reduce", "all-reduce", "all-gather", "reduce-scatter",
                                     "all-reduce"]
    assert found[0].bytes == (128 * 64 + 10 * 128) * 4
    assert [c.group_size for c in found] == [4, 2, 4, 2, None]


@pytest.mark.slow
def test_real_jax_emulates_eight_cpu_devices_in_a_fresh_process():
    pytest.importorskip("jax")
    code = ("import jax; from accelkit import sharding; c = sharding.choose_mesh(cpu_devices=8); "
            "m = jax.make_mesh((4, 2), ('data', 'model'), devices=c.devices); "
            "print(c.platform, c.n, dict(m.shape))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "cpu 8 {'data': 4, 'model': 2}" in out.stdout


# Notebook 05's SPMD section, run for real in a fresh process: its cells in order (found by
# their first line), with the few names Setup defines, on `n` emulated CPU devices.
NB05_SPMD = ("TRACES = []", "from jax.sharding import AxisType", "grad_fn = jax.grad",
             "ALL = (", "#@title Evidence: every layout", "def matmul_reduce_scatter",
             "#@title Evidence: the explicit reduce-scatter")


def _nb05_spmd_program(n: int) -> str:
    import json
    from pathlib import Path

    cells = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "05_tpu.ipynb")
                       .read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    picked = []
    for start in NB05_SPMD:
        found = [s for s in sources if s.startswith(start)]
        assert len(found) == 1, f"05 has {len(found)} code cells starting with {start!r}"
        picked.append(found[0])
    setup = ("import numpy as np, jax, jax.numpy as jnp\n"
             "from jax.sharding import NamedSharding, PartitionSpec\n"
             "import accelkit as ak\n"
             f"MESH_CHOICE = ak.sharding.choose_mesh(cpu_devices={n})\n"
             "PER_REPLICA = 64\n")
    return "\n".join([setup, *picked])


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 8])
def test_nb05_spmd_checks_run_on_several_devices_and_say_skipped_on_one(n):
    """On one device (a TPU v5e-1) the SPMD evidence says it checks nothing; on 8 it checks."""
    pytest.importorskip("jax")
    out = subprocess.run([sys.executable, "-c", _nb05_spmd_program(n)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    if n == 1:
        assert out.stdout.count("skipped:") == 2, out.stdout  # layouts and reduce-scatter
        assert "nothing to check" in out.stdout
    else:
        assert "skipped" not in out.stdout, out.stdout
        assert "all-reduce" in out.stdout and "reduce-scatter x1 (groups of 2)" in out.stdout


@pytest.mark.slow
def test_nb05_spmd_evidence_fails_when_the_data_parallel_all_reduce_is_missing():
    """The check can fail: with the batch left whole (no split) there is no all-reduce."""
    pytest.importorskip("jax")
    program = _nb05_spmd_program(8).replace('"data parallel": ({k: () for k in params}, ("data",))',
                                            '"data parallel": ({k: () for k in params}, ())')
    assert '({k: () for k in params}, ())' in program
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode != 0 and "data parallel" in out.stderr, out.stderr[-3000:]
