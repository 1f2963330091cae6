"""A sequence diagram (SVG): participants as lifelines, messages as labelled arrows.

The view knows nothing about NSQ: the session turns its transcript into
:class:`Arrow` objects (``SUB orders audit`` from client to broker, ``OK`` back) and
this module only draws them, one row per arrow, in the order given. An arrow with a
``detail`` (the HTML of its bytes: a hex view with its field tree) is clickable: a
transparent label over its row opens the detail under the diagram, in stored HTML as in
a live widget (:mod:`nsqviz.widgets.opener` says how and why).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from nsqviz.palette import OTHER, ink, name_colour
from nsqviz.protocols.timers import TimerSpan
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


class _Layout(NamedTuple):
    """Where everything of one diagram goes (px of the SVG's own coordinates)."""

    xs: dict[str, float]  # each lane's centre
    box: float  # a participant box's width
    width: int
    gutter: float  # the x of the timers' first lane
    lines: list[list[str]]  # each arrow's label, wrapped to its arrow's length
    notes: list[str]  # each arrow's note, cut to its arrow's length
    ys: list[int]  # each arrow's line
    tops: list[int]  # each row's top (its label's first line above the line)
    timer_lines: list[list[str]]  # each timer's label, wrapped
    timer_ys: list[int]  # each timer label's first baseline
    height: int


class SequenceDiagram(StaticView):
    """Lifelines for ``participants`` (left to right) and ``arrows`` (top to bottom).

    The picture is laid out for :attr:`WIDTH` pixels -- the website's column (~824 px)
    less a card's border and padding (the stepper's); a notebook in JupyterLab with its
    file browser open is wider (~950 px of a 1,400-px window) -- and shown scaled to its
    container (``width`` 100 %, never wider than drawn). Lanes are spaced to fill that
    width and never closer than :attr:`MIN_COL` (a participant's box and a gap), so its
    11-px labels stay readable; an arrow's label is wrapped to its arrow's length, a timer's to
    :attr:`TIMER_CHARS`; a participant no arrow touches is left out (it would only push
    the others aside).
    """

    WIDTH = 800
    MIN_COL = 128
    MAX_COL = 380
    BOX = 104
    TOP = 46
    ROW = 38
    LINE = 13  # an arrow label's extra line
    GLYPH = 6.7  # an 11-px monospace glyph's advance (DejaVu Sans Mono: 0.6 em), and a margin
    SMALL = 6.1  # a 10-px one
    TIMER_CHARS = 22
    LANE = 12
    STAMP_CHARS = 9
    """The time margin's least width in characters (``1234.5 ms``, ``12.345s``): a
    run's times differ in their digits from one run to the next, and the lanes must not
    move with them (a notebook's stored picture is compared with a fresh run's)."""

    LABEL_GAP = 11
    """The height of a timer's label line: two labels' baselines are at least this apart."""
    LABEL_SPACE = 5
    """More between two timers' labels than between two lines of one."""

    def __init__(self, participants: list[str], arrows: list[Arrow], title: str = "",
                 spans: list[TimerSpan] | None = None):
        used = {p for a in arrows for p in (a.src, a.dst)}
        self.participants = [p for p in participants if p in used] or list(participants)
        self.arrows = list(arrows)
        self.title = title
        self.spans = list(spans or [])

    def row_y(self, row: int) -> int:
        """The y of arrow ``row``'s line."""
        return self.layout().ys[row]

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

    def label_ys(self) -> list[int]:
        """Each span's label baseline (its first line's)."""
        return self.layout().timer_ys

    def height(self) -> int:
        return self.layout().height

    def layout(self) -> _Layout:
        """Lanes spaced to fit :attr:`WIDTH`, labels wrapped to what their arrows leave,
        rows as tall as their labels, timer labels stacked so that none overlaps."""
        n = len(self.participants)
        stamps = max((len(a.t) for a in self.arrows), default=0)
        left = max(stamps, self.STAMP_CHARS) * self.GLYPH + 12 if stamps else 8
        timer_lines = [textwrap.wrap(s.label, self.TIMER_CHARS) or [""] for s in self.spans]
        right = self.BOX / 2 + 8  # beyond the last lane
        if self.spans:
            lanes = max(self.span_lanes()) + 1
            text = max(len(line) for lines in timer_lines for line in lines) * self.SMALL
            right = max(right, 24 + lanes * self.LANE + 6 + text + 6)
        fit = (self.WIDTH - left - self.BOX / 2 - right) / max(n - 1, 1)
        col = max(self.MIN_COL, min(fit, self.MAX_COL))
        xs = {p: left + self.BOX / 2 + i * col for i, p in enumerate(self.participants)}
        last_x = left + self.BOX / 2 + (n - 1) * col
        width = int(last_x + right + 0.5)
        box = min(self.BOX, col - 10) if n > 1 else self.BOX
        lines, notes, ys, tops = [], [], [], []
        top = self.TOP - 4
        for a in self.arrows:
            room = abs(xs[a.dst] - xs[a.src]) - 24 if a.src != a.dst else col - 24
            wrapped = _wrap(a.label, max(int(room / self.GLYPH), 8), 4)
            lines.append(wrapped)
            notes.append(_cut(a.note, max(int(room / self.SMALL), 8)))
            tops.append(top)
            y = top + 18 + (len(wrapped) - 1) * self.LINE
            ys.append(y)
            top = y + self.ROW - 18
        timer_ys: list[int] = []
        free = 0
        for s, wrapped in zip(self.spans, timer_lines, strict=True):  # in row order
            first = ys[s.first] if s.first < len(ys) else top
            y = max(first + 4, free)
            timer_ys.append(y)
            free = y + self.LABEL_GAP * len(wrapped) + self.LABEL_SPACE
        height = max([top + 26, self.TOP + self.ROW + 22] + [y + 6 for y in timer_ys])
        if timer_ys:
            height = max(height, free)
        gutter = last_x + 24
        return _Layout(xs, box, width, gutter, lines, notes, ys, tops, timer_lines,
                       timer_ys, height)

    def _spans_svg(self, lay: _Layout) -> list[str]:
        out = []
        lanes = self.span_lanes()
        x0 = lay.gutter
        text_x = x0 + (max(lanes, default=-1) + 1) * self.LANE + 6
        for s, lane, ty, lines in zip(self.spans, lanes, lay.timer_ys, lay.timer_lines,
                                      strict=True):
            col = ink(name_colour(s.name)) if s.name else "#6b7280"
            x = x0 + lane * self.LANE
            y1 = lay.ys[s.first] if s.first < len(lay.ys) else lay.height - 8
            y2 = lay.height - 8 if s.last is None or s.last >= len(lay.ys) else lay.ys[s.last]
            end = ("" if s.last is None else
                   f'<line x1="{x - 4:g}" y1="{y2}" x2="{x + 4:g}" y2="{y2}" stroke="{col}"/>')
            dash = "" if s.last is not None else ' stroke-dasharray="2,2"'
            text = "".join(
                f'<tspan x="{text_x:g}" dy="{0 if k == 0 else self.LABEL_GAP}">{esc(line)}</tspan>'
                for k, line in enumerate(lines))
            out.append(
                f'<g class="nv-timer"><title>{esc(s.label)}</title>'
                f'<line x1="{x - 4:g}" y1="{y1}" x2="{x + 4:g}" y2="{y1}" stroke="{col}"/>'
                f'<line class="nv-timer-bar" x1="{x:g}" y1="{y1}" x2="{x:g}" y2="{y2}" '
                f'stroke="{col}" stroke-width="2"{dash}/>{end}'
                f'<line x1="{x:g}" y1="{y1}" x2="{text_x - 3:g}" y2="{ty - 4}" stroke="{col}" '
                f'stroke-width="0.6" stroke-dasharray="1,2"/>'
                f'<text class="nv-timer-label" x="{text_x:g}" y="{ty}" fill="{col}" '
                f'font-size="10">{text}</text></g>'
            )
        return out

    def svg(self) -> str:
        lay = self.layout()
        width, height = lay.width, lay.height
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
        for i in range(1, len(self.arrows), 2):
            row_h = (lay.tops[i + 1] if i + 1 < len(lay.tops) else lay.ys[i] + 20) - lay.tops[i]
            out.append(f'<rect x="0" y="{lay.tops[i]}" width="{width}" height="{row_h}" '
                           'fill="#fafafa"/>')
        half = lay.box / 2
        fits = int((lay.box - 8) / 7.4)  # a 12-px sans glyph, bold
        for p, x in lay.xs.items():
            name = _cut(p, fits)
            out.append(
                f'<g class="nv-lane"><title>{esc(p)}</title>'
                f'<rect x="{x - half:g}" y="6" width="{lay.box:g}" height="24" rx="5" '
                f'fill="#f3f4f6" stroke="#9ca3af"/><text class="nv-lane-name" x="{x:g}" y="22" '
                f'text-anchor="middle" font-family="sans-serif" font-size="12" '
                f'font-weight="600">{esc(name)}</text></g>'
                f'<line x1="{x:g}" y1="30" x2="{x:g}" y2="{height - 6}" stroke="#d1d5db" '
                f'stroke-dasharray="3,3"/>'
            )
        for i, a in enumerate(self.arrows):
            y = lay.ys[i]
            col = a.stroke
            if a.t:
                out.append(f'<text x="6" y="{y + 4}" fill="#9ca3af">{esc(a.t)}</text>')
            x1, x2 = lay.xs[a.src], lay.xs[a.dst]
            dash = ' stroke-dasharray="5,3"' if a.unasked else ""
            out.append(
                f'<line class="nv-arrow nv-{esc(a.kind)}" x1="{x1:g}" y1="{y}" x2="{x2:g}" '
                f'y2="{y}" stroke="{col}" stroke-width="1.6"{dash} '
                f'marker-end="url(#nv-ah-@ID@-{col[1:]})"/>'
            )
            mid = (x1 + x2) / 2
            lines = lay.lines[i]
            first = y - 6 - (len(lines) - 1) * self.LINE
            if a.fill:
                for k, line in enumerate(lines):
                    w = len(line) * 3.35 + 4
                    out.append(
                        f'<rect x="{mid - w:.1f}" y="{first + k * self.LINE - 11}" '
                        f'width="{2 * w:.1f}" height="14" rx="3" fill="{a.fill}"/>'
                    )
            text = "".join(
                f'<tspan x="{mid:g}" dy="{0 if k == 0 else self.LINE}">{esc(line)}</tspan>'
                for k, line in enumerate(lines))
            out.append(
                f'<g><title>{esc(a.label)}</title><text class="nv-label" x="{mid:g}" '
                f'y="{first}" text-anchor="middle" fill="{col}" font-weight="600">{text}'
                f'</text></g>'
            )
            if a.note:
                out.append(
                    f'<text class="nv-note" x="{mid:g}" y="{y + 13}" text-anchor="middle" '
                    f'fill="#6b7280" font-size="10"><title>{esc(a.note)}</title>'
                    f'{esc(lay.notes[i])}</text>'
                )
        out += self._spans_svg(lay)
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
        lay = self.layout()
        svg = self.svg()
        openers = Openers(svg)
        rows = self._rows(openers, lay)
        # as wide as its container, never wider than drawn: laid out for WIDTH, it is
        # shown full size in a notebook and barely scaled in the site's column
        svg = svg.replace('<svg class="nv-seq" ',
                          '<svg class="nv-seq" style="display:block;width:100%;'
                          f'max-width:{lay.width}px;height:auto" ', 1)
        wrap = f"position:relative;max-width:{lay.width}px"
        if rows:
            legend += " · click an arrow to open its bytes"
            head = OPEN_CSS + LINK_CSS
        else:
            head = ""
        return (
            f'{CSS if with_css else ""}{head}<div class="nsqviz nsqviz-seq nv-open">{title}'
            f'<div class="nv-seqwrap" style="{wrap}">{svg}{rows}</div>'
            f'<div class="nv-muted" style="font-size:11px">{legend} · dashed: unasked'
            f"</div>{openers.html()}</div>"
        )

    def _rows(self, openers: Openers, lay: _Layout) -> str:
        """A transparent label over each row whose arrow has a detail (at most
        :data:`~nsqviz.widgets.opener.MAX_OPENERS`, the last ones), placed in percent of
        the picture so it stays on its row when the SVG is scaled down to fit."""
        height = lay.height
        rows = [(i, a) for i, a in enumerate(self.arrows) if a.detail][-MAX_OPENERS:]
        out = []
        for k, (i, a) in enumerate(rows):
            bottom = lay.tops[i + 1] if i + 1 < len(lay.tops) else lay.ys[i] + 20
            top = lay.tops[i] / height * 100
            style = (f"position:absolute;left:0;width:100%;top:{top:.3f}%;"
                     f"height:{(bottom - lay.tops[i]) / height * 100:.3f}%")
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



_BREAK = re.compile(r"(?<=[ ,;])")
"""Where a label may break: after a space, and inside a parameter list (an IDENTIFY's
``{feature_negotiation,output_buffer_timeout}`` breaks after its commas, not mid-name)."""


def _wrap(text: str, width: int, most: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken where :data:`_BREAK`
    allows (a piece longer than a line is split), at most ``most`` lines, the last cut
    with "…" if more was left."""
    lines: list[str] = []
    line = ""
    for piece in _BREAK.split(text):
        while len(line) + len(piece.rstrip()) > width:
            if line:
                lines.append(line.rstrip())
                line = ""
            elif len(piece) > width:
                lines.append(piece[:width])
                piece = piece[width:]
            else:
                break
        line += piece
    lines.append(line.rstrip())
    if len(lines) > most:
        lines = lines[:most]
        lines[-1] = _cut(lines[-1] + " …", width)
    return lines


def _cut(text: str, width: int) -> str:
    """``text``, or its first ``width - 1`` characters and "…"."""
    return text if len(text) <= width else text[: width - 1] + "…"


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
