"""accelkit: thin helpers for the deep-learning acceleration notebooks.

Modules are imported lazily, so ``import accelkit as ak`` is cheap and never imports
TensorFlow or initialises CUDA.  Call helpers through their module::

    import accelkit as ak
    P = ak.config.profile()
    dev = ak.device.best_torch_device().device
    t = ak.bench.measure(lambda: x @ x, label="matmul", flops=2 * n**3)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_MODULES = (
    "bench",
    "checks",
    "claims",
    "comm_bench",
    "comm_model",
    "compare",
    "config",
    "course",
    "data",
    "device",
    "dist",
    "dtype_trace",
    "dtypes",
    "elastic",
    "emulation",
    "explore",
    "env",
    "exercises",
    "fusion",
    "gpt",
    "gpt_data",
    "hardware",
    "jax_mesh",
    "jobs",
    "keras_mp",
    "launch",
    "launch_result",
    "memory",
    "models",
    "pipeline_model",
    "plot",
    "precision",
    "procs",
    "report",
    "roofline",
    "runner",
    "scripts",
    "spawning",
    "stacks",
    "stats",
    "strategy",
    "tf_bench",
    "tf_device",
    "tf_trace",
    "verify",
)

__all__ = list(_MODULES)


def _emulate_hardware_class() -> None:
    """Apply ``$ACCELKIT_HARDWARE``'s instruction-set caps before torch computes anything."""
    import os

    if os.environ.get("ACCELKIT_HARDWARE"):
        from accelkit import emulation

        emulation.apply()


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
