"""Stored notebooks rendered to HTML with no kernel and no widget JavaScript still show
every widget's picture, checked in headless Chromium.

This is what a reader gets from nbconvert/nbviewer offline, GitHub, or a notebook opened
before it runs: the widget's own view cannot be drawn, so the stored ``text/html`` must
be. Widget state is dropped before rendering (nbconvert would otherwise emit only a
placeholder for the widget manager it loads from a CDN).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("NSQVIZ_CHROMIUM", "/usr/bin/chromium")
WIDGET = "application/vnd.jupyter.widget-view+json"

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _with_widgets() -> list[Path]:
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        if any(WIDGET in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", [])):
            found.append(path)
    return found


def test_every_widget_cell_shows_its_static_picture(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium (scripts/sysdeps.sh)")
    sync_api = pytest.importorskip("playwright.sync_api")
    nbformat = pytest.importorskip("nbformat")
    from nbconvert import HTMLExporter

    from tests.explorer.test_browser import FLAGS

    pages = []
    for path in _with_widgets():
        nb = nbformat.reads(path.read_text(), as_version=4)
        nb.metadata.pop("widgets", None)
        widgets = sum(WIDGET in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
        body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
        page = tmp_path / f"{path.stem}.html"
        page.write_text(body)
        pages.append((path.stem, page, widgets))
    assert pages, "no notebook stores a widget"
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            view = browser.new_page(viewport={"width": 1400, "height": 900})
            for stem, page, widgets in pages:
                view.goto(page.as_uri())
                outputs = view.locator(".jp-OutputArea-output")
                shown = [o for o in outputs.all()
                         if o.locator(".nsqviz").count() and o.is_visible()
                         and o.bounding_box()["height"] > 40]
                assert len(shown) >= widgets, (stem, len(shown), widgets)
                text = view.locator("body").inner_text()
                assert "VBox(children" not in text and "Error displaying widget" not in text
                if stem == "01-wire-format":
                    _linked_selection(view)
        finally:
            browser.close()


def _outline(locator) -> str:
    return locator.evaluate("e => getComputedStyle(e).outlineStyle")


def _linked_selection(view) -> None:
    """Click a byte: its tree row lights up; click a tree row: its bytes light up."""
    hexview = view.locator(".nsqviz-hex").filter(has=view.locator("li.nv-k2")).first
    byte, row = hexview.locator(".nv-b.nv-k2").first, hexview.locator("li.nv-k2").first
    other = hexview.locator("li.nv-k3").first
    assert _outline(row) == "none"
    byte.click()
    assert _outline(row) == "solid" and _outline(other) == "none"
    hexview.locator("li.nv-k3").first.click()
    assert _outline(hexview.locator(".nv-b.nv-k3").first) == "solid"
    assert _outline(row) == "none"
