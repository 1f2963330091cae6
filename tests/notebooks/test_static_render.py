"""Stored notebooks rendered to HTML with no kernel and no widget JavaScript still show
every widget's picture, checked in headless Chromium.

This is what a reader gets from nbconvert/nbviewer offline, GitHub, or a notebook opened
before it runs: the widget's own view cannot be drawn, so the stored ``text/html`` must
be. The notebooks store no widget state (tests/notebooks/test_stored_outputs.py), so
nbconvert renders them as they are.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests._browser import CHROMIUM, need_chromium

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _pictures(nb) -> int:
    """How many outputs store an nsqviz picture (a view's or a widget's HTML)."""
    return sum('class="nsqviz' in _html(o) for c in nb.cells for o in c.get("outputs", []))


def _html(output) -> str:
    value = output.get("data", {}).get("text/html", "")
    return "".join(value) if isinstance(value, list) else value


def test_every_picture_shows_with_no_kernel(tmp_path):
    """Every stored nsqviz picture, a live widget's included, is drawn; the stored
    outputs' clickable parts work with no kernel: a byte and a tree row light each other
    up (01), a replay box (05), a sticky-map frame (03) and a sequence-diagram arrow (02)
    open their frame's hex view."""
    sync_api = need_chromium()
    nbformat = pytest.importorskip("nbformat")
    from nbconvert import HTMLExporter

    from tests.explorer.test_browser import FLAGS

    pages = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.reads(path.read_text(), as_version=4)
        pictures = _pictures(nb)
        if not pictures:
            continue
        body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
        page = tmp_path / f"{path.stem}.html"
        page.write_text(body)
        pages.append((path.stem, page, pictures))
    assert len(pages) >= 8, [p[0] for p in pages]
    clicks = {"01-wire-format": _linked_selection, "02-live-session": _opens_arrow,
              "03-sticky-packets": _opens_sticky_frame, "06-pcap-replay": _opens_replay_box}
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            view = browser.new_page(viewport={"width": 1400, "height": 900})
            for stem, page, pictures in pages:
                view.goto(page.as_uri())
                outputs = view.locator(".jp-OutputArea-output")
                shown = [o for o in outputs.all()
                         if o.locator(".nsqviz").count() and o.is_visible()
                         and o.bounding_box()["height"] > 12]
                assert len(shown) >= pictures, (stem, len(shown), pictures)
                text = view.locator("body").inner_text()
                assert "VBox(children" not in text and "Error displaying widget" not in text
                if stem in clicks:
                    clicks.pop(stem)(view)
            assert not clicks, f"not clicked: {sorted(clicks)}"
        finally:
            browser.close()


def _opens(view, container: str, box_index: int = 0) -> str:
    """Click box ``box_index`` of the first ``container`` with boxes: exactly one pane
    opens, with a hex view whose bytes and rows are linked; close shuts it. The title of
    the opened hex view."""
    where = view.locator(container).filter(has=view.locator("label.nv-box")).first
    assert where.locator(".nv-pane:visible").count() == 0
    where.locator("label.nv-box").nth(box_index).click()
    pane = where.locator(".nv-pane:visible")
    assert pane.count() == 1
    title = pane.locator(".nsqviz-hex .nv-title").inner_text()
    byte = pane.locator(".nv-b[tabindex]").first
    byte.click()
    row_class = next(c for c in byte.get_attribute("class").split() if c.startswith("nv-k"))
    assert _outline(pane.locator(f"li.{row_class}")) == "solid"
    assert where.locator(".nv-pane:visible").count() == 1  # a click inside keeps it open
    pane.locator(".nv-close").click()
    assert where.locator(".nv-pane:visible").count() == 0
    return title


def _opens_replay_box(view) -> None:
    title = _opens(view, ".nsqviz-replay", 2)
    assert " · c2s · packets " in title or " · s2c · packets " in title, title


def _opens_sticky_frame(view) -> None:
    assert _opens(view, ".nsqviz-sticky").startswith("F0 ")


def _opens_arrow(view) -> None:
    assert _opens(view, ".nsqviz-seq", 1).startswith(("→ ", "← "))


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
