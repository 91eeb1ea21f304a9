"""How close each timed claim came to its bound, over the runs in ACCELKIT_CLAIMS_LOG files.

Usage: ``python tools/claim_margins.py build/claims.jsonl [more.jsonl ...]``

For each claim (its ``what``, hardware class and bounds) prints the runs, how many did not hold, the
median speedup and the smallest margin: the interval's low end over the floor (and the
ceiling over its high end), where 1.0 means the interval touched the bound.  A floor is
safe for CI when its smallest margin over many runs, on every CPU CI draws, stays well
above 1.  ``make nbval`` writes the log and prints this table, failed or not.  A claim
asserted in two notebooks with the same words, class and bound (00's and 02's bf16 matmul)
counts once per notebook; a claim asserted without a class shows ``-``.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from accelkit.stats import HOLDS


def margin(line: dict) -> float:
    """Return the claim's margin: min(low / at_least, at_most / high) over the bounds given."""
    out = [float("inf")]
    if line.get("at_least") is not None:
        out.append(line["low"] / line["at_least"])
    if line.get("at_most") is not None:
        out.append(line["at_most"] / line["high"])
    return min(out)


def table(lines: list[dict]) -> str:
    """Return the margins table (markdown), the smallest margin first."""
    groups: dict[tuple, list[dict]] = defaultdict(list)  # a changed bound starts a new row
    for line in lines:
        groups[(line["what"], line["hardware"], line.get("at_least"), line.get("at_most"))
               ].append(line)
    rows = sorted(groups.items(), key=lambda kv: min(margin(x) for x in kv[1]))
    out = ["| claim | class | bound | runs | not held | median speedup | smallest margin |",
           "|---|---|---|---|---|---|---|"]
    for (what, hw, at_least, at_most), got in rows:
        bound = " ".join(f"{w} {b:g}x" for w, b in (("≥", at_least), ("≤", at_most))
                         if b is not None)
        failed = sum(x["verdict"] != HOLDS for x in got)
        out.append(f"| {what} | {hw or '-'} | {bound} | {len(got)} | {failed} | "
                   f"{statistics.median(x['speedup'] for x in got):.2f}x | "
                   f"{min(margin(x) for x in got):.2f} |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    """Print the table for the logs named in ``argv`` (missing files are skipped)."""
    lines = [json.loads(t) for p in argv if Path(p).is_file()
             for t in Path(p).read_text(encoding="utf-8").splitlines() if t.strip()]
    print(table(lines) if lines else "no claims logged")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
