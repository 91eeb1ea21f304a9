"""TensorFlow: a quiet import and its devices, timing its callables, and what XLA and a trace show it ran.

Owns, for TensorFlow only:

* import and devices: :func:`import_tf` (C++ start-up logs hidden), :func:`has_tf` (no
  import), :func:`tf_devices`, :func:`best_tf_device`, and :func:`set_logical_cpus`, which
  must run before TensorFlow initialises its devices (else :class:`TFAlreadyInitializedError`);
* timing: :func:`force` and :func:`sync` (wait for a result by fetching one element of each
  tensor) and :func:`compare` (:func:`accelkit.bench.compare` with each result forced);
* what ran: :func:`hlo_fusions` (the fusions in XLA's optimized HLO, with their bytes,
  :func:`hlo_shape_bytes`) and :func:`trace` (the kernels and allocations of one call, from a
  ``tf.profiler`` trace).

TensorFlow is imported only inside the functions (never by :func:`has_tf`), so importing
this module is cheap; inside it, the TensorFlow module is always the local name ``tf``.

Elsewhere: the PyTorch and CPU probes and :class:`accelkit.device.DeviceInfo` in
:mod:`accelkit.device`; what each device can do in :mod:`accelkit.hardware`; the timing
itself and its statistics in :mod:`accelkit.bench`; ``tf.distribute`` strategies and JAX
meshes in :mod:`accelkit.sharding`; Keras activation bytes in :mod:`accelkit.precision`.

Example::

    tf = ak.tf.import_tf()
    cmp = ak.tf.compare(lambda: graph(x), lambda: xla(x))
    fusions, others = ak.tf.hlo_fusions(xla.experimental_get_compiler_ir(x)(stage="optimized_hlo"))
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


# What TensorFlow's C++ side writes to the stderr file descriptor while it loads, before its
# logging exists (so TF_CPP_MIN_LOG_LEVEL cannot silence it): absl's "WARNING: All log
# messages before absl::InitializeLog()" banner and glog-style "I0000 00:00:..." info lines
# such as "Could not find cuda drivers on your machine, GPU will not be used" — harmless on a
# machine without a GPU, yet they read like an error to a beginner.
_LOAD_NOISE = ("WARNING: All log messages before absl::InitializeLog",)


@contextlib.contextmanager
def _quiet_load_noise() -> Iterator[None]:
    """Capture file descriptor 2 while TensorFlow loads; pass on all but its load noise.

    Info-level glog lines (``I`` + 4 digits) and the absl banner are dropped; warnings,
    errors and anything else written meanwhile are written back to stderr unchanged.
    """
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

    Sets ``TF_CPP_MIN_LOG_LEVEL`` (unless already set) so C++ logs do not flood the notebook:
    ``2`` (info and warnings hidden, errors kept) on machines with an NVIDIA driver, ``3`` on
    machines without one, where the only C++ "error" is the harmless ``failed call to cuInit``.
    The ``I0000`` info lines TensorFlow's C++ side prints while loading, before its logging
    starts (``Could not find cuda drivers ...``, ``oneDNN custom operations are on``), are
    captured at the file-descriptor level and dropped; warnings and errors still show.

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
    """List the devices TensorFlow sees, accelerators first and the CPU last.

    Imports TensorFlow (seconds).  Uses ``tf.config.list_physical_devices``, which does not
    allocate GPU memory.

    Returns:
        One :class:`DeviceInfo` per TPU/GPU, then the CPU(s).

    Raises:
        ImportError: when TensorFlow is not installed (with how to install it).
    """
    tf = import_tf()
    out: list[DeviceInfo] = []
    for kind in ("TPU", "GPU"):
        for i, d in enumerate(tf.config.list_physical_devices(kind)):
            details = tf.config.experimental.get_device_details(d) if kind == "GPU" else {}
            cc = details.get("compute_capability")
            name = details.get("device_name", d.name)
            cls = hardware.get("tpu-v5e") if kind == "TPU" else hardware.classify_gpu(name, cc)
            out.append(DeviceInfo.from_class(cls, "tf", kind.lower() if kind == "TPU" else "cuda",
                                             f"/{kind}:{i}", name, compute_capability=cc))
    cpu = hardware.for_device("cpu")
    for i, _ in enumerate(tf.config.list_physical_devices("CPU")):
        out.append(DeviceInfo.from_class(cpu, "tf", "cpu", f"/CPU:{i}", device.cpu_name(),
                                         device.system_memory_bytes()))
    return out


def best_tf_device() -> DeviceChoice:
    """Choose the device TensorFlow should place work on: TPU, then GPU, then CPU.

    Returns:
        A :class:`DeviceChoice` whose ``device`` is a string such as ``"/GPU:0"``.
    """
    devs = tf_devices()
    first = devs[0]
    if first.kind == "tpu":
        return DeviceChoice(first.name, "tpu", "TPU found; use TPUStrategy (notebook 05)")
    if first.kind == "cuda":
        n = sum(d.kind == "cuda" for d in devs)
        return DeviceChoice(first.name, "cuda", f"{n} GPU(s) found; using {first.description}")
    return DeviceChoice("/CPU:0", "cpu", "no GPU or TPU visible to TensorFlow; using the CPU")


def set_logical_cpus(n: int) -> list[str]:
    """Split the physical CPU into ``n`` logical TensorFlow devices (for MirroredStrategy demos).

    Must run before TensorFlow initialises its devices; calling it again with the same ``n``
    afterwards (a re-run notebook cell) returns the same devices.

    Args:
        n: number of logical CPUs, >= 1.

    Returns:
        The logical device names, ``["/device:CPU:0", ...]``.

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
    """Wait for TensorFlow results by fetching one element of each tensor to the host.

    TensorFlow's GPU/TPU ops run asynchronously, like CUDA's.  A value can reach the host
    only after the op that makes it has finished, so fetching *one element* of each output
    is a synchronisation point that copies a few bytes whatever the tensor's size — unlike
    ``.numpy()`` of the whole output, which would time a device-to-host copy too (1 GiB in
    the ``full`` profile).

    Args:
        out: what the timed callable returned: a tensor, a nest of tensors, or anything else
            (non-tensors are left alone).

    Returns:
        The NumPy arrays fetched, one of at most one element per tensor (for tests).
    """
    tf = import_tf()
    return [tf.reshape(t, [-1])[:1].numpy() for t in tf.nest.flatten(out)
            if isinstance(t, (tf.Tensor, tf.Variable))]


def sync(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Wrap a TensorFlow callable so each call returns only once its result exists.

    See :func:`force`: one element of each output is fetched, so the bytes copied to the
    host do not grow with the output.  Returns the wrapped callable (same result as ``fn``).
    Example: ``first_s = ak.bench.time_once(sync(lambda: xla_fn(x)))``
    """

    def synced() -> Any:
        out = fn()
        force(out)
        return out

    return synced


def compare(baseline: Callable[[], Any], candidate: Callable[[], Any],
            **kwargs: Any) -> bench.Comparison:
    """Like :func:`accelkit.bench.compare` for TensorFlow callables (results forced, :func:`sync`).

    Keyword arguments are those of :func:`accelkit.bench.compare`; returns its
    :class:`accelkit.bench.Comparison` (``.speedup`` > 1: ``candidate`` is faster).
    """
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
    """Return the bytes of an HLO shape: ``"f32[32768,1024]{1,0}"``, a tuple of them, ``"f32[]"``.

    Element types this module does not know (``token[]``, ``s4``) count 0 bytes.

    Example: ``hlo_shape_bytes("(f32[4,2]{1,0}, bf16[8]{0})")  # 48``
    """
    total = 0
    for dtype, dims in _HLO_ARRAY.findall(shape):
        if dtype in _HLO_ITEMSIZE:
            total += math.prod(int(d) for d in dims.split(",") if d) * _HLO_ITEMSIZE[dtype]
    return total


@dataclass(frozen=True)
class HloFusion:
    """One fusion of XLA's optimized HLO, as launched from the entry computation.

    Attributes:
        name: the instruction name (``broadcast_multiply_fusion``).
        kind: ``kLoop`` (elementwise), ``kInput`` (a reduction), ``kOutput``, ``kCustom``.
        operand_bytes: bytes of the operands it reads.
        result_bytes: bytes of the result it writes.
    """

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
    """Read the fusions (and the other work) an optimized HLO module's entry computation runs.

    Get the text with ``tf.function(f, jit_compile=True).experimental_get_compiler_ir(*args)
    (stage="optimized_hlo")`` (or ``jax.jit(f).lower(*args).compile().as_text()``).

    Two layouts of the entry are read (both printed by TensorFlow's XLA on a CPU):

    * the fusion is an instruction of the ``ENTRY`` computation (TensorFlow 2.21,
      ``ROOT %broadcast_multiply_fusion = f32[...] fusion(%arg0.1, %arg1.1), kind=kLoop``);
    * the entry ``call``\\ s a computation that holds the fusion (TensorFlow 2.20's XLA wraps a
      loop it splits across threads in ``%parallel_broadcast_multiply_fusion``:
      ``ROOT %call = f32[...] call(%arg0.1, %arg1.2), to_apply=%parallel_...``).  The
      instructions of a called computation are read as if they were the entry's (calls inside
      calls too, up to 8 deep); the ``call`` itself is not counted as work.

    Args:
        hlo_text: the HLO module as text.

    Returns:
        ``(fusions, others)``: one :class:`HloFusion` per ``fusion`` instruction the entry
        runs (directly or through ``call``), in order, with the bytes of its operands and
        result read from their shapes; and the opcodes of the other instructions that do
        work (parameters, constants, tuples, get-tuple-element and bitcasts left out).  An
        empty ``fusions`` means XLA fused nothing, or the text has a layout this function
        does not know: check ``others`` (a ``while`` or ``conditional`` is not followed).

    Raises:
        ValueError: when the text has no ``ENTRY`` computation (not optimized HLO text), when
            a ``call`` names a computation the text does not hold, or when a fusion's operand
            has no shape in its computation (a layout this parser misreads): fix the text
            or report the TensorFlow version.

    Example: ``fusions, others = hlo_fusions(text); sum(f.bytes for f in fusions)``
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
        kernels: ``(name, seconds)`` per op kernel in the order they ran; a name reads
            ``"node:OpType"`` (``"mul_1:Mul"``).
        allocations: buffers the allocator reported (``MemoryAllocation`` events) during the
            call; ``None`` when the trace holds none at all, so "not reported", not "zero".
            Which buffers are reported depends on TensorFlow's CPU allocator: with oneDNN's
            optimisations on (the AVX-512 Xeon here) its allocator reported the chain's large
            buffers (small ones go to a sub-allocator that records no event); with them off
            (an AVX2-only AMD EPYC here) the plain CPU allocator recorded no event at all
            (it does only with its statistics enabled).
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
    """Run ``call`` once under ``tf.profiler`` and list the kernels and allocations it ran.

    Uses ``tf.profiler.experimental.start/stop`` (the same trace TensorBoard's profiler
    shows) and reads the host plane of the ``.xplane.pb`` file it writes: events named
    ``"node:OpType"`` are op kernels; ``MemoryAllocation`` events are buffers allocated.
    Run ``call`` once before, so tracing and graph building are not in the trace.

    Args:
        call: one call of a ``tf.function`` (its result is waited for with :func:`force`).
        root: folder for the profiler's log files (a temporary folder inside it, deleted).

    Returns:
        A :class:`TfTrace`.

    Example: ``trace(lambda: g(x)).op_types  # ['AddV2', 'Relu', 'Mul']``
    """
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


__all__ = [
    "HloFusion",
    "TFAlreadyInitializedError",
    "TfTrace",
    "best_tf_device",
    "compare",
    "force",
    "has_tf",
    "hlo_fusions",
    "hlo_shape_bytes",
    "import_tf",
    "set_logical_cpus",
    "sync",
    "tf_devices",
    "trace",
]
