"""How make test deals the tests to its workers (tests/_xdist.py): the units, and the rule
that keeps a costly session fixture from being built once per worker."""

from __future__ import annotations

import ast
from pathlib import Path

from tests import _xdist

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def test_a_file_is_a_unit_and_a_notebook_keeps_its_cells_on_one_kernel():
    assert _xdist.unit_of("tests/nsq/test_codec.py::test_x[a::b]") == "tests/nsq/test_codec.py"
    cells = [f"notebooks/02-live-session.ipynb::Cell {i}" for i in range(3)]
    assert {_xdist.unit_of(c) for c in cells} == {"notebooks/02-live-session.ipynb"}


def test_a_shared_session_fixture_keeps_its_folder_on_one_worker():
    ids = ["tests/pipeline/test_frames.py::test_a", "tests/pipeline/test_cluster.py::test_b"]
    assert {_xdist.unit_of(i) for i in ids} == {"tests/pipeline/"}


def test_the_learner_notebooks_run_apart():
    learner = "tests/explorer/test_browser_learner.py"
    assert _xdist.UNITS[learner] == _xdist.EACH
    ids = [f"{learner}::test_a_learner_steps_through_without_a_traceback[{n}]"
           for n in ("02-live-session.ipynb", "11-tubemq.ipynb")]
    assert len({_xdist.unit_of(i) for i in ids}) == 2


class _Item:
    def __init__(self, nodeid: str, *marks: str):
        self.nodeid, self.marks = nodeid, marks

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.marks else None


def test_the_longest_units_start_first_then_the_marked_ones():
    learner = "tests/explorer/test_browser_learner.py::test_a_learner[02]"
    items = [_Item("tests/nsq/test_codec.py::test_a"),
             _Item("tests/nsq/test_x.py::test_b", "slow"),
             _Item(learner, "browser"),
             _Item("tests/pipeline/test_frames.py::test_c", "spark"),
             _Item("tests/analysis/test_cli.py::test_d"),
             _Item("tests/pipeline/test_cli.py::test_e")]
    _xdist.longest_first(items)  # type: ignore[arg-type]
    assert [i.nodeid.split("::")[1] for i in items] == [
        "test_c", "test_e", "test_a_learner[02]", "test_b", "test_a", "test_d"]


def _session_fixtures(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and any(
                        k.arg == "scope" and isinstance(k.value, ast.Constant)
                        and k.value.value == "session" for k in deco.keywords):
                    found.append(node.name)
    return found


def test_every_session_fixture_is_built_on_one_worker():
    """A session-scoped fixture outside a TOGETHER folder would be built again on every
    worker that runs one of its tests: a Spark session or a site build each time."""
    together = tuple(p for p, kind in _xdist.UNITS.items() if kind == _xdist.TOGETHER)
    stray = {f"{p.relative_to(ROOT)}::{name}" for p in TESTS.rglob("*.py")
             for name in _session_fixtures(p)
             if not str(p.relative_to(ROOT)).startswith(together)}
    assert not stray, (f"{sorted(stray)}: move each into a TOGETHER folder of "
                       "tests._xdist.UNITS (or list its folder there), or give it module scope")
