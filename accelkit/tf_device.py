"""TensorFlow's devices: a quiet import, what TensorFlow sees, and configuring it before use.

This module owns everything that imports TensorFlow to ask about or configure devices:
:func:`import_tf` (quiet C++ logs) and :func:`has_tf`; :func:`tf_devices` and
:func:`best_tf_device`; :func:`tf_enable_memory_growth` and :func:`tf_set_logical_cpus`, which
must run before TensorFlow initialises its devices and raise
:class:`TFAlreadyInitializedError` when they come too late.  TensorFlow is imported only
inside the functions (and never by :func:`has_tf`).

Elsewhere: the PyTorch and CPU probes, :class:`accelkit.device.DeviceInfo` and
:class:`accelkit.device.DeviceChoice` in :mod:`accelkit.device`; what each device can do in
:mod:`accelkit.hardware`; distribution strategies in :mod:`accelkit.strategy`; Keras mixed
precision in :mod:`accelkit.keras_mp`.

Example::

    if ak.tf_device.has_tf():
        tf = ak.tf_device.import_tf()
        ak.tf_device.tf_enable_memory_growth()  # before the first tensor
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from accelkit import device, hardware
from accelkit.device import DeviceChoice, DeviceInfo


class TFAlreadyInitializedError(RuntimeError):
    """TensorFlow's devices were configured after TensorFlow had initialised them."""


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


def tf_enable_memory_growth() -> list[str]:
    """Make TensorFlow allocate GPU memory on demand instead of grabbing all of it.

    Must run before TensorFlow initialises its devices (before the first tensor, model or
    ``tf.config.list_logical_devices`` call).

    Returns:
        The names of the GPUs configured (empty on a machine without GPUs: nothing to do).

    Raises:
        TFAlreadyInitializedError: when TensorFlow initialised its GPUs before memory growth
            was turned on; the message says to restart the kernel and call this first.  The
            underlying ``RuntimeError`` is chained, never swallowed.  A second call after a
            successful one returns quietly even after initialisation: TensorFlow compares the
            setting with the stored one first and raises only when it would change.
    """
    tf = import_tf()
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return []
    try:
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
    except RuntimeError as exc:
        raise TFAlreadyInitializedError(
            "TensorFlow already initialised its GPUs, so memory growth can no longer be set. "
            "Restart the kernel and call accelkit.tf_device.tf_enable_memory_growth() right "
            f"after importing TensorFlow, before creating any tensor or model. ({exc})"
        ) from exc
    return [g.name for g in gpus]


def tf_set_logical_cpus(n: int) -> list[str]:
    """Split the physical CPU into ``n`` logical TensorFlow devices (for MirroredStrategy demos).

    Must run before TensorFlow initialises its devices.

    Args:
        n: number of logical CPUs, >= 1.

    Returns:
        The logical device names, ``["/device:CPU:0", ...]``.

    Raises:
        ValueError: if ``n < 1``.
        TFAlreadyInitializedError: when TensorFlow has already initialised its devices
            and the existing split differs from ``n``.
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
                f"restart the kernel and call tf_set_logical_cpus({n}) first. ({exc})"
            ) from exc
    return [d.name for d in tf.config.list_logical_devices("CPU")]


__all__ = [
    "TFAlreadyInitializedError",
    "best_tf_device",
    "has_tf",
    "import_tf",
    "tf_devices",
    "tf_enable_memory_growth",
    "tf_set_logical_cpus",
]
