"""The failure labs of notebook 04 against any nsqd, and their answers side by side.

The labs are the notebook's own cells: :func:`run` executes them in this process with
:envvar:`NSQVIZ_NSQD` naming the server (``"embedded"`` or ``"real"``) and keeps, per
lab, what its cells printed; :func:`stored` reads the same from the notebook's saved
outputs (the embedded broker's answers, which nbval checks on every run). Server-made
values -- message ids, times in ms, loopback ports -- are masked, so two servers' answers
compare line for line.

``python -m nsqviz.teaching.labs`` runs the labs against the real nsqd (found as
:mod:`nsqviz.servers.peers` finds it) and writes :data:`COMPARISON`, which the notebook shows as
a table: a stored picture, so the notebook reads the same with or without an nsqd at
hand. ``tests/differential/test_failure_labs.py`` runs them again and fails when the
stored comparison no longer says what the real nsqd answers, or when a lab's answers
differ without a named reason in :data:`KNOWN_DIFFERENCES`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nsqviz.widgets.table import TableView

__all__ = ["COMPARISON", "KNOWN_DIFFERENCES", "NOTEBOOK", "compare", "readable", "run",
           "side_by_side", "stored"]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "04-failure-labs.ipynb"
COMPARISON = ROOT / "data" / "failure-labs-real-nsqd.json"

_SCAN_LATE = (
    "the real nsqd redelivers up to 5 s after it is due -- its queue scan looks only at "
    "channels in a list it refreshes every 5 s (QueueScanRefreshInterval, no flag), and this "
    "channel is new; the embedded broker scans every channel every queue_scan_interval (0.1 s)")

KNOWN_DIFFERENCES: dict[int, str] = {
    3: f"same answer, later: a timed-out message comes back between msg_timeout and "
       f"msg_timeout + 5 s: {_SCAN_LATE}",
    4: f"same answer, later: the deferred REQ comes back between its delay and the delay + "
       f"5 s: {_SCAN_LATE}",
    9: "timing: the real nsqd's second heartbeat and its read deadline (two intervals after "
       "the IDENTIFY it last read) fall due together, so one or two _heartbeat_ arrive "
       "before it closes the connection; the embedded broker closes first",
    11: f"same answer, later: the dropped connection's messages come back between "
        f"msg_timeout and msg_timeout + 5 s: {_SCAN_LATE}",
}
"""Lab number -> how the real nsqd's behaviour differs there (the answers may agree)."""

_MASKS = (
    (re.compile(r"\b[0-9a-f]{16}\b"), "<id>"),
    (re.compile(r"\b\d+(\.\d+)? ms\b"), "<t> ms"),
    # lab 5's measured spacing and hold (lab 4's "1.4 s" is a bound it prints, kept)
    (re.compile(r"\b\d+\.\d+ s to \d+\.\d+ s apart"), "<t> s to <t> s apart"),
    (re.compile(r"held \d+\.\d+ s \(\d+\.\d+ ×"), "held <t> s (<n> ×"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
)
_HEADING = re.compile(r"^## (\d+)\. (.*)")


def _mask(text: str) -> list[str]:
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return [line for line in text.splitlines() if line.strip()]


def _cells(notebook: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(notebook.read_text())["cells"]
    return cells


def _labs(cells: list[dict[str, Any]],
          printed: Callable[[int, dict[str, Any]], str]) -> dict[int, dict[str, Any]]:
    """Group what ``printed(index, cell)`` gives for each code cell under its lab."""
    labs: dict[int, dict[str, Any]] = {}
    lab = 0
    for index, cell in enumerate(cells):
        source = "".join(cell["source"])
        heading = _HEADING.match(source) if cell["cell_type"] == "markdown" else None
        if heading:
            lab = int(heading[1])
            labs[lab] = {"lab": lab, "title": heading[2].strip(), "lines": []}
        elif source.startswith("## "):
            lab = 0  # the exercises and anything after the labs
        elif cell["cell_type"] == "code":
            text = printed(index, cell)
            if lab:
                labs[lab]["lines"] += _mask(text)
    return labs


def stored(notebook: Path = NOTEBOOK) -> dict[int, dict[str, Any]]:
    """Each lab's printed answers as the notebook saved them (the embedded broker's)."""
    def printed(_index: int, cell: dict[str, Any]) -> str:
        return "".join("".join(o["text"]) for o in cell.get("outputs", [])
                       if o.get("output_type") == "stream" and o.get("name") == "stdout")

    return _labs(_cells(notebook), printed)


def run(server: str, notebook: Path = NOTEBOOK,
        namespace: dict[str, Any] | None = None) -> dict[int, dict[str, Any]]:
    """Each lab's printed answers when the notebook's cells run against ``server``
    (``namespace``: where the cells run, to read their variables afterwards)."""
    from nsqviz.clients.session import NSQD_CHOICE

    namespace = {} if namespace is None else namespace
    namespace["__name__"] = "__labs__"
    before = os.environ.get(NSQD_CHOICE)
    os.environ[NSQD_CHOICE] = server
    here = os.getcwd()
    os.chdir(notebook.parent)

    def printed(index: int, cell: dict[str, Any]) -> str:
        out = io.StringIO()
        code = compile("".join(cell["source"]), f"{notebook.name}[{index}]", "exec")
        with contextlib.redirect_stdout(out):
            exec(code, namespace)  # noqa: S102 - the project's own notebook
        return out.getvalue()

    try:
        return _labs(_cells(notebook), printed)
    finally:
        os.chdir(here)
        if before is None:
            os.environ.pop(NSQD_CHOICE, None)
        else:
            os.environ[NSQD_CHOICE] = before


def compare(embedded: dict[int, dict[str, Any]], real: dict[int, dict[str, Any]],
            version: str) -> dict[str, Any]:
    """The two servers' answers per lab, whether they agree, and the known difference."""
    rows = []
    for lab, ours in embedded.items():
        theirs = real.get(lab, {"lines": []})
        rows.append({"lab": lab, "title": ours["title"], "embedded": ours["lines"],
                     "real": theirs["lines"], "same": ours["lines"] == theirs["lines"],
                     "difference": KNOWN_DIFFERENCES.get(lab, "")})
    return {"real_nsqd": version, "labs": rows}


_STEP = re.compile(r"^<Step [^:]+: (.*?) -> (.*?); (\w+) -> (\w+)(?: -- why: (.*))?>$")
_ARRIVALS = re.compile(r"<Arrival [^:]+: ([^>]*)>")


def readable(line: str) -> str:
    """A printed answer as a table cell says it: a step's repr as "command → answer
    (state → state)", a list of arrivals as what arrived, in order."""
    step = _STEP.match(line)
    if step:
        command, answer, before, after, why = step.groups()
        moved = before if before == after else f"{before} → {after}"
        return f"{command} → {answer} ({moved})" + (f"; why: {why}" if why else "")
    arrivals = _ARRIVALS.findall(line)
    if arrivals and line.startswith("["):
        return "arrived: " + ", ".join(arrivals)
    return line


def side_by_side(path: Path = COMPARISON) -> TableView:
    """The stored comparison as a table (one row per lab), in words: no backticks, no
    reprs."""
    from nsqviz.widgets.table import TableView

    doc = json.loads(path.read_text())

    def said(lines: list[str]) -> str:
        return " · ".join(readable(line) for line in lines)

    rows = [{"lab": f"{r['lab']}. {r['title'].replace('`', '')}",
             "embedded broker": said(r["embedded"]),
             doc["real_nsqd"]: "the same" if r["same"] else said(r["real"]),
             "known difference": r["difference"] or "none"}
            for r in doc["labs"]]
    return TableView(["lab", "embedded broker", doc["real_nsqd"], "known difference"], rows,
                     title=f"the {len(rows)} labs: the embedded broker and the real nsqd")


def main() -> int:
    from nsqviz.servers.peers import require

    nsqd = require("nsqd")
    version = subprocess.run([str(nsqd), "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[:2]
    with contextlib.redirect_stdout(sys.stderr):
        real = run("real")
    doc = compare(stored(), real, " ".join(version))
    COMPARISON.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {COMPARISON.relative_to(ROOT)}: "
          f"{sum(r['same'] for r in doc['labs'])} of {len(doc['labs'])} labs answer alike")
    return 0


if __name__ == "__main__":
    sys.exit(main())
