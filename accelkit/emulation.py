"""Emulating a CPU hardware class on this CPU: ``$ACCELKIT_HARDWARE``'s instruction-set caps.

With ``ACCELKIT_HARDWARE=cpu-avx2`` (or another CPU class of :data:`accelkit.hardware.CLASSES`)
a machine with a wider CPU computes like that class: :func:`apply` caps oneDNN's and ATen's
instruction sets (the class's ``emulate_env``) before the first tensor operation, and gives
Inductor a cache folder of its own.  :func:`active` says whether an emulation is in force,
:func:`note` says so in words for the hardware card.

This module owns only that.  Elsewhere: the classes, ``$ACCELKIT_HARDWARE`` itself
(:func:`accelkit.hardware.from_env`) and the probed class (:func:`accelkit.hardware.probed_cpu`)
in :mod:`accelkit.hardware`; ``import accelkit`` calls :func:`apply`.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

from accelkit import hardware
from accelkit.hardware import HardwareClass


def active() -> tuple[HardwareClass, HardwareClass] | None:
    """Return ``(emulated, real)`` CPU classes while ``$ACCELKIT_HARDWARE`` names another CPU class.

    Returns:
        ``None`` when the variable is unset, names this CPU's own class, or names a non-CPU
        class (a GPU cannot be emulated: only the course's *decisions* would change).
    """
    named = hardware.from_env()
    if named is None or named.kind != "cpu":
        return None
    real = hardware.probed_cpu()
    return None if named == real else (named, real)


def note() -> str:
    """Say what ``$ACCELKIT_HARDWARE`` emulates here, and what it does not ("" when inactive)."""
    pair = active()
    if pair is None:
        return ""
    named, real = pair
    if not named.emulate_env:
        return (f"deciding as {named.name} on a {real.name} CPU: only the course's decisions "
                "change (this class's instruction set cannot be imposed on this CPU)")
    caps = " ".join(f"{k}={v}" for k, v in named.emulate_env.items())
    return (f"running as {named.name}, emulated on a {real.name} CPU with {caps}: models the "
            "instruction set of PyTorch's kernels (vector width, no bf16 units); not XLA's CPU "
            "code (TensorFlow/JAX jit_compile still target this CPU), the core count, caches, "
            "clocks or other vendors' kernels")


def apply(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Put the instruction-set caps of ``$ACCELKIT_HARDWARE``'s CPU class into the environment.

    oneDNN (``ONEDNN_MAX_CPU_ISA``), ATen (``ATEN_CPU_CAPABILITY``) and Inductor read them
    the first time they compute, not when ``torch`` is imported, so ``import accelkit`` (which
    calls this) before the first tensor operation is early enough.  Variables already set are
    left alone.  Where the ATen capability is capped, Inductor also gets a cache folder of its
    own (``TORCHINDUCTOR_CACHE_DIR``): its shared cache would hand this process kernels
    compiled for the real CPU's vector width, which compute wrong values here.

    Args:
        environ: the environment to update; default ``os.environ`` (tests pass a dict).

    Returns:
        The variables set (empty when no emulation is active).
    """
    env = os.environ if environ is None else environ
    pair = active()
    if pair is None:
        return {}
    done = {}
    for key, value in pair[0].emulate_env.items():
        if key not in env:
            env[key] = value
            done[key] = value
    if "ATEN_CPU_CAPABILITY" in pair[0].emulate_env and "TORCHINDUCTOR_CACHE_DIR" not in env:
        # Inductor's on-disk cache does not key on the vector ISA: a graph cached under
        # another capability is reloaded with the wrong vector width and returns wrong
        # values (docs/notes/inductor-cache-vector-isa.md).  One cache per capability in
        # force: named after the value actually set (a learner may have set it before), not
        # after the class, so a cache never mixes vector widths.
        import getpass
        import tempfile

        user = "".join(c for c in getpass.getuser() if c.isalnum()) or "user"
        isa = "".join(c for c in env["ATEN_CPU_CAPABILITY"].lower() if c.isalnum()) or "default"
        done["TORCHINDUCTOR_CACHE_DIR"] = env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(
            tempfile.gettempdir(), f"torchinductor_{user}_isa_{isa}")
    return done


__all__ = ["active", "apply", "note"]
