"""Notebook 07's workers: what nbval cannot see. Their findings on 2 and 4 CPU ranks (checkpoint
resume, the 2-D mesh, the mismatched collective) are asserted by 07's evidence cells under nbval."""

import pytest

from accelkit import scripts


def test_loader_data_reads_slowly_and_validates():
    ld = scripts.import_worker("loader_data.py")
    ds = ld.SlowReads(10, dim=3, read_ms=0)
    x, y = ds[0]
    assert len(ds) == 10 and x.shape == (3,) and 0 <= int(y) < 10
    assert [float(ld.Squares()[i][1]) for i in range(4)] == [0.0, 1.0, 4.0, 9.0]
    for bad in ({"n": 0}, {"n": 4, "read_ms": -1}, {"n": 4, "classes": 1}):
        with pytest.raises(ValueError):
            ld.SlowReads(**bad)
