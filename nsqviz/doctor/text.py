"""A finding as text: what ``nsqviz doctor`` prints in a terminal, and what
``cap.diagnose()`` shows where a notebook shows text -- the same lines, with times since
the capture's start and files by their base names, so the text does not depend on where
the capture lies."""

from __future__ import annotations

import math
import os
import textwrap
from typing import Any

from nsqviz.doctor.rule import Severity
from nsqviz.doctor.words import connection_of

__all__ = ["finding_text", "tally"]


def _t(ts: Any, t0: float) -> str:
    return "?" if ts is None or (isinstance(ts, float) and math.isnan(ts)) \
        else f"+{ts - t0:.6f}s"


def finding_text(r: dict[str, Any], t0: float, several: bool, width: int) -> str:
    """One finding for a terminal: its head line, then its words and evidence (times
    since ``t0``; a packet's file named, by its base name, only when ``several`` files
    hold the findings' packets)."""
    head = f"{r['severity'].upper():<8} {r['rule']}  {r['summary']}"
    lines = textwrap.wrap(head, width, subsequent_indent=" " * 9) or [head]
    label = " " * 2
    if r["connection"]:
        lines.append(f"{label}connection  {r['connection']}")
    for name, words in (("what", r["explanation"]), ("change", r["change"])):
        lines += textwrap.wrap(words, width, initial_indent=f"{label}{name:<10}  ",
                               subsequent_indent=" " * 14)
    for k, item in enumerate(r["evidence"] or ()):
        packet = "" if item["packet"] is None else f"packet {item['packet']}"
        if several and item["file"]:
            packet += f" in {os.path.basename(item['file'])}"
        conn = connection_of(item["conn_id"])
        other = f"  [{conn}]" if conn and conn != r["connection"] else ""
        mid = f"  id {item['msg_id']}" if item["msg_id"] else ""
        line = (f"{label}{'evidence' if k == 0 else '':<10}  {packet:<11} "
                f"{_t(item['ts'], t0):>13}  {item['what']}{mid}{other}")
        lines += textwrap.wrap(line, width, subsequent_indent=" " * 40) or [line]
    for k, threshold in enumerate(r["thresholds"] or ()):
        lines += textwrap.wrap(threshold, width,
                               initial_indent=f"{label}{'threshold' if k == 0 else '':<10}  ",
                               subsequent_indent=" " * 14)
    return "\n".join(lines) + "\n"


def tally(found: list[dict[str, Any]], shown: list[dict[str, Any]],
          level: Severity) -> str:
    """The last line: how many findings of each severity, and how many ``level`` hid."""
    counts = {s: sum(r["severity"] == s for r in found) for s in Severity}
    words = ", ".join(f"{n} {s.value}{'s' if n != 1 and s != Severity.INFO else ''}"
                      for s, n in counts.items())
    hidden = len(found) - len(shown)
    more = f"; {hidden} below {level.value} not shown (--severity)" if hidden else ""
    sep = "\n" if shown else ""
    if not found:
        return "no findings: no rule of the doctor found a problem in this capture\n"
    return f"{sep}{len(found)} finding{'s' if len(found) != 1 else ''}: {words}{more}\n"
