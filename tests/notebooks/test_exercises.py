"""Every notebook's exercises: the answer keys hold against the code, the cells are current."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsqviz.teaching.exercises import EXERCISES, Question, markdown

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
ALL = [(name, i, q) for name, qs in EXERCISES.items() for i, q in enumerate(qs, 1)]


@pytest.mark.parametrize(("name", "number", "question"), ALL,
                         ids=[f"{n}-q{i}" for n, i, _ in ALL])
def test_answer_key_is_what_the_code_says(name: str, number: int, question: Question):
    assert question.check() == question.answer, f"{name} question {number}: wrong key"


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_notebook_ends_with_its_exercises(name: str):
    questions = EXERCISES[name]
    assert 4 <= len(questions) <= 8
    cells = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())["cells"]
    assert "".join(cells[-1]["source"]) == markdown(questions), (
        f"{name}: exercises cell stale; run `python -m nsqviz.teaching.exercises notebooks`")


def test_a_wrong_key_fails():
    wrong = Question("?", 36, "", lambda: EXERCISES["01-wire-format"][0].check())
    assert wrong.check() != wrong.answer


def test_every_teaching_notebook_has_exercises():
    """01 and the README say every notebook after the reference card ends with exercises."""
    teaching = {path.stem for path in NOTEBOOKS.glob("*.ipynb")} - {"00-reference"}
    assert set(EXERCISES) == teaching
