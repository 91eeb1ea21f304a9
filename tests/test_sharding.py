"""accelkit.sharding: TPU → all chips, several GPUs → all, else emulated CPU devices for a JAX
mesh; HLO collectives.

The TPU and multi-GPU branches run against a fake ``jax`` module that records the calls, so
they are tested without the hardware; slow tests run the real JAX in a fresh process (emulated
devices need a JAX that has not started yet), including notebook 05's SPMD cells.
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from accelkit import sharding


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
             f"jax.config.update('jax_num_cpu_devices', {n})\n"
             "DEVICES = jax.devices()\n"
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
