"""The offline byte-level corpus and the batch sampler of notebook 06's GPT.

The corpus is the source code of a fixed list of Python standard-library modules
(:data:`CORPUS_FILES`), read from this interpreter's ``sysconfig.get_paths()["stdlib"]``:
every machine with Python has it, so nothing is downloaded.  Its bytes (vocabulary 256) are
the tokens.  The text differs between Python versions, so :class:`Corpus` reports its size
and SHA-256; within one interpreter it is deterministic.

Owns: :data:`CORPUS_FILES`, :func:`load_corpus`, :func:`batch_starts` / :func:`batches` /
:func:`window` (seeded batches of windows), :class:`Windows` (a ``Dataset`` of them, for a
``DataLoader``).  Elsewhere: the model, its FLOPs and the training step in
:mod:`accelkit.gpt`.
"""

from __future__ import annotations

import hashlib
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

#: The corpus: standard-library modules present, as plain ``.py`` files, in every CPython
#: from 3.10 on (none of them was removed by PEP 594), in this order.
CORPUS_FILES: tuple[str, ...] = (
    "textwrap.py", "heapq.py", "bisect.py", "string.py", "fnmatch.py", "shlex.py", "glob.py",
    "queue.py", "sched.py", "contextlib.py", "functools.py", "random.py", "statistics.py",
    "fractions.py", "dataclasses.py", "abc.py", "copy.py", "difflib.py", "csv.py",
    "argparse.py",
)



@dataclass(frozen=True)
class Corpus:
    """The byte-level corpus.

    Attributes:
        data: ``(n_bytes,)`` uint8 tensor, the files concatenated (each preceded by a header
            line ``# ==== name ====``).
        files: the files read, in order.
        sha256: hex digest of the bytes (differs between Python versions).
    """

    data: torch.Tensor
    files: tuple[str, ...]
    sha256: str

    def split(self, train_fraction: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(train, val)``: the first ``train_fraction`` of the bytes, and the rest."""
        n = int(len(self.data) * train_fraction)
        return self.data[:n], self.data[n:]

    def __str__(self) -> str:
        return (f"{len(self.data):,} bytes from {len(self.files)} standard-library files "
                f"(sha256 {self.sha256[:12]}...)")


def load_corpus(files: Sequence[str] = CORPUS_FILES, stdlib: str | None = None) -> Corpus:
    """Read the standard-library files ``files`` into one byte tensor.

    Args:
        files: file names relative to the stdlib folder (default :data:`CORPUS_FILES`).
        stdlib: the folder; default ``sysconfig.get_paths()["stdlib"]`` of this interpreter.

    Raises:
        FileNotFoundError: when none of the files exists (a Python without its source files,
            e.g. some embedded builds): install the full Python, or pass ``stdlib=``.
    """
    root = Path(stdlib or sysconfig.get_paths()["stdlib"])
    found = [f for f in files if (root / f).is_file()]
    if not found:
        raise FileNotFoundError(f"none of {list(files)} under {root}: this Python has no "
                                "standard-library sources; install a full CPython")
    blob = b"".join(f"# ==== {f} ====\n".encode() + (root / f).read_bytes() for f in found)
    data = torch.frombuffer(bytearray(blob), dtype=torch.uint8).clone()
    return Corpus(data, tuple(found), hashlib.sha256(blob).hexdigest())


def batch_starts(n_tokens: int, n: int, batch: int, seq_len: int, *,
                 seed: int = 0) -> list[torch.Tensor]:
    """Return ``n`` tensors of ``batch`` random window starts in ``[0, n_tokens - seq_len)``.

    The same ``seed`` gives the same starts: what :func:`batches` cuts, and what a loop that
    cuts its batches on the fly (:func:`window`) cuts too.

    Raises:
        ValueError: when ``n_tokens`` is not larger than ``seq_len``.
    """
    if n_tokens <= seq_len:
        raise ValueError(f"{n_tokens} tokens cannot fill a window of {seq_len} + 1")
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(n_tokens - seq_len, (batch,), generator=g) for _ in range(n)]


def batches(data: torch.Tensor, n: int, batch: int, seq_len: int, *,
            seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Return ``n`` batches of random windows of ``data``, the same for the same ``seed``.

    **Shape** each ``(x, y)``: ``(batch, seq_len)`` int64; ``y`` is ``x`` shifted by one
    token (next-token targets).

    Raises:
        ValueError: when ``data`` is not longer than ``seq_len``.
    """
    return [window(data, s, seq_len)
            for s in batch_starts(len(data), n, batch, seq_len, seed=seed)]


def window(data: torch.Tensor, starts: torch.Tensor,
           seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut ``(x, y)`` windows of ``seq_len`` tokens at ``starts``: ``(len(starts), seq_len)``."""
    rows = torch.stack([data[s:s + seq_len + 1] for s in starts.tolist()]).long()
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


class Windows(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """A map-style dataset of windows starting every ``stride`` tokens, for ``DataLoader``.

    Defined in a module (not in a notebook) so ``DataLoader`` workers can unpickle it under
    the ``spawn`` start method (macOS, Windows).
    """

    def __init__(self, data: torch.Tensor, seq_len: int, stride: int | None = None) -> None:
        self.data, self.seq_len, self.stride = data, seq_len, stride or seq_len

    def __len__(self) -> int:
        return (len(self.data) - self.seq_len - 1) // self.stride + 1

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = window(self.data, torch.tensor([i * self.stride]), self.seq_len)
        return x[0], y[0]


# ----------------------------------------------------------------------------- helpers


__all__ = [
    "batch_starts",
    "batches",
    "Corpus",
    "CORPUS_FILES",
    "load_corpus",
    "window",
    "Windows",
]
