"""A sequence diagram (SVG): participants as lifelines, messages as labelled arrows.

The view knows nothing about NSQ: the session turns its transcript into
:class:`Arrow` objects (``SUB orders audit`` from client to broker, ``OK`` back) and
this module only draws them, one row per arrow, in the order given. An arrow with a
``detail`` (the HTML of its bytes: a hex view with its field tree) is clickable: a
transparent label over its row opens the detail under the diagram, in stored HTML as in
a live widget (:mod:`nsqviz.widgets.opener` says how and why).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nsqviz.palette import OTHER, ink, name_colour
from nsqviz.protocols import TimerSpan
from nsqviz.records import DecodedRecord, label
from nsqviz.widgets.hexview import LINK_CSS
from nsqviz.widgets.opener import MAX_OPENERS, OPEN_CSS, Openers
from nsqviz.widgets.style import CSS, StaticView, esc, unique_ids

__all__ = ["Arrow", "SequenceDiagram", "ARROW_COLOURS", "from_records"]

ARROW_COLOURS = {
    "command": "#2563eb",
    "response": "#059669",
    "error": "#dc2626",
    "message": "#7c3aed",
    "heartbeat": "#db2777",
    "note": "#6b7280",
}
"""Stroke per arrow kind, for an arrow without a table name (a refusal, a TCP close, a
note); an arrow with one takes its name's colour (:mod:`nsqviz.palette`)."""


@dataclass(frozen=True)
class Arrow:
    """One arrow: ``label`` above it, ``note`` (sizes, timing) below, ``t`` in the margin.

    ``unasked`` arrows (pushed messages, heartbeats) are dashed: nobody asked for them.
    ``name`` is the command, frame type or RPC method the arrow carries (``SUB``,
    ``FrameTypeMessage``): the label sits on that name's fill and the line takes its
    darker shade, the colours the replay, the sticky map and the plots give that name.
    ``detail``: HTML a click on the arrow opens (its bytes), or ``""``.
    """

    src: str
    dst: str
    label: str
    kind: str = "command"
    note: str = ""
    t: str = ""
    unasked: bool = False
    name: str = ""
    detail: str = ""

    @property
    def fill(self) -> str | None:
        """The name's fill, or ``None`` for an arrow without a table name."""
        fill = name_colour(self.name) if self.name else OTHER
        return None if fill == OTHER else fill

    @property
    def stroke(self) -> str:
        fill = self.fill
        return ink(fill) if fill else ARROW_COLOURS.get(self.kind, "#374151")


class SequenceDiagram(StaticView):
    """Lifelines for ``participants`` (left to right) and ``arrows`` (top to bottom)."""

    ROW = 38
    COL = 320
    MAX_COL = 380
    LEFT = 80
    TOP = 46

    LANE = 12

    def __init__(self, participants: list[str], arrows: list[Arrow], title: str = "",
                 spans: list[TimerSpan] | None = None):
        self.participants = list(participants)
        self.arrows = list(arrows)
        self.title = title
        self.spans = list(spans or [])

    def row_y(self, row: int) -> int:
        """The y of arrow ``row``'s line."""
        return self.TOP + row * self.ROW + 14

    def span_lanes(self) -> list[int]:
        """Each span's lane (0 nearest the lifelines): overlapping spans side by side."""
        ends: list[float] = []
        lanes = []
        for s in self.spans:
            last = len(self.arrows) if s.last is None else s.last
            lane = next((k for k, end in enumerate(ends) if end < s.first), len(ends))
            if lane == len(ends):
                ends.append(last)
            ends[lane] = last
            lanes.append(lane)
        return lanes

    LABEL_GAP = 11
    """The height of a timer's label line: two labels' baselines are at least this apart."""

    def label_ys(self) -> list[int]:
        """Each span's label baseline: at its start row, or pushed down below the label
        before it when it would collide (many timers start on the same or nearby rows), so
        no two labels overlap; the picture grows to hold the last one."""
        ys: list[int] = []
        free = 0
        for s in self.spans:  # in row order (timer_spans sorts them)
            y = max(self.row_y(s.first) + 4, free)
            ys.append(y)
            free = y + self.LABEL_GAP
        return ys

    def height(self) -> int:
        """The picture's height: every row, and every timer label below the last row."""
        rows = self.TOP + max(len(self.arrows), 1) * self.ROW + 22
        return max([rows] + [y + 6 for y in self.label_ys()])

    def _spans_svg(self, x0: int, height: int) -> list[str]:
        out = []
        lanes = self.span_lanes()
        text_x = x0 + (max(lanes, default=-1) + 1) * self.LANE + 6
        for s, lane, ty in zip(self.spans, lanes, self.label_ys(), strict=True):
            col = ink(name_colour(s.name)) if s.name else "#6b7280"
            x = x0 + lane * self.LANE
            y1 = self.row_y(s.first)
            y2 = height - 8 if s.last is None else self.row_y(s.last)
            end = ("" if s.last is None else
                   f'<line x1="{x - 4}" y1="{y2}" x2="{x + 4}" y2="{y2}" stroke="{col}"/>')
            dash = "" if s.last is not None else ' stroke-dasharray="2,2"'
            out.append(
                f'<g class="nv-timer"><title>{esc(s.label)}</title>'
                f'<line x1="{x - 4}" y1="{y1}" x2="{x + 4}" y2="{y1}" stroke="{col}"/>'
                f'<line class="nv-timer-bar" x1="{x}" y1="{y1}" x2="{x}" y2="{y2}" stroke="{col}"'
                f' stroke-width="2"'
                f'{dash}/>{end}'
                f'<line x1="{x}" y1="{y1}" x2="{text_x - 3}" y2="{ty - 4}" stroke="{col}" '
                f'stroke-width="0.6" stroke-dasharray="1,2"/>'
                f'<text x="{text_x}" y="{ty}" fill="{col}" font-size="10">'
                f"{esc(s.label)}</text></g>"
            )
        return out

    def svg(self) -> str:
        # columns grow with the longest label (~6.7 px a glyph at 11 px monospace) up to
        # MAX_COL; longer labels are cut to fit over their arrow, whole in the tooltip
        longest = max((len(a.label) for a in self.arrows), default=0)
        span = max(self.COL, min(int(longest * 6.7) + 40, self.MAX_COL))
        fits = int((span - 30) / 6.7)
        xs = {p: self.LEFT + 60 + i * span for i, p in enumerate(self.participants)}
        width = self.LEFT + 120 + (len(self.participants) - 1) * span
        gutter = width - 40
        if self.spans:
            lanes = max(self.span_lanes()) + 1
            width += lanes * self.LANE + 20 + int(max(len(s.label) for s in self.spans) * 6.1)
        height = self.height()
        out = [
            f'<svg class="nv-seq" xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" '
            'font-family="DejaVu Sans Mono,Menlo,Consolas,monospace" font-size="11">',
            "<defs>",
        ]
        for col in sorted({a.stroke for a in self.arrows}):
            out.append(
                f'<marker id="nv-ah-@ID@-{col[1:]}" viewBox="0 0 10 10" refX="9" refY="5" '
                f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
                f'<path d="M0,0 L10,5 L0,10 z" fill="{col}"/></marker>'
            )
        out.append("</defs>")
        for p, x in xs.items():
            out.append(
                f'<rect x="{x - 52}" y="6" width="104" height="24" rx="5" fill="#f3f4f6" '
                f'stroke="#9ca3af"/><text x="{x}" y="22" text-anchor="middle" '
                f'font-family="sans-serif" font-size="12" font-weight="600">{esc(p)}</text>'
                f'<line x1="{x}" y1="30" x2="{x}" y2="{height - 6}" stroke="#d1d5db" '
                f'stroke-dasharray="3,3"/>'
            )
        for i, a in enumerate(self.arrows):
            y = self.TOP + i * self.ROW + 14
            col = a.stroke
            if i % 2:
                out.append(
                    f'<rect x="0" y="{y - 18}" width="{width}" height="{self.ROW}" '
                    'fill="#fafafa"/>'
                )
            if a.t:
                out.append(f'<text x="6" y="{y + 4}" fill="#9ca3af">{esc(a.t)}</text>')
            x1, x2 = xs[a.src], xs[a.dst]
            dash = ' stroke-dasharray="5,3"' if a.unasked else ""
            out.append(
                f'<line class="nv-arrow nv-{esc(a.kind)}" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" '
                f'stroke="{col}" stroke-width="1.6"{dash} marker-end="url(#nv-ah-@ID@-{col[1:]})"/>'
            )
            mid = (x1 + x2) / 2
            label = a.label if len(a.label) <= fits else a.label[: fits - 1] + "…"
            if a.fill:
                half = len(label) * 3.35 + 4
                out.append(
                    f'<rect x="{mid - half:.1f}" y="{y - 17}" width="{2 * half:.1f}" '
                    f'height="14" rx="3" fill="{a.fill}"/>'
                )
            out.append(
                f'<g><title>{esc(a.label)}</title><text class="nv-label" x="{mid}" y="{y - 6}" '
                f'text-anchor="middle" fill="{col}" font-weight="600">{esc(label)}</text></g>'
            )
            if a.note:
                out.append(
                    f'<text x="{mid}" y="{y + 13}" text-anchor="middle" fill="#6b7280" '
                    f'font-size="10">{esc(a.note)}</text>'
                )
        out += self._spans_svg(gutter, height)
        out.append("</svg>")
        return unique_ids("".join(out))

    def html(self, *, with_css: bool = True) -> str:
        names = dict.fromkeys(a.name for a in self.arrows if a.fill)
        kinds = dict.fromkeys(a.kind for a in self.arrows if not a.fill and a.kind != "note")
        legend = " ".join(
            f'<span class="nv-chip" style="background:{name_colour(n)}">{esc(n)}</span>'
            for n in names
        ) + "".join(
            f' <span style="color:{ARROW_COLOURS.get(k, "#374151")}">━ {esc(k)}</span>'
            for k in kinds
        )
        title = f'<div class="nv-title">{esc(self.title)}</div>' if self.title else ""
        svg = self.svg()
        openers = Openers(svg)
        rows = self._rows(openers)
        # full size, scrolled sideways when wider than the page: scaled to fit, a long
        # session's labels shrank to a few pixels
        svg = svg.replace('<svg class="nv-seq" ', '<svg class="nv-seq" style="max-width:none" ', 1)
        if rows:
            svg = (f'<div class="nv-seqwrap" style="position:relative;width:fit-content">'
                   f'{svg}{rows}</div>')
            legend += " · click an arrow to open its bytes"
            head = OPEN_CSS + LINK_CSS
        else:
            head = ""
        return (
            f'{CSS if with_css else ""}{head}<div class="nsqviz nsqviz-seq nv-open">{title}'
            f'<div class="nv-seqscroll" style="overflow-x:auto;max-width:100%">{svg}</div>'
            f'<div class="nv-muted" style="font-size:11px">{legend} · dashed: unasked'
            f"</div>{openers.html()}</div>"
        )

    def _rows(self, openers: Openers) -> str:
        """A transparent label over each row whose arrow has a detail (at most
        :data:`~nsqviz.widgets.opener.MAX_OPENERS`, the last ones), placed in percent of
        the picture so it stays on its row when the SVG is scaled down to fit."""
        height = self.height()
        rows = [(i, a) for i, a in enumerate(self.arrows) if a.detail][-MAX_OPENERS:]
        out = []
        for k, (i, a) in enumerate(rows):
            top = (self.row_y(i) - 18) / height * 100
            style = (f"position:absolute;left:0;width:100%;top:{top:.3f}%;"
                     f"height:{self.ROW / height * 100:.3f}%")
            out.append(openers.box(k, "", style=style, title=f"{a.label} · click: its bytes"))
            openers.pane(k, a.detail)
        return "".join(out)

    def text(self) -> str:
        lines = [self.title] if self.title else []
        for a in self.arrows:
            mark = "~~>" if a.unasked else "-->"
            when = f"  @ {a.t}" if a.t else ""  # last: a varying width must not shift columns
            lines.append(f"{a.src} {mark} {a.dst}: {a.label}  {a.note}".rstrip() + when)
        for s in self.spans:
            until = "the end" if s.last is None else f"row {s.last + 1}"
            lines.append(f"timer {s.label}: row {s.first + 1} to {until}")
        return "\n".join(lines)



def from_records(records: Iterable[DecodedRecord], title: str = "") -> SequenceDiagram:
    """The commands and frames of decoded records (a capture's, any protocol's) as a
    diagram: each connection's client and server a lifeline, each unit an arrow worded
    by its protocol (:func:`nsqviz.records.label`), a refused command noted with the
    server's code, times from the first unit."""
    participants: dict[str, None] = {}
    arrows: list[Arrow] = []
    t0: float | None = None
    for rec in records:
        if rec.kind not in ("command", "frame") or rec.flow is None or rec.event is None:
            continue
        client, _, server = rec.flow.partition("->")
        participants.setdefault(client)
        participants.setdefault(server)
        t0 = rec.ts if t0 is None else t0
        text, kind = label(rec.event)
        problem = rec.fields.get("violation")
        note = f"refused: {problem['code']}" if problem else ""
        src, dst = (client, server) if rec.kind == "command" else (server, client)
        arrows.append(Arrow(src, dst, text, kind, note=note, t=f"{rec.ts - t0:.3f}s",
                            name=rec.name))
    return SequenceDiagram(list(participants), arrows, title=title)
