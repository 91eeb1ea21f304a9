"""accelkit's line budget: no module grows, none is added past the limit, the total shrinks.

A ratchet toward the targets of issue 24 (tools/line_budget.py: <= 9,000 lines, <= 24 modules,
none > 500).  When a module shrinks, ``python tools/line_budget.py --write`` lowers its budget
here to match; a budget is never raised to let a module grow.  Also: accelkit/__init__.py's
docstring maps every module to the notebooks that call it, and the notebooks call at most 80
distinct accelkit names.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import accelkit

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("line_budget", ROOT / "tools" / "line_budget.py")
line_budget = importlib.util.module_from_spec(_spec)
sys.modules["line_budget"] = line_budget
_spec.loader.exec_module(line_budget)

#: Lines per module (path under accelkit/), at most: today's count, lowered as modules shrink.
#: Set afresh once, when 48 files merged into 28 (2026-12-03): a merged module's budget is its
#: lines after the merge, below the sum of the budgets of the modules it replaced.  Again when
#: 28 files became 23 (config and __main__ into env, data into models, dtypes into precision,
#: exercises into report) and docstrings were cut to facts: 10,629 -> 8,372 lines.
BUDGET: dict[str, int] = {
    "__init__.py": 93,
    "bench.py": 419,
    "claims.py": 408,
    "comm.py": 293,
    "device.py": 397,
    "dist.py": 323,
    "env.py": 499,
    "explore.py": 441,
    "fusion.py": 239,
    "gpt.py": 391,
    "hardware.py": 409,
    "launch.py": 412,
    "memory.py": 390,
    "models.py": 272,
    "plot.py": 151,
    "precision.py": 497,
    "procs.py": 342,
    "report.py": 455,
    "roofline.py": 410,
    "scripts.py": 391,
    "sharding.py": 61,
    "stats.py": 309,
    "tf.py": 377,
}
#: Lines in the whole package, at most (the sum of the budgets when this file was written).
TOTAL_BUDGET = 7979


def test_no_module_grows_past_its_budget_and_new_ones_stay_small():
    counts = line_budget.line_counts()
    print(line_budget.table(counts))  # the targets, shown with -s or on failure
    # fails if a module grew: move code out, or shrink something else and --write
    grown = {k: (n, BUDGET[k]) for k, n in counts.items() if k in BUDGET and n > BUDGET[k]}
    assert not grown, f"over budget (lines, budget): {grown}"
    # fails if a new module is added over the per-module limit
    new = {k: n for k, n in counts.items() if k not in BUDGET}
    assert all(n <= line_budget.MODULE_MAX for n in new.values()), new
    # fails if the module count grows (a split must merge something else)
    assert len(counts) <= len(BUDGET), sorted(new)


def test_the_package_total_does_not_grow():
    total = sum(line_budget.line_counts().values())
    # fails if the package grew in all (targets: tools/line_budget.py)
    assert total <= min(TOTAL_BUDGET, sum(BUDGET.values())), (total, line_budget.TARGET_LINES)


def test_the_ratchet_only_lowers():
    budget = {"a.py": 10, "b.py": 5, "gone.py": 7}
    # fails if --write could raise a budget or keep a module that is gone
    assert line_budget.ratchet(budget, {"a.py": 8, "b.py": 9}) == {"a.py": 8, "b.py": 5}


def test_init_docstring_maps_every_module_to_its_notebooks():
    doc = " ".join((accelkit.__doc__ or "").split())
    # an entry: the module, then its notebooks ("00 02 06", "all", "00-06"), or a note in
    # parentheses, or a comma before the next module of the same note
    listed = {m for m in accelkit._MODULES if re.search(rf"(?<![\w.]){m}(?: \d\d| all| \(|,)", doc)}
    # fails if a module is added to accelkit without saying which notebooks use it
    assert set(accelkit._MODULES) <= listed, set(accelkit._MODULES) - listed
    on_disk = {p.stem for p in (ROOT / "accelkit").glob("*.py")} - {"__init__", "__main__"}
    # fails if _MODULES (the lazy imports) and the package's files disagree
    assert set(accelkit._MODULES) == on_disk | {"explore"}, set(accelkit._MODULES) ^ on_disk


def _import_graph() -> dict[str, set[str]]:
    """``{module: the accelkit modules it imports}``, lazy and TYPE_CHECKING imports included."""
    import ast

    graph: dict[str, set[str]] = {}
    for path in (ROOT / "accelkit").rglob("*.py"):
        name = path.stem if path.parent.name == "accelkit" else path.parent.name
        deps = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "accelkit":
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("accelkit."):
                deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names if a.name.startswith("accelkit.")}
        deps.discard(name)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """Return one import cycle (``[a, b, ..., a]``), or ``[]``; a depth-first search."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [node, dep] if dep in path else [node, dep]
            if dep in graph and dep not in state and (found := visit(dep, path + [node])):
                return found
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start, [])):
            return found
    return []


def test_accelkit_has_no_import_cycle():
    # the checker finds a cycle where there is one
    assert _cycle({"device": {"hardware"}, "hardware": {"claims", "device"}, "claims": set()})
    assert not _cycle({"device": set(), "hardware": {"device"}})
    graph = _import_graph()
    assert "device" in graph["hardware"] or "device" in graph["env"]  # the graph is read
    # fails if two modules import each other, directly or around a loop (device <-> hardware was one)
    assert not _cycle(graph), " -> ".join(_cycle(graph))


#: Distinct accelkit names the notebooks may call (issue 24: d2l's performance chapter uses 13).
NAMES_BUDGET = 80


def _notebook_names(sources: dict[str, str]) -> dict[str, set[str]]:
    """name -> notebooks calling it: ``ak.mod.name``, or ``mod.name`` after ``from accelkit import mod``
    (read from tokens, so result keys inside strings such as ``"gpt.mfu"`` do not count)."""
    import io
    import tokenize

    found: dict[str, set[str]] = {}
    for nb, code in sources.items():
        code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("!", "%")))
        direct = {m.strip() for imp in re.findall(r"^\s*from accelkit import ([\w, ]+)", code, re.M)
                  for m in imp.split(",")}
        toks = [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline)
                if t.type in (tokenize.NAME, tokenize.OP)]
        for i in range(len(toks) - 2):
            if toks[i] == "ak" and toks[i + 1] == "." and i + 4 < len(toks) and toks[i + 3] == ".":
                found.setdefault(f"{toks[i + 2]}.{toks[i + 4]}", set()).add(nb)
            elif toks[i] in direct and toks[i + 1] == "." and (i == 0 or toks[i - 1] != "."):
                found.setdefault(f"{toks[i]}.{toks[i + 2]}", set()).add(nb)
    return found


def test_notebooks_call_at_most_80_accelkit_names():
    import json

    fake = {"x": 'import accelkit as ak\nak.bench.compare(a, b)\nak.bench.compare(c, d)\n'
                 'r = "gpt.mfu"\nfrom accelkit import gpt\ngpt.mfu(1)\n!pip install ak.x.y'}
    assert _notebook_names(fake) == {"bench.compare": {"x"}, "gpt.mfu": {"x"}}
    sources = {p.name[:2]: "\n".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"]
                                     if c["cell_type"] == "code")
               for p in sorted((ROOT / "notebooks").glob("0*.ipynb"))}
    names = _notebook_names(sources)
    assert len(names) <= NAMES_BUDGET, sorted(names)
