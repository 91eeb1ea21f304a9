"""TensorFlow: a quiet import and its devices, timing its callables, what XLA and a trace show it ran.

Owns :func:`import_tf` (C++ start-up logs hidden), :func:`has_tf` (no import), the devices
(:func:`tf_devices`, :func:`best_tf_device`, :func:`set_logical_cpus`), timing (:func:`force`,
:func:`sync`: wait by fetching one element per tensor; :func:`compare`), and what ran
(:func:`hlo_fusions` in XLA's optimized HLO, :func:`trace` of a ``tf.profiler`` run).
TensorFlow is imported only inside functions, as the local name ``tf``.  Elsewhere: PyTorch
probes (:mod:`accelkit.device`), the timing and its statistics (:mod:`accelkit.bench`),
``tf.distribute`` and JAX meshes (:mod:`accelkit.sharding`), Keras activation bytes
(:mod:`accelkit.precision`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from accelkit import bench, device, hardware
from accelkit.device import DeviceChoice, DeviceInfo


# ----------------------------------------------------------------------------- import, devices
class TFAlreadyInitializedError(RuntimeError):
    """TensorFlow's devices were configured after TensorFlow had initialised them."""


# What TensorFlow's C++ side writes to fd 2 while it loads, before TF_CPP_MIN_LOG_LEVEL applies:
# absl's banner and glog "I0000 ..." info lines ("Could not find cuda drivers ...").
_LOAD_NOISE = ("WARNING: All log messages before absl::InitializeLog",)


@contextlib.contextmanager
def _quiet_load_noise() -> Iterator[None]:
    """Capture fd 2 while TensorFlow loads; write back all but glog info lines and the banner."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines = tmp.read().decode(errors="replace").splitlines()
            kept = [ln for ln in lines if ln and not ln.startswith(_LOAD_NOISE)
                    and not (ln[:1] == "I" and ln[1:5].isdigit())]
            if kept:
                print("\n".join(kept), file=sys.stderr)


def import_tf() -> Any:
    """Import TensorFlow quietly and return the module.

    Sets ``TF_CPP_MIN_LOG_LEVEL`` unless set: ``2`` (errors kept) with an NVIDIA driver, ``3``
    without (the only C++ "error" there is the harmless ``failed call to cuInit``); the info
    lines printed while loading are dropped at the file-descriptor level.

    Raises:
        ImportError: when TensorFlow is not installed, saying how to install it.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2" if os.path.exists("/dev/nvidiactl") else "3")
    try:
        with _quiet_load_noise():
            import tensorflow as tf
    except ImportError as exc:
        raise ImportError(
            "TensorFlow is not installed in this environment; install it with "
            "`pip install 'accelkit[tf]'` (or skip the TensorFlow cells)"
        ) from exc
    return tf


def has_tf() -> bool:
    """True when TensorFlow is importable (checked without importing it)."""
    return importlib.util.find_spec("tensorflow") is not None


def tf_devices() -> list[DeviceInfo]:
    """Return one :class:`DeviceInfo` per TPU/GPU TensorFlow sees, then the CPU(s), with their
    class's ``supports_*`` (imports TensorFlow; allocates no GPU memory).

    Raises:
        ImportError: when TensorFlow is not installed (with how to install it).
    """
    tf = import_tf()
    out: list[DeviceInfo] = []

    def add(hw: Any, kind: str, name: str, desc: str, mem: int | None = None,
            cc: tuple[int, int] | None = None) -> None:
        out.append(DeviceInfo("tf", kind, name, desc, mem, cc, supports_fp16=hw.fp16_units,
                              supports_bf16=hw.bf16_units))

    for kind in ("TPU", "GPU"):
        for i, d in enumerate(tf.config.list_physical_devices(kind)):
            details = tf.config.experimental.get_device_details(d) if kind == "GPU" else {}
            cc = details.get("compute_capability")
            name = details.get("device_name", d.name)
            cls = hardware.get("tpu-v5e") if kind == "TPU" else hardware.classify_gpu(name, cc)
            add(cls, "tpu" if kind == "TPU" else "cuda", f"/{kind}:{i}", name, cc=cc)
    cpu = hardware.for_device("cpu")
    for i, _ in enumerate(tf.config.list_physical_devices("CPU")):
        add(cpu, "cpu", f"/CPU:{i}", device.cpu_name(), device.system_memory_bytes())
    return out


def best_tf_device() -> DeviceChoice:
    """Return the :class:`DeviceChoice` (``device`` a string like ``"/GPU:0"``) TensorFlow
    should place work on: TPU, then GPU, then CPU."""
    devs = tf_devices()
    first = devs[0]
    if first.kind == "tpu":
        return DeviceChoice(first.name, "tpu", "TPU found; use TPUStrategy (notebook 05)")
    if first.kind == "cuda":
        n = sum(d.kind == "cuda" for d in devs)
        return DeviceChoice(first.name, "cuda", f"{n} GPU(s) found; using {first.description}")
    return DeviceChoice("/CPU:0", "cpu", "no GPU or TPU visible to TensorFlow; using the CPU")


def set_logical_cpus(n: int) -> list[str]:
    """Split the CPU into ``n`` >= 1 logical TensorFlow devices; return their names
    (``["/device:CPU:0", ...]``).  Must run before TensorFlow initialises its devices (a re-run
    with the same ``n`` afterwards returns the same devices).

    Raises:
        ValueError: if ``n < 1``.
        TFAlreadyInitializedError: when TensorFlow has already initialised its devices
            and the existing split differs from ``n`` (the underlying error is chained).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    tf = import_tf()
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
    except RuntimeError as exc:
        have = tf.config.list_logical_devices("CPU")
        if len(have) != n:
            raise TFAlreadyInitializedError(
                f"TensorFlow already initialised {len(have)} logical CPU(s); "
                f"restart the kernel and call set_logical_cpus({n}) first. ({exc})"
            ) from exc
    return [d.name for d in tf.config.list_logical_devices("CPU")]


# ----------------------------------------------------------------------------- timing
def force(out: Any) -> list[Any]:
    """Wait for TensorFlow results by fetching one element of each tensor in ``out`` (a nest;
    non-tensors left alone) to the host: a sync point whose copy does not grow with the output.

    Returns:
        The NumPy arrays fetched, at most one element per tensor.
    """
    tf = import_tf()
    return [tf.reshape(t, [-1])[:1].numpy() for t in tf.nest.flatten(out)
            if isinstance(t, (tf.Tensor, tf.Variable))]


def sync(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Return ``fn`` wrapped so each call returns only once its result exists (:func:`force`)."""

    def synced() -> Any:
        out = fn()
        force(out)
        return out

    return synced


def compare(baseline: Callable[[], Any], candidate: Callable[[], Any],
            **kwargs: Any) -> bench.Comparison:
    """Return :func:`accelkit.bench.compare` (same keywords) of TensorFlow callables, each
    result forced (:func:`sync`): a :class:`accelkit.bench.Comparison`."""
    return bench.compare(sync(baseline), sync(candidate), **kwargs)


# ----------------------------------------------------------------------------- XLA's HLO
_HLO_ITEMSIZE = {"pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "s16": 2, "u16": 2,
                 "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8,
                 "f64": 8, "c64": 8, "c128": 16}
_HLO_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")
_HLO_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([\w\-]+)\((.*?)\)(.*)$")
_HLO_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(")  # a computation's first line
_HLO_NO_WORK = ("parameter", "constant", "tuple", "get-tuple-element", "bitcast")
_HLO_MAX_DEPTH = 8  # calls inside calls followed at most this deep


def hlo_shape_bytes(shape: str) -> int:
    """Return the bytes of an HLO shape (``"f32[32768,1024]{1,0}"``, a tuple of them,
    ``"f32[]"``); unknown element types (``token[]``, ``s4``) count 0."""
    total = 0
    for dtype, dims in _HLO_ARRAY.findall(shape):
        if dtype in _HLO_ITEMSIZE:
            total += math.prod(int(d) for d in dims.split(",") if d) * _HLO_ITEMSIZE[dtype]
    return total


@dataclass(frozen=True)
class HloFusion:
    """One fusion the entry computation of XLA's optimized HLO launches: its instruction
    ``name``, ``kind`` (``kLoop`` elementwise, ``kInput`` a reduction, ``kOutput``, ``kCustom``),
    and the bytes it reads (``operand_bytes``) and writes (``result_bytes``)."""

    name: str
    kind: str
    operand_bytes: int
    result_bytes: int

    @property
    def bytes(self) -> int:
        """Bytes read plus bytes written."""
        return self.operand_bytes + self.result_bytes


@dataclass(frozen=True)
class _Instr:
    name: str
    shape: str
    opcode: str
    operands: tuple[str, ...]
    rest: str


def _hlo_computations(hlo_text: str) -> tuple[dict[str, list[_Instr]], str | None]:
    """Split an HLO module's text into its computations' instructions; return them and the
    name of the ``ENTRY`` computation (``None`` without one)."""
    comps: dict[str, list[_Instr]] = {}
    entry, current = None, None
    for line in hlo_text.splitlines():
        header = _HLO_HEADER.match(line) if line[:1] not in (" ", "\t") else None
        if header and line.rstrip().endswith("{"):  # "%name (params) -> shape {", at column 0
            current = header.group(2)
            comps[current] = []
            if header.group(1):
                entry = current
            continue
        if line.strip() == "}":
            current = None
            continue
        m = _HLO_INSTR.match(line) if current is not None else None
        if m is None or current is None:
            continue
        name, shape, opcode, operands, rest = m.groups()
        names = (tuple(re.findall(r"%([\w.\-]+)", operands)) if "%" in operands else
                 tuple(o.strip().split()[-1] for o in operands.split(",") if o.strip()))
        comps[current].append(_Instr(name, shape, opcode, names, rest))
    return comps, entry


def hlo_fusions(hlo_text: str) -> tuple[list[HloFusion], list[str]]:
    """Read the fusions (and other work) the entry computation of optimized HLO text runs.

    The text: ``tf.function(f, jit_compile=True).experimental_get_compiler_ir(*args)(stage=
    "optimized_hlo")`` or ``jax.jit(f).lower(*args).compile().as_text()``.  A fusion may be an
    ``ENTRY`` instruction (TensorFlow 2.21) or sit in a computation the entry ``call``\\ s
    (2.20 wraps a loop it splits across threads in ``%parallel_..._fusion``); calls are
    followed up to 8 deep and not counted as work.

    Returns:
        ``(fusions, others)``: one :class:`HloFusion` per fusion run, in order, bytes read from
        the shapes; and the opcodes of the other instructions doing work (parameters,
        constants, tuples, get-tuple-element, bitcasts left out).  Empty ``fusions``: nothing
        fused, or an unknown layout (``while``/``conditional`` are not followed).

    Raises:
        ValueError: no ``ENTRY`` computation, a ``call`` to a computation not in the text, or a
            fusion operand without a shape in its computation (a layout this parser misreads).
    """
    comps, entry = _hlo_computations(hlo_text)
    if entry is None:
        raise ValueError("no ENTRY computation in this HLO text (expected the text of "
                         "experimental_get_compiler_ir(...)(stage='optimized_hlo'))")
    fusions: list[HloFusion] = []
    others: list[str] = []

    def walk(name: str, depth: int) -> None:
        shapes = {i.name: i.shape for i in comps[name]}
        for ins in comps[name]:
            if ins.opcode == "call" and depth < _HLO_MAX_DEPTH:
                target = re.search(r"to_apply=%?([\w.\-]+)", ins.rest)
                if target is None or target.group(1) not in comps:
                    raise ValueError(f"HLO call {ins.name!r} in {name!r} names no computation "
                                     f"of this text: {ins.rest[:120]!r}")
                walk(target.group(1), depth + 1)
            elif ins.opcode == "fusion":
                missing = [o for o in ins.operands if o not in shapes]
                if missing:
                    raise ValueError(f"HLO fusion {ins.name!r} in {name!r}: operands {missing} "
                                     "have no shape in that computation")
                kind = re.search(r"kind=(\w+)", ins.rest)
                fusions.append(HloFusion(ins.name, kind.group(1) if kind else "",
                                         sum(hlo_shape_bytes(shapes[o]) for o in ins.operands),
                                         hlo_shape_bytes(ins.shape)))
            elif ins.opcode not in _HLO_NO_WORK:
                others.append(ins.opcode)

    walk(entry, 0)
    return fusions, others


# ----------------------------------------------------------------------------- TF traces
@dataclass(frozen=True)
class TfTrace:
    """What one TensorFlow call ran, read from a ``tf.profiler`` trace.

    Attributes:
        kernels: ``(name, seconds)`` per op kernel in the order they ran (``"mul_1:Mul"``).
        allocations: ``MemoryAllocation`` events during the call; ``None`` when the trace holds
            none ("not reported", not zero): oneDNN's allocator (AVX-512 Xeon here) reported
            the large buffers, the plain CPU allocator (AVX2 EPYC here) none.
    """

    kernels: tuple[tuple[str, float], ...]
    allocations: int | None

    @property
    def op_types(self) -> list[str]:
        """The op type of each kernel (``"AddV2"``, ``"Mul"``, ...)."""
        return [name.rsplit(":", 1)[-1] for name, _ in self.kernels]

    @property
    def seconds(self) -> float:
        """The kernels' total time."""
        return sum(s for _, s in self.kernels)


def trace(call: Callable[[], Any], root: str | None = None) -> TfTrace:
    """Run ``call`` (a warmed-up ``tf.function`` call, forced) once under ``tf.profiler`` and
    return its :class:`TfTrace`, read from the host plane of the ``.xplane.pb`` written to a
    temporary folder (deleted) under ``root``: ``"node:OpType"`` events are op kernels."""
    import glob
    import shutil

    tf = import_tf()
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    logdir = tempfile.mkdtemp(dir=root)
    try:
        tf.profiler.experimental.start(logdir)
        try:
            force(call())
        finally:
            tf.profiler.experimental.stop()
        path = sorted(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True))[-1]
        with open(path, "rb") as f:
            space = xplane_pb2.XSpace.FromString(f.read())
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    events = []
    allocations = 0
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            for e in line.events:
                name = names.get(e.metadata_id, "")
                if name == "MemoryAllocation":
                    allocations += 1
                elif re.fullmatch(r"[\w/.\-]+:[A-Z]\w*", name):
                    events.append((line.timestamp_ns * 1000 + e.offset_ps, name,
                                   e.duration_ps / 1e12))
    return TfTrace(tuple((n, s) for _, n, s in sorted(events)), allocations or None)


__all__ = ["HloFusion", "TFAlreadyInitializedError", "TfTrace", "best_tf_device", "compare",
           "force", "has_tf", "hlo_fusions", "hlo_shape_bytes", "import_tf", "set_logical_cpus",
           "sync", "tf_devices", "trace"]
