"""Operator fusion: the bytes an AdamW step moves, and what ``torch.compile`` really did.

A chain of elementwise ops is memory-bound: eager runs one kernel per op, each reading and
writing memory; a fused kernel reads the inputs and writes the output once, so the predicted
speedup is eager bytes / fused bytes (roofline: Williams et al., CACM 2009).

* :func:`adamw_step_bytes`: the bytes of one AdamW step, for-loop/foreach/fused.
* :class:`GraphRecorder`: a ``torch.compile`` backend that records each Dynamo graph (graph
  breaks, recompilations).
* :func:`timed_compile`: first-call time, Inductor's cache state and the code it generated.
* :func:`reuse_freed_memory` (glibc): freed memory kept for reuse, to measure page faults.

Elsewhere: what TensorFlow and XLA ran is :mod:`accelkit.tf`; timing is :mod:`accelkit.bench`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

# ----------------------------------------------------------------------------- bytes
# One AdamW step, per parameter element (torch.optim.adam, decoupled weight decay,
# amsgrad off).  Unfused (for-loop and foreach run the same kernels, foreach batches them
# over tensors):
#   param.mul_(1 - lr*wd)             r p          w p       2
#   exp_avg.lerp_(grad, 1 - beta1)    r m, g       w m       3
#   exp_avg_sq.mul_(beta2)            r v          w v       2
#   exp_avg_sq.addcmul_(grad, grad)   r v, g       w v       3
#   exp_avg_sq.sqrt()                 r v          w t       2
#   / bias_correction2_sqrt           r t          w t'      2
#   .add_(eps)                        r t'         w t'      2
#   param.addcdiv_(exp_avg, denom)    r p, m, t'   w p       4   -> 20 accesses
# Fused: read p, g, m, v; write p, m, v                        -> 7 accesses
ADAMW_ACCESSES = {"for-loop": 20, "foreach": 20, "fused": 7}


def adamw_step_bytes(numel: int, itemsize: int = 4, impl: str = "fused") -> int:
    """Return the bytes one AdamW step moves for ``numel`` parameter elements.

    ``ADAMW_ACCESSES[impl] * numel * itemsize``: 20 tensor accesses per element unfused
    (``"for-loop"``, ``"foreach"``), 7 fused (read param, grad, exp_avg, exp_avg_sq; write
    three back).  ``itemsize``: bytes per element (4 for float32).

    Raises:
        ValueError: for an unknown ``impl``, ``numel < 0`` or ``itemsize < 1``.
    """
    if impl not in ADAMW_ACCESSES:
        raise ValueError(f"impl must be one of {', '.join(ADAMW_ACCESSES)}, got {impl!r}")
    if numel < 0 or itemsize < 1:
        raise ValueError(f"need numel >= 0 and itemsize >= 1, got {numel}, {itemsize}")
    return ADAMW_ACCESSES[impl] * numel * itemsize


# ----------------------------------------------------------------------------- compile
@dataclass(frozen=True)
class CapturedGraph:
    """One FX graph that Dynamo handed to a backend: its ``ops`` (call nodes), the shape of
    each tensor input (symbolic sizes such as ``"s0"`` under dynamic shapes), its Python code."""

    ops: int
    input_shapes: tuple[tuple[Any, ...], ...]
    code: str = field(repr=False, default="")

    @property
    def dynamic(self) -> bool:
        """True when an input size is symbolic (the graph serves many shapes)."""
        return any(not isinstance(s, int) for shape in self.input_shapes for s in shape)


class GraphRecorder:
    """A ``torch.compile`` backend that records each graph (:class:`CapturedGraph`) and runs it
    eagerly: counts graphs and recompilations in milliseconds, with no C++ compiler."""

    def __init__(self) -> None:
        self.graphs: list[CapturedGraph] = []

    def __call__(self, gm: Any, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        """Record ``gm`` and return its ``forward`` (the backend protocol)."""
        ops = sum(n.op in ("call_function", "call_method", "call_module") for n in gm.graph.nodes)
        shapes = []
        for node in gm.graph.nodes:  # the traced (fake) inputs carry symbolic sizes
            value = node.meta.get("example_value") if node.op == "placeholder" else None
            shape = getattr(value, "shape", None)
            if shape is not None:
                shapes.append(tuple(int(s) if type(s) is int else str(s) for s in shape))
        self.graphs.append(CapturedGraph(ops, tuple(shapes), gm.code))
        return gm.forward

    @property
    def count(self) -> int:
        """How many graphs were compiled so far."""
        return len(self.graphs)

    def clear(self) -> None:
        """Forget the recorded graphs (not ``reset``: ``torch._dynamo.reset()`` calls that on
        cached backends, which would wipe a finished experiment's record)."""
        self.graphs.clear()


# ----------------------------------------------------------------------------- fresh memory
# glibc's mallopt(3) parameters and their defaults (malloc/malloc.c): blocks >= 128 KiB
# (adjusted up to 32 MiB) are mmap(2)ed and unmapped on free; a freed heap top > 128 KiB is trimmed.
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_GLIBC_DEFAULTS = {_M_TRIM_THRESHOLD: 128 * 1024, _M_MMAP_MAX: 65536}


@contextlib.contextmanager
def reuse_freed_memory() -> Iterator[bool]:
    """Let freed memory be reused instead of handed back to the OS (Linux with glibc only).

    By default glibc gives each large block (a 128 MiB tensor) its own ``mmap`` and unmaps it
    when freed, so every new one faults in zeroed 4 KiB pages.  Inside, ``mallopt(M_MMAP_MAX,
    0)`` and ``mallopt(M_TRIM_THRESHOLD, 1 GiB)`` keep large blocks on the heap, so a same-size
    allocation reuses mapped pages; on exit glibc's defaults return and ``malloc_trim(0)``
    hands the freed memory back.  Changes how memory is obtained, never what is computed: for
    measuring what fresh allocations cost, not for production code.

    Yields:
        ``True`` when applied; ``False`` (nothing changed) without glibc (macOS, Windows,
        musl) or where ``mallopt`` refused.
    """
    import ctypes
    import platform
    import sys

    libc = None
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        try:
            libc = ctypes.CDLL("libc.so.6")
        except OSError:  # pragma: no cover - a glibc without the usual soname
            libc = None
    applied = libc is not None and all(
        libc.mallopt(param, value) == 1
        for param, value in ((_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, 2**30)))
    try:
        yield applied
    finally:
        if libc is not None:
            for param, value in _GLIBC_DEFAULTS.items():
                libc.mallopt(param, value)
            libc.malloc_trim(0)  # hand the memory freed meanwhile back to the OS


# ----------------------------------------------------------------------------- compile caches
@dataclass(frozen=True)
class CompileRecord:
    """One timed first call of a compiled function, with what Inductor's caches did.

    Attributes:
        seconds: wall time of the call (trace + compile or cache load + run).
        fx_graph, aot_autograd: ``"hit"``, ``"miss"`` or ``"bypass"`` from Inductor's FX-graph
            cache and the AOTAutograd cache (``""``: nothing compiled, e.g. another backend).
        code: the source Inductor generated or loaded for the call.
    """

    seconds: float
    fx_graph: str
    aot_autograd: str
    code: tuple[str, ...] = ()

    @property
    def warm(self) -> bool:
        """True when the compiled graph came from the on-disk FX-graph cache."""
        return self.fx_graph == "hit"

    @property
    def vectorized(self) -> bool | None:
        """Whether Inductor's C++ (CPU) kernels use ``at::vec::Vectorized`` (SIMD), from
        :attr:`code`; ``None`` where there is no C++ kernel (no code, or Triton on a GPU)."""
        cpp = [c for c in self.code if "cpp_fused" in c or "extern \"C\"" in c]
        if not cpp:
            return None
        return any("at::vec::Vectorized" in c for c in cpp)

    def __str__(self) -> str:
        state = {"hit": "warm (FX-graph cache hit)", "miss": "cold (FX-graph cache miss)",
                 "bypass": "uncached (FX-graph cache bypassed)"}.get(self.fx_graph, "no Inductor graph")
        aot = f", AOTAutograd cache {self.aot_autograd}" if self.aot_autograd else ""
        return f"{self.seconds:.2f} s, {state}{aot}"


def _cache_state(delta: dict[str, int], prefix: str) -> str:
    for state in ("miss", "bypass", "hit"):  # a miss anywhere makes the call cold
        if delta.get(f"{prefix}_{state}", 0) > 0:
            return state
    return ""


def timed_compile(call: Callable[[], Any], *, device: Any = None) -> CompileRecord:
    """Time the first call of a ``torch.compile``d function (``call``, e.g. ``lambda: f(x)``).

    Returns a :class:`CompileRecord`: the cache states from ``torch._dynamo.utils.counters``
    before and after (``fxgraph_cache_*``, ``autograd_cache_*``; a hit: compiled before, only
    loaded now) and the code Inductor saved (as ``run_and_get_code`` reads it, without its
    ``torch._dynamo.reset()``; ``()`` where this torch has no hook).  ``device`` is
    synchronised (:func:`accelkit.bench.time_once`).
    """
    from torch._dynamo.utils import counters

    from accelkit import bench

    def snapshot() -> dict[str, int]:
        return {k: v for group in ("inductor", "aot_autograd") for k, v in counters[group].items()}

    before = snapshot()
    with _output_code() as code:
        seconds = bench.time_once(call, device=device)
    after = snapshot()
    delta = {k: v - before.get(k, 0) for k, v in after.items()}
    return CompileRecord(seconds, _cache_state(delta, "fxgraph_cache"),
                         _cache_state(delta, "autograd_cache"), tuple(code))


@contextlib.contextmanager
def _output_code() -> Iterator[list[str]]:
    """Collect the source code Inductor saves for each graph compiled or loaded meanwhile
    (``GraphLowering.save_output_code``, the hook ``run_and_get_code`` uses); empty where
    this torch has no such hook."""
    code: list[str] = []
    try:
        from torch._inductor.graph import GraphLowering
    except ImportError:  # pragma: no cover - torch without Inductor
        yield code
        return
    if not hasattr(GraphLowering, "save_output_code"):  # pragma: no cover - other torch
        yield code
        return
    old = GraphLowering.save_output_code
    GraphLowering.save_output_code = code.append  # a class attribute, called unbound
    try:
        yield code
    finally:
        GraphLowering.save_output_code = old


__all__ = ["ADAMW_ACCESSES", "CapturedGraph", "CompileRecord", "GraphRecorder", "adamw_step_bytes",
           "reuse_freed_memory", "timed_compile"]
