"""Datasets for notebook 07's input-pipeline lesson, in a module so worker processes find them.

A ``DataLoader`` with ``num_workers > 0`` sends the Dataset to each worker process.  Under
the *spawn* start method (the default on macOS and Windows) a worker is a new Python that
imports the Dataset's class *by module and name*: a class defined in a notebook lives in
``__main__``, which a spawned worker cannot import, so it fails.  A class in a module file
like this one imports fine everywhere.

``SlowReads`` stands in for a dataset read from a disk or a network: each item waits
``read_ms`` milliseconds (``time.sleep``: the process waits and uses no CPU, as when it
waits for storage), then returns an in-memory tensor.  CPU-heavy decoding would instead
compete with the training step for the cores.
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import Dataset


class SlowReads(Dataset):
    """``n`` random samples, each read with a delay of ``read_ms`` milliseconds.

    Args:
        n: number of samples, >= 1.
        dim: features per sample, >= 1.
        read_ms: the wait per item, milliseconds, >= 0.
        classes: number of labels, >= 2.

    **Shape** item ``i``: ``(x: (dim,) float32, y: () int64)``.

    Raises:
        ValueError: for a size or delay out of range.
    """

    def __init__(self, n: int, dim: int = 64, read_ms: float = 0.0, classes: int = 10) -> None:
        if n < 1 or dim < 1 or classes < 2 or read_ms < 0:
            raise ValueError(f"need n >= 1, dim >= 1, classes >= 2, read_ms >= 0; got n={n}, "
                             f"dim={dim}, classes={classes}, read_ms={read_ms}")
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, dim, generator=g)
        self.y = torch.randint(0, classes, (n,), generator=g)
        self.read_s = read_ms / 1e3

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.read_s:
            time.sleep(self.read_s)           # waiting for storage, not computing
        return self.x[i], self.y[i]


class Squares(Dataset):
    """``n`` items ``(i, i * i)`` as float tensors: the spawn lesson's fixed Dataset.

    **Shape** item ``i``: ``(tensor(i), tensor(i * i))``, both () float32.
    """

    def __init__(self, n: int = 8) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tensor(float(i)), torch.tensor(float(i * i))
