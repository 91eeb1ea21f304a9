"""Interactive explorers: the course's models as sliders (JupyterLab, Colab), or a static figure.

One entry point per model, each starting from a notebook's measured case and recomputing
every number with the same ``accelkit`` function the notebook checks against measurements:

===================  =====================================================  ==============
entry point          model                                                  notebook
===================  =====================================================  ==============
:func:`roofline`     :class:`accelkit.roofline.Roofline` (measured roofs)   00
:func:`memory`       :mod:`accelkit.memory` (per device, step peak, fits)   01
:func:`pipeline`     :mod:`accelkit.pipeline_model` (GPipe, bubble)         01
:func:`mfu`          :func:`accelkit.gpt.flops_per_token`, :func:`~accelkit.gpt.mfu`  06
===================  =====================================================  ==============

Each explorer lives in its own module (``roofline_view``, ``memory_view``,
``pipeline_view``, ``mfu_view``) with a pure ``compute`` (settings -> numbers, the update
function the tests check), ``draw`` (numbers -> matplotlib figure) and ``readout`` (numbers ->
text).  Whether widgets or a static figure are shown, and the settings printed as code, is
:mod:`accelkit.explore.ui` (``$ACCELKIT_EXPLORE``).  Elsewhere: the models themselves (the
modules in the table); the course's other plots in :mod:`accelkit.plot`.

Example::

    ak.explore.memory(n_params, strategy="zero3", world_size=8, device="h100")
"""

from __future__ import annotations

import importlib
from typing import Any

from accelkit.explore.ui import MODE_ENV, is_interactive

#: entry point -> the module that defines it (imported on first use: the views import
#: matplotlib and torch, the mode check does not)
_ENTRY_POINTS = {"memory": "memory_view", "mfu": "mfu_view",
                 "pipeline": "pipeline_view", "roofline": "roofline_view"}

__all__ = ["MODE_ENV", "is_interactive", "memory", "mfu", "pipeline", "roofline"]


def __getattr__(name: str) -> Any:
    """Import the entry point ``name`` from its module, or the module ``name``, on first use
    (PEP 562): ``ak.explore.memory_view.compute(...)`` works without an import."""
    if name in _ENTRY_POINTS.values():
        return importlib.import_module(f"{__name__}.{name}")
    if name in _ENTRY_POINTS:
        fn = getattr(importlib.import_module(f"{__name__}.{_ENTRY_POINTS[name]}"), name)
        globals()[name] = fn
        return fn
    raise AttributeError(f"module 'accelkit.explore' has no attribute {name!r}")
