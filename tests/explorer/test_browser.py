"""Notebook 02 in a real JupyterLab in real headless Chromium: the stepper must render.

The test starts JupyterLab on a free loopback port with its own token, settings and
workspace directories (nothing of the user's is read or written), opens a copy of
``notebooks/02-live-session.ipynb``, runs all cells from the Run menu, and checks in the
DOM that the stepper widget -- a live ipywidget, not the saved HTML fallback -- shows the
sequence diagram with the session's commands and frames, and the hex view of the last
step. Screenshots go to ``test-artifacts/`` (git-ignored).

Chromium is Debian's (``/usr/bin/chromium``, installed by ``scripts/sysdeps.sh``), driven
by the ``playwright`` package; Playwright's own browser download is never used.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
from pathlib import Path

import pytest

from tests._jupyter import free_port, running_lab

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("NSQVIZ_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _write_settings(settings: Path) -> None:
    """JupyterLab user settings for a quiet, fully rendered notebook."""
    files = {
        # render every cell (JupyterLab 4 detaches off-screen cells by default)
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        # no news or update checks: the test has no network
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false", "checkForUpdates": False},
    }
    for name, doc in files.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))


@pytest.fixture
def lab(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium (scripts/sysdeps.sh)")
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
    work = tmp_path / "nb"
    work.mkdir()
    # a copy without outputs: whatever the page shows must come from running it here
    nb = json.loads((ROOT / "notebooks" / "02-live-session.ipynb").read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb["metadata"].pop("widgets", None)
    (work / "02-live-session.ipynb").write_text(json.dumps(nb))
    _write_settings(tmp_path / "settings")
    port, token = free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
        f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
        f"--LabApp.user_settings_dir={tmp_path / 'settings'}",
        f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
        "--ServerApp.port_retries=0", "--LabApp.news_url=", "--allow-root",
    ]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    url = f"http://127.0.0.1:{port}"
    with running_lab(cmd, env, tmp_path / "lab.log", f"{url}/api/status?token={token}"):
        yield url, token


def test_notebook_02_runs_and_the_stepper_renders(lab, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, token = lab
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/lab/tree/02-live-session.ipynb?token={token}")
            # the kernel is up when the status says Idle
            expect(page.locator(".jp-Notebook").first).to_be_visible(timeout=60_000)
            idle = page.get_by_role("button", name=re.compile(r"Python 3.*\| Idle"))
            expect(idle).to_be_visible(timeout=60_000)
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_text("Run All Cells", exact=True).click()
            # the last cell prints how many steps were saved: everything ran
            expect(page.get_by_text("17 steps saved")).to_be_visible(timeout=120_000)

            stepper = page.locator(".nsqviz-stepper-widget").first
            stepper.scroll_into_view_if_needed()
            expect(stepper).to_be_visible()
            labels = stepper.locator(".nv-seq text.nv-label").all_text_contents()
            for expected in ("magic '  V2'", "SUB orders audit", "OK", "RDY 2", "CLS",
                             "CLOSE_WAIT", "E_FIN_FAILED"):
                assert any(label.startswith(expected) for label in labels), (expected, labels)
            assert sum(label.startswith("MSG ") for label in labels) >= 5  # 4 + the REQ'd one
            assert any("PUB orders" in label for label in labels)

            hexview = stepper.locator(".nsqviz-hex")
            assert hexview.count() >= 2  # CLS, and its CLOSE_WAIT frame
            titles = hexview.locator(".nv-title").all_inner_texts()
            assert any(t.startswith("→ CLS") for t in titles), titles
            assert any(t.startswith("← CLOSE_WAIT") for t in titles), titles
            cells = stepper.locator(".nsqviz-hex .nv-b")
            assert cells.first.inner_text() in ("43", "00")  # "C" of CLS, or a frame size

            buttons = stepper.locator("button").all_inner_texts()
            for verb in ("magic", "IDENTIFY", "AUTH", "SUB", "PUB", "MPUB", "DPUB", "RDY",
                         "FIN", "REQ", "TOUCH", "NOP", "CLS"):
                assert verb in buttons, (verb, buttons)
            assert page.get_by_text("Error displaying widget").count() == 0

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

            # the stepper's top (controls + start of the diagram) as the user sees it ...
            stepper.evaluate("el => el.scrollIntoView({block: 'start'})")
            page.screenshot(path=str(ARTIFACTS / "browser-notebook-02.png"))
            # ... and the whole widget, in a window tall enough to hold it
            page.set_viewport_size({"width": 1400, "height": 4200})
            stepper.evaluate("el => el.scrollIntoView({block: 'start'})")
            stepper.screenshot(path=str(ARTIFACTS / "browser-stepper.png"))
        finally:
            browser.close()
