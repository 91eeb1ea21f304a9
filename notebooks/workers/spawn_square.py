"""A worker function for ``torch.multiprocessing.spawn`` that the child processes can import.

Notebook 01 imports it with ``ak.scripts.import_worker`` and passes ``square`` to ``ak.launch.spawn``:
a spawned child imports this module by name, which works for a file and fails for a
function defined in a notebook cell.
"""

import json
from pathlib import Path


# region square
def square(rank: int, out_dir: str) -> None:
    """Write ``{"rank": rank, "square": rank**2}`` to ``out_dir/rank<rank>.json``."""
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps({"rank": rank, "square": rank**2}))
# endregion


def all_reduce_default_backend(rank: int, out_dir: str, world_size: int = 2,
                               hide_gpus: bool = True) -> None:
    """Open a process group with no backend named, all-reduce ``rank + 1``, write what ran.

    ``init_process_group()`` without a backend (torch >= 2.6) takes the one registered for
    the accelerator it detects: gloo on a CPU-only machine, NCCL on a CUDA one.  The ranks
    meet through a file in ``out_dir`` (no port to choose).  ``hide_gpus`` makes a GPU
    machine look CPU-only to these ranks (NCCL needs one GPU per rank).  Writes
    ``{"rank", "backend_config", "sum"}`` to ``out_dir/backend<rank>.json``.
    """
    import os

    if hide_gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before anything asks CUDA for its devices
    import torch
    import torch.distributed as dist

    # region default_backend
    dist.init_process_group(init_method=f"file://{Path(out_dir, 'store').resolve()}",
                            rank=rank, world_size=world_size)  # no backend named: torch picks
    config = str(dist.get_backend_config())                     # "cpu:gloo" or "cuda:nccl"
    device = "cuda" if "nccl" in config else "cpu"
    if device == "cuda":
        torch.cuda.set_device(rank)
    t = torch.tensor([rank + 1.0], device=device)
    dist.all_reduce(t)                                          # 1 + 2 + ... + world_size
    dist.destroy_process_group()
    # endregion
    Path(out_dir, f"backend{rank}.json").write_text(json.dumps(
        {"rank": rank, "backend_config": config, "sum": t.item()}))
