"""accelkit: thin helpers for the deep-learning acceleration notebooks.

Modules are imported lazily, so ``import accelkit as ak`` is cheap and never imports
TensorFlow or initialises CUDA.  Call helpers through their module::

    import accelkit as ak
    P = ak.config.profile()
    dev = ak.device.best_torch_device().device
    t = ak.bench.measure(lambda: x @ x, label="matmul", flops=2 * n**3)

Module -> the notebooks that call it (``notebooks/NN_*.ipynb``; "workers" are the scripts in
``notebooks/workers/`` they launch).  ``tests/test_line_budget.py`` checks that every module
is listed here and that the package shrinks toward its line budget.

Lessons
    precision 00 02 06 · dtypes 06 · dtype_trace 02 · keras_mp 02 06 · fusion 03 06 ·
    tf_trace 03 · memory 01 02 06 07 · roofline 00 03 · comm_model 01 · pipeline_model 01 ·
    gpt 06 07 · gpt_data 06 · jobs 07 · jax_mesh 05 · strategy 05 · explore 00 01 06
Instruments
    bench all · stats 00 01 04 06 07 · checks 00-06 · tf_bench 00 02 03 06 · comm_bench 04
    (workers of 01 04 06) · plot 00-04 06 07 · report all · exercises 00-06 · verify 00 01 03
    04 06 (published figures beside a measurement)
The machine
    config all · device all but 04 · tf_device 00-06 · hardware 00-06 · claims (hardware's
    floors, from claims.toml) · emulation ($ACCELKIT_HARDWARE) · env all · data 00 01 02 04
    05 · models 00 01 02 04 05
Processes
    launch 01 04 05 06 07 · procs 04 07 · scripts 01 04-07 · dist 01 04 and inside every
    worker · elastic 04 · launch_result (what launch returns; reading stacks back)
The course
    course (``python -m accelkit doctor``, what each notebook needs); the maintainers'
    commands (``make run``, ``make verify``, ``make compare``) are in ``tools/``
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_MODULES = (
    "bench",
    "claims",
    "comm",
    "config",
    "data",
    "device",
    "dist",
    "dtypes",
    "env",
    "exercises",
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
