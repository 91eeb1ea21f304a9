"""Spread work over devices: a ``tf.distribute`` strategy or JAX devices for a mesh, and why;
the collectives XLA put in a compiled program (:func:`collectives`).

:func:`choose_strategy`: a TPU → ``TPUStrategy``; 2+ GPUs → ``MirroredStrategy``; else the
default strategy.  :func:`choose_mesh`: a TPU → all chips; 2+ GPUs → all; else the host CPU
split into ``cpu_devices`` emulated devices (``jax_num_cpu_devices``, as
``XLA_FLAGS=--xla_force_host_platform_device_count``), so TPU-pod sharding code runs on CI.
Both probe cheaply first (device files and env for a TPU, NVML for GPUs; ``TPUClusterResolver``
only when a TPU looks attached, its errors caught), then ask JAX for the one platform chosen
(``jax_platforms``).  The probes are parameters so tests fake the hardware.

Elsewhere: PyTorch process groups (:mod:`accelkit.dist`), the all-reduce cost model
(:mod:`accelkit.comm`), starting workers (:mod:`accelkit.launch`), HLO shape sizes
(:mod:`accelkit.tf`).  Sources: https://www.tensorflow.org/guide/tpu,
https://www.tensorflow.org/guide/distributed_training,
https://docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_automatic_parallelization.html,
https://docs.jax.dev/en/latest/config_options.html.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelkit import device
from accelkit.tf import hlo_shape_bytes, import_tf

# Resolvers already connected and initialised, by TPU address: initialising a TPU system
# again wipes its memory, so a second choose_strategy() reuses the first connection.
_TPU_RESOLVERS: dict[str, Any] = {}


@dataclass(frozen=True)
class StrategyChoice:
    """The ``tf.distribute`` ``strategy`` chosen (build the model inside ``strategy.scope()``),
    its ``kind`` (``"tpu"``, ``"mirrored"``, ``"default"``), ``replicas``
    (``num_replicas_in_sync``; 1 for the default) and the ``reason``, one sentence."""

    strategy: Any
    kind: str
    replicas: int
    reason: str

    def __str__(self) -> str:
        return f"{self.kind} strategy, {self.replicas} replica(s): {self.reason}"


def tpu_address() -> str | None:
    """Return ``TPUClusterResolver(tpu=...)``'s argument here, or None when no TPU (no TF): the
    name or ``grpc://`` address in ``$TPU_NAME`` / ``$COLAB_TPU_ADDR``, else ``"local"`` (a TPU VM)."""
    if not device.has_tpu():
        return None
    for var in ("TPU_NAME", "COLAB_TPU_ADDR"):
        value = os.environ.get(var)
        if value:
            return value if var == "TPU_NAME" or value.startswith("grpc://") else f"grpc://{value}"
    return "local"


def connect_tpu(tpu: str = "local", *, tf: Any = None) -> Any:
    """Connect to the TPU ``tpu`` (``"local"``, a name or ``grpc://host:port``) and initialise
    it once per address; return the ``TPUClusterResolver`` for ``tf.distribute.TPUStrategy``.

    Raises:
        ValueError: from the resolver when no TPU name can be found.
        tf.errors.NotFoundError: no TPU at that address ("TPUs not found in the cluster").
    """
    if tpu in _TPU_RESOLVERS:
        return _TPU_RESOLVERS[tpu]
    tf = tf or import_tf()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    _TPU_RESOLVERS[tpu] = resolver
    return resolver


def choose_strategy(
    *,
    allow_tpu: bool = True,
    allow_mirrored: bool = True,
    min_gpus: int = 2,
    tpu_probe: Callable[[], str | None] = tpu_address,
    gpu_probe: Callable[[], list[str]] | None = None,
    tf: Any = None,
) -> StrategyChoice:
    """Pick the ``tf.distribute`` strategy for this machine and say why.

    Order: a TPU, ``min_gpus``+ GPUs, else ``tf.distribute.get_strategy()`` (one device); a TPU
    that is attached but fails to initialise is named in the reason and skipped.

    Args:
        allow_tpu, allow_mirrored: consider a TPU, several GPUs.
        min_gpus: GPUs needed for ``MirroredStrategy`` (>= 1).
        tpu_probe: returns the TPU address or None (default :func:`tpu_address`, no TF).
        gpu_probe: returns the GPU device names (default: TensorFlow's logical GPUs).
        tf: the TensorFlow module (default: :func:`accelkit.tf.import_tf`); tests pass a fake.

    Returns:
        A :class:`StrategyChoice`.

    Raises:
        ValueError: if ``min_gpus < 1``.
        ImportError: when TensorFlow is not installed (install ``accelkit[tf]``).
    """
    if min_gpus < 1:
        raise ValueError(f"min_gpus must be >= 1, got {min_gpus}")
    tf = tf or import_tf()
    notes: list[str] = []  # why each option before the chosen one was passed over
    if allow_tpu:
        choice = _try_tpu(tpu_probe(), tf, notes)
        if choice is not None:
            return choice
    gpus: list[str] = []
    if allow_mirrored:
        gpus = gpu_probe() if gpu_probe else [d.name for d in tf.config.list_logical_devices("GPU")]
        if len(gpus) >= min_gpus:
            strategy = tf.distribute.MirroredStrategy(devices=gpus)
            return StrategyChoice(strategy, "mirrored", int(strategy.num_replicas_in_sync),
                                  f"{len(gpus)} GPUs visible to TensorFlow; MirroredStrategy "
                                  "keeps one replica per GPU and all-reduces the gradients")
        notes.append(f"{len(gpus)} GPU(s), fewer than the {min_gpus} MirroredStrategy needs")
    where = "/GPU:0" if gpus else "/CPU:0"
    reason = "; ".join(notes + [f"the default strategy runs on one device ({where}), "
                                "no replication"])
    return StrategyChoice(tf.distribute.get_strategy(), "default", 1, reason)


def _try_tpu(address: str | None, tf: Any, notes: list[str]) -> StrategyChoice | None:
    """``TPUStrategy`` on the TPU at ``address``, or None (and a note in ``notes`` saying why)."""
    if address is None:
        notes.append("no TPU attached (no /dev/accel*, $TPU_NAME or $COLAB_TPU_ADDR)")
        return None
    try:
        strategy = tf.distribute.TPUStrategy(connect_tpu(address, tf=tf))
    except Exception as exc:  # any TPU failure falls back, with its reason in the note
        notes.append(f"a TPU looks attached ({address!r}) but initialising it failed: "
                     f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return None
    n = int(strategy.num_replicas_in_sync)
    return StrategyChoice(strategy, "tpu", n, f"TPU found (tpu={address!r}); "
                          f"TPUStrategy runs one replica on each of its {n} cores")


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


__all__ = ["COLLECTIVES", "Collective", "MeshChoice", "StrategyChoice", "choose_mesh",
           "choose_strategy", "collectives", "connect_tpu", "tpu_address"]
