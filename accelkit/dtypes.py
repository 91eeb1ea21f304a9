"""Floating-point dtype names: the one table that turns ``torch.bfloat16``, ``"bf16"`` ... into a name.

This module owns the spelling of dtype names and nothing else: the canonical long name
(``"bfloat16"``, as torch, NumPy, TensorFlow and ``ml_dtypes`` spell it), the short key the
course prints and uses as a result key (``"bf16"``), and the aliases between them.  It never
imports a framework.

Each user checks the name against what *it* covers and raises its own error:
:func:`accelkit.precision.format_name` (the formats the course compares),
:func:`accelkit.roofline.dtype_key` (the dtypes the roofline measures),
:func:`accelkit.checks.tolerance` (the dtypes with a default tolerance) and
:func:`accelkit.hardware.datasheet_tflops` (the datasheet peaks).

Example::

    canonical(torch.bfloat16)  # "bfloat16"
    short("half")              # "fp16"
"""

from __future__ import annotations

from typing import Any

#: Canonical name -> short key, widest first.
SHORT: dict[str, str] = {
    "float64": "fp64",
    "float32": "fp32",
    "tfloat32": "tf32",
    "float16": "fp16",
    "bfloat16": "bf16",
}

#: Other spellings -> canonical name (the short keys, and the C/PyTorch type names).
ALIASES: dict[str, str] = {
    "fp64": "float64",
    "double": "float64",
    "fp32": "float32",
    "float": "float32",
    "tf32": "tfloat32",
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
}


def canonical(dtype: Any) -> str:
    """Return the canonical name of a dtype: ``"float32"``, ``"tfloat32"``, ``"bfloat16"`` ...

    Args:
        dtype: a name (``"bf16"``, ``"BFloat16"``, ``"half"``), a torch dtype, or anything
            with a ``.name`` (NumPy and TensorFlow dtypes).

    Returns:
        The canonical name for a known spelling; any other name lower-cased and with a
        ``"torch."`` prefix removed (``torch.int8`` -> ``"int8"``), for the caller to reject
        with its own message.  Never raises.
    """
    raw = str(getattr(dtype, "name", dtype)).strip().replace("torch.", "").lower()
    return ALIASES.get(raw, raw)


def short(dtype: Any) -> str:
    """Return the short key of a dtype: ``"fp32"``, ``"tf32"``, ``"fp16"``, ``"bf16"``, ``"fp64"``.

    Args:
        dtype: anything :func:`canonical` takes.

    Returns:
        The short key; a name with none (``"fp8"``, ``"int8"``) is returned as
        :func:`canonical` gives it.  Never raises.
    """
    name = canonical(dtype)
    return SHORT.get(name, name)


__all__ = ["ALIASES", "SHORT", "canonical", "short"]
