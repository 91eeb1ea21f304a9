"""accelkit.comm_bench: timing collectives, alone (a group of one) and without a group.

Measured on a real 2-rank gloo group in test_dist.py (slow)."""

import pytest
import torch

from accelkit import comm_bench


def test_time_collective_alone_and_its_arguments(no_launcher):
    t = comm_bench.time_collective(lambda: torch.ones(4).sum(), number=3, repeats=2, warmup=0)
    assert len(t.times_s) == 2 and t.median_s > 0
    with pytest.raises(ValueError):
        comm_bench.time_collective(lambda: None, number=0)
    with pytest.raises(RuntimeError, match="process group"):
        comm_bench.measure_allreduce([4])


def test_allreduce_vs_model_needs_a_group(no_launcher):
    with pytest.raises(RuntimeError, match="process group"):
        comm_bench.allreduce_vs_model(4096)
