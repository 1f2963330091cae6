"""The stored outputs of every notebook read well without a kernel.

GitHub, nbviewer, Binder before the first run and a text export show what the notebook
file holds. So: no widget is stored as ipywidgets' bare repr (``VBox(children=...``),
every widget view also stores an HTML picture, each shared ``<style>`` block is stored
once per notebook (not in every output), and no nbval directive shows as a comment in a
cell (they live in cell tags).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nsqviz.widgets import style

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"
BARE = re.compile(r"^\s*(VBox|HBox|Box|HTML|Output|Tab|Accordion|GridBox|Button|Text|"
                  r"IntSlider|Dropdown|Play)\(")
STYLE = re.compile(r"<style>.*?</style>", re.S)


def _outputs(path: Path):
    nb = json.loads(path.read_text())
    for index, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            yield index, out.get("data", {})


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_bare_widget_and_every_widget_has_a_picture(path: Path):
    for index, data in _outputs(path):
        plain = _text(data.get("text/plain", ""))
        assert not BARE.match(plain), f"cell {index} stores a bare widget repr: {plain[:60]!r}"
        if WIDGET in data:
            assert _text(data.get("text/html", "")).strip(), f"cell {index}: widget, no HTML"
            assert plain.strip() and not plain.startswith("<"), (
                f"cell {index}: widget with no meaningful text/plain: {plain[:60]!r}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_shared_css_is_stored_once(path: Path):
    blocks: dict[str, list[int]] = {}
    for index, data in _outputs(path):
        for block in STYLE.findall(_text(data.get("text/html", ""))):
            blocks.setdefault(block, []).append(index)
    repeated = {b[:40]: cells for b, cells in blocks.items() if len(cells) > 1}
    assert not repeated, f"style blocks stored more than once (cells): {repeated}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_nbval_comment_in_cells(path: Path):
    nb = json.loads(path.read_text())
    for index, cell in enumerate(nb["cells"]):
        assert "NBVAL_" not in "".join(cell["source"]), (
            f"cell {index} shows an nbval directive; use the cell tag instead")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_widget_state_is_stored(path: Path):
    """A stored widget reference names a model only a running kernel has: JupyterLab
    shows "model not found" for it before the notebook runs, nbconvert/nbviewer a blank
    area. The HTML picture stored beside it is what a reader without a kernel gets, so
    the reference and the state snapshot are not stored (scripts/run_notebooks.py)."""
    nb = json.loads(path.read_text())
    assert "widgets" not in nb["metadata"], "metadata.widgets: run scripts/run_notebooks.py"
    for index, data in _outputs(path):
        assert WIDGET not in data, f"cell {index} stores {WIDGET}: run scripts/run_notebooks.py"


def test_run_notebooks_strips_what_a_kernel_alone_can_show():
    import importlib.util

    import nbformat

    spec = importlib.util.spec_from_file_location(
        "run_notebooks", Path(__file__).parents[2] / "scripts" / "run_notebooks.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    nb = nbformat.v4.new_notebook(metadata={"widgets": {"state": {}}})
    out = nbformat.v4.new_output("display_data", data={
        WIDGET: {"model_id": "m"}, "text/html": "<b>picture</b>", "text/plain": "text"})
    nb.cells.append(nbformat.v4.new_code_cell("w", outputs=[out]))
    assert script.strip_widget_state(nb) == 2
    assert "widgets" not in nb.metadata
    assert nb.cells[0].outputs[0]["data"] == {"text/html": "<b>picture</b>",
                                              "text/plain": "text"}


def test_once_strips_only_blocks_already_shown(monkeypatch):
    monkeypatch.setattr(style, "_shown", set())
    first = style.once(style.CSS + "<b>a</b>")
    again = style.once(style.CSS + "<b>b</b>")
    assert first == style.CSS + "<b>a</b>" and again.strip() == "<b>b</b>"
    bundle = style.Live(_Widget(), style.CSS + "<i>x</i>", "x as text")._repr_mimebundle_()
    assert bundle["text/html"].strip() == "<i>x</i>" and bundle["text/plain"] == "x as text"
    assert WIDGET in bundle


class _Widget:
    def _repr_mimebundle_(self):
        return {WIDGET: {"model_id": "m"}, "text/plain": "VBox(children=())"}


MARKER = re.compile(r'<marker id="([^"]+)"')


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_svg_marker_ids_are_per_picture(path: Path):
    """Arrowheads keep working with two diagrams or two notebooks on one page."""
    for index, data in _outputs(path):
        for marker in MARKER.findall(_text(data.get("text/html", ""))):
            assert re.fullmatch(r"nv-(ah|fsm-ah)-[0-9a-f]{10}(-\w+)?", marker), (
                f"cell {index}: marker id {marker!r} is not unique to its picture")


def test_unique_ids_follow_the_content():
    a, b = '<svg><marker id="x-@ID@"/>1</svg>', '<svg><marker id="x-@ID@"/>2</svg>'
    assert style.unique_ids(a) == style.unique_ids(a) != style.unique_ids(b)
    assert "@ID@" not in style.unique_ids(a)
