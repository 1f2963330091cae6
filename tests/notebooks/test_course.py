"""One reading order, one set of times: the notebooks, their Next links and the README
say what :mod:`nsqviz.teaching.course` says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nsqviz.teaching.course import COURSE, NEXT_ID, PATH_ID, next_cell, path_cell

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def _markdown(name: str) -> dict[str, str]:
    nb = json.loads((NOTEBOOKS / name).read_text())
    return {c["id"]: "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"}


def test_every_notebook_is_in_the_course_once():
    assert sorted(lesson.file for lesson in COURSE) == sorted(
        p.name for p in NOTEBOOKS.glob("*.ipynb"))


def test_the_files_are_numbered_in_reading_order():
    """JupyterLab's file browser sorts by name: it shows the course in its order."""
    assert [lesson.number for lesson in COURSE] == [f"{n:02d}" for n in range(len(COURSE))]


@pytest.mark.parametrize("lesson", COURSE[1:], ids=lambda lesson: lesson.number)
def test_each_notebook_links_to_the_next_in_the_course(lesson):
    cells = _markdown(lesson.file)
    assert cells.get(NEXT_ID) == next_cell(lesson.file), \
        "stale: run `python -m nsqviz.teaching.course notebooks`"
    others = [cid for cid, text in cells.items() if "**Next:**" in text and cid != NEXT_ID]
    assert not others, f"a second Next link in {others}"
    stated = re.findall(r"About (\d+) minutes", "\n".join(cells.values()))
    assert all(int(m) == lesson.minutes for m in stated), (stated, lesson.minutes)


def test_the_path_table_is_the_course():
    assert _markdown("01-wire-format.ipynb")[PATH_ID] == path_cell()


def test_the_readme_reads_in_the_same_order_and_times():
    readme = (ROOT / "README.md").read_text()
    said = re.findall(r"(\d\d) \((\d+) min", readme)
    assert said == [(lesson.number, str(lesson.minutes)) for lesson in COURSE[1:]]


def test_the_sites_course_is_the_course():
    """The website's sidebar (docs/index.md's course toctree) lists the course in its
    order; the reference card sits under Reference."""
    index = (ROOT / "docs" / "index.md").read_text()
    block = index.split(":caption: The course", 1)[1].split("```", 1)[0]
    listed = re.findall(r"^/notebooks/(\S+)$", block, flags=re.M)
    assert listed == [lesson.file.removesuffix(".ipynb") for lesson in COURSE
                      if lesson.minutes is not None]
