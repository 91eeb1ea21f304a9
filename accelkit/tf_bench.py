"""Timing TensorFlow callables: :mod:`accelkit.bench` with each result forced to exist.

Owns: the synchronisation point for TensorFlow (:func:`force`, :func:`sync`) and the
TensorFlow forms of ``bench.measure`` and ``bench.compare`` (:func:`measure`, :func:`compare`)::

    t = ak.tf_bench.measure(lambda: tf.matmul(a, a), label="tf matmul")
    first_s = ak.bench.time_once(ak.tf_bench.sync(lambda: xla_fn(x)))

Lives elsewhere: the timing itself, its statistics and the result types (:mod:`accelkit.bench`,
:mod:`accelkit.stats`); TensorFlow's device setup (the device helpers).  TensorFlow is imported
only when a result is forced, so importing this module is cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelkit import bench


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
    import tensorflow as tf

    fetched = []
    for t in tf.nest.flatten(out):
        if isinstance(t, (tf.Tensor, tf.Variable)):
            fetched.append(tf.reshape(t, [-1])[:1].numpy())
    return fetched


def sync(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Wrap a TensorFlow callable so each call returns only once its result exists.

    See :func:`force`: one element of each output is fetched, so the bytes copied to the
    host do not grow with the output.  Returns the wrapped callable (same result as ``fn``).
    """

    def synced() -> Any:
        out = fn()
        force(out)
        return out

    return synced


def measure(fn: Callable[[], Any], **kwargs: Any) -> bench.Timing:
    """Time a TensorFlow callable; like :func:`accelkit.bench.measure`, with the result forced.

    Keyword arguments are those of :func:`accelkit.bench.measure` (``device`` is not used);
    the label defaults to ``fn``'s name.  Returns a :class:`accelkit.bench.Timing` (seconds).
    """
    kwargs.setdefault("label", getattr(fn, "__name__", "fn"))
    return bench.measure(sync(fn), **kwargs)


def compare(baseline: Callable[[], Any], candidate: Callable[[], Any],
            **kwargs: Any) -> bench.Comparison:
    """Like :func:`accelkit.bench.compare` for TensorFlow callables (results forced).

    Keyword arguments are those of :func:`accelkit.bench.compare`; returns its
    :class:`accelkit.bench.Comparison` (``.speedup`` > 1: ``candidate`` is faster).
    """
    return bench.compare(sync(baseline), sync(candidate), **kwargs)
