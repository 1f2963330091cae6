"""The stepper at a learner's pace, in real JupyterLab and headless Chromium.

A learner clicks magic, IDENTIFY (the form's default heartbeat_interval, 30 s), SUB and
RDY, reads for 70 s -- past nsqd's read deadline of two heartbeat intervals -- and clicks
on. The session answers each ``_heartbeat_`` itself, so no click is refused, no
connection is silently replaced, and the answer shows right under the buttons.
"""

from __future__ import annotations

import json

import pytest

from tests._browser import CHROMIUM, need_chromium
from tests._jupyter import lab_server
from tests.explorer.test_browser import ARTIFACTS, FLAGS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAUSE_MS = 70_000

NOTEBOOK = {
    "cells": [{"cell_type": "code", "execution_count": None, "id": "stepper", "metadata": {},
               "outputs": [], "source": [
                   "from nsqviz.clients.session.nsq import Session\n",
                   "from nsqviz.widgets.stepper import Stepper\n",
                   'Stepper(Session(), topic="pace", channel="learner")']}],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                "name": "python3"}},
    "nbformat": 4, "nbformat_minor": 5,
}


@pytest.fixture
def pace_lab(tmp_path):
    need_chromium()
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
    work = tmp_path / "nb"
    work.mkdir()
    (work / "pace.ipynb").write_text(json.dumps(NOTEBOOK))
    with lab_server(tmp_path, work) as (url, token):
        yield url, token


def test_stepper_survives_a_70_second_pause(pace_lab):
    import re

    from playwright.sync_api import expect, sync_playwright

    url, token = pace_lab
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{url}/lab/tree/pace.ipynb?token={token}")
            idle = page.get_by_role("button", name=re.compile(r"Python 3.*\| Idle"))
            expect(idle).to_be_visible(timeout=60_000)
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_text("Run All Cells", exact=True).click()
            stepper = page.locator(".nsqviz-stepper-widget").first
            expect(stepper).to_be_visible(timeout=60_000)
            status = stepper.locator(".nsqviz .nv-mono").first
            answers = {"magic": "magic → no answer", "IDENTIFY": "IDENTIFY → JSON",
                       "SUB": "SUB → OK", "RDY": "RDY → no answer"}
            for verb, answer in answers.items():
                stepper.get_by_role("button", name=verb, exact=True).click()
                expect(status).to_contain_text(answer, timeout=20_000)
            page.wait_for_timeout(PAUSE_MS)  # a learner reads; nsqd's deadline is 60 s
            for verb in ("NOP", "RDY"):
                stepper.get_by_role("button", name=verb, exact=True).click()
                expect(status).to_contain_text(f"{verb} → no answer", timeout=20_000)
                text = status.inner_text()
                assert "⚠" not in text and "E_" not in text and "refuses" not in text, text
            diagram = stepper.locator(".nv-seq").first
            expect(diagram).to_contain_text("_heartbeat_")
            expect(diagram).to_contain_text("answers _heartbeat_")
            expect(stepper.locator(".nsqviz-fsm .nv-current").first).to_contain_text(
                "SUBSCRIBED")
            stepper.screenshot(path=str(ARTIFACTS / "browser-stepper-after-pause.png"))
        finally:
            browser.close()
