"""Spread work over devices: pick a ``tf.distribute`` strategy or JAX's devices for a mesh, say
which and why; read the collectives XLA put in a compiled program.

* :func:`choose_strategy` (TensorFlow): a TPU → ``TPUStrategy``; two or more GPUs →
  ``MirroredStrategy``; otherwise the default strategy (one device, no replication).
* :func:`choose_mesh` (JAX): a TPU → all its chips; two or more GPUs → all of them; otherwise
  the host CPU split into ``cpu_devices`` *emulated* devices (JAX's ``jax_num_cpu_devices``,
  the same as ``XLA_FLAGS=--xla_force_host_platform_device_count``), so the sharding code of a
  TPU pod runs for real, slowly, on a laptop or CI.
* :func:`collectives` lists the communication ops of a compiled program
  (``jax.jit(f).lower(*args).compile().as_text()``) with their bytes and group sizes.

Both choosers probe cheaply before any framework starts a device: device files and
environment variables for a TPU (:func:`accelkit.device.has_tpu`), NVML for GPUs
(:func:`accelkit.device.nvml_gpus`).  ``TPUClusterResolver`` is called only when a TPU looks
attached, with its errors caught, so "no TPU here" takes milliseconds and a broken TPU setup
falls back with the reason; JAX is asked for the one platform chosen (``jax_platforms``), so a
CPU run never loads a TPU or CUDA runtime, nor grabs a TPU held by another process.  The
probes are parameters (``tpu_probe``, ``gpu_probe``, ``tf``, ``jax``) so tests fake a TPU or
a multi-GPU machine without the hardware.

Elsewhere: PyTorch process groups and the code inside torchrun workers in :mod:`accelkit.dist`;
the all-reduce cost model in :mod:`accelkit.comm`; starting worker processes (``TF_CONFIG``,
the Keras-on-JAX worker) in :mod:`accelkit.launch`; HLO shape sizes in :mod:`accelkit.tf`.

Sources: https://www.tensorflow.org/guide/tpu (``TPUClusterResolver``,
``experimental_connect_to_cluster``, ``initialize_tpu_system``, ``TPUStrategy``),
https://www.tensorflow.org/guide/distributed_training (``MirroredStrategy``, the default
strategy), https://docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_automatic_parallelization.html
(``Mesh``, ``NamedSharding``, emulated CPU devices) and
https://docs.jax.dev/en/latest/config_options.html (``jax_num_cpu_devices``, ``jax_platforms``).
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

# ----------------------------------------------------------------------------- tf.distribute
# Resolvers already connected and initialised, by TPU address: initialising a TPU system
# again wipes its memory, so a second choose_strategy() reuses the first connection.
_TPU_RESOLVERS: dict[str, Any] = {}


@dataclass(frozen=True)
class StrategyChoice:
    """The ``tf.distribute`` strategy chosen for this machine, and why.

    Attributes:
        strategy: the ``tf.distribute.Strategy``; build the model and optimizer inside
            ``strategy.scope()``.
        kind: ``"tpu"``, ``"mirrored"`` or ``"default"``.
        replicas: ``strategy.num_replicas_in_sync`` (TPU cores or GPUs; 1 for the default).
        reason: one sentence saying why this strategy was chosen.
    """

    strategy: Any
    kind: str
    replicas: int
    reason: str

    def __str__(self) -> str:
        return f"{self.kind} strategy, {self.replicas} replica(s): {self.reason}"


def tpu_address() -> str | None:
    """Return what to pass as ``TPUClusterResolver(tpu=...)`` here, or None when no TPU.

    Cheap (no TensorFlow): ``"local"`` on a TPU VM (``/dev/accel*``, e.g. Colab's TPU
    runtimes), else the TPU name or gRPC address from ``$TPU_NAME`` / ``$COLAB_TPU_ADDR``
    (older remote TPU nodes, reached over the network).
    """
    if not device.has_tpu():
        return None
    for var in ("TPU_NAME", "COLAB_TPU_ADDR"):
        value = os.environ.get(var)
        if value:
            return value if var == "TPU_NAME" or value.startswith("grpc://") else f"grpc://{value}"
    return "local"


def connect_tpu(tpu: str = "local", *, tf: Any = None) -> Any:
    """Connect to a TPU and initialise it, the TensorFlow way; return the cluster resolver.

    Runs ``TPUClusterResolver(tpu=tpu)``, ``tf.config.experimental_connect_to_cluster`` and
    ``tf.tpu.experimental.initialize_tpu_system`` once per address (later calls return the
    same resolver: initialising again would wipe the TPU's memory).

    Args:
        tpu: ``"local"`` on a TPU VM, else a TPU name or ``grpc://host:port`` address.
        tf: the TensorFlow module (default: :func:`accelkit.tf.import_tf`).

    Returns:
        The ``TPUClusterResolver``, to pass to ``tf.distribute.TPUStrategy``.

    Raises:
        ValueError: from the resolver when no TPU name can be found (not on a TPU VM and no
            ``tpu=`` given); pass ``tpu="local"`` on a TPU VM.
        tf.errors.NotFoundError: when there is no TPU at that address ("TPUs not found in
            the cluster"); check the runtime type, or that ``tensorflow-tpu`` is installed.
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

    Order: a TPU (``TPUStrategy``), then ``min_gpus`` or more GPUs (``MirroredStrategy``),
    otherwise the default strategy (``tf.distribute.get_strategy()``: one device, no
    replication).  A TPU that is attached but cannot be initialised is reported in the
    reason and the next option is used, so the call never fails on a CPU laptop.

    Args:
        allow_tpu: consider a TPU.
        allow_mirrored: consider several GPUs.
        min_gpus: GPUs needed for ``MirroredStrategy`` (>= 1; one GPU gains nothing from
            mirroring, so the default is 2).
        tpu_probe: returns the TPU address or None (default :func:`tpu_address`, no TF).
        gpu_probe: returns the GPU device names (default: TensorFlow's logical GPUs).
        tf: the TensorFlow module (default: :func:`accelkit.tf.import_tf`); tests pass a fake.

    Returns:
        A :class:`StrategyChoice`; ``.replicas`` is 1 for the default strategy.

    Raises:
        ValueError: if ``min_gpus < 1``.
        ImportError: when TensorFlow is not installed (install ``accelkit[tf]``).

    Example: ``choice = choose_strategy(); print(choice); with choice.strategy.scope(): ...``
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


# ----------------------------------------------------------------------------- JAX meshes
@dataclass(frozen=True)
class MeshChoice:
    """The JAX devices chosen for a mesh, and why.

    Build the mesh with ``jax.make_mesh(shape, names, devices=choice.devices,
    axis_types=(jax.sharding.AxisType.Auto,) * len(shape))``, ``prod(shape) == choice.n``.

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
        A :class:`MeshChoice`.

    Raises:
        ValueError: for ``cpu_devices < 1`` or ``min_gpus < 1``.

    Example: ``choice = choose_mesh(cpu_devices=8); print(choice)``
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


# ----------------------------------------------------------------------------- collectives
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


@dataclass(frozen=True)
class Collective:
    """One communication op of a compiled XLA program.

    Attributes:
        op: one of :data:`COLLECTIVES`.
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
            found.append(Collective(m.group(2), hlo_shape_bytes(m.group(1)), _group_size(line)))
    return found


__all__ = [
    "COLLECTIVES",
    "Collective",
    "MeshChoice",
    "StrategyChoice",
    "choose_mesh",
    "choose_strategy",
    "collectives",
    "connect_tpu",
    "tpu_address",
]
