"""A worker function for ``torch.multiprocessing.spawn`` that the child processes can import.

Notebook 01 imports it with ``ak.scripts.import_worker`` and passes ``square`` to ``ak.launch.spawn``:
a spawned child imports this module by name, which works for a file and fails for a
function defined in a notebook cell.
"""

import json
from pathlib import Path


def square(rank: int, out_dir: str) -> None:
    """Write ``{"rank": rank, "square": rank**2}`` to ``out_dir/rank<rank>.json``."""
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps({"rank": rank, "square": rank**2}))
