"""The doctor's report: what ``cap.diagnose()`` shows in a notebook.

Its findings (rows of the ``findings`` table, :data:`nsqviz.doctor.rule.FINDING_COLUMNS`)
as cards, most severe first -- rule id, severity, the one-line summary, what happened and
why it matters, what to change, the thresholds that decided, and the evidence item by
item -- over a timeline of the capture: one lane per connection the findings name, each
finding a bar on its connections' lanes over the time its evidence spans, coloured by
severity and numbered as its card, with a tick per evidence item.

Every packet number in a card opens, under the card, the replay of that packet's
connection at that packet (:class:`~nsqviz.widgets.replay.ReplayView`, the
:data:`REPLAY_AROUND` packets of the connection each side of it): the click-to-open
mechanism of the other views (:mod:`nsqviz.widgets.opener`: a label, a radio button, a
pane and one CSS rule), so it works in a saved notebook with no kernel and no widget
state. The replay in a pane opens no bytes of its own (its radio group would answer the
card's); ``cap.replay(upto=N)`` does.

The HTML is static and deterministic: nothing random, the SVG has no ids.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from nsqviz.capture.replay import Replay
from nsqviz.doctor.rule import EVIDENCE_LIMIT, Severity
from nsqviz.widgets.opener import OPEN_CSS, Openers
from nsqviz.widgets.replay import ReplayView
from nsqviz.widgets.style import CSS, ON_FILL, RULE, esc, once

__all__ = ["REPLAYS_LINKED", "REPLAY_AROUND", "SEVERITY_COLOUR", "FindingsReport"]

SEVERITY_COLOUR = {Severity.ERROR: "#dc2626", Severity.WARNING: "#d97706",
                   Severity.INFO: "#2563eb"}
"""A severity's colour: its cards' edge and chip, its bars on the timeline."""

_CHIP = {Severity.ERROR: "#fee2e2", Severity.WARNING: "#fef3c7", Severity.INFO: "#dbeafe"}

REPLAY_AROUND = 12
"""Packets of the connection shown each side of a linked packet in its replay: enough to
see the commands that led to it and the answers after it, while a card's two dozen
panes stay a few hundred kilobytes in a saved notebook (every pane is in the page)."""

REPLAYS_LINKED = 120
"""Replays a report holds at most (~10 kB each; a capture with hundreds of findings would
make a saved notebook of megabytes): the cards' packet numbers past them, most severe
cards first, are plain, and their cards say how to open them."""

_AXIS = 620  # px of the timeline's time axis
_LABEL = 250  # px of the lane names left of it
_ROW = 14  # px per finding in a lane

REPORT_CSS = "<style>" + (
    f".nsqviz .nv-card{{border:1px solid {RULE};border-left-width:5px;border-radius:4px;"
    "padding:6px 10px;margin:10px 0;max-width:1000px}"
    ".nsqviz .nv-card p{margin:4px 0}"
    ".nsqviz .nv-sev{display:inline-block;padding:0 6px;border-radius:3px;font-size:11px;"
    f"font-weight:600;color:{ON_FILL};margin-right:6px}}"
    ".nsqviz .nv-card .nv-summary{font-weight:600}"
    ".nsqviz .nv-card ul{margin:2px 0 2px 18px;padding:0}"
    ".nsqviz .nv-evidence td,.nsqviz .nv-evidence th{text-align:left;padding:1px 8px 1px 0;"
    "vertical-align:top}"
    ".nsqviz .nv-pkt{color:#2563eb;text-decoration:underline}"
    ".nsqviz .nv-card label.nv-box{position:relative}"
) + "</style>"


class FindingsReport:
    """The report of ``findings`` (rows as dicts, any order) of a capture of ``files``
    spanning ``span`` (its first and last record's times: the timeline's axis)."""

    def __init__(self, findings: Sequence[Mapping[str, Any]], files: Sequence[str],
                 span: tuple[float, float] | None = None):
        self.findings = sorted(findings, key=lambda f: Severity(f["severity"]).rank)
        self.files = list(files)
        times = [t for f in self.findings for t in (f["ts"], f["end_ts"]) if t is not None]
        self.span = span or ((min(times), max(times)) if times else (0.0, 0.0))
        self._replays: dict[str, Replay] = {}
        self._linked = 0  # replays the cards drawn so far hold

    # -- the parts ------------------------------------------------------------------

    def lanes(self) -> list[str]:
        """The timeline's lanes: each connection the findings name (``client->server``),
        in the order of its first finding in time; ``""`` for findings about none."""
        firsts: dict[str, float] = {}
        for f in self.findings:
            for lane in _lanes_of(f):
                firsts[lane] = min(firsts.get(lane, math.inf), f["ts"] or 0.0)
        return sorted(firsts, key=lambda lane: (firsts[lane], lane))

    def timeline(self) -> str:
        """The SVG timeline: a lane per connection, each finding a bar over its evidence's
        time span in a row of its own within the lane (its number is its card's), a tick
        per evidence item."""
        lanes = self.lanes()
        rows: dict[str, list[int]] = {lane: [] for lane in lanes}  # lane -> its findings
        for number, f in enumerate(self.findings, 1):
            for lane in _lanes_of(f):
                rows[lane].append(number)
        tops, y = {}, 0
        for lane in lanes:
            tops[lane] = y
            y += len(rows[lane]) * _ROW + 6
        t0, t1 = self.span
        length = max(t1 - t0, 1e-6)

        def x(t: float) -> float:
            return _LABEL + (min(max(t, t0), t1) - t0) / length * _AXIS

        out = [f'<svg class="nv-timeline" width="{_LABEL + _AXIS + 20}" height="{y + 24}" '
               f'font-size="10" xmlns="http://www.w3.org/2000/svg">']
        for lane in lanes:
            top, height = tops[lane], len(rows[lane]) * _ROW + 2
            out.append(f'<rect x="{_LABEL}" y="{top + 2}" width="{_AXIS}" height="{height}" '
                       f'fill="#9ca3af" fill-opacity="0.15"/><text class="nv-lane" '
                       f'x="{_LABEL - 6}" y="{top + height / 2 + 5}" text-anchor="end" '
                       f'fill="currentColor" font-family="monospace">'
                       f'{esc(lane or "the capture")}</text>')
        for number, f in enumerate(self.findings, 1):
            colour = SEVERITY_COLOUR[Severity(f["severity"])]
            for lane in _lanes_of(f):
                top = tops[lane] + 3 + rows[lane].index(number) * _ROW
                times = [i["ts"] for i in _items(f["evidence"])
                         if lane and _connection(i) == lane and i["ts"] is not None]
                start, end = (min(times), max(times)) if times else (f["ts"], f["end_ts"])
                left, right = x(start), x(end)
                left = min(left, _LABEL + _AXIS - 12)  # a moment's bar stays on the axis
                out.append(
                    f'<g class="nv-mark" data-rule="{esc(f["rule"])}"><title>#{number} '
                    f'{esc(f["rule"])} ({esc(f["severity"])}): {esc(f["summary"])}</title>'
                    f'<rect x="{left:.1f}" y="{top}" width="{max(right - left, 12):.1f}" '
                    f'height="{_ROW - 2}" rx="2" fill="{colour}" fill-opacity="0.8"/>'
                    + "".join(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top}" '
                              f'y2="{top + _ROW - 2}" stroke="{colour}"/>' for t in times)
                    + f'<text x="{left + 2:.1f}" y="{top + _ROW - 5}" fill="#fff" '
                    f'font-weight="600">{number}</text></g>')
        out.append(f'<line x1="{_LABEL}" x2="{_LABEL + _AXIS}" y1="{y + 2}" y2="{y + 2}" '
                   f'stroke="currentColor" stroke-opacity="0.4"/>')
        for k in range(5):
            out.append(f'<text x="{_LABEL + _AXIS * k / 4:.1f}" y="{y + 16}" '
                       f'text-anchor="{"start" if k == 0 else "end" if k == 4 else "middle"}" '
                       f'fill="currentColor">{_seconds(length * k / 4)}</text>')
        out.append("</svg>")
        return "".join(out)

    def card(self, number: int, f: Mapping[str, Any]) -> str:
        """Finding ``f``'s card, numbered as its bars on the timeline."""
        severity = Severity(f["severity"])
        colour = SEVERITY_COLOUR[severity]
        openers = Openers(f"finding {number} {f['rule']} {f['summary']}")
        links: dict[tuple[str | None, int], int] = {}
        rows = []
        unlinked = 0
        several = len(self.files) > 1
        for item in _items(f["evidence"]):
            packet = item["packet"]
            cell = ""
            if packet is not None:
                where = self._file_of(item["file"])
                text = (f"{os.path.basename(where)}#{packet}" if several and where
                        else str(packet))
                cell = esc(text)
                k = links.get((where, packet))
                if k is None and where is not None and self._linked < REPLAYS_LINKED:
                    pane = self._replay_at(where, packet)
                    if pane is not None:
                        k = links[(where, packet)] = len(links)
                        openers.pane(k, pane[1], pane[0])
                        self._linked += 1
                elif k is None:
                    unlinked += 1
                if k is not None:
                    cell = openers.box(k, f'<span class="nv-pkt">{esc(text)}</span>',
                                       title=f"packet {packet}: open the replay at it",
                                       cls="nv-pktlink")
            rows.append(
                f"<tr><td class='nv-mono'>{_seconds(item['ts'] - self.span[0])}</td>"
                f"<td class='nv-mono'>{cell}</td>"
                f"<td class='nv-mono'>{esc(_connection(item) or '')}</td>"
                f"<td class='nv-mono'>{esc(item['msg_id'] or '')}</td>"
                f"<td>{esc(item['what'] or '')}</td></tr>")
        kept = (f'<div class="nv-muted">the first {EVIDENCE_LIMIT} items of its evidence (the '
                f"summary counts them all)</div>" if len(rows) >= EVIDENCE_LIMIT else "")
        thresholds = "".join(f"<li>{esc(t)}</li>" for t in _items(f["thresholds"]))
        ids = len(_items(f["msg_ids"]))
        where = " · ".join(part for part in (
            f"connection <span class='nv-mono'>{esc(f['connection'])}</span>"
            if f["connection"] else "",
            f"server <span class='nv-mono'>{esc(f['server'])}</span>" if f["server"] else "",
            f"{_seconds(f['ts'] - self.span[0])} to {_seconds(f['end_ts'] - self.span[0])}"
            " into the capture",
            f"{ids} message ids" if ids else "") if part)
        plain = (f"; the report links {REPLAYS_LINKED} packets at most: "
                 f"cap.replay(upto=N) shows the others" if unlinked else "")
        table = (f'<div class="nv-muted" style="font-size:11px">click a packet number: the '
                 f"replay of its connection at that packet opens under the card{plain}</div>"
                 f'<table class="nv-table nv-evidence"><tr><th>time</th><th>packet</th>'
                 f"<th>connection</th><th>message id</th><th>what it shows</th></tr>"
                 f"{''.join(rows)}</table>{kept}" if rows else "")
        return (
            f'<div class="nv-card nv-open nv-{severity.value}" data-rule="{esc(f["rule"])}" '
            f'style="border-left-color:{colour}">'
            f'<div><span class="nv-sev" style="background:{_CHIP[severity]};'
            f'border:1px solid {colour}">#{number} {severity.value}</span>'
            f'<code>{esc(f["rule"])}</code></div>'
            f'<p class="nv-summary">{esc(f["summary"])}</p>'
            f"<p>{esc(f['explanation'])}</p>"
            f"<p><b>What to change:</b> {esc(f['change'])}</p>"
            + (f'<div class="nv-muted">decided by:<ul>{thresholds}</ul></div>'
               if thresholds else "")
            + f'<div class="nv-muted">{where}</div>{table}{openers.html()}</div>')

    def html(self, *, with_css: bool = True) -> str:
        counts = {s: sum(f["severity"] == s.value for f in self.findings) for s in Severity}
        said = ", ".join(f"{n} {s.value}{'s' if n != 1 and s != Severity.INFO else ''}"
                         for s, n in counts.items() if n)
        names = ", ".join(os.path.basename(f) for f in self.files)
        title = (f'<div class="nv-title">The doctor: {len(self.findings)} finding'
                 f"{'' if len(self.findings) == 1 else 's'}"
                 f"{f' ({said})' if said else ''} <span class='nv-muted'>· {esc(names)}"
                 f"</span></div>")
        if not self.findings:
            body = '<div class="nv-muted">no rule found anything wrong in this capture</div>'
        else:
            legend = " ".join(
                f'<span class="nv-sev" style="background:{_CHIP[s]};border:1px solid '
                f'{SEVERITY_COLOUR[s]}">{s.value}</span>' for s in Severity)
            body = (f'<div class="nv-muted" style="font-size:11px">{legend} each finding on '
                    f"its connections' lanes over the time its evidence spans, numbered as "
                    f"its card; a tick per evidence item</div>{self.timeline()}"
                    + "".join(self.card(n, f) for n, f in enumerate(self.findings, 1)))
        return (f'{CSS if with_css else ""}{OPEN_CSS}{REPORT_CSS}'
                f'<div class="nsqviz nsqviz-doctor">{title}{body}</div>')

    def _repr_html_(self) -> str:
        return once(self.html())

    # -- the replays ----------------------------------------------------------------

    def _file_of(self, file: str | None) -> str | None:
        """The capture file an evidence item names (the only one when it names none)."""
        if file is not None:
            return file
        return self.files[0] if len(self.files) == 1 else None

    def _replay_at(self, file: str, packet: int) -> tuple[str, str] | None:
        """(caption, HTML) of the replay of packet ``packet``'s connection at it, or
        ``None`` when the file has no such packet."""
        if file not in self._replays:
            self._replays[file] = Replay.load(file)
        rp = self._replays[file]
        at = next((p for p in rp.packets if p.number == packet), None)
        if at is None:
            return None
        mine = [p for p in rp.packets if p.flow_id == at.flow_id]
        i = mine.index(at)
        shown = mine[max(0, i - REPLAY_AROUND):i + REPLAY_AROUND + 1]
        numbers = {p.number for p in shown}
        flows = tuple(s for s in rp.flows if s.flow.id == at.flow_id)
        window = replace(
            rp, name=f"{rp.name}, packets {shown[0].number}..{shown[-1].number}",
            packets=tuple(shown), flows=flows,
            records=tuple(r for r in rp.records if r.flow_id == at.flow_id and r.packets
                          and set(r.packets) <= numbers))
        view = ReplayView(window, upto=packet, flows=[s.flow.id for s in flows],
                          open_bytes=False)
        label = flows[0].flow.label if flows else "no connection"
        return (f"packet {packet} of {rp.name}: the replay of {label} at it",
                view.html(with_css=False))


def _connection(item: Mapping[str, Any]) -> str | None:
    """An evidence item's connection as ``client->server``."""
    conn: str | None = item["conn_id"]
    return None if conn is None else conn.rsplit("@", 1)[0]


def _lanes_of(f: Mapping[str, Any]) -> list[str]:
    """The lanes finding ``f`` is marked on: its connection and every one its evidence
    names; the capture's own (``""``) when it names none."""
    named = [*([f["connection"]] if f["connection"] else []), *_items(f["connections"])]
    return list(dict.fromkeys(named)) or [""]


def _items(value: Any) -> list[Any]:
    """A list column's value as a list (``None`` when empty; an array once in pandas)."""
    return [] if value is None else list(value)


def _seconds(t: float) -> str:
    """A time since the capture's start, to the millisecond."""
    return f"{t:.3f} s"
