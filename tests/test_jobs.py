"""accelkit.jobs: profiler shares, the largest-batch model and search, flight-record tables."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils.data import DataLoader, TensorDataset

from accelkit import jobs


def test_batch_by_model_is_the_floor_of_what_is_left():
    assert jobs.batch_by_model(16e9, 6e9, 50e6) == 200
    assert jobs.batch_by_model(100, 40, 7) == 8          # 60 // 7
    assert jobs.batch_by_model(100, 120, 7) == 0         # the fixed part alone does not fit
    for bad in ((0, 1, 1), (100, -1, 1), (100, 1, 0)):
        with pytest.raises(ValueError):
            jobs.batch_by_model(*bad)


@pytest.mark.parametrize("answer", [1, 2, 3, 7, 8, 9, 100, 1023, 1024])
def test_largest_fitting_finds_the_boundary(answer):
    best, tried = jobs.largest_fitting(lambda n: n <= answer, limit=4096)
    assert best == answer
    assert all(ok == (n <= answer) for n, ok in tried)
    assert len(tried) <= 2 * answer.bit_length() + 2     # doubling, then bisection


def test_largest_fitting_stops_at_the_limit_and_refuses_a_start_that_does_not_fit():
    best, tried = jobs.largest_fitting(lambda n: True, start=3, limit=20)
    assert best == 20 and tried[-1] == (20, True) and max(n for n, _ in tried) == 20
    with pytest.raises(ValueError, match="does not fit"):
        jobs.largest_fitting(lambda n: False)
    with pytest.raises(ValueError):
        jobs.largest_fitting(lambda n: True, start=0)
    with pytest.raises(ValueError):
        jobs.largest_fitting(lambda n: True, start=8, limit=4)


def test_time_in_counts_the_dataloader_and_labels():
    loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for (x,) in loader:
            with record_function("compute"):
                x.sum()
    waited, computed = jobs.time_in(prof, jobs.DATALOADER_PREFIX), jobs.time_in(prof, "compute")
    assert waited > 0 and computed > 0
    assert jobs.time_in(prof, "no-such-op") == 0.0
    with pytest.raises(ValueError):
        jobs.time_in(prof, "")


def test_collective_rows_line_ranks_up_and_find_the_first_divergence():
    def entry(seq, shape):
        return {"collective_seq_id": seq, "profiling_name": "gloo:all_reduce", "input_sizes": [shape]}

    rows = jobs.collective_rows({0: [entry(1, [8]), entry(2, [])], 1: [entry(1, [8])]})
    assert rows == [{"seq": 1, 0: "gloo:all_reduce [8]", 1: "gloo:all_reduce [8]"},
                    {"seq": 2, 0: "gloo:all_reduce []", 1: "—"}]
    assert jobs.first_divergence(rows) == 2
    same = jobs.collective_rows({0: [entry(1, [8])], 1: [entry(1, [8])]})
    assert jobs.first_divergence(same) is None
    shapes = jobs.collective_rows({0: [entry(1, [4])], 1: [entry(1, [8])]})
    assert jobs.first_divergence(shapes) == 1            # same op, other shape: a mismatch too
    with pytest.raises(KeyError):
        jobs.collective_rows({0: [{"collective_seq_id": 1}]})
