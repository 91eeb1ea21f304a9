"""Operator fusion: the bytes an AdamW step moves, and what ``torch.compile`` really did.

An elementwise op does a few FLOPs per element and moves every element through memory, so a
chain of them is memory-bound: eager mode runs one kernel per op, each reading its inputs from
memory and writing its result back; a fused kernel reads the inputs once and writes the output
once.  On a bandwidth-bound machine the time is ``bytes / bandwidth``, so the predicted speedup
is eager bytes / fused bytes (Williams et al., CACM 2009).

* :func:`adamw_step_bytes`: the bytes of one AdamW step, for-loop/foreach/fused.
* :class:`GraphRecorder` is a ``torch.compile`` backend that records each graph Dynamo
  produces (to count graph breaks and recompilations without paying for code generation);
  :func:`without_cxx_compiler` shows what inductor does on a CPU with no C++ compiler.
* :func:`timed_compile` times a first call and reads Inductor's cache counters (an FX-graph
  cache hit is a *warm* compile) and the code it generated or loaded (vectorized or not);
  :func:`cold_and_warm` times both in a fresh cache folder.
* :func:`reuse_freed_memory` (glibc) keeps freed memory for reuse instead of returning it to
  the OS: inside it a fresh output costs no page faults, which measures what they cost.

Elsewhere: the evidence of what TensorFlow and XLA really ran (optimized-HLO fusions, kernel
traces) is :mod:`accelkit.tf`; timing is :mod:`accelkit.bench`.

Example: ``ak.fusion.adamw_step_bytes(n_params, 4, "fused") / roof.bandwidth_gbps / 1e9``
(seconds at the memory roof)
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

    Counts the memory traffic of the kernels ``torch.optim.AdamW`` runs (see
    ``ADAMW_ACCESSES``): 20 tensor accesses per element unfused (``"for-loop"``,
    ``"foreach"``), 7 fused (read param, grad, exp_avg, exp_avg_sq; write three back).

    Args:
        numel: total parameter elements, >= 0.
        itemsize: bytes per element (4 for float32 parameters and states).
        impl: ``"for-loop"``, ``"foreach"`` or ``"fused"``.

    Raises:
        ValueError: for an unknown ``impl`` or negative sizes.

    Example: ``adamw_step_bytes(10**6, 4, "fused")  # 28 MB``
    """
    if impl not in ADAMW_ACCESSES:
        raise ValueError(f"impl must be one of {', '.join(ADAMW_ACCESSES)}, got {impl!r}")
    if numel < 0 or itemsize < 1:
        raise ValueError(f"need numel >= 0 and itemsize >= 1, got {numel}, {itemsize}")
    return ADAMW_ACCESSES[impl] * numel * itemsize


# ----------------------------------------------------------------------------- compile
@dataclass(frozen=True)
class CapturedGraph:
    """One FX graph that Dynamo handed to a backend.

    Attributes:
        ops: the number of ``call_function``/``call_method``/``call_module`` nodes.
        input_shapes: the shape of each tensor input (symbolic sizes such as ``s0`` when
            the graph was compiled for dynamic shapes).
        code: the graph's Python code, for printing.
    """

    ops: int
    input_shapes: tuple[tuple[Any, ...], ...]
    code: str = field(repr=False, default="")

    @property
    def dynamic(self) -> bool:
        """True when an input size is symbolic (the graph serves many shapes)."""
        return any(not isinstance(s, int) for shape in self.input_shapes for s in shape)


class GraphRecorder:
    """A ``torch.compile`` backend that records each graph and then runs it eagerly.

    Use it to *count* graphs (graph breaks) and recompilations cheaply: nothing is code-
    generated, so it needs no C++ compiler and takes milliseconds.

    Example::

        rec = GraphRecorder()
        f = torch.compile(fn, backend=rec)
        f(torch.randn(8)); f(torch.randn(16))
        rec.count   # 2: one graph per shape, or 1 with dynamic=True
    """

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
        """Forget the recorded graphs.

        (Not named ``reset``: ``torch._dynamo.reset()`` calls ``reset()`` on the backends it
        has cached, which would wipe the record of a finished experiment.)
        """
        self.graphs.clear()


@contextlib.contextmanager
def without_cxx_compiler(name: str = "no-such-c++") -> Iterator[None]:
    """Make inductor look for a C++ compiler that does not exist, inside a ``with`` block.

    Shows what ``torch.compile`` does on a CPU machine without ``g++``/``clang++`` (a slim
    container, Windows without MSVC): compiling a new function raises
    ``InvalidCxxCompiler``.  The setting (``torch._inductor.config.cpp.cxx``) is restored on
    exit.

    Args:
        name: the compiler name to pretend is configured.

    Example::

        with without_cxx_compiler():
            torch.compile(fn)(x)     # raises ... InvalidCxxCompiler
    """
    import torch._inductor.config as inductor_config

    old = inductor_config.cpp.cxx
    inductor_config.cpp.cxx = (None, name)
    try:
        yield
    finally:
        inductor_config.cpp.cxx = old


# ----------------------------------------------------------------------------- fresh memory
# glibc's mallopt(3) parameters and their defaults (malloc/malloc.c): large blocks (>= 128 KiB,
# adjusted up to 32 MiB) are mmap(2)ed and returned to the kernel on free; freed heap top
# above 128 KiB is trimmed.
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_GLIBC_DEFAULTS = {_M_TRIM_THRESHOLD: 128 * 1024, _M_MMAP_MAX: 65536}


@contextlib.contextmanager
def reuse_freed_memory() -> Iterator[bool]:
    """Let freed memory be reused instead of handed back to the OS (Linux with glibc only).

    By default glibc's ``malloc`` (under PyTorch's and TensorFlow's CPU allocators) gives
    a block as large as one of notebook 03's 128 MiB tensors its own ``mmap`` and returns it
    to the kernel when it is freed, so the next such block is fresh memory again: the first
    write to each of its 4 KiB pages faults and the kernel zeroes the page (~57 ms per
    128 MiB measured in notebook 03, several times a copy of the same bytes).  Inside this
    block ``mallopt(M_MMAP_MAX, 0)`` and ``mallopt(M_TRIM_THRESHOLD, 1 GiB)`` make large
    blocks come from the heap and stay there when freed, so an allocation of the same size
    reuses pages already mapped; on exit both go back to glibc's defaults (128 KiB trim
    threshold, 65536 mmaps: glibc's ``malloc/malloc.c``) and ``malloc_trim(0)`` hands the
    memory freed meanwhile back to the OS (a block of that size may still be carved from the
    heap's free space later, its pages faulted in afresh).  It changes how memory is obtained, never what is
    computed: use it to measure what fresh allocations cost (compare a timing inside with
    one outside), not in production code.

    Yields:
        ``True`` when the settings were applied; ``False`` (and nothing changed) where
        there is no glibc (macOS, Windows, musl) or ``mallopt`` refused.

    Example: ``with ak.fusion.reuse_freed_memory() as on: t = ak.bench.measure(fn)``
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
        fx_graph: ``"hit"``, ``"miss"`` or ``"bypass"`` from Inductor's FX-graph cache
            (``""`` when Inductor compiled nothing, e.g. another backend).
        aot_autograd: ``"hit"``, ``"miss"`` or ``"bypass"`` from the AOTAutograd cache, or ``""``.
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
        """Whether Inductor's C++ (CPU) kernels use SIMD vectors, read from :attr:`code`.

        ``True`` when the code uses ATen's vector type (``at::vec::Vectorized``), ``False``
        when it holds C++ kernels without it (one element per instruction: a kernel built for
        no vector ISA, or served from a cache that a process without one wrote), ``None``
        when there is no C++ kernel to read (no code captured, or Triton kernels on a GPU).
        """
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
    """Time one (first) call of a ``torch.compile``d function and read the cache counters.

    Reads ``torch._dynamo.utils.counters`` before and after: ``fxgraph_cache_hit/miss/bypass``
    (Inductor's on-disk FX-graph cache, ``torch._inductor.config.fx_graph_cache``) and
    ``autograd_cache_hit/miss/bypass`` (AOTAutograd's, ``torch._functorch.config.
    enable_autograd_cache``).  A hit means this graph was compiled before, in this or an
    earlier process, and only loaded now.  The source code Inductor generated or loaded for
    the call is kept too (:attr:`CompileRecord.code`, read as ``torch._inductor.utils.
    run_and_get_code`` does, without its ``torch._dynamo.reset()``), so a caller can check
    what kernel it got (:attr:`CompileRecord.vectorized`); where this torch has no such hook
    the code is ``()``.

    Args:
        call: calls the compiled function once, its first call (e.g. ``lambda: f(x)``); a
            later call compiles nothing, so it records no cache state and no code.
        device: the device to synchronise (see :func:`accelkit.bench.time_once`).

    Example: ``timed_compile(lambda: torch.compile(fn)(x)).warm``
    """
    from torch._dynamo.utils import counters

    from accelkit import bench

    def snapshot() -> dict[str, int]:
        return {f"{k}": v for group in ("inductor", "aot_autograd")
                for k, v in counters[group].items()}

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


def cold_and_warm(fn: Callable[..., Any], *args: Any, device: Any = None,
                  root: str | None = None) -> tuple[CompileRecord, CompileRecord]:
    """Compile ``fn`` twice in a fresh Inductor cache folder: cold, then warm.

    Inside ``torch._inductor.utils.fresh_cache`` (a new ``TORCHINDUCTOR_CACHE_DIR``, deleted
    afterwards; the previous value, e.g. the per-class folder ``accelkit.hardware.apply_emulation`` sets, is
    restored): ``torch._dynamo.reset()`` and a first call, which compiles from scratch (a
    cache miss); then ``torch._dynamo.reset()`` and Inductor's in-memory caches cleared, as
    in a new process, and a second call, which loads the graph from the on-disk cache.

    Note: ``torch._dynamo.reset()`` makes every compiled function in the process trace
    again on its next call (from the cache, when it is warm).

    Args:
        fn: a function of tensors (not yet compiled).
        *args: its arguments (a small size: the point is the compile time).
        device: the device to synchronise.
        root: folder to make the temporary cache folder in (default: the system's).

    Returns:
        ``(cold, warm)`` :class:`CompileRecord` s.
    """
    import torch
    from torch._inductor.utils import clear_caches, fresh_cache

    with fresh_cache(dir=root):
        torch._dynamo.reset()
        cold = timed_compile(lambda: torch.compile(fn)(*args), device=device)
        torch._dynamo.reset()
        clear_caches()  # Inductor's in-memory caches: what a new process starts without
        warm = timed_compile(lambda: torch.compile(fn)(*args), device=device)
    return cold, warm


__all__ = [
    "ADAMW_ACCESSES",
    "CapturedGraph",
    "CompileRecord",
    "GraphRecorder",
    "adamw_step_bytes",
    "cold_and_warm",
    "reuse_freed_memory",
    "timed_compile",
    "without_cxx_compiler",
]
