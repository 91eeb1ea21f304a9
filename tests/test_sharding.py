"""accelkit.sharding: the collectives of a compiled HLO program; slow tests run notebook 05's
SPMD cells in a fresh process (emulated devices need a JAX that has not started yet).
(05's device choice for Keras on JAX is tested with its worker, tests/test_workers_05.py.)
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from accelkit import sharding

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
