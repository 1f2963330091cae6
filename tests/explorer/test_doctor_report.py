"""The doctor's report in a real JupyterLab, in headless Chromium, as a reader opens a
saved notebook: ``cap.diagnose()``'s stored output shows the findings as cards, most
severe first, over the timeline with a lane per connection; clicking a packet number
opens the replay of its connection at that packet under its card, and closes again --
from the stored output alone (no kernel runs while the page is read, no widget state).

The notebook is run first by a real kernel (nbclient), as ``scripts/run_notebooks.py``
runs the course's, then trusted (``tests._jupyter.trust``: JupyterLab keeps a trusted
notebook's ``<style>`` blocks, which the report's openers need).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqviz.analysis.capture import Capture
from nsqviz.doctor.rule import Severity
from tests._browser import CHROMIUM, need_chromium
from tests._jupyter import lab_server, trust
from tests.explorer.test_browser import ARTIFACTS, FLAGS

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "data" / "doctor" / "tcp-reset.pcap"  # errors, warnings and an info

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _notebook(path: Path) -> None:
    """A notebook whose one cell shows ``cap.diagnose()``, run by a real kernel."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        f"import nsqviz\ncap = nsqviz.open({str(CAPTURE)!r})\ncap.diagnose()")]
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)


def test_the_report_in_a_saved_notebook_shows_cards_and_its_packet_links_open_replays(
        tmp_path: Path) -> None:
    sync_api = need_chromium()
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed")
    found = Capture(str(CAPTURE), fields=False).diagnose()
    root = tmp_path / "nb"
    root.mkdir()
    notebook = root / "doctor.ipynb"
    _notebook(notebook)
    trust(tmp_path, notebook)
    with lab_server(tmp_path, root) as (url, token), sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{url}/lab/tree/doctor.ipynb?token={token}")
            report = page.locator(".jp-OutputArea-output .nsqviz-doctor")
            sync_api.expect(report).to_be_visible(timeout=90_000)
            # the cards, most severe first: the findings, in the doctor's order
            cards = report.locator(".nv-card")
            assert cards.count() == len(found)
            rules = [cards.nth(i).get_attribute("data-rule") for i in range(cards.count())]
            assert rules == list(found.rule)
            ranks = [Severity(s).rank for s in found.severity]
            assert ranks == sorted(ranks) and len(set(ranks)) == 3
            for i, f in enumerate(found.itertuples()):
                card = cards.nth(i)
                assert f.summary in card.inner_text()
                assert card.locator(".nv-pane:visible").count() == 0
                # every packet of its evidence is a link
                links = card.locator("label.nv-pktlink")
                shown = {int(links.nth(k).inner_text()) for k in range(links.count())}
                assert shown == {item["packet"] for item in f.evidence}
            # the timeline: a lane per connection the findings name, a bar per lane mark
            lanes = report.locator("svg.nv-timeline text.nv-lane")
            named = {c for f in found.itertuples() for c in [f.connection, *f.connections]
                     if c}
            assert {lanes.nth(k).text_content() for k in range(lanes.count())} == named
            assert report.locator("svg.nv-timeline g.nv-mark rect").first.is_visible()
            # a packet link opens its connection's replay at that packet; close shuts it
            card = cards.nth(1)
            link = card.locator("label.nv-pktlink").last
            link.scroll_into_view_if_needed()
            packet = link.inner_text()
            link.click()
            pane = card.locator(".nv-pane:visible")
            assert pane.count() == 1
            title = pane.locator(".nsqviz-replay .nv-title").inner_text()
            assert f"· packet {packet} of " in title, title
            assert pane.locator(".nsqviz-replay").bounding_box()["height"] > 60
            page.screenshot(path=str(ARTIFACTS / "doctor-report-lab.png"), full_page=False)
            pane.locator(".nv-close").click()
            assert card.locator(".nv-pane:visible").count() == 0
        finally:
            browser.close()
