"""tools/course_time.py: the course time README.md states is a count from the notebooks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("course_time", ROOT / "tools" / "course_time.py")
course_time = importlib.util.module_from_spec(_spec)
sys.modules["course_time"] = course_time
_spec.loader.exec_module(course_time)
Count = course_time.Count


def _md(src, **meta):
    return {"cell_type": "markdown", "metadata": meta, "source": src}


def _code(src, outputs=(), **meta):
    return {"cell_type": "code", "metadata": meta, "source": src, "outputs": list(outputs),
            "execution_count": 1}


FOLDED = {"jupyter": {"source_hidden": True}, "cellView": "form"}
NB = {"cells": [
    _md("# 00 · Title\n\nTwo words [see this](https://example.com/a/b) <!-- hidden words -->"),
    _code("x = 1\n\ny = 2\n", [{"output_type": "stream", "name": "stdout", "text": ["one two three\n"]}]),
    _code("#@title Evidence: checks\nassert x == 1\nassert y == 2\n", **FOLDED),
    _md("## Deep dive (optional): internals\n\nfour words of prose"),
    _code("z = 3\n", [{"output_type": "display_data",
                       "data": {"image/png": "AAAA", "text/plain": "<Figure size 640x480>"}}]),
    _md("### a sub-heading inside the dive"),
    _md("## Summary\n\nback in the lesson"),
]}


def test_words_skip_link_targets_comments_and_markup():
    assert course_time.words("See [the docs](https://x.y/z) -- 2 GB/s.") == 5  # See the docs 2 GB/s
    assert course_time.words("| a | b |\n|---|---|\n| 1 | 2 |") == 4
    assert course_time.words("<b>bold</b> &amp; <!-- not this -->") == 1


def test_lesson_closes_folds_and_skips_deep_dives():
    lesson = course_time.count(NB, lesson=True)
    # "00 Title Two words see this" + "Summary back in the lesson"; not the hidden comment
    assert lesson.prose_words == 6 + 5
    assert lesson.code_lines == 2 + 1  # x, y; the folded cell's #@title only; the dive's z left out
    assert lesson.output_words == 3 and lesson.figures == 0
    everything = course_time.count(NB, lesson=False)
    assert everything.code_lines == 2 + 3 + 1 and everything.figures == 1
    assert everything.prose_words == lesson.prose_words + 8 + 5  # the dive's two cells
    assert everything.minutes > lesson.minutes


def test_minutes_use_the_stated_rates():
    c = Count(prose_words=course_time.PROSE_WPM, code_lines=course_time.CODE_LINES_PER_MIN,
              output_words=course_time.OUTPUT_WPM, figures=2)
    assert c.minutes == pytest.approx(3 + 2 * course_time.FIGURE_S / 60)


@pytest.mark.parametrize("minutes, text", [(0, "≈ 0.5 h"), (44, "≈ 0.5 h"), (46, "≈ 1 h"),
                                           (498, "≈ 8.5 h"), (525, "≈ 9 h")])
def test_hours_to_the_nearest_half_hour(minutes, text):
    assert course_time.hours(minutes) == text


def test_not_a_notebook_raises():
    with pytest.raises(ValueError, match="not a notebook"):
        course_time.count({"metadata": {}}, lesson=True)


def test_update_readme_needs_markers_and_is_idempotent():
    text = f"a\n{course_time.START}old{course_time.END}\nb"
    once = course_time.update_readme(text, "new")
    assert once == f"a\n{course_time.START}new{course_time.END}\nb"
    assert course_time.update_readme(once, "new") == once
    with pytest.raises(ValueError, match="markers"):
        course_time.update_readme("no markers", "x")


def test_readme_states_the_counted_course_time():
    paths = course_time.notebooks()
    assert len(paths) >= 7, paths
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    expected = course_time.update_readme(readme, course_time.readme_sentence(paths))
    assert readme == expected, (
        "README.md's course time is not the count from the notebooks: python tools/course_time.py --write")


def test_prose_that_mentions_a_deep_dive_does_not_open_one():
    nb = {"cells": [_md("# 06 · Title\n\nFolded **Deep dive (optional)** cells hold the depth."),
                    _md("## The idea\n\nfive words of prose here")]}
    assert course_time.count(nb, lesson=True).prose_words > 10  # the header did not skip it all


def test_readme_table_gets_each_notebooks_counted_minutes():
    text = ("| notebook | what | after | reading | run |\n|---|---|---|---|---|\n"
            "| [00 · Setup](nb/00.ipynb) | devices | — | 60–75 min | ≈ 30 s |\n"
            "| [01 · More](nb/01.ipynb) | rings | 00 | 90 min | ≈ 65 s |\n")
    out = course_time.update_reading_column(text, {"00": 56.4})
    assert "| [00 · Setup](nb/00.ipynb) | devices | — | 56 min | ≈ 30 s |" in out
    assert "| 00 | 90 min | ≈ 65 s |" in out  # a notebook without a count is left alone
