"""accelkit's line budget: lines per module now, and the targets the package shrinks toward.

    python tools/line_budget.py           # the table: lines per module, total, module count
    python tools/line_budget.py --write   # ratchet tests/test_line_budget.py's BUDGET down to today

``tests/test_line_budget.py`` fails when a module grows past its budget, a module is added
without one (or over :data:`MODULE_MAX` lines), or the package's total grows.  Run ``--write``
after a module shrinks, so the budget follows it down; it never raises a budget.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "accelkit"
TEST = ROOT / "tests" / "test_line_budget.py"
#: Where the package is headed (issue 24): lines in all, modules, lines in any one module.
TARGET_LINES, TARGET_MODULES, MODULE_MAX = 9_000, 24, 500


def line_counts(package: Path = PACKAGE) -> dict[str, int]:
    """Return ``{module path relative to the package: lines}`` for every ``.py`` file in it."""
    return {p.relative_to(package).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted(package.rglob("*.py"))}


def table(counts: dict[str, int]) -> str:
    """Return the counts as text, largest first, with the total and the targets."""
    rows = [f"{n:6d}  {name}{'  (over ' + str(MODULE_MAX) + ')' if n > MODULE_MAX else ''}"
            for name, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return "\n".join(rows + [
        f"{sum(counts.values()):6d}  lines in {len(counts)} modules (targets: <= {TARGET_LINES:,} "
        f"lines, <= {TARGET_MODULES} modules, none > {MODULE_MAX})"])


def ratchet(budget: dict[str, int], counts: dict[str, int]) -> dict[str, int]:
    """Return the budget lowered to today's counts; modules that are gone leave it."""
    return {name: min(limit, counts[name]) for name, limit in budget.items() if name in counts}


def write(counts: dict[str, int], test: Path = TEST) -> None:
    """Rewrite the ``BUDGET = {...}`` block of the test with :func:`ratchet`'s result."""
    sys.path.insert(0, str(test.parent))
    import test_line_budget as t

    new = ratchet(t.BUDGET, counts)
    body = "".join(f'    "{k}": {v},\n' for k, v in sorted(new.items()))
    text = test.read_text(encoding="utf-8")
    text = re.sub(r"^BUDGET: dict\[str, int\] = \{\n.*?^\}\n", f"BUDGET: dict[str, int] = {{\n{body}}}\n",
                  text, count=1, flags=re.S | re.M)
    test.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Print the table; with ``--write`` also ratchet the test's budget."""
    argv = sys.argv[1:] if argv is None else argv
    counts = line_counts()
    print(table(counts))
    if "--write" in argv:
        write(counts)
        print(f"ratcheted {TEST.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
