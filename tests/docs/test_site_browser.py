"""The built website in a real headless Chromium, read as a reader meets it.

The site ``make docs`` builds (the session's ``site`` fixture) is served on a free
loopback port. Every notebook page is opened at 1400x900 in Furo's light and dark theme
(the reader's system setting, which Furo follows until a reader picks one): its stored
pictures are drawn with their own style sheet (computed styles, not only present) and
keep their contrast with the page; a byte and its tree row light each other up; a
frame box (replay, sticky-packet map, sequence diagram) opens its frame's bytes and
closes again -- all without a kernel; nothing scrolls sideways (but a sequence
diagram, in a box of its own). The search page finds
``max_rdy_count``. Screenshots go to ``test-artifacts/`` (git-ignored).

Chromium is Debian's (``/usr/bin/chromium``, installed by ``scripts/sysdeps.sh``), driven
by the ``playwright`` package, as in ``tests/explorer/test_browser.py``.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests._browser import CHROMIUM, need_chromium
from tests.docs.conftest import ROOT, Site
from tests.explorer.test_browser import _CONTRAST, ARTIFACTS, FLAGS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
# the containers whose frame boxes open a pane with the frame's bytes
BOXES = (".nsqviz-replay", ".nsqviz-sticky", ".nsqviz-seq")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- the base's name
        pass


@pytest.fixture(scope="module")
def served(site: Site) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (search needs more than file://)."""
    assert site.returncode == 0, site.output[-2000:]
    handler = functools.partial(_Quiet, directory=str(site.html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser(served: str) -> Iterator[Any]:
    sync_api = need_chromium()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _outline(locator: Any) -> str:
    return str(locator.evaluate("e => getComputedStyle(e).outlineStyle"))


def _key(locator: Any) -> str:
    """The field class (``nv-kN``) that ties a byte to its tree row."""
    return str(next(c for c in locator.get_attribute("class").split() if c.startswith("nv-k")))


_STYLED = """() => [...document.querySelectorAll('article .nsqviz')]
  .filter(e => e.offsetParent && !e.parentElement.closest('.nsqviz'))
  .map(e => {
    const s = getComputedStyle(e), b = e.querySelector('.nv-b');
    return {size: s.fontSize, font: s.fontFamily, lineHeight: s.lineHeight,
            byte: b ? [getComputedStyle(b).display, getComputedStyle(b).backgroundColor] : null};
  })"""

_SIDEWAYS = """() => {
  const out = [], root = document.documentElement;
  if (root.scrollWidth > root.clientWidth) {
    out.push(`page: ${root.scrollWidth} > ${root.clientWidth}`);
  }
  for (const e of document.querySelectorAll('article *')) {
    if (!e.offsetParent || e.scrollWidth <= e.clientWidth + 1) continue;
    // a sequence diagram scrolls in its own box by design (drawn full size, readable)
    if (e.classList.contains('nv-seqscroll')) continue;
    if (['auto', 'scroll'].includes(getComputedStyle(e).overflowX)) {
      out.push(`${e.tagName}.${e.getAttribute('class')}: ${e.scrollWidth} > ${e.clientWidth}`
               + ` "${(e.innerText || '').slice(0, 60)}"`);
    }
  }
  return out;
}"""


_OPEN_SPOT = """box => {
  const r = box.getBoundingClientRect();
  for (const f of [0.5, 0.375, 0.625, 0.125, 0.875]) {
    const hit = document.elementFromPoint(r.x + r.width * f, r.y + r.height / 2);
    if (hit && box.contains(hit)) return {x: r.width * f, y: r.height / 2};
  }
  return {x: r.width / 2, y: r.height / 2};
}"""


def _pictures_are_styled(page: Any, stem: str) -> int:
    """Every visible picture carries its own style sheet's look: 13 px text in its sans
    font, and bytes as filled inline blocks. The number of pictures seen."""
    found = page.evaluate(_STYLED)
    for picture in found:
        assert picture["size"] == "13px" and "Segoe UI" in picture["font"], (stem, picture)
        if picture["byte"] is not None:
            display, fill = picture["byte"]
            assert display == "inline-block" and fill not in ("rgba(0, 0, 0, 0)",), (stem, picture)
    return len(found)


def _byte_and_row_light_each_other(page: Any) -> bool:
    """In the first hex view showing two fields: a byte lights its tree row up, a tree row
    its bytes (and the other row goes dark). False when the page shows no such view."""
    for view in page.locator("article .nsqviz-hex:visible").all()[:20]:
        rows: dict[str, Any] = {}
        for row in view.locator("li[tabindex]").all()[:12]:
            key = _key(row)
            if view.locator(f".nv-b.{key}").count():
                rows.setdefault(key, row)
        if len(rows) < 2:
            continue
        (first, row), (second, other) = list(rows.items())[:2]
        view.scroll_into_view_if_needed()
        assert _outline(row) == "none"
        view.locator(f".nv-b.{first}").first.click()
        assert _outline(row) == "solid" and _outline(other) == "none"
        other.click()
        assert _outline(view.locator(f".nv-b.{second}").first) == "solid"
        assert _outline(row) == "none"
        return True
    return False


def _box_opens_its_frame(page: Any) -> bool:
    """A frame box opens exactly one pane, whose hex view (if the frame is small enough
    to draw) is linked; its close button shuts it. False when the page has no visible
    frame box."""
    for container in BOXES:
        where = page.locator(f"article {container}:visible").filter(
            has=page.locator("label.nv-box"))
        if not where.count():
            continue
        where = where.first
        where.scroll_into_view_if_needed()
        assert where.locator(".nv-pane:visible").count() == 0
        box = where.locator("label.nv-box").first
        box.scroll_into_view_if_needed()
        # where a reader's click reaches the box: block marks stand on 07's 13-block frame
        box.click(position=box.evaluate(_OPEN_SPOT))
        pane = where.locator(".nv-pane:visible")
        assert pane.count() == 1, container
        if pane.locator(".nsqviz-hex").count():  # (a frame too big to draw says so instead)
            assert pane.locator(".nsqviz-hex .nv-title").first.inner_text().strip()
            byte = pane.locator(".nv-b[tabindex]").first
            byte.click()
            assert _outline(pane.locator(f"li.{_key(byte)}").first) == "solid"
        pane.locator(".nv-close").first.click()
        assert where.locator(".nv-pane:visible").count() == 0
        return True
    return False


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_notebook_page_as_a_reader_meets_it(browser: Any, served: str, theme: str) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, color_scheme=theme)
    page = context.new_page()
    seen: dict[str, dict[str, object]] = {}
    poor: dict[str, object] = {}
    wide: dict[str, list[str]] = {}
    try:
        for stem in NOTEBOOKS:
            page.goto(f"{served}/notebooks/{stem}.html")
            page.wait_for_load_state("load")
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert (background == "rgb(255, 255, 255)") == (theme == "light"), (stem, background)
            pictures = _pictures_are_styled(page, stem)
            seen[stem] = {"pictures": pictures, "linked": _byte_and_row_light_each_other(page),
                          "box": _box_opens_its_frame(page)}
            for sel, least in ((".nsqviz .nv-title", 4.5), (".nv-tree li .nv-mono", 4.5),
                               (".nsqviz-hex .nv-b", 4.5), (".nsqviz .nv-muted", 3)):
                bad = [f for f in page.evaluate(_CONTRAST, f"article {sel}") if f[0] < least]
                if bad:
                    poor[f"{stem} {sel}"] = bad[:3]
            if found := page.evaluate(_SIDEWAYS):
                wide[stem] = found
            if pictures:
                picture = page.locator("article .nsqviz:visible").first
                picture.scroll_into_view_if_needed()
                page.screenshot(path=str(ARTIFACTS / f"site-{stem}-{theme}.png"))
    finally:
        context.close()
    assert not poor, poor
    assert not wide, wide
    # what the notebooks show today: pictures on most pages, linked bytes and boxes on many
    assert sum(bool(s["pictures"]) for s in seen.values()) >= 8, seen
    assert sum(bool(s["linked"]) for s in seen.values()) >= 6, seen
    assert sum(bool(s["box"]) for s in seen.values()) >= 5, seen


def test_search_finds_max_rdy_count(browser: Any, served: str) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(f"{served}/docs/index.html")
        box = page.locator("input[name=q]").first
        box.fill("max_rdy_count")
        box.press("Enter")
        # the summary is written once every page is scored (names first, then full text)
        expect(page.locator("#search-results .search-summary")).to_contain_text(
            "found", timeout=30_000)
        results = page.locator("#search-results ul.search li")
        links = results.locator("a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
        assert any("notebooks/00-reference" in link for link in links), links
        page.screenshot(path=str(ARTIFACTS / "site-search.png"))
    finally:
        page.close()


def test_search_ranks_the_heartbeats_section_first(browser: Any, served: str) -> None:
    """A course site: "heartbeats" finds 02's section that teaches them before the API
    properties of that name (docs/search_scorer.js)."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(f"{served}/search.html?q=heartbeats")
        expect(page.locator("#search-results .search-summary")).to_contain_text(
            "found", timeout=30_000)
        links = page.locator("#search-results ul.search li a").evaluate_all(
            "as => as.map(a => a.getAttribute('href'))")
        assert links and "notebooks/02-live-session" in links[0] and "heartbeats" in links[0], \
            links[:5]
    finally:
        page.close()
