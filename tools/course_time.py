"""The course's reading time, counted from the notebooks: the figure README.md states, tested.

    python tools/course_time.py           # per notebook: words, code lines, outputs, minutes
    python tools/course_time.py --check   # exit 1 when README.md's stated times disagree
    python tools/course_time.py --write   # rewrite README.md's sentence between the markers

What a learner reads in a notebook with its stored outputs, at stated rates (assumptions, not
measurements of learners; change them here and ``--write``):

* prose: the words of markdown cells, at ``PROSE_WPM`` = 200 words per minute, a common figure
  for careful reading of technical text;
* code: the non-blank lines of code cells, at ``CODE_LINES_PER_MIN`` = 10 (6 s a line: reading
  to follow what it does, not typing it);
* outputs: the words of printed and displayed text (stdout, results, HTML tables, tracebacks)
  at ``OUTPUT_WPM`` = 200, and ``FIGURE_S`` = 30 s for each figure.

A check of the rates: for 00-05 as they stood on 2026-12-03 the count gave 428 min, and the
README's table of a new learner's read of 00-05 (typed, per notebook) adds up to 405-450 min.

Two counts per notebook: the *lesson*, as a learner who unfolds nothing reads it (folded code
cells, ``"jupyter": {"source_hidden": true}`` such as the Colab bootstrap and "Evidence" cells,
count their outputs and their first line, the ``#@title``, not their code; a section whose
heading says "Deep dive (optional)" is left out, up to the next heading of its level or
higher), and *everything*, with every fold open.  Running the cells is not counted (a minute
or two each on a CPU; the README's run-time column has them), nor the exercises' thinking time.

README.md holds the sentence between ``<!-- course-time:start -->`` and
``<!-- course-time:end -->``: the lesson total, everything, and the one-GPU path
(``ONE_GPU_PATH``), each to the nearest half hour; ``tests/test_course_time.py`` fails when it
disagrees with the notebooks (run ``--write``).

Owns: this count and that sentence.  Lives elsewhere: run times (``tools/runtimes.py``, from
``make verify``), the typed per-notebook reading estimates in README's table.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
PROSE_WPM = 200
CODE_LINES_PER_MIN = 10
OUTPUT_WPM = 200
FIGURE_S = 30
#: The suggested order for a learner with one GPU (README's start box).
ONE_GPU_PATH = ("00", "02", "03", "06")
START, END = "<!-- course-time:start -->", "<!-- course-time:end -->"
DEEP_DIVE = re.compile(r"^#{1,6}\s.*deep dive \(optional\)", re.I | re.M)  # in a heading
_WORD = re.compile(r"[^\W_][\w'’.,:;/+-]*")  # a token with a letter or digit in front
_HEADING = re.compile(r"^(#{1,6})\s", re.M)
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml")


@dataclass(frozen=True)
class Count:
    """What one notebook (or a sum of them) asks a learner to read.

    Attributes:
        prose_words: words of markdown.
        code_lines: non-blank lines of code that are shown.
        output_words: words of text outputs.
        figures: number of image outputs.
    """

    prose_words: int = 0
    code_lines: int = 0
    output_words: int = 0
    figures: int = 0

    def __add__(self, other: Count) -> Count:
        return Count(self.prose_words + other.prose_words, self.code_lines + other.code_lines,
                     self.output_words + other.output_words, self.figures + other.figures)

    @property
    def minutes(self) -> float:
        """Reading time in minutes at the module's rates."""
        return (self.prose_words / PROSE_WPM + self.code_lines / CODE_LINES_PER_MIN
                + self.output_words / OUTPUT_WPM + self.figures * FIGURE_S / 60)


def words(text: str) -> int:
    """Count the words of markdown or plain text: link targets, HTML tags and comments, and
    table rules are not words; a token counts when it starts with a letter or digit.

    Example: ``words("See [the docs](https://x.y/z) -- 2 GB/s.")`` is 5.
    """
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "] ", text)  # [label](target): the label only
    text = re.sub(r"<[^>]+>", " ", text)
    return len(_WORD.findall(html.unescape(text)))


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _is_folded(cell: dict[str, Any]) -> bool:
    return bool(cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"))


def _outputs_hidden(cell: dict[str, Any]) -> bool:
    return bool(cell.get("metadata", {}).get("jupyter", {}).get("outputs_hidden"))


def output_count(cell: dict[str, Any]) -> Count:
    """Count a code cell's outputs: text words and figures (an output with an image counts as
    one figure, its ``text/plain`` fallback such as ``<Figure size ...>`` not as words)."""
    n_words = n_figures = 0
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            n_words += words(_source({"source": out.get("text", "")}))
        elif kind == "error":
            tb = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(out.get("traceback", [])))
            n_words += words(tb)
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if any(t in data for t in _IMAGE_TYPES):
                n_figures += 1
            else:
                for t in ("text/markdown", "text/html", "text/plain"):
                    if t in data:
                        n_words += words(_source({"source": data[t]}))
                        break
    return Count(output_words=n_words, figures=n_figures)


def count(nb: dict[str, Any], *, lesson: bool) -> Count:
    """Count what a learner reads in one notebook (an nbformat 4 dict).

    Args:
        nb: the notebook, as ``json.load`` returns it.
        lesson: True: folds closed (folded code shows its first line and its outputs; "Deep
            dive (optional)" sections are skipped). False: everything open.

    Raises:
        ValueError: when ``nb`` has no ``cells`` list (not a notebook).
    """
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise ValueError("not a notebook: no 'cells' list")
    total = Count()
    skip_level = 0  # inside a deep dive opened by a heading of this level (0: not inside)
    for cell in cells:
        src = _source(cell)
        if cell.get("cell_type") == "markdown":
            levels = [len(h) for h in _HEADING.findall(src)]
            if skip_level and levels and min(levels) <= skip_level:
                skip_level = 0  # a heading of the deep dive's level or higher ends it
            dive = DEEP_DIVE.search(src)  # a heading naming a deep dive, not prose mentioning one
            if lesson and not skip_level and dive:
                skip_level = len(_HEADING.match(dive.group()).group(1))
        if lesson and skip_level:
            continue
        if cell.get("cell_type") == "markdown":
            total += Count(prose_words=words(src))
        elif cell.get("cell_type") == "code":
            lines = [ln for ln in src.splitlines() if ln.strip()]
            if lesson and _is_folded(cell):
                lines = lines[:1]  # the #@title line
            total += Count(code_lines=len(lines))
            if not (lesson and _outputs_hidden(cell)):
                total += output_count(cell)
    return total


def notebooks(folder: Path = ROOT / "notebooks") -> list[Path]:
    """Return the course's notebooks (``NN_name.ipynb``), in order."""
    return sorted(folder.glob(NOTEBOOK_GLOB))


def counts(paths: list[Path], *, lesson: bool) -> dict[str, Count]:
    """Map each notebook's two-digit number (``"00"``) to its count."""
    return {p.name[:2]: count(json.loads(p.read_text(encoding="utf-8")), lesson=lesson)
            for p in paths}


def hours(minutes: float) -> str:
    """Return minutes as hours to the nearest half hour: ``"≈ 9.5 h"`` (at least ``"≈ 0.5 h"``)."""
    return f"≈ {max(0.5, round(minutes / 30) / 2):g} h"


def readme_sentence(paths: list[Path]) -> str:
    """Return the sentence README.md shows between the markers, from the notebooks."""
    lesson, full = counts(paths, lesson=True), counts(paths, lesson=False)
    total = sum(c.minutes for c in lesson.values())
    everything = sum(c.minutes for c in full.values())
    path = sum(lesson[n].minutes for n in ONE_GPU_PATH if n in lesson)
    first, last = min(lesson), max(lesson)
    unfolded = (f"; {hours(everything)} with every folded cell open" if hours(everything) != hours(total)
                else "")
    return (f"Reading time, counted from the notebooks (`python tools/course_time.py`: prose at "
            f"{PROSE_WPM} words/min, code at {CODE_LINES_PER_MIN} lines/min, printed output at "
            f"{OUTPUT_WPM} words/min, {FIGURE_S} s a figure; running the cells not included): "
            f"**{hours(total)}** for all of {first}–{last}{unfolded}; "
            f"**{hours(path)}** for the one-GPU path {' → '.join(ONE_GPU_PATH)}.")


def update_readme(text: str, sentence: str) -> str:
    """Return ``text`` with the sentence between the markers replaced.

    Raises:
        ValueError: when the markers are missing (put them in README's start box).
    """
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"README.md has no {START} ... {END} markers")
    return pattern.sub(lambda _: START + sentence + END, text, count=1)


_ROW = re.compile(r"^(\| \[(\d\d) · [^|]*\|[^|]*\|[^|]*\| )([^|]*?)( \|.*)$", re.M)


def update_reading_column(text: str, minutes: dict[str, float]) -> str:
    """Return ``text`` with the reading column of README's notebook table (the 4th: notebook,
    what, after, reading, ...) set to each notebook's counted lesson minutes; rows of
    notebooks not in ``minutes`` are left as they are."""
    def cell(m: re.Match[str]) -> str:
        n = m.group(2)
        return m.group(1) + (f"{minutes[n]:.0f} min" if n in minutes else m.group(3)) + m.group(4)
    return _ROW.sub(cell, text)


def table(paths: list[Path]) -> str:
    """Return a Markdown table of the count per notebook (lesson), with totals."""
    lesson, full = counts(paths, lesson=True), counts(paths, lesson=False)
    rows = ["| notebook | prose words | code lines | output words | figures | lesson | everything |",
            "|---|---|---|---|---|---|---|"]
    for n, c in lesson.items():
        rows.append(f"| {n} | {c.prose_words} | {c.code_lines} | {c.output_words} | {c.figures} "
                    f"| {c.minutes:.0f} min | {full[n].minutes:.0f} min |")
    s = sum(lesson.values(), Count())
    rows.append(f"| all | {s.prose_words} | {s.code_lines} | {s.output_words} | {s.figures} "
                f"| {s.minutes / 60:.1f} h | {sum(c.minutes for c in full.values()) / 60:.1f} h |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Print the table, or check or write README.md's sentence; return the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when README.md disagrees")
    ap.add_argument("--write", action="store_true", help="rewrite README.md's sentence")
    args = ap.parse_args(argv)
    paths, readme = notebooks(), ROOT / "README.md"
    if not (args.check or args.write):
        print(table(paths))
        print(readme_sentence(paths))
        return 0
    text = readme.read_text(encoding="utf-8")
    minutes = {n: c.minutes for n, c in counts(paths, lesson=True).items()}
    new = update_reading_column(update_readme(text, readme_sentence(paths)), minutes)
    if args.write:
        if new != text:
            readme.write_text(new, encoding="utf-8")
        print("README.md: " + ("updated" if new != text else "up to date"))
        return 0
    if new != text:
        print("README.md's course time disagrees with the notebooks: python tools/course_time.py --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
