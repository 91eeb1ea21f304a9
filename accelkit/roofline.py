"""This machine's roofline: measured matmul throughput per dtype and memory bandwidth.

The roofline model (Williams, Waterman & Patterson, "Roofline: an insightful visual performance
model for multicore architectures", CACM 52(4), 2009): ``attainable FLOP/s = min(peak FLOP/s,
intensity × bandwidth)``, intensity being FLOP per byte moved; below the *ridge point*
``peak / bandwidth`` a kernel is memory-bound.  :func:`measure` takes both roofs from this
machine: a large square matmul per dtype (``2·n³`` FLOP) and a copy much larger than the
last-level cache.

**Bytes moved are memory traffic, write-allocate included.**  With write-back caches an ordinary
store to an uncached line first reads it (read-for-ownership): a copy moves 3 bytes per 2
counted, an ``out=`` add 4 per 3, so STREAM's count (one read + one write) understates the
memory's GB/s by 1/3 (McCalpin, https://www.cs.virginia.edu/stream/ref.html, "Counting Bytes
and FLOPS"; measured by G. Hager, https://blogs.fau.de/hager/archives/8263, 2019).
:func:`writes_allocate` per device kind:

- x86-64 CPUs: yes, ``written × 2`` (non-temporal stores and Intel's SpecI2M can skip the read;
  PyTorch's elementwise kernels use ordinary stores).
- Arm CPUs: no, *write streaming mode* on whole-line writes (Cortex-A76 TRM, 100798, A6.2.6).
- GPUs: no, L2 tracks writes per sector (NVIDIA: 32 bytes).  Arm and GPUs are not yet measured
  by this course; notebook 00's in-place-vs-copy evidence cell measures it where it runs.

Elsewhere: timing in :mod:`accelkit.bench`; datasheet peaks in :mod:`accelkit.hardware`; dtype
names in :mod:`accelkit.claims`; the size profile in :mod:`accelkit.env`.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelkit import bench, claims
from accelkit import device as _device

#: The dtypes the roofline measures: short key (the result key) -> torch dtype name.
DTYPE_NAMES = {claims.SHORT[name]: name for name in ("float32", "bfloat16", "float16")}

MIB = 2**20


def dtype_key(dtype: Any) -> str:
    """Return the short name (``"fp32"``, ``"bf16"``, ``"fp16"``) of a dtype or dtype name
    (any spelling :func:`accelkit.claims.short` reads).

    Raises:
        ValueError: for a dtype the roofline does not measure.
    """
    key = claims.short(dtype)
    if key not in DTYPE_NAMES:
        raise ValueError(f"unknown dtype {dtype!r}; the roofline knows "
                         f"{', '.join(DTYPE_NAMES)} (or {', '.join(DTYPE_NAMES.values())})")
    return key


#: ``platform.machine()`` names of x86-64 CPUs (Linux/macOS, Windows): their stores write-allocate.
X86_MACHINES = frozenset({"x86_64", "amd64", "i386", "i686"})


def writes_allocate(dev: Any = "cpu", machine: str | None = None) -> bool:
    """Return whether ordinary stores on ``dev`` (a torch device or string) read each written
    line first: True for an x86-64 CPU (``machine``: ``platform.machine()``, default this one),
    False for Arm CPUs and GPUs (sources: the module docstring)."""
    kind = str(dev).split(":", 1)[0]
    if kind != "cpu":
        return False
    arch = (machine if machine is not None else platform.machine()).lower()
    return arch in X86_MACHINES


def traffic_bytes(read_bytes: float, written_bytes: float, *, write_allocate: bool) -> float:
    """Return the memory traffic of a kernel that reads and writes these bytes: ``read + written``,
    or ``read + 2·written`` with write-allocate (McCalpin's "hardware" count).

    Raises:
        ValueError: for a negative or non-finite byte count.
    """
    for name, value in (("read_bytes", read_bytes), ("written_bytes", written_bytes)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return read_bytes + written_bytes * (2 if write_allocate else 1)


@dataclass(frozen=True)
class Placement:
    """A measured kernel placed on a roofline: its ``label``, the ``dtype`` roof it is compared
    with, ``intensity`` (FLOP/byte), ``achieved_tflops`` and ``attainable_tflops`` (10**12
    FLOP/s) and ``bound`` (``"memory"``: left of the ridge point, or ``"compute"``)."""

    label: str
    dtype: str
    intensity: float
    achieved_tflops: float
    attainable_tflops: float
    bound: str

    @property
    def fraction(self) -> float:
        """``achieved / attainable``: how close the kernel gets to its roof (can exceed 1
        when data stays in a cache, which the memory roof does not model)."""
        return self.achieved_tflops / self.attainable_tflops

    def __str__(self) -> str:
        return (f"{self.label}: {self.intensity:.3g} FLOP/B, {self.achieved_tflops:.3g} of "
                f"{self.attainable_tflops:.3g} TFLOP/s attainable ({self.fraction:.0%}, "
                f"{self.bound}-bound, {self.dtype} roof)")


@dataclass(frozen=True)
class Roofline:
    """The two roofs of one device, measured.

    Attributes:
        peak_tflops: matmul throughput per dtype, TFLOP/s (``{"fp32": 0.35, ...}``; keys read
            by :func:`dtype_key`).
        bandwidth_gbps: memory bandwidth, GB/s (10**9 bytes/s): the copy's traffic.
        device, device_name, profile: ``"cpu"``/``"cuda:0"``, its product name, ``"ci"``/``"full"``.
        timings: the measurements behind the roofs.
        write_allocate: :func:`writes_allocate` of the device.

    Raises:
        ValueError: for no peak, or a peak or bandwidth that is not a positive number.
    """

    peak_tflops: dict[str, float]
    bandwidth_gbps: float
    device: str = "cpu"
    device_name: str = ""
    profile: str = "ci"
    timings: tuple[bench.Timing, ...] = field(default=(), repr=False)
    write_allocate: bool = False

    def __post_init__(self) -> None:
        if not self.peak_tflops:
            raise ValueError("peak_tflops needs at least one dtype")
        for key, value in self.peak_tflops.items():
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"peak_tflops[{key!r}] must be a positive number, got {value}")
        # keys by their short names, so {"float32": ...} and {"fp32": ...} mean the same
        object.__setattr__(self, "peak_tflops",
                           {dtype_key(k): float(v) for k, v in self.peak_tflops.items()})
        if not (math.isfinite(self.bandwidth_gbps) and self.bandwidth_gbps > 0):
            raise ValueError(f"bandwidth_gbps must be a positive number, got "
                             f"{self.bandwidth_gbps}")

    @property
    def copy_gbps(self) -> float:
        """The copy's GB/s in STREAM's count (one read + one write per element): ``bandwidth_gbps
        × 2/3`` where stores write-allocate, else ``bandwidth_gbps``."""
        return self.bandwidth_gbps * (2 / 3 if self.write_allocate else 1.0)

    def traffic(self, read_bytes: float, written_bytes: float) -> float:
        """Return the memory traffic of a kernel on this device, to pass as ``bytes_moved``
        (:func:`traffic_bytes` with this roof's ``write_allocate``)."""
        return traffic_bytes(read_bytes, written_bytes, write_allocate=self.write_allocate)

    def peak(self, dtype: Any = "fp32") -> float:
        """Return the measured peak of ``dtype`` in TFLOP/s.

        Raises:
            ValueError: for an unknown dtype, or one not measured on this device.
        """
        key = dtype_key(dtype)
        if key not in self.peak_tflops:
            raise ValueError(f"{key} was not measured on {self.device}; measured: "
                             f"{', '.join(self.peak_tflops)}")
        return self.peak_tflops[key]

    def attainable_tflops(self, intensity: float, dtype: Any = "fp32") -> float:
        """Return the roofline bound ``min(peak, intensity × bandwidth)`` in TFLOP/s, for an
        intensity in FLOP/byte and the compute roof of ``dtype``.

        Raises:
            TypeError: for an intensity that is not a number.
            ValueError: for a negative or non-finite intensity, or an unmeasured dtype.
        """
        if isinstance(intensity, bool) or not isinstance(intensity, (int, float)):
            raise TypeError(f"intensity must be a number, got {type(intensity).__name__}")
        if not (math.isfinite(intensity) and intensity >= 0):
            raise ValueError(f"intensity must be a finite number >= 0 FLOP/byte, got {intensity}")
        return min(self.peak(dtype), intensity * self.bandwidth_gbps / 1e3)

    def ridge_point(self, dtype: Any = "fp32") -> float:
        """Return the intensity (FLOP/byte) where the memory roof meets the compute roof:
        ``peak / bandwidth`` (kernels below it are memory-bound)."""
        return self.peak(dtype) * 1e3 / self.bandwidth_gbps

    def place(self, timing: bench.Timing, dtype: Any = "fp32") -> Placement:
        """Place a timing (:func:`accelkit.bench.measure` with ``flops=`` and ``bytes_moved=``)
        on the ``dtype`` roof: a :class:`Placement` at intensity ``flops / bytes_moved``.

        Raises:
            ValueError: when the timing lacks ``flops`` or a positive ``bytes_moved``, or for an
                unmeasured dtype.
        """
        if timing.flops is None or timing.bytes_moved is None or timing.bytes_moved <= 0:
            raise ValueError(f"timing {timing.label!r} needs flops= and bytes_moved= (> 0) to be "
                             "placed on a roofline; pass them to ak.bench.measure")
        ai = timing.flops / timing.bytes_moved
        key = dtype_key(dtype)
        return Placement(timing.label, key, ai, timing.tflops or 0.0,
                         self.attainable_tflops(ai, key), self.bound(ai, key))

    def bound(self, intensity: float, dtype: Any = "fp32") -> str:
        """Return ``"memory"`` for an intensity left of the ridge point, else ``"compute"``."""
        return "memory" if intensity < self.ridge_point(dtype) else "compute"

    def predicted_s(self, flops: float, bytes_moved: float, dtype: Any = "fp32") -> float:
        """Return the seconds a kernel takes at its roof, ``flops / attainable(flops /
        bytes_moved)`` (the fastest this roofline allows).

        Raises:
            ValueError: for ``flops`` or ``bytes_moved`` <= 0, or an unmeasured dtype.
        """
        if not (flops > 0 and bytes_moved > 0):
            raise ValueError(f"flops and bytes_moved must be > 0, got {flops}, {bytes_moved}")
        return flops / (self.attainable_tflops(flops / bytes_moved, dtype) * 1e12)

    def table(self) -> str:
        """Return the roofs as a Markdown table (peak and ridge point per dtype)."""
        rows = ["| roof | measured | ridge point |", "|---|---|---|"]
        for key, peak in self.peak_tflops.items():
            rows.append(f"| matmul {key} | {peak:.3g} TFLOP/s | {self.ridge_point(key):.3g} FLOP/B |")
        how = "read + write-allocate + write" if self.write_allocate else "read + write"
        rows.append(f"| memory (copy traffic: {how}) | {self.bandwidth_gbps:.3g} GB/s | |")
        return "\n".join(rows)

    def __str__(self) -> str:
        peaks = ", ".join(f"{k} {v:.3g} TFLOP/s" for k, v in self.peak_tflops.items())
        return (f"Roofline of {self.device} ({self.device_name}, profile {self.profile}): "
                f"{peaks}; memory {self.bandwidth_gbps:.3g} GB/s" + (
                    f" (write-allocate counted; STREAM copy {self.copy_gbps:.3g} GB/s)"
                    if self.write_allocate else ""))


# ----------------------------------------------------------------------------- measuring
def last_level_cache_bytes(dev: Any = "cpu") -> int | None:
    """Return the device's last-level cache in bytes, or None if unknown: the highest level in
    ``/sys/devices/system/cpu/cpu0/cache`` (Linux CPU) or ``L2_cache_size`` (CUDA)."""
    import torch

    kind = torch.device(dev).type
    if kind == "cuda":
        return int(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0)) or None
    if kind != "cpu":
        return None
    best: tuple[int, int] | None = None
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:], 1)
        digits = size.rstrip("KMG")
        if digits.isdigit() and (best is None or level > best[0]):
            best = (level, int(digits) * scale)
    return best[1] if best else None


def copy_bytes(dev: Any, prof: Any) -> int:
    """Return the bytes of the copied tensor: ``max(prof.pick(ci=256 MiB, full=1 GiB), LLC)``
    (src + dst exceed the cache twice), capped at 1/8 of the memory available on the host
    (CPU) or free on the device (CUDA); ``prof`` is a size profile (:func:`accelkit.env.profile`)."""
    import torch

    want = max(prof.pick(ci=256 * MIB, full=1024 * MIB), last_level_cache_bytes(dev) or 0)
    kind = torch.device(dev).type
    avail: int | None = None
    if kind == "cuda":
        avail = int(torch.cuda.mem_get_info(dev)[0])
    else:
        try:
            import psutil

            avail = int(psutil.virtual_memory().available)
        except ImportError:  # pragma: no cover
            avail = None
    if avail:
        want = min(want, avail // 8)
    return max(MIB, want // MIB * MIB)


def _dtypes_for(dev: Any) -> list[str]:
    import torch

    kind = torch.device(dev).type
    out = ["fp32", "bf16"]  # bf16 runs everywhere (emulated where there are no bf16 units)
    feats = _device.cpu_features()  # on a CPU, measure fp16 where it has any fp16 instructions
    from accelkit import hardware

    emulated = hardware.emulated() is not None  # an emulated AVX2/AVX-512 CPU has none
    if kind != "cpu" or (not emulated and (feats["avx512_fp16"] or feats["amx_fp16"])):
        out.append("fp16")
    return out


def _matmul(n: int, key: str, dev: Any, run_time: float) -> bench.Timing | None:
    """Time an ``(n, n) @ (n, n)`` matmul in ``key``; :func:`accelkit.bench.fit_size` shrinks
    ``n`` (the label says why) where one call would take over a quarter of ``run_time``."""
    import torch

    dt = getattr(torch, DTYPE_NAMES[key])

    def operands(m: int) -> tuple[Any, Any]:
        return (torch.randn(m, m, device=dev).to(dt), torch.randn(m, m, device=dev).to(dt))

    def make(m: int) -> Any:
        a, b = operands(m)
        return lambda: a @ b

    try:
        size, why = bench.fit_size(make, n, max_call_s=run_time / 4, device=dev)
        a, b = operands(size)
        label = f"matmul {size} {key}" + (f" ({why})" if why else "")
        return bench.measure(lambda: a @ b, label=label, flops=2 * size**3,
                             bytes_moved=3 * size * size * a.element_size(), device=dev,
                             min_run_time=run_time)
    except RuntimeError:  # this device cannot run this dtype's matmul
        return None


def _copy(numel: int, dev: Any, run_time: float, write_allocate: bool = False) -> bench.Timing:
    """Time ``dst.copy_(src)`` of ``numel`` float32; bytes: its memory traffic."""
    import torch

    src = torch.ones(numel, device=dev)  # written, so reads are not served by the zero page
    dst = torch.empty_like(src)
    nbytes = numel * 4
    label = f"copy {nbytes // MIB} MiB" + (" (traffic: + write-allocate)" if write_allocate else "")
    return bench.measure(lambda: dst.copy_(src), label=label,
                         bytes_moved=traffic_bytes(nbytes, nbytes, write_allocate=write_allocate),
                         device=dev, min_run_time=run_time, warmup=1)


def measure(device: Any = None, *, profile: Any, dtypes: Sequence[Any] | None = None,
            min_run_time: float | None = None) -> Roofline:
    """Measure this device's roofline: matmul TFLOP/s per dtype and copy GB/s.

    Matmul: ``(n, n) @ (n, n)``, ``n = profile.pick(ci=1024, full=8192)`` (smaller for a dtype
    too slow here, see :func:`_matmul`), ``2·n³`` FLOP.  Copy: ``dst.copy_(src)`` of
    :func:`copy_bytes`, its bytes the memory traffic.  A few seconds in ``ci`` on a 2-core CPU.

    Args:
        device: a torch device or string; default: :func:`accelkit.device.best_torch_device`.
        profile: the size profile, resolved (``P = ak.env.profile()``).
        dtypes: matmul dtypes; default fp32 and bf16, fp16 on GPUs and CPUs with fp16 units
            (AVX512-FP16/AMX-FP16).  A dtype the device cannot run is left out.
        min_run_time: seconds spent timing each kernel; default ``profile.pick(0.2, 1.0)``.

    Returns:
        A :class:`Roofline`.

    Raises:
        DeviceNotAvailableError: when ``device`` is not on this machine.
        TypeError: for a profile name (resolve it with :func:`accelkit.env.profile`).
        ValueError: for an unknown dtype.
    """
    if isinstance(profile, str):
        raise TypeError(f"profile={profile!r}: pass a resolved profile, ak.env.profile({profile!r})")
    dev = (_device.best_torch_device().device if device is None
           else _device.get_torch_device(device))
    keys = [dtype_key(d) for d in dtypes] if dtypes is not None else _dtypes_for(dev)
    run_time = min_run_time if min_run_time is not None else profile.pick(ci=0.2, full=1.0)
    n = profile.pick(ci=1024, full=8192)
    timings: list[bench.Timing] = []
    peaks: dict[str, float] = {}
    for key in keys:
        t = _matmul(n, key, dev, run_time)
        if t is not None:
            timings.append(t)
            peaks[key] = t.tflops or 0.0
    wa = writes_allocate(dev)
    copy = _copy(copy_bytes(dev, profile) // 4, dev, run_time, write_allocate=wa)
    timings.append(copy)
    return Roofline(peaks, copy.gbps or 0.0, str(dev), _device_name(dev), profile.name,
                    tuple(timings), write_allocate=wa)


def _device_name(dev: Any) -> str:
    import torch

    kind = torch.device(dev).type
    if kind == "cuda":
        return torch.cuda.get_device_name(dev)
    if kind == "cpu":
        threads = torch.get_num_threads()
        return f"{_device.cpu_name()}, {threads} thread{'s' if threads > 1 else ''}"
    return kind


def report(device: Any = None, *, profile: Any) -> str:
    """Measure the roofline (as :func:`measure`) and return it as text
    (``python -m accelkit.env --roofline``)."""
    roof = measure(device, profile=profile)
    lines = [str(roof), "", roof.table(), "", "Measurements:"]
    lines += [f"- {t}" for t in roof.timings]
    lines += ["", "A kernel with arithmetic intensity I (FLOP/byte) can reach at most "
              "min(peak, I x bandwidth) (Williams, Waterman & Patterson, CACM 2009).",
              "Bytes are memory traffic: " + ("each written byte counts twice (x86 stores read "
              "the line first: write-allocate)." if roof.write_allocate else "reads + writes."),
              f"Sizes from the {roof.profile!r} profile (ACCELKIT_PROFILE=ci|full|auto)."]
    return "\n".join(lines)


__all__ = ["DTYPE_NAMES", "Placement", "Roofline", "copy_bytes", "dtype_key", "last_level_cache_bytes",
           "measure", "report", "traffic_bytes", "writes_allocate"]
