"""Notebooks 02, 04 and 11 run the way a learner runs them, in real JupyterLab and Chromium.

A learner presses Shift+Enter, waits for the cell (until its prompt shows its number),
reads a moment, and once in a while stops to think. Each notebook is stepped cell by cell
(:data:`PACE_S` after every code cell: what a cell left running -- heartbeats,
deliveries, a widget's updates -- carries on while the next is read) with one long pause
(:data:`PAUSE_S`, past the deadlines that matter) before the cell where it hurts most:

* 02: before the FIN, with two messages in flight (their ``msg_timeout`` runs);
* 11: after consumer A joined and reported its partitions (the simulated Master counts
  the time since A's last heartbeat);
* 04: after lab 11, before its sequence diagram (every lab connection is idle, nsqd's
  heartbeat timers run and the session must answer them).

Three 90-s pauses per run would make this test the longest of the suite, so each run
pauses in one notebook -- the one :func:`paused_notebook` picks by the day, or
``NSQVIZ_PACE_PAUSE=02|04|11|all`` -- and steps the other two at reading pace only.

Once the last cell ran, every sequence and state diagram the run drew (the stepper's
live widget included), each of its lanes, labels and controls, lies within its output
area at 1400x900 with the file browser open (:func:`tests.explorer.test_browser.
diagrams_fit`).

After a cleanup cell a learner tries one more thing: the test adds that cell to 07 and 10
and expects the one-line "this session is closed" instead of a traceback. The notebook is
then saved from the page and read back: no other cell may have raised, and the cells that
report an outcome must say it.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import time
from pathlib import Path

import pytest

from tests._browser import CHROMIUM, need_chromium
from tests._jupyter import lab_server
from tests.explorer.test_browser import (
    ARTIFACTS,
    FLAGS,
    KNOWN_LANES,
    LEAST_SCALE,
    NOTEBOOK_OUTPUTS,
    diagrams_fit,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PACE_S = 1.0
DONE = re.compile(r"\[\d+\]")  # a code cell's prompt once it ran: [12]:
PAUSE_S = 90.0
EXPERIMENT = "learner-experiment"

# notebook -> (cell id the pause comes before, (cell id after which the experiment goes, its code))
PLANS: dict[str, tuple[str, tuple[str, str] | None]] = {
    "02-live-session.ipynb": ("c18", None),
    "11-tubemq.ipynb": ("34447f43", ("4ac8bad0", "a.heartbeat()")),
    "04-failure-labs.ipynb": ("lab25", ("lab22", 'session.connect("one-more")')),
}

# notebook -> the cell id that makes the session the experiment finds closed
MADE = {"11-tubemq.ipynb": "b723bd18", "04-failure-labs.ipynb": "lab01"}

# notebook -> cell id -> text its output must contain (what happened, said)
SAYS: dict[str, dict[str, str]] = {
    "02-live-session.ipynb": {"c22": "attempts: 2 -- the REQ above put it back",
                              "c29": "b'order #4 (deferred 300 ms)' attempts: 1"},
    "11-tubemq.ipynb": {"b723bd18": "the Master forgets a client 3600 s after its last heartbeat",
                        "5d40f177": "HeartResponseM2C 200 OK!",
                        "194879fb": "b'with an attribute'"},
    "04-failure-labs.ipynb": {"lab24": "same id as before: True, attempts=2",
                              "lab22": "session closed"},
}


def paused_notebook() -> str:
    """Which notebook gets the long pause in this run: ``NSQVIZ_PACE_PAUSE`` or the day's."""
    chosen = os.environ.get("NSQVIZ_PACE_PAUSE", "")
    if chosen:
        return chosen
    names = sorted(PLANS)
    return names[datetime.date.today().toordinal() % len(names)][:2]


def _prepare(work: Path, name: str) -> dict:
    """A copy of the notebook without outputs (and with the learner's extra cell), beside
    a link to the samples its relative paths read."""
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb["metadata"].pop("widgets", None)
    extra = PLANS[name][1]
    if extra is not None:
        after, code = extra
        at = next(i for i, c in enumerate(nb["cells"]) if c.get("id") == after) + 1
        nb["cells"].insert(at, {"cell_type": "code", "id": EXPERIMENT, "metadata": {},
                                "execution_count": None, "outputs": [], "source": code})
    (work / "notebooks").mkdir(exist_ok=True)
    (work / "notebooks" / name).write_text(json.dumps(nb))
    if not (work / "data").exists():
        (work / "data").symlink_to(ROOT / "data")
    return nb


def _text(cell: dict) -> str:
    out = []
    for o in cell.get("outputs", []):
        if "text" in o:
            out.append("".join(o["text"]))
        out.append("".join(o.get("data", {}).get("text/plain", "")))
        if o.get("output_type") == "error":
            out.append(f"{o['ename']}: {o['evalue']}")
    return "\n".join(out)


@pytest.fixture(scope="module")
def learner_lab(tmp_path_factory):
    need_chromium()
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
    tmp = tmp_path_factory.mktemp("learner")
    work = tmp / "nb"
    work.mkdir()
    with lab_server(tmp, work) as (url, token):
        yield url, token, work


@pytest.mark.timeout(600)  # 3 s a cell and once a 90-s pause: 02 takes 3-4 minutes
@pytest.mark.parametrize("name", sorted(PLANS))
def test_a_learner_steps_through_without_a_traceback(learner_lab, name):
    from playwright.sync_api import expect, sync_playwright

    url, token, work = learner_lab
    nb = _prepare(work, name)
    pause_before = PLANS[name][0] if paused_notebook() in (name[:2], "all") else None
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            # a workspace of its own, reset: the previous notebook's tab is not restored
            page.goto(f"{url}/lab/workspaces/learner-{name[:2]}/tree/notebooks/{name}"
                      f"?token={token}&reset")
            idle = page.get_by_role("button", name=re.compile(r"Python 3.*\| Idle"))
            expect(idle).to_be_visible(timeout=60_000)
            panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            panel.locator(".jp-Cell").first.click()
            page.keyboard.press("Escape")  # command mode: Shift+Enter runs and moves on
            prompts = panel.locator(".jp-CodeCell .jp-InputArea-prompt")
            ran = 0
            for cell in nb["cells"]:
                if cell.get("id") == pause_before:
                    page.wait_for_timeout(PAUSE_S * 1000)  # the learner stops to think
                page.keyboard.press("Shift+Enter")
                if cell["cell_type"] == "code":
                    # done when its prompt shows its number ("[*]" while queued or running)
                    expect(prompts.nth(ran)).to_have_text(DONE, timeout=120_000)
                    expect(idle).to_be_visible(timeout=120_000)
                    ran += 1
                    page.wait_for_timeout(PACE_S * 1000)
            # every diagram the run drew (live widgets included) within its output area
            fit = diagrams_fit(page, NOTEBOOK_OUTPUTS)
            assert not fit["outside"], fit["outside"][:8]
            assert fit["scales"] and min(fit["scales"]) >= LEAST_SCALE, fit["scales"]
            assert KNOWN_LANES.get(name[:-6], set()) <= set(fit["lanes"]), fit["lanes"]
            saved = work / "notebooks" / name
            before = saved.stat().st_mtime_ns
            page.keyboard.press("Control+s")
            deadline = time.monotonic() + 30
            while saved.stat().st_mtime_ns == before and time.monotonic() < deadline:
                page.wait_for_timeout(100)  # until the page's save reaches the file
            page.screenshot(path=str(ARTIFACTS / f"learner-{name[:2]}.png"))
        finally:
            browser.close()
    ran = json.loads((work / "notebooks" / name).read_text())
    cells = {c.get("id"): c for c in ran["cells"]}
    raised = {cid: _text(c)[-300:] for cid, c in cells.items() if cid != EXPERIMENT
              and any(o.get("output_type") == "error" for o in c.get("outputs", []))}
    assert not raised, raised
    # (Shift+Enter on the last cell adds an empty one: it is not the notebook's)
    assert all(c.get("execution_count") for c in ran["cells"]
               if c["cell_type"] == "code" and "".join(c["source"]).strip()), \
        "a cell did not run: the page and the notebook are out of step"
    for cid, says in SAYS[name].items():
        assert says in _text(cells[cid]), (cid, _text(cells[cid])[:600])
    everything = "\n".join(_text(c) for c in ran["cells"])
    assert "Invalid node id" not in everything and "heartbeat timeout" not in everything
    if EXPERIMENT in cells:
        said = _text(cells[EXPERIMENT]).strip()
        made = cells[MADE[name]]["execution_count"]
        assert said.startswith("SessionClosed: this session") and f"run cell [{made}] " \
            in said, said
        assert "ConnectionRefusedError" not in said
