"""JAX devices for a mesh, and why (:func:`choose_mesh`); the collectives XLA put in a compiled
program (:func:`collectives`).

:func:`choose_mesh`: a TPU → all chips; 2+ GPUs → all; else the host CPU split into
``cpu_devices`` emulated devices (``jax_num_cpu_devices``, as
``XLA_FLAGS=--xla_force_host_platform_device_count``), so TPU-pod sharding code runs on CI.
It probes cheaply first (device files and env for a TPU, NVML for GPUs), then asks JAX for the
one platform chosen (``jax_platforms``).  The probes are parameters so tests fake the hardware.
Notebook 05 shows the same steps as plain JAX; its Keras-on-JAX worker calls this.

Elsewhere: PyTorch process groups (:mod:`accelkit.dist`), the all-reduce cost model
(:mod:`accelkit.comm`), starting workers (:mod:`accelkit.launch`), HLO shape sizes
(:mod:`accelkit.tf`).  Sources:
https://docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_automatic_parallelization.html,
https://docs.jax.dev/en/latest/config_options.html.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelkit import device
from accelkit.tf import hlo_shape_bytes


@dataclass(frozen=True)
class MeshChoice:
    """The JAX ``devices`` chosen for a mesh (JAX's order) on ``platform`` (``"tpu"``, ``"gpu"``,
    ``"cpu"``), ``emulated`` when one CPU split by ``jax_num_cpu_devices``, and the ``reason``.
    Use ``jax.make_mesh(shape, names, devices=choice.devices, axis_types=...)``."""

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


def _import_jax() -> Any:
    import jax

    return jax


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

    Call it before any other JAX operation: only then can the host be split into
    ``cpu_devices`` (>= 1) devices (else the reason says how many JAX has).  ``min_gpus``
    (>= 1) GPUs are needed to use them; ``tpu_probe`` (device files) and ``gpu_probe`` (NVML)
    do not start JAX; ``jax`` defaults to ``import jax`` (tests pass fakes).

    Returns a :class:`MeshChoice`; raises ValueError for ``cpu_devices`` or ``min_gpus`` < 1.
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
    # the CPU split into n devices: takes effect only before JAX's first operation
    try:
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", cpu_devices)
        took = True
    except RuntimeError:  # "should be updated before backends are initialized"
        took = False
    found = tuple(jax.devices("cpu"))
    if took and len(found) == cpu_devices:
        why = (f"the host CPU split into {cpu_devices} emulated devices "
               f"(jax_num_cpu_devices={cpu_devices})")
    else:
        why = (f"JAX had already started with {len(found)} CPU device(s), so {cpu_devices} "
               "could not be emulated; call choose_mesh before any other JAX operation "
               "(restart the kernel)")
    return MeshChoice("cpu", found, len(found) > 1, "; ".join(notes + [why]))


def _try_platform(jax: Any, platform: str, notes: list[str]) -> tuple[Any, ...]:
    """All devices of ``platform`` (JAX started for it alone), or () with the reason in notes."""
    try:
        jax.config.update("jax_platforms", f"{platform},cpu")
        return tuple(jax.devices(platform))
    except RuntimeError as exc:  # no such backend in this JAX build, or already started
        notes.append(f"{platform.upper()} seen but JAX cannot use it: {str(exc).splitlines()[0][:160]}")
        return ()


COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


@dataclass(frozen=True)
class Collective:
    """One communication op of a compiled XLA program: ``op`` (one of :data:`COLLECTIVES`),
    ``bytes`` of its result per device (all outputs of a combined op), ``group_size`` (devices
    per replica group, e.g. 4 = one mesh axis of 4; None when the text gives none)."""

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
    """List the collectives of ``jax.jit(f).lower(*args).compile().as_text()`` in program
    order: one :class:`Collective` per op (async ``-start``/``-done`` pairs count once)."""
    found = []
    for line in hlo_text.splitlines():
        m = _OP.search(line)
        if m:
            found.append(Collective(m.group(2), hlo_shape_bytes(m.group(1)), _group_size(line)))
    return found


__all__ = ["COLLECTIVES", "Collective", "MeshChoice", "choose_mesh", "collectives"]
