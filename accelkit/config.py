"""Size profile and seeding: the one place where notebooks get their problem sizes.

``ACCELKIT_PROFILE`` selects the profile:

* ``ci``   – small sizes that run a notebook in under a minute on a 2-core CPU;
* ``full`` – sizes that keep a GPU/TPU busy long enough to measure it;
* ``auto`` (default) – ``full`` when an accelerator is present, else ``ci``.

Every notebook takes its sizes from ``profile().pick(ci=..., full=...)`` instead of
writing its own ``if torch.cuda.is_available()`` branches.  The profile is resolved once (a
notebook's Setup cell, ``P = ak.config.profile()``, or the command line) and passed on to what
uses it (``ak.roofline.measure(dev, profile=P)``);
:data:`PROFILE_ENV` is the one place the variable's name is written.

Owns: the size profile, seeding, the scratch folder.  Lives elsewhere: the hardware class
(whose ``profile`` field is what ``auto`` would pick on it) in :mod:`accelkit.hardware`; the
results and run-summary variables (``ACCELKIT_RESULTS``, ``ACCELKIT_NOTEBOOK``) in
:mod:`accelkit.report`.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

PROFILE_ENV = "ACCELKIT_PROFILE"
SCRATCH_ENV = "ACCELKIT_SCRATCH"
PROFILES = ("ci", "full")

T = TypeVar("T")


@dataclass(frozen=True)
class Profile:
    """A resolved size profile.

    Attributes:
        name: ``"ci"`` or ``"full"``.
        reason: why this profile was chosen (for the hardware card).
    """

    name: str
    reason: str

    @property
    def is_full(self) -> bool:
        """True in the ``full`` profile."""
        return self.name == "full"

    def pick(self, ci: T, full: T) -> T:
        """Return ``ci`` in the ``ci`` profile and ``full`` in the ``full`` profile.

        Example: ``n = P.pick(ci=512, full=8192)``.
        """
        return full if self.is_full else ci

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"


def profile(name: str | None = None) -> Profile:
    """Resolve the size profile.

    Args:
        name: ``"ci"``, ``"full"`` or ``"auto"``; default: ``$ACCELKIT_PROFILE`` or ``"auto"``.

    Returns:
        The resolved :class:`Profile`. ``auto`` becomes ``full`` when
        :func:`accelkit.device.accelerator_name` finds a GPU/TPU, else ``ci``.

    Raises:
        ValueError: for an unknown profile name (lists the valid ones).
    """
    raw = name if name is not None else os.environ.get(PROFILE_ENV, "auto")
    value = raw.strip().lower()
    if value in PROFILES:
        source = "argument" if name is not None else f"${PROFILE_ENV}"
        return Profile(value, f"set by {source}")
    if value != "auto":
        raise ValueError(
            f"unknown size profile {raw!r}; use one of 'ci', 'full' or 'auto' "
            f"(e.g. {PROFILE_ENV}=ci)"
        )
    from accelkit import device

    accel = device.accelerator_name()
    if accel:
        return Profile("full", f"auto: {accel} found")
    return Profile("ci", "auto: no accelerator found")


def seed_everything(seed: int = 0) -> int:
    """Seed Python, NumPy, PyTorch and (if already imported) TensorFlow/Keras.

    TensorFlow is seeded only when it has been imported, so a torch-only notebook never
    pays for importing it.

    Args:
        seed: the seed, a non-negative int.

    Returns:
        The seed, for logging.

    Raises:
        ValueError: if ``seed`` is negative.
    """
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    if "torch" in sys.modules:
        import torch

        torch.manual_seed(seed)
    if "tensorflow" in sys.modules or "keras" in sys.modules:
        import keras

        keras.utils.set_random_seed(seed)
    return seed


def scratch_dir(name: str = "") -> Path:
    """Return a writable folder for files a notebook makes (worker scripts, checkpoints).

    Notebooks never write next to themselves: the folder is ``$ACCELKIT_SCRATCH`` (set by
    ``make run`` to a folder under ``build/``) or ``<tmp>/accelkit-scratch``.

    Args:
        name: optional sub-folder, created if missing.

    Returns:
        The folder as a :class:`pathlib.Path` (it exists).
    """
    root = Path(os.environ.get(SCRATCH_ENV) or Path(tempfile.gettempdir()) / "accelkit-scratch")
    path = root / name if name else root
    path.mkdir(parents=True, exist_ok=True)
    return path
