"""Choose JAX's devices for an SPMD mesh, and say which and why; read the collectives XLA put on it.

The JAX twin of :mod:`accelkit.strategy` (which picks a ``tf.distribute`` strategy).
:func:`choose_mesh` picks the devices: a TPU → all its chips; two or more GPUs → all of them;
otherwise the host CPU split into ``cpu_devices`` *emulated* devices (JAX's
``jax_num_cpu_devices`` option, the same as ``XLA_FLAGS=--xla_force_host_platform_device_count``),
so the sharding code of a TPU pod runs for real, slowly, on a laptop or CI.  The probes are
cheap and happen before JAX starts a backend: device files for a TPU
(:func:`accelkit.device.has_tpu`) and NVML for GPUs (:func:`accelkit.device.nvml_gpus`); JAX is
then asked for that one platform only (``jax_platforms``), so a CPU run never loads a TPU or
CUDA runtime by accident, and a TPU held by another process is not grabbed just by probing.
:func:`collectives` lists the communication ops of a compiled program
(``jax.jit(f).lower(*args).compile().as_text()``) with their bytes and group sizes.

The probes are parameters (``tpu_probe``, ``gpu_probe``, ``jax``) so tests fake a TPU or a
multi-GPU machine without the hardware.

Elsewhere: ``tf.distribute`` strategies in :mod:`accelkit.strategy`; reading fusions from HLO
text and HLO shape sizes (:func:`accelkit.tf_trace.hlo_shape_bytes`) in
:mod:`accelkit.tf_trace`; starting worker processes (the Keras-on-JAX worker) in
:mod:`accelkit.launch`.

Sources: https://docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_automatic_parallelization.html
(``Mesh``, ``NamedSharding``, ``PartitionSpec``, emulated CPU devices) and
https://docs.jax.dev/en/latest/config_options.html (``jax_num_cpu_devices``, ``jax_platforms``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from accelkit import device
from accelkit import tf as tf_trace

PLATFORMS = ("tpu", "gpu", "cpu")
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


@dataclass(frozen=True)
class MeshChoice:
    """The JAX devices chosen for a mesh, and why.

    Attributes:
        platform: ``"tpu"``, ``"gpu"`` or ``"cpu"``.
        devices: the ``jax.Device`` objects, in JAX's order.
        emulated: True when the devices are one CPU split by ``jax_num_cpu_devices``.
        reason: one sentence saying why these devices.
    """

    platform: str
    devices: tuple[Any, ...]
    emulated: bool
    reason: str

    @property
    def n(self) -> int:
        """Number of devices."""
        return len(self.devices)

    def __str__(self) -> str:
        kind = "emulated CPU" if self.emulated else self.platform.upper()
        return f"{self.n} {kind} device(s): {self.reason}"

    def mesh(self, shape: Sequence[int] | None = None,
             axis_names: Sequence[str] = ("data",), *, jax: Any = None) -> Any:
        """Build a ``jax.sharding.Mesh`` over these devices with ``Auto`` axes.

        ``Auto`` axes let the compiler propagate shardings and insert the collectives (JAX
        0.8.1+ ``jax.make_mesh`` defaults to ``Explicit`` axes, which raise on ambiguous ops;
        0.7.x, as on Colab, defaulted to ``Auto``).

        Args:
            shape: devices per axis, product = :attr:`n` (default ``(n,)``).
            axis_names: one name per axis, e.g. ``("data", "model")``.
            jax: the JAX module (default: ``import jax``); tests pass a fake.

        Raises:
            ValueError: when the shape does not multiply to :attr:`n` or the names do not match.
        """
        shape = tuple(shape) if shape is not None else (self.n,)
        if math.prod(shape) != self.n or len(shape) != len(axis_names):
            raise ValueError(f"mesh shape {shape} with axes {tuple(axis_names)} does not fit "
                             f"{self.n} devices; use mesh_shape({self.n}, ...)")
        jax = jax or _import_jax()
        auto = (jax.sharding.AxisType.Auto,) * len(shape)
        return jax.make_mesh(shape, tuple(axis_names), axis_types=auto, devices=self.devices)


def _import_jax() -> Any:
    import jax

    return jax


def mesh_shape(n: int, model: int = 1) -> tuple[int, int]:
    """Return ``(data, model)``: ``n`` devices as ``n // model`` data rows of ``model`` devices.

    Raises:
        ValueError: when ``model`` is < 1 or does not divide ``n``.

    Example: ``mesh_shape(8, model=2)  # (4, 2)``
    """
    if model < 1 or n % model:
        raise ValueError(f"model axis {model} must be >= 1 and divide the {n} devices")
    return n // model, model


def emulate_cpu_devices(n: int, *, jax: Any = None) -> bool:
    """Ask JAX to split the host CPU into ``n`` devices; True if it took effect.

    Sets ``jax_num_cpu_devices`` (and ``jax_platforms="cpu"``, so no TPU/GPU runtime is
    loaded).  This works only before JAX's first operation in this process; after it JAX
    keeps the devices it started with and this returns False (restart the kernel, or run the
    code in a fresh process).

    Raises:
        ValueError: for ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    jax = jax or _import_jax()
    try:
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError:  # "should be updated before backends are initialized"
        return False
    return True


def _gpu_count() -> int:
    return len(device.nvml_gpus() or [])


def choose_mesh(
    *,
    cpu_devices: int = 8,
    min_gpus: int = 2,
    tpu_probe: Callable[[], bool] = device.has_tpu,
    gpu_probe: Callable[[], int] = _gpu_count,
    jax: Any = None,
) -> MeshChoice:
    """Pick JAX devices for a mesh: TPU → all chips; ``min_gpus``+ GPUs → all; else emulated CPUs.

    Call it before any other JAX operation in the process: the CPU branch can split the host
    into ``cpu_devices`` devices only then (otherwise the reason says how many JAX already
    has).  The TPU and GPU probes do not start JAX; JAX is then asked for one platform only.

    Args:
        cpu_devices: emulated CPU devices when there is no TPU or multi-GPU (>= 1).
        min_gpus: GPUs needed to use them (>= 1).
        tpu_probe: True when a TPU is attached (default: device files, no JAX).
        gpu_probe: the number of GPUs (default: NVML, no CUDA context).
        jax: the JAX module (default: ``import jax``); tests pass a fake.

    Returns:
        A :class:`MeshChoice`; build the mesh with ``choice.mesh((4, 2), ("data", "model"))``.

    Raises:
        ValueError: for ``cpu_devices < 1`` or ``min_gpus < 1``.

    Example: ``choice = choose_mesh(cpu_devices=8); print(choice); mesh = choice.mesh()``
    """
    if cpu_devices < 1 or min_gpus < 1:
        raise ValueError(f"cpu_devices and min_gpus must be >= 1, got {cpu_devices}, {min_gpus}")
    jax = jax or _import_jax()
    notes: list[str] = []
    if tpu_probe():
        found = _try_platform(jax, "tpu", notes)
        if found:
            return MeshChoice("tpu", found, False, f"TPU attached; the mesh spans all its "
                              f"{len(found)} chip(s)")
    else:
        notes.append("no TPU attached")
    gpus = gpu_probe()
    if gpus >= min_gpus:
        found = _try_platform(jax, "gpu", notes)
        if found:
            why = f"{len(found)} GPUs; the mesh spans all of them"
            return MeshChoice("gpu", found, False, "; ".join(notes + [why]))
    else:
        notes.append(f"{gpus} GPU(s), fewer than {min_gpus}")
    return _cpu_choice(jax, cpu_devices, notes)


def _try_platform(jax: Any, platform: str, notes: list[str]) -> tuple[Any, ...]:
    """All devices of ``platform`` (JAX started for it alone), or () with the reason in notes."""
    try:
        jax.config.update("jax_platforms", platform if platform == "cpu" else f"{platform},cpu")
        return tuple(jax.devices(platform))
    except RuntimeError as exc:  # no such backend in this JAX build, or already started
        notes.append(f"{platform.upper()} seen but JAX cannot use it: {str(exc).splitlines()[0][:160]}")
        return ()


def _cpu_choice(jax: Any, n: int, notes: list[str]) -> MeshChoice:
    took = emulate_cpu_devices(n, jax=jax)
    found = tuple(jax.devices("cpu"))
    if took and len(found) == n:
        why = f"the host CPU split into {n} emulated devices (jax_num_cpu_devices={n})"
    else:
        why = (f"JAX had already started with {len(found)} CPU device(s), so {n} could not be "
               "emulated; call choose_mesh before any other JAX operation (restart the kernel)")
    return MeshChoice("cpu", found, len(found) > 1, "; ".join(notes + [why]))


@dataclass(frozen=True)
class Collective:
    """One communication op of a compiled XLA program.

    Attributes:
        op: ``"all-reduce"``, ``"all-gather"``, ``"reduce-scatter"``, ``"all-to-all"`` or
            ``"collective-permute"``.
        bytes: bytes of its result (all outputs of a combined op), per device.
        group_size: devices that take part in each group (e.g. 4 = one mesh axis of 4), or
            None when the text gives no groups.
    """

    op: str
    bytes: int
    group_size: int | None


_OP = re.compile(r"=\s*(.+?)\s+(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")


def _group_size(line: str) -> int | None:
    """Devices per replica group, from any of XLA's three printed forms."""
    explicit = re.search(r"replica_groups=\{\{([0-9,]*)\}", line)
    if explicit:
        return len([d for d in explicit.group(1).split(",") if d])
    iota = re.search(r"replica_groups=\[(\d+),(\d+)\]<=", line)
    if iota:
        return int(iota.group(2))
    mesh = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", line)
    if mesh:
        sizes = dict(re.findall(r"'(\w+)'=(\d+)", mesh.group(1)))
        return math.prod(int(sizes[a]) for a in re.findall(r"'(\w+)'", mesh.group(2)))
    return None


def collectives(hlo_text: str) -> list[Collective]:
    """List the collectives of a compiled XLA program's text, in program order.

    Args:
        hlo_text: ``jax.jit(f).lower(*args).compile().as_text()`` (optimized HLO).

    Returns:
        One :class:`Collective` per op (async ``-start``/``-done`` pairs count once).

    Example: ``{c.op for c in collectives(text)}  # {"all-reduce"}`` for data parallelism.
    """
    found = []
    for line in hlo_text.splitlines():
        m = _OP.search(line)
        if m:
            found.append(Collective(m.group(2), tf_trace.hlo_shape_bytes(m.group(1)),
                                    _group_size(line)))
    return found


__all__ = [
    "COLLECTIVES",
    "PLATFORMS",
    "Collective",
    "MeshChoice",
    "choose_mesh",
    "collectives",
    "emulate_cpu_devices",
    "mesh_shape",
]
