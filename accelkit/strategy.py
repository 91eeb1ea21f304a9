"""Choose a ``tf.distribute`` strategy for this machine, and say which and why.

TPU attached → ``TPUStrategy``; two or more GPUs → ``MirroredStrategy``; otherwise TensorFlow's
default strategy (one device, no replication).  The TPU probe is cheap: the device files and
environment variables are checked first (:func:`accelkit.device.has_tpu`, no TensorFlow), and
``TPUClusterResolver`` is only called when they say a TPU is there, with its errors caught, so
"no TPU here" is answered in milliseconds and a broken TPU setup falls back with the reason.

The probes are parameters (``tpu_probe``, ``gpu_probe``, ``tf``) so tests can fake a TPU or a
multi-GPU machine without the hardware.

This module owns the TensorFlow side only.  Elsewhere: the TPU device-file probe in
:mod:`accelkit.device`; PyTorch process groups and the code inside torchrun workers in
:mod:`accelkit.dist`; the all-reduce cost model in :mod:`accelkit.comm_model`; starting
multi-worker TensorFlow processes (``TF_CONFIG``) in :mod:`accelkit.launch`.

Sources: https://www.tensorflow.org/guide/tpu (TPU initialisation: ``TPUClusterResolver``,
``experimental_connect_to_cluster``, ``initialize_tpu_system``, ``TPUStrategy``) and
https://www.tensorflow.org/guide/distributed_training (``MirroredStrategy``, default strategy).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelkit import device
from accelkit import tf as tf_device

KINDS = ("tpu", "mirrored", "default")

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


def gpu_names(tf: Any = None) -> list[str]:
    """Return the logical GPU devices TensorFlow sees (``["/device:GPU:0", ...]``).

    Args:
        tf: the TensorFlow module (default: :func:`accelkit.tf_device.import_tf`).
    """
    tf = tf or tf_device.import_tf()
    return [d.name for d in tf.config.list_logical_devices("GPU")]


def connect_tpu(tpu: str = "local", *, tf: Any = None) -> Any:
    """Connect to a TPU and initialise it, the TensorFlow way; return the cluster resolver.

    Runs ``TPUClusterResolver(tpu=tpu)``, ``tf.config.experimental_connect_to_cluster`` and
    ``tf.tpu.experimental.initialize_tpu_system`` once per address (later calls return the
    same resolver: initialising again would wipe the TPU's memory).

    Args:
        tpu: ``"local"`` on a TPU VM, else a TPU name or ``grpc://host:port`` address.
        tf: the TensorFlow module (default: :func:`accelkit.tf_device.import_tf`).

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
    tf = tf or tf_device.import_tf()
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
        gpu_probe: returns the GPU device names (default :func:`gpu_names`).
        tf: the TensorFlow module (default: :func:`accelkit.tf_device.import_tf`); tests pass a
            fake.

    Returns:
        A :class:`StrategyChoice`; ``.replicas`` is 1 for the default strategy.

    Raises:
        ValueError: if ``min_gpus < 1``.
        ImportError: when TensorFlow is not installed (install ``accelkit[tf]``).

    Example: ``choice = choose_strategy(); print(choice); with choice.strategy.scope(): ...``
    """
    if min_gpus < 1:
        raise ValueError(f"min_gpus must be >= 1, got {min_gpus}")
    tf = tf or tf_device.import_tf()
    notes: list[str] = []  # why each option before the chosen one was passed over
    if allow_tpu:
        choice = _try_tpu(tpu_probe(), tf, notes)
        if choice is not None:
            return choice
    gpus: list[str] = []
    if allow_mirrored:
        gpus = (gpu_probe or (lambda: gpu_names(tf)))()
        choice = _try_mirrored(gpus, min_gpus, tf, notes)
        if choice is not None:
            return choice
    return _default_choice(tf, bool(gpus), notes)


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


def _try_mirrored(gpus: list[str], min_gpus: int, tf: Any,
                  notes: list[str]) -> StrategyChoice | None:
    """``MirroredStrategy`` over ``gpus`` when there are ``min_gpus`` of them, else None."""
    if len(gpus) < min_gpus:
        notes.append(f"{len(gpus)} GPU(s), fewer than the {min_gpus} MirroredStrategy needs")
        return None
    strategy = tf.distribute.MirroredStrategy(devices=gpus)
    return StrategyChoice(strategy, "mirrored", int(strategy.num_replicas_in_sync),
                          f"{len(gpus)} GPUs visible to TensorFlow; MirroredStrategy keeps "
                          "one replica per GPU and all-reduces the gradients")


def _default_choice(tf: Any, has_gpu: bool, notes: list[str]) -> StrategyChoice:
    """TensorFlow's default strategy (one device), the ``notes`` leading its reason."""
    where = "/GPU:0" if has_gpu else "/CPU:0"
    reason = "; ".join(notes + [f"the default strategy runs on one device ({where}), "
                                "no replication"])
    return StrategyChoice(tf.distribute.get_strategy(), "default", 1, reason)


def _replicas(strategy: Any) -> int:
    n = getattr(strategy, "replicas", None)
    if n is None:
        n = getattr(strategy, "num_replicas_in_sync", None)
    if not isinstance(n, int) or n < 1:
        raise TypeError(f"expected a StrategyChoice or tf.distribute.Strategy, got {strategy!r}")
    return n


def global_batch(per_replica: int, strategy: Any) -> int:
    """Return the global batch size: ``per_replica`` × the number of replicas.

    With a strategy, ``Model.fit`` and ``strategy.experimental_distribute_dataset`` split each
    *global* batch over the replicas, so batch the dataset by this number.

    Args:
        per_replica: samples each replica (TPU core / GPU) processes per step, >= 1.
        strategy: a :class:`StrategyChoice` or a ``tf.distribute.Strategy``.

    Raises:
        ValueError: if ``per_replica < 1``.
        TypeError: if ``strategy`` has no replica count.

    Example: ``global_batch(128, choice)`` is 1024 on an 8-core TPU, 128 on a CPU.
    """
    if per_replica < 1:
        raise ValueError(f"per_replica must be >= 1, got {per_replica}")
    return per_replica * _replicas(strategy)


def per_replica_batch(global_size: int, strategy: Any) -> int:
    """Return the batch each replica sees when batches of ``global_size`` are split.

    Raises:
        ValueError: when ``global_size`` is not a positive multiple of the replica count
            (the replicas would get unequal shares; round it with :func:`global_batch`).
        TypeError: if ``strategy`` has no replica count.
    """
    n = _replicas(strategy)
    if global_size < 1 or global_size % n:
        raise ValueError(f"global batch {global_size} does not split evenly over {n} replicas; "
                         f"use a multiple of {n}, e.g. global_batch({max(1, global_size // n)}, "
                         "strategy)")
    return global_size // n


__all__ = [
    "KINDS",
    "StrategyChoice",
    "choose_strategy",
    "connect_tpu",
    "global_batch",
    "gpu_names",
    "per_replica_batch",
    "tpu_address",
]
