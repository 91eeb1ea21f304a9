"""The collectives XLA put in a compiled program (:func:`collectives`): which communication
ops a sharded JAX program runs, their bytes and group sizes.

Elsewhere: PyTorch process groups (:mod:`accelkit.dist`), the all-reduce cost model
(:mod:`accelkit.comm`), starting workers (:mod:`accelkit.launch`), HLO shape sizes
(:mod:`accelkit.tf`).  Source:
https://docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_automatic_parallelization.html.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from accelkit.tf import hlo_shape_bytes

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


@dataclass(frozen=True)
class Collective:
    """One communication op of a compiled XLA program: ``op`` (one of :data:`COLLECTIVES`),
    ``bytes`` of its result per device (all outputs of a combined op), ``group_size`` (devices
    per replica group, e.g. 4 = one mesh axis of 4; None when the text gives none)."""

    op: str
    bytes: int
    group_size: int | None


_OP = re.compile(r"=\s*(.+?)\s+(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")


def _group_size(line: str) -> int | None:
    """Devices per replica group, from any of XLA's three printed forms."""
    explicit = re.search(r"replica_groups=\{\{([0-9,]*)\}", line)
    if explicit:
        return len([d for d in explicit.group(1).split(",") if d])
    iota = re.search(r"replica_groups=\[(\d+),(\d+)\]<=", line)
    if iota:
        return int(iota.group(2))
    mesh = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", line)
    if mesh:
        sizes = dict(re.findall(r"'(\w+)'=(\d+)", mesh.group(1)))
        return math.prod(int(sizes[a]) for a in re.findall(r"'(\w+)'", mesh.group(2)))
    return None


def collectives(hlo_text: str) -> list[Collective]:
    """List the collectives of ``jax.jit(f).lower(*args).compile().as_text()`` in program
    order: one :class:`Collective` per op (async ``-start``/``-done`` pairs count once)."""
    found = []
    for line in hlo_text.splitlines():
        m = _OP.search(line)
        if m:
            found.append(Collective(m.group(2), hlo_shape_bytes(m.group(1)), _group_size(line)))
    return found


__all__ = ["COLLECTIVES", "Collective", "collectives"]
