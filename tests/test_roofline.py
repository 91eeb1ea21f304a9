"""accelkit.roofline: the roofline formulas, placing kernels, and a quick real measurement."""

from __future__ import annotations

import math

import pytest
import torch

from accelkit import bench, env, roofline
from accelkit.roofline import Roofline

ROOF = Roofline({"fp32": 2.0, "bf16": 8.0}, bandwidth_gbps=100.0, device="cpu", profile="ci")


def _timing(flops, bytes_moved, seconds=1e-3, label="k"):
    return bench.Timing(label, (seconds, seconds), flops, bytes_moved)


def test_attainable_is_min_of_memory_and_compute_roofs():
    assert ROOF.attainable_tflops(1.0) == pytest.approx(0.1)  # 1 FLOP/B * 100 GB/s
    assert ROOF.attainable_tflops(1e6) == pytest.approx(2.0)  # capped by the fp32 peak
    assert ROOF.attainable_tflops(1e6, "bf16") == pytest.approx(8.0)
    assert ROOF.attainable_tflops(0) == 0.0


def test_ridge_point_is_where_the_roofs_meet():
    assert ROOF.ridge_point("fp32") == pytest.approx(20.0)  # 2e12 / 100e9
    assert ROOF.ridge_point(torch.bfloat16) == pytest.approx(80.0)
    for key in ("fp32", "bf16"):
        ridge = ROOF.ridge_point(key)
        assert ROOF.attainable_tflops(ridge, key) == pytest.approx(ROOF.peak(key))
        assert ROOF.attainable_tflops(ridge / 2, key) == pytest.approx(ROOF.peak(key) / 2)


def test_place_gives_intensity_fraction_and_bound():
    add = ROOF.place(_timing(flops=1e6, bytes_moved=12e6, seconds=1e-3, label="add"))
    assert add.intensity == pytest.approx(1 / 12)
    assert add.achieved_tflops == pytest.approx(1e-3)
    assert add.attainable_tflops == pytest.approx(100e9 / 12 / 1e12)
    assert add.fraction == pytest.approx(1e-3 / (100e9 / 12 / 1e12))
    assert add.bound == "memory"
    mm = ROOF.place(_timing(flops=2 * 1024**3, bytes_moved=3 * 1024**2 * 2), "bfloat16")
    assert mm.bound == "compute" and mm.dtype == "bf16"
    assert "FLOP/B" in str(mm)


def test_place_needs_flops_and_bytes():
    with pytest.raises(ValueError, match="bytes_moved"):
        ROOF.place(_timing(flops=1.0, bytes_moved=None))
    with pytest.raises(ValueError, match="flops"):
        ROOF.place(_timing(flops=None, bytes_moved=4.0))


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="intensity"):
        ROOF.attainable_tflops(-1.0)
    with pytest.raises(ValueError, match="intensity"):
        ROOF.attainable_tflops(math.inf)
    with pytest.raises(TypeError, match="intensity"):
        ROOF.attainable_tflops("1")
    with pytest.raises(ValueError, match="not measured"):
        ROOF.attainable_tflops(1.0, "fp16")
    with pytest.raises(ValueError, match="unknown dtype"):
        ROOF.ridge_point("int8")
    with pytest.raises(ValueError, match="bandwidth"):
        Roofline({"fp32": 1.0}, bandwidth_gbps=0.0)
    with pytest.raises(ValueError, match="peak_tflops"):
        Roofline({}, bandwidth_gbps=1.0)


def test_dtype_key_aliases():
    assert Roofline({"float32": 1.0}, 10.0).peak("fp32") == 1.0
    assert roofline.dtype_key(torch.float32) == "fp32"
    assert roofline.dtype_key("bfloat16") == roofline.dtype_key("bf16") == "bf16"
    assert roofline.dtype_key(torch.float16) == "fp16"


def test_copy_size_exceeds_last_level_cache(monkeypatch):
    import psutil

    mib = roofline.MIB
    if psutil.virtual_memory().available // 8 < 600 * mib:
        pytest.skip("not enough free memory to test the 600 MiB case")
    monkeypatch.setattr(roofline, "last_level_cache_bytes", lambda dev: 600 * mib)
    assert roofline.copy_bytes("cpu", env.profile("ci")) >= 600 * mib
    monkeypatch.setattr(roofline, "last_level_cache_bytes", lambda dev: 1 * mib)
    assert roofline.copy_bytes("cpu", env.profile("ci")) == 256 * mib
    assert roofline.copy_bytes("cpu", env.profile("full")) == 1024 * mib


def test_last_level_cache_is_found_where_sysfs_lists_caches():
    from pathlib import Path

    if not list(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size")):
        pytest.skip("no cache information in sysfs here")
    llc = roofline.last_level_cache_bytes("cpu")
    assert llc is not None and llc >= 2**20


def test_measure_returns_positive_roofs(monkeypatch):
    monkeypatch.setattr(roofline, "copy_bytes", lambda dev, prof: 8 * roofline.MIB)
    roof = roofline.measure("cpu", profile=env.profile("ci"), dtypes=("fp32", "bf16"), min_run_time=0.2)
    assert set(roof.peak_tflops) == {"fp32", "bf16"}
    assert all(v > 0 for v in roof.peak_tflops.values()) and roof.bandwidth_gbps > 0
    assert roof.device == "cpu" and roof.profile == "ci"
    labels = [t.label for t in roof.timings]
    # 1024 on an idle machine; a loaded one sizes it down and says so in the label
    assert labels[0].startswith("matmul ") and " fp32" in labels[0] and labels[2].startswith("copy")
    assert labels[1].startswith("matmul") and "bf16" in labels[1]
    copy = roof.timings[-1]
    wa = roofline.writes_allocate("cpu")  # x86: the copy's write reads each line first
    assert roof.write_allocate is wa
    assert copy.bytes_moved == (3 if wa else 2) * 8 * roofline.MIB  # read (+ allocate) + write
    assert roof.copy_gbps == pytest.approx(copy.gbps * (2 / 3 if wa else 1))
    n = int(labels[0].split()[1])
    assert roof.timings[0].flops == 2 * n**3 and n in (128, 256, 512, 1024)


def test_a_matmul_too_slow_for_the_time_is_measured_smaller_and_says_so():
    t = roofline._matmul(1024, "fp32", "cpu", run_time=1e-4)  # no 1024 matmul fits in 25 µs
    assert t.label.startswith("matmul 128 fp32 (at 1024 one call would take about")
    assert t.flops == 2 * 128**3 and t.tflops > 0


def test_measure_rejects_absent_device():
    from accelkit.device import DeviceNotAvailableError

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(DeviceNotAvailableError):
        roofline.measure("cuda", profile=env.profile("ci"))


def test_measure_wants_a_resolved_profile():
    with pytest.raises(TypeError, match=r"ak\.env\.profile\('ci'\)"):
        roofline.measure("cpu", profile="ci")


def test_report_cites_the_model(monkeypatch):
    monkeypatch.setattr(roofline, "measure", lambda device=None, profile=None: ROOF)
    text = roofline.report(profile=env.profile("ci"))
    assert "Williams" in text and "fp32" in text and "100 GB/s" in text


# ------------------------------------------------------------------ write-allocate (issue 25)
def test_writes_allocate_per_device_kind():
    for machine in ("x86_64", "AMD64", "i686"):  # Linux/macOS and Windows spellings
        assert roofline.writes_allocate("cpu", machine=machine)
    for machine in ("aarch64", "arm64", "ppc64le"):
        assert not roofline.writes_allocate("cpu", machine=machine)
    for dev in ("cuda", "cuda:1", "mps", "xpu:0", torch.device("cuda", 0)):
        assert not roofline.writes_allocate(dev, machine="x86_64")  # GPUs: sectored writes


def test_traffic_counts_each_written_byte_twice_with_write_allocate():
    n = 1000
    assert roofline.traffic_bytes(4 * n, 4 * n, write_allocate=True) == 12 * n  # copy: 3 per 2
    assert roofline.traffic_bytes(4 * n, 4 * n, write_allocate=False) == 8 * n
    assert roofline.traffic_bytes(8 * n, 4 * n, write_allocate=True) == 16 * n  # add: 4 per 3
    assert roofline.traffic_bytes(8 * n, 0, write_allocate=True) == 8 * n  # a sum writes nothing
    with pytest.raises(ValueError, match="written_bytes"):
        roofline.traffic_bytes(1.0, -1.0, write_allocate=True)
    with pytest.raises(ValueError, match="read_bytes"):
        roofline.traffic_bytes(math.nan, 1.0, write_allocate=False)
    wa = Roofline({"fp32": 1.0}, 30.0, write_allocate=True)
    assert wa.traffic(8.0, 4.0) == 16.0 and ROOF.traffic(8.0, 4.0) == 12.0
    assert wa.copy_gbps == pytest.approx(20.0) and ROOF.copy_gbps == ROOF.bandwidth_gbps
    assert "write-allocate" in str(wa) and "write-allocate" in wa.table()
    assert "write-allocate" not in str(ROOF)


def test_an_add_on_a_write_allocating_machine_sits_at_its_roof_not_above_it():
    """The issue-25 bug: a machine whose memory moves B bytes/s of traffic, write-allocating.

    Its copy of n floats takes 12n/B s, an out= add 16n/B s. Counted as read + write, the
    roof is 8n per copy time and the add (12n bytes) lands at 9/8 of it; counted as traffic,
    both sit exactly at the roof.
    """
    n, traffic_bps = 2**20, 30e9
    copy_s, add_s = 12 * n / traffic_bps, 16 * n / traffic_bps
    old_roof = Roofline({"fp32": 1.0}, 8 * n / copy_s / 1e9)  # STREAM count, as before
    old = old_roof.place(_timing(flops=n, bytes_moved=12 * n, seconds=add_s, label="add"))
    assert old.fraction == pytest.approx(9 / 8)
    new_roof = Roofline({"fp32": 1.0}, 12 * n / copy_s / 1e9, write_allocate=True)
    new = new_roof.place(_timing(flops=n, bytes_moved=new_roof.traffic(8 * n, 4 * n),
                                 seconds=add_s, label="add"))
    assert new.fraction == pytest.approx(1.0) and new.intensity == pytest.approx(1 / 16)
    assert new_roof.copy_gbps == pytest.approx(old_roof.bandwidth_gbps)  # the old figure kept
