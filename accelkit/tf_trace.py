"""What TensorFlow and XLA really ran: the fusions in XLA's optimized HLO, and the kernels and
buffer allocations of one TensorFlow call in a ``tf.profiler`` trace.

* :func:`hlo_fusions` reads XLA's optimized HLO text (``tf.function(jit_compile=True)``'s
  ``experimental_get_compiler_ir(...)(stage="optimized_hlo")``): each fusion, its kind and the
  bytes it reads and writes (:func:`hlo_shape_bytes`), and the ops left outside fusions.
* :func:`trace_tf` lists the kernels one TensorFlow call ran and the buffers it allocated,
  read from a ``tf.profiler.experimental`` trace (the XSpace protobuf it writes).

Notebook 03 uses both to answer "what did the graph fuse?" from evidence.  Elsewhere: the
byte-counting model and the torch.compile helpers are :mod:`accelkit.fusion`; timing is
:mod:`accelkit.bench`.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
        if dtype not in _HLO_ITEMSIZE:
            continue
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


def trace_tf(call: Callable[[], Any], root: str | None = None) -> TfTrace:
    """Run ``call`` once under ``tf.profiler`` and list the kernels and allocations it ran.

    Uses ``tf.profiler.experimental.start/stop`` (the same trace TensorBoard's profiler
    shows) and reads the host plane of the ``.xplane.pb`` file it writes: events named
    ``"node:OpType"`` are op kernels; ``MemoryAllocation`` events are buffers allocated.
    Run ``call`` once before, so tracing and graph building are not in the trace.

    Args:
        call: one call of a ``tf.function`` (its result is waited for with ``tf_bench.force``).
        root: folder for the profiler's log files (a temporary folder inside it, deleted).

    Example: ``trace_tf(lambda: g(x)).op_types  # ['AddV2', 'Relu', 'Mul']``
    """
    import glob
    import shutil

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from accelkit import tf_bench
    from accelkit.tf_device import import_tf

    tf = import_tf()
    logdir = tempfile.mkdtemp(dir=root)
    try:
        tf.profiler.experimental.start(logdir)
        try:
            tf_bench.force(call())
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
    "hlo_fusions",
    "hlo_shape_bytes",
    "HloFusion",
    "TfTrace",
    "trace_tf",
]
