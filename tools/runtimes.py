"""Run times in README.md and in each notebook's "**Runs on**" sentence, from one measurement.

    python tools/runtimes.py --check   # exit 1 and list what disagrees with the record
    python tools/runtimes.py --write   # rewrite the README column and the notebooks' phrases

The measurement is the CI machine class's verification record, ``verified/cpu-avx512-bf16.json``
(written by ``make verify``): ``notebooks[<stem>]["wall_s"]``, the wall time of nbval over the
notebook, kernel start included.  Two places show it:

* README.md's notebook table, the column whose header starts with ``run time``: one cell per
  row that links ``notebooks/<stem>.ipynb``; and the sentence between the README's
  ``<!-- runtime:start -->``/``<!-- runtime:end -->`` markers (which record, which date).
* Cell 0 of each notebook: a phrase between the same markers at the end of the paragraph that
  holds ``**Runs on**``; where a real (not emulated) record of a CPU without bf16 units exists
  (``verified/cpu-avx2.json``), the phrase adds that run time too: most laptops are that class.
  A run time typed into that paragraph outside the markers ("about 40 s", "under a minute")
  is removed by ``--write``, so the two never disagree.

``--write`` changes only cell 0's source; outputs are kept, nothing needs re-executing.
Owns: these phrases.  Lives elsewhere: the records (``accelkit/report.py``), the reading-time
estimates (typed in README.md: they come from a learner's read, not from a machine).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelkit import report

ROOT = Path(__file__).resolve().parents[1]
CI_CLASS = "cpu-avx512-bf16"
RECORD = ROOT / "verified" / f"{CI_CLASS}.json"
#: The laptop class whose real record, when there is one, each notebook's phrase also quotes.
LAPTOP_CLASS = "cpu-avx2"
LAPTOP_RECORD = ROOT / "verified" / f"{LAPTOP_CLASS}.json"
START, END = "<!-- runtime:start -->", "<!-- runtime:end -->"
RUNS_ON = "**Runs on**"
COLUMN = "run time"
#: A run time typed by hand: a qualifier, then a duration ("about 40 s", "under a minute").
TYPED = re.compile(r"(?:about|under|around|roughly|~|≈)\s*(?:a minute and a half|a minute|"
                   r"\d+(?:\.\d+)?\s*(?:s|sec|seconds?|min|minutes?))\b\s*")
_ROW_LINK = re.compile(r"\(notebooks/(\d\d_\w+)\.ipynb\)")


def duration(wall_s: float) -> str:
    """Return a wall time as people say it: ``"≈ 30 s"`` (to 5 s) below 100 s, else ``"≈ 1.5 min"``."""
    if wall_s < 100:
        return f"≈ {max(5, 5 * round(wall_s / 5))} s"
    return f"≈ {round(wall_s / 30) / 2:g} min"


def wall(record: dict[str, Any], stem: str) -> float | None:
    """Return the notebook's measured wall time in seconds, or ``None`` when it did not pass."""
    run = record["notebooks"].get(stem, {})
    return float(run["wall_s"]) if run.get("status") == "ok" and "wall_s" in run else None


def laptop_wall(laptop: dict[str, Any] | None, stem: str) -> float | None:
    """Return the notebook's wall time in a real (not emulated) laptop record, else ``None``."""
    return wall(laptop, stem) if laptop and report.is_real(laptop) else None


def notebook_phrase(record: dict[str, Any], stem: str,
                    laptop: dict[str, Any] | None = None) -> str:
    """Return the marked phrase for a notebook's "Runs on" paragraph.

    ``laptop``: a real record of :data:`LAPTOP_CLASS`; its run time is added when it has one.
    """
    secs = wall(record, stem)
    other = laptop_wall(laptop, stem)
    if secs is None and other is not None and laptop:
        hw = laptop.get("hardware", {})
        return (f"{START}Measured run time: {duration(other)} top to bottom on a "
                f"{hw.get('cpu_count', '?')}-core CPU without bf16 units (`{laptop['class']}`, "
                f"{hw.get('cpu', '?')}, `make verify` of {laptop['date']}); not yet measured on "
                f"the CI class `{record.get('class', CI_CLASS)}`.{END}")
    if secs is None:
        text = (f"Run time: not measured yet (no passing `make verify` record of `{stem}` on "
                f"`{record.get('class', CI_CLASS)}`).")
    else:
        cores = record.get("hardware", {}).get("cpu_count", "?")
        text = (f"Measured run time: {duration(secs)} top to bottom on the CI machine's "
                f"{cores}-core CPU (`{record['class']}`, `{record['profile']}` profile, "
                f"`make verify` of {record['date']}).")
    if laptop and other is not None:
        hw = laptop.get("hardware", {})
        text += (f" On a {hw.get('cpu_count', '?')}-core CPU without bf16 units "
                 f"(`{laptop['class']}`, {hw.get('cpu', '?')}): {duration(other)}.")
    return f"{START}{text}{END}"


def readme_sentence(record: dict[str, Any]) -> str:
    """Return the marked README sentence that says where the run-time column comes from."""
    cores = record.get("hardware", {}).get("cpu_count", "?")
    return (f"{START}Run times: wall time of `make verify` (nbval, kernel start included) on the "
            f"CI machine's {cores}-core CPU (`{record['class']}`, `{record['profile']}` profile) "
            f"on {record['date']}, from `verified/{record['class']}.json` (a notebook without a "
            f"run there: a real `{LAPTOP_CLASS}` record's time, marked with that class); "
            f"`tools/runtimes.py` writes them here and into each notebook's header.{END}")


def _replace_marked(text: str, phrase: str) -> str:
    head, rest = text.split(START, 1)
    return head + phrase + rest.split(END, 1)[1]


def update_cell0(source: str, record: dict[str, Any], stem: str,
                 laptop: dict[str, Any] | None = None) -> str:
    """Return cell 0's source with the run-time phrase current and typed run times removed.

    Raises:
        ValueError: when no paragraph holds ``**Runs on**``.
    """
    paras = source.split("\n\n")
    hits = [i for i, p in enumerate(paras) if RUNS_ON in p]
    if not hits:
        raise ValueError(f"{stem}: cell 0 has no {RUNS_ON} sentence")
    i = hits[0]
    para, phrase = paras[i], notebook_phrase(record, stem, laptop)
    if START in para and END in para:
        before, rest = para.split(START, 1)
        after = rest.split(END, 1)[1]
        para = TYPED.sub("", before) + phrase + TYPED.sub("", after)
    else:
        para = TYPED.sub("", para).rstrip() + " " + phrase
    paras[i] = para
    return "\n\n".join(paras)


def update_readme(text: str, record: dict[str, Any],
                  laptop: dict[str, Any] | None = None) -> str:
    """Return README.md's text with the run-time column and the marked sentence current.

    A notebook without a passing run in ``record`` gets the real ``laptop`` record's run time,
    named by its class (``"≈ 75 s (cpu-avx2)"``), else ``"not measured yet"``.

    Raises:
        ValueError: when the README lacks the markers or the table's ``run time`` column.
    """
    if START not in text or END not in text:
        raise ValueError(f"README.md has no {START} ... {END} markers")
    lines = _replace_marked(text, readme_sentence(record)).split("\n")
    col = None
    for n, line in enumerate(lines):
        cells = line.split("|")
        if col is None and line.startswith("|") and any(
                c.strip().lower().startswith(COLUMN) for c in cells):
            col = next(k for k, c in enumerate(cells) if c.strip().lower().startswith(COLUMN))
        elif col is not None and line.startswith("|") and (m := _ROW_LINK.search(cells[1])):
            secs = wall(record, m.group(1))
            other = laptop_wall(laptop, m.group(1))
            cells[col] = (f" {duration(secs)} " if secs is not None else
                          f" {duration(other)} (`{laptop['class']}`) " if other is not None and laptop
                          else " not measured yet ")
            lines[n] = "|".join(cells)
    if col is None:
        raise ValueError(f"README.md has no table column whose header starts with {COLUMN!r}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Stale:
    """A file whose run times disagree with the record (``what`` says where)."""

    path: Path
    what: str

    def __str__(self) -> str:
        return f"{self.path.name}: {self.what}"


def check(readme: Path, notebooks: list[Path], record: dict[str, Any], *,
          write: bool = False, laptop: dict[str, Any] | None = None) -> list[Stale]:
    """Compare (and with ``write`` rewrite) the README and notebooks against ``record``
    (and the notebooks' laptop run time against ``laptop``, see :func:`notebook_phrase`).

    Returns:
        One :class:`Stale` per file that disagreed (also when it was rewritten).
    """
    stale = []
    text = readme.read_text(encoding="utf-8")
    new = update_readme(text, record, laptop)
    if new != text:
        stale.append(Stale(readme, "run-time column or sentence differs from the record"))
        if write:
            readme.write_text(new, encoding="utf-8")
    for path in notebooks:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cell = nb["cells"][0]
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        new = update_cell0(src, record, path.stem, laptop)
        if new != src:
            stale.append(Stale(path, "Runs on run time differs from the record (or is typed)"))
            if write:
                cell["source"] = new.splitlines(keepends=True)
                path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n",
                                encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--check`` (default) or ``--write``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite stale files in place")
    parser.add_argument("--check", action="store_true", help="report stale files, exit 1")
    parser.add_argument("--record", type=Path, default=RECORD)
    parser.add_argument("--laptop-record", type=Path, default=LAPTOP_RECORD,
                        help="a real cpu-avx2 record; used when the file exists")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="default: notebooks/NN_*.ipynb")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    laptop = report.load_record(args.laptop_record) if args.laptop_record.exists() else None
    stale = check(args.readme, paths, report.load_record(args.record), write=args.write, laptop=laptop)
    for s in stale:
        print(("fixed " if args.write else "stale ") + str(s))
    if stale and not args.write:
        print(f"{len(stale)} stale; run: python tools/runtimes.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
