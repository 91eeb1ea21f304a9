"""accelkit: thin helpers for the deep-learning acceleration notebooks.

Modules are imported lazily, so ``import accelkit as ak`` is cheap and never imports
TensorFlow or initialises CUDA.  Call helpers through their module::

    import accelkit as ak
    P = ak.env.profile()
    dev = ak.device.best_torch_device().device
    t = ak.bench.measure(lambda: x @ x, label="matmul", flops=2 * n**3)

Module -> the notebooks that call it (``notebooks/NN_*.ipynb``; "workers" are the scripts in
``notebooks/workers/`` they launch).  ``tests/test_line_budget.py`` checks that every module
is listed here and that the package shrinks toward its line budget.

Lessons
    precision 00 02 06 (number formats, autocast paths, dtype traces, Keras activations) ·
    fusion 03 · memory 01 02 06 07 · roofline 00 03 · comm 01 (all-reduce and pipeline models;
    timing collectives in workers of 01 04 06) · gpt 06 07 · sharding 05 (JAX meshes,
    tf.distribute strategies) · explore 00 01 06
Instruments
    bench all but 04 · stats 00 01 04 07 · claims 00-03 05 06 (floors from claims.toml, the
    asserts that check them) · plot all but 05 · report all (results, exercises, and the
    verified records read back)
The machine
    env all (size profile, seeds, scratch folders, the hardware card; ``python -m accelkit.env``)
    · device 02 03 05 06 07 · hardware 00-03 05 06 (classes from hardware.toml;
    $ACCELKIT_HARDWARE emulation) · tf 00-06 (TensorFlow devices, timing, XLA traces) · models
    00 01 02 04 05 06 (the small models and the datasets they train on)
Processes
    launch 01 04 05 06 07 · procs (process groups under launch) · scripts 01 04-07 (worker
    scripts, their files, torchrun's records, stacks) · dist (inside every worker)
The maintainers' commands (``make run``, ``make verify``, ``make compare``) are in ``tools/``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_MODULES = (
    "bench",
    "claims",
    "comm",
    "device",
    "dist",
    "env",
    "explore",
    "fusion",
    "gpt",
    "hardware",
    "launch",
    "memory",
    "models",
    "plot",
    "precision",
    "procs",
    "report",
    "roofline",
    "scripts",
    "sharding",
    "stats",
    "tf",
)

__all__ = list(_MODULES)


def _emulate_hardware_class() -> None:
    """Apply ``$ACCELKIT_HARDWARE``'s instruction-set caps before torch computes anything."""
    import os

    if os.environ.get("ACCELKIT_HARDWARE"):
        from accelkit import hardware

        hardware.apply_emulation()


_emulate_hardware_class()


def __getattr__(name: str) -> Any:
    """Import the submodule ``name`` on first use (PEP 562)."""
    if name in _MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'accelkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_MODULES))
