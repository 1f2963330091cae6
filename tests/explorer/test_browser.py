"""The notebooks in a real JupyterLab in real headless Chromium, clicked as a learner would.

One JupyterLab per module (:func:`tests._jupyter.lab_server`: a free loopback port, its
own token, settings and workspace directories -- nothing of the user's is read or
written) serves copies of the notebooks. Notebook 02, without its outputs, is run from
the Run menu once; its tests check that the stepper widget -- a live ipywidget, not the
saved HTML fallback -- shows the session, and click the two "Your turn" suggestions of
its markdown exactly as written. A small notebook of linked views is run and its bytes,
tree rows and replay boxes are clicked. Every stored notebook is opened at 1400x900 and
no output may scroll sideways; in the dark theme the views' text must contrast with the
page. Screenshots go to ``test-artifacts/`` (git-ignored).

Chromium is Debian's (``/usr/bin/chromium``, installed by ``scripts/sysdeps.sh``), driven
by the ``playwright`` package; Playwright's own browser download is never used.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests._browser import CHROMIUM, need_chromium
from tests._jupyter import lab_server, trust

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    need_chromium()
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
    tmp = tmp_path_factory.mktemp("lab")
    work = tmp / "nb"
    (work / "stored").mkdir(parents=True)
    # a copy without outputs: whatever the page shows must come from running it here
    nb = json.loads((ROOT / "notebooks" / "02-live-session.ipynb").read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb["metadata"].pop("widgets", None)
    (work / "02-live-session.ipynb").write_text(json.dumps(nb))
    (work / "linked.ipynb").write_text(json.dumps(LINKED))
    for path in (ROOT / "notebooks").glob("*.ipynb"):  # as stored, for reading only,
        (work / "stored" / path.name).write_text(path.read_text())
        trust(tmp, work / "stored" / path.name)  # rendered as a run notebook is
    with lab_server(tmp, work) as (url, token):
        yield url, token


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _run_all(browser, lab, name: str, done: str):
    """A page with notebook ``name`` opened and run from the Run menu, once ``done``
    (a text its last cell shows) is visible."""
    from playwright.sync_api import expect

    url, token = lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}/lab/tree/{name}?reset&token={token}")  # reset: this tab only
    # the kernel is up when the status says Idle
    expect(page.locator(".jp-Notebook").first).to_be_visible(timeout=60_000)
    idle = page.get_by_role("button", name=re.compile(r"Python 3.*\| Idle"))
    expect(idle).to_be_visible(timeout=60_000)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_text("Run All Cells", exact=True).click()
    expect(page.get_by_text(done).first).to_be_visible(timeout=120_000)
    return page


@pytest.fixture(scope="module")
def notebook02(browser, lab):
    # the last cell prints how many steps were saved: everything ran
    page = _run_all(browser, lab, "02-live-session.ipynb", "17 steps saved")
    yield page
    page.close()


def test_notebook_02_runs_and_the_stepper_renders(notebook02):
    from playwright.sync_api import expect

    page = notebook02
    stepper = page.locator(".nsqviz-stepper-widget").first
    stepper.scroll_into_view_if_needed()
    expect(stepper).to_be_visible()
    labels = stepper.locator(".nv-seq text.nv-label").all_text_contents()
    for expected in ("magic '  V2'", "SUB orders audit", "OK", "RDY 2", "CLS",
                     "CLOSE_WAIT", "E_FIN_FAILED"):
        assert any(label.startswith(expected) for label in labels), (expected, labels)
    assert sum(label.startswith("MSG ") for label in labels) >= 5  # 4 + the REQ'd one
    assert any("PUB orders" in label for label in labels)

    hexview = stepper.locator(".nsqviz-hex:visible")  # the last step's, not a closed pane
    assert hexview.count() >= 2  # CLS, and its CLOSE_WAIT frame
    titles = hexview.locator(".nv-title").all_inner_texts()
    assert any(t.startswith("→ CLS") for t in titles), titles
    assert any(t.startswith("← CLOSE_WAIT") for t in titles), titles
    assert hexview.locator(".nv-b").first.inner_text() in ("43", "00")  # "C" of CLS, a size

    buttons = stepper.locator("button").all_inner_texts()
    for verb in ("magic", "IDENTIFY", "AUTH", "SUB", "PUB", "MPUB", "DPUB", "RDY",
                 "FIN", "REQ", "TOUCH", "NOP", "CLS"):
        assert verb in buttons, (verb, buttons)
    assert page.get_by_text("Error displaying widget").count() == 0

    # the stepper's top (controls + start of the diagram) as the user sees it ...
    stepper.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(ARTIFACTS / "browser-notebook-02.png"))

    # the fresh stepper at the end: click through a session of our own
    mine = page.locator(".nsqviz-stepper-widget").nth(1)
    mine.scroll_into_view_if_needed()
    for verb in ("magic", "IDENTIFY", "SUB", "RDY"):
        mine.get_by_role("button", name=verb, exact=True).click()
        expect(mine.locator(".nv-seq")).to_contain_text(
            {"magic": "magic", "IDENTIFY": "JSON", "SUB": "SUB workshop mine",
             "RDY": "RDY 1"}[verb], timeout=20_000)
    expect(mine.locator(".nsqviz-fsm .nv-current")).to_contain_text("SUBSCRIBED")
    mine.screenshot(path=str(ARTIFACTS / "browser-stepper-clicked.png"))


def _your_turn(page) -> str:
    """The markdown's "Your turn" paragraph, as the reader sees it."""
    return page.locator(".jp-MarkdownOutput p").filter(has_text="Your turn:").inner_text()


def test_your_turn_suggestions_work_as_written(notebook02):
    """The two suggestions of 02's "Your turn", clicked as the markdown writes them on
    the session's stepper: `connection: publisher` → `PUB`; untick *check* and send
    `SUB` twice, to see nsqd's answer."""
    from playwright.sync_api import expect

    page = notebook02
    said = _your_turn(page)
    assert "connection: publisher → PUB" in said and "untick check and send SUB twice" in said
    stepper = page.locator(".nsqviz-stepper-widget").first
    stepper.scroll_into_view_if_needed()
    status = stepper.locator(".nsqviz .nv-mono").first
    # connection: publisher -> PUB
    stepper.get_by_role("button", name="publisher", exact=True).click()
    stepper.get_by_role("button", name="PUB", exact=True).click()
    expect(status).to_contain_text("PUB → OK", timeout=20_000)
    assert "⚠" not in status.inner_text()
    # untick check, SUB twice: the second SUB is nsqd's to refuse
    stepper.get_by_role("checkbox", name="check (codec refuses misuse)").uncheck()
    stepper.get_by_role("button", name="SUB", exact=True).click()
    expect(status).to_contain_text("SUB → OK", timeout=20_000)
    stepper.get_by_role("button", name="SUB", exact=True).click()
    expect(status).to_contain_text("SUB → E_INVALID", timeout=20_000)
    expect(stepper.locator(".nv-seq").first).to_contain_text("E_INVALID")
    stepper.screenshot(path=str(ARTIFACTS / "browser-your-turn.png"))


LINKED = {
    "cells": [{"cell_type": "code", "execution_count": None, "id": "views", "metadata": {},
               "outputs": [], "source": [
                   "from pathlib import Path\n",
                   "from nsqviz.capture.replay import Replay\n",
                   "from nsqviz.nsq import grammar\n",
                   "from nsqviz.widgets.hexview import HexView\n",
                   "from nsqviz.widgets.replay import ReplayView\n",
                   "HexView.of(grammar.Command, b'SUB orders audit\\n', 'SUB')\n"]},
              {"cell_type": "code", "execution_count": None, "id": "replay", "metadata": {},
               "outputs": [], "source": [
                   f"replay = Replay.load(Path({str(ROOT / 'data')!r}) / 'pubsub-pynsq.pcap')\n",
                   "ReplayView(replay, upto=33).live()"]}],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                "name": "python3"}},
    "nbformat": 4, "nbformat_minor": 5,
}


def _outline(locator) -> str:
    return locator.evaluate("e => getComputedStyle(e).outlineStyle")


def test_a_byte_a_tree_row_and_a_replay_box_are_clickable(browser, lab):
    """In the live outputs: a byte lights its tree row up, a tree row its bytes, and a
    replay box (in the live widget) opens its frame's hex view, which is linked too."""
    from playwright.sync_api import expect

    page = _run_all(browser, lab, "linked.ipynb", "click a box to open its bytes")
    try:
        hexview = page.locator(".jp-OutputArea-output .nsqviz-hex").first
        topic = hexview.locator("li[tabindex]").filter(has_text="topic")
        key = next(c for c in topic.get_attribute("class").split() if c.startswith("nv-k"))
        assert _outline(topic) == "none"
        hexview.locator(f".nv-b.{key}").nth(2).click()  # the "d" of orders
        assert _outline(topic) == "solid"
        channel = hexview.locator("li[tabindex]").filter(has_text="channel")
        channel.click()
        other = next(c for c in channel.get_attribute("class").split() if c.startswith("nv-k"))
        assert _outline(hexview.locator(f".nv-b.{other}").first) == "solid"
        assert _outline(topic) == "none"

        replay = page.locator(".widget-html .nsqviz-replay").first  # the live widget's lanes
        replay.scroll_into_view_if_needed()
        box = replay.locator("label.nv-box[title^='SUB ']").first
        box.click()
        pane = replay.locator(".nv-pane:visible")
        expect(pane).to_have_count(1)
        expect(pane.locator(".nv-title").first).to_contain_text("SUB · c2s · packets")
        row = pane.locator("li[tabindex]").filter(has_text="channel")
        assert _outline(row) == "none"
        row.click()
        key = next(c for c in row.get_attribute("class").split() if c.startswith("nv-k"))
        assert _outline(pane.locator(f".nv-b.{key}").first) == "solid"
        page.screenshot(path=str(ARTIFACTS / "browser-replay-opened.png"))
    finally:
        page.close()


_SIDEWAYS = """() => {
  const out = [];
  const panel = '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output';
  document.querySelectorAll(panel).forEach(area => {
    for (const e of [area, ...area.querySelectorAll('div, pre, table, svg')]) {
      // a sequence diagram scrolls in its own box, by design: drawn full size, its
      // labels stay readable (scaled to fit, a long session's shrank to ~5 px)
      if (e.classList.contains('nv-seqscroll') || e.closest('.nv-seqscroll')) continue;
      if (e !== area && e.scrollWidth <= e.clientWidth + 1) continue;
      const scrolls = e === area || ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
      if (scrolls && e.scrollWidth > e.clientWidth + 1) {
        out.push(`${e.tagName}.${e.getAttribute('class')}: ${e.scrollWidth} > ${e.clientWidth}`
                 + ` "${(e.innerText || '').slice(0, 60)}"`);
      }
    }
  });
  return out;
}"""


def _stop_kernels(lab) -> None:
    """Opening a notebook starts a kernel; reading needs none."""
    import urllib.request

    url, token = lab
    with urllib.request.urlopen(f"{url}/api/sessions?token={token}") as answer:
        sessions = json.loads(answer.read())
    for session in sessions:
        if session["path"].startswith("stored/"):
            urllib.request.urlopen(urllib.request.Request(
                f"{url}/api/sessions/{session['id']}?token={token}", method="DELETE"))


_RENDERED = """(n) => {
  const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find(e => e.offsetParent);
  return !!panel && [...panel.querySelectorAll('.jp-CodeCell')]
    .filter(c => c.querySelector('.jp-OutputArea-child')).length >= n;
}"""


def _stored_pages(browser, lab):
    """A page on the stored notebooks' folder; ``open(name)`` opens one from the file
    browser (no reload of JupyterLab) in a tab of its own, in front of the others, and
    returns once every cell with stored outputs shows them."""
    from playwright.sync_api import expect

    url, token = lab
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    # Whatever JupyterLab asks about the kernels _stop_kernels shut down under an open
    # notebook (on a busy machine it may ask, e.g. to pick a kernel, and later than any
    # check before a click) is cancelled: reading stored outputs needs no kernel, and an
    # open dialog takes every click.
    page.add_locator_handler(page.locator(".jp-Dialog"),
                             lambda _dialog: page.keyboard.press("Escape"))
    page.goto(f"{url}/lab/tree/stored?reset&token={token}")

    def open_(name: str) -> None:
        _stop_kernels(lab)
        stored = json.loads((ROOT / "notebooks" / name).read_text())
        with_outputs = sum(1 for c in stored["cells"] if c.get("outputs"))
        page.locator(".jp-DirListing-item").filter(has_text=name).dblclick()
        expect(page.locator(".jp-NotebookPanel:visible .jp-Cell").first).to_be_visible(
            timeout=60_000)
        page.wait_for_function(_RENDERED, arg=with_outputs, timeout=60_000)
        page.wait_for_timeout(800)  # the last outputs lay out

    return page, open_


def test_no_output_scrolls_sideways_at_1400_px(browser, lab):
    """Every stored notebook, opened in JupyterLab at 1400x900 (the file browser open):
    no output area, and nothing inside one that could scroll, is wider than its box --
    but a sequence diagram, which scrolls in a box of its own at full size."""
    page, open_ = _stored_pages(browser, lab)
    wide = {}
    try:
        for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
            open_(path.name)
            found = page.evaluate(_SIDEWAYS)
            if found:
                wide[path.stem] = found
                page.screenshot(path=str(ARTIFACTS / f"browser-wide-{path.stem}.png"))
    finally:
        _stop_kernels(lab)
        page.close()
    assert not wide, json.dumps(wide, indent=1, ensure_ascii=False)


_CONTRAST = """(sel) => {
  const rgb = c => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const ground = e => {
    for (; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || c[3] > 0.5) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  return [...document.querySelectorAll(sel)].filter(e => e.offsetParent && e.innerText.trim())
    .slice(0, 40).map(e => {
      const a = lum(rgb(getComputedStyle(e).color)), b = lum(ground(e));
      return [(Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05), e.innerText.slice(0, 30)];
    });
}"""


def test_dark_theme_keeps_every_view_readable(browser, lab):
    """Settings > Theme > JupyterLab Dark: titles, tree rows, values, bytes and muted
    notes of the stored views keep their contrast with what is behind them (WCAG: 4.5
    for text, 3 for the muted notes)."""
    page, open_ = _stored_pages(browser, lab)
    try:
        page.get_by_role("menuitem", name="Settings", exact=True).click()
        page.get_by_text("Theme", exact=True).hover()
        page.get_by_text("JupyterLab Dark", exact=True).click()
        page.wait_for_function("document.body.dataset.jpThemeLight === 'false'")
        poor = {}
        for name in ("01-wire-format.ipynb", "02-live-session.ipynb", "06-pcap-replay.ipynb"):
            open_(name)
            for sel, least in ((".nsqviz .nv-title", 4.5), (".nv-tree li .nv-mono", 4.5),
                               (".nsqviz .nv-val", 4.5), (".nsqviz-hex .nv-b", 4.5),
                               (".nsqviz .nv-chip", 4.5), (".nsqviz .nv-muted", 3)):
                found = page.evaluate(_CONTRAST, sel)
                assert found, (name, sel)
                bad = [f for f in found if f[0] < least]
                if bad:
                    poor[f"{name} {sel}"] = bad[:3]
        replay = page.locator(".jp-NotebookPanel:visible .nsqviz-replay").first
        replay.scroll_into_view_if_needed()
        replay.screenshot(path=str(ARTIFACTS / "browser-dark-theme.png"))
    finally:
        page.get_by_role("menuitem", name="Settings", exact=True).click()
        page.get_by_text("Theme", exact=True).hover()
        page.get_by_text("JupyterLab Light", exact=True).click()
        _stop_kernels(lab)
        page.close()
    assert not poor, poor
