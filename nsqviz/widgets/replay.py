"""The replay view: a capture as lanes, one per connection, frames as boxes on their packets.

The horizontal axis is packet order (Wireshark's packet list turned sideways), so a
burst of packets in one millisecond stays readable. Each lane is one TCP connection:
its packets are ticks (client to server above the line, server to client below),
retransmissions are orange, a packet that proved bytes missing is red. Each decoded
command or frame is a box spanning the packets that carried it -- a frame split over
three segments is a long box, eight frames glued in one segment are eight slim boxes in
one packet's slot: the capture-level sticky-packet (粘包) map.

Under a lane, the timers its records show, as each record's protocol finds them
(:meth:`nsqviz.protocols.protocol.Protocol.timers`) -- NSQ's: a DPUB's deferral and a REQ's delay
from the packet that carried the command, and ``msg_timeout``,
``output_buffer_timeout`` and heartbeats where the IDENTIFY exchange in the capture gives
their length (a capture does not say how its servers were started, so nothing is
assumed).

``ReplayView(replay, upto=N)`` shows the capture as of packet N (later boxes faded); its
HTML is static and deterministic (what a saved notebook shows). Clicking a box of a
record completed by packet N opens that record's hex view with its field tree
(:class:`~nsqviz.widgets.hexview.HexView`) under the lanes -- in the stored HTML as in
the live widget, with no script (:mod:`nsqviz.widgets.opener` says how and why).
``widget()`` adds a play button and a slider over packet numbers, and a picker listing
every record up to the current packet.
"""

from __future__ import annotations

from typing import Any

from nsqviz import protocols
from nsqviz.capture.replay import Replay
from nsqviz.palette import KINDS, ink, name_colour, ordinal_colour
from nsqviz.protocols.timers import TimerRow, TimerSpan
from nsqviz.records import DecodedRecord
from nsqviz.stream import Direction
from nsqviz.widgets.hexview import LINK_CSS, HexView, unit_view
from nsqviz.widgets.opener import MAX_OPEN_BYTES, MAX_OPENERS, OPEN_CSS, Openers, too_long
from nsqviz.widgets.style import CSS, Live, esc, once

__all__ = ["ReplayView"]

_WIDTH = 760  # px for the packet axis at most (it shrinks to fit: positions are in %)
_LANE = 64  # px per lane
_TIMERS_SHOWN = 6  # per lane; a capture of 200 messages has 200 msg_timeouts
_TIMER_ROW = 20  # px per timer: its 11-px label, then its 6-px bar, apart from the next label
_MIN_CELL = 3.0  # px: a packet slot narrower than this (at full width) has no clickable boxes
_TICK = {"": "#9ca3af", "retransmission": "#f59e0b", "gap": "#dc2626", "warning": "#dc2626"}


class ReplayView:
    """Render a :class:`~nsqviz.capture.replay.Replay` up to packet ``upto``."""

    def __init__(self, replay: Replay, upto: int | None = None, *, flows: list[int] | None = None,
                 open_bytes: bool = True):
        self.replay = replay
        self.open_bytes = open_bytes  # False: no box opens (a view nested in another's pane)
        last = replay.packets[-1].number if replay.packets else 0
        self.upto = last if upto is None else upto
        decoded = [s.flow.id for s in replay.flows if s.protocol]
        self.flows = flows if flows is not None else decoded
        self._x = {p.number: i for i, p in enumerate(replay.packets)}
        self._names = sorted({r.name for r in replay.records if r.kind in ("command", "frame")})
        self._hex: dict[int, str] = {}  # record index -> its hex view's HTML

    # -- geometry -------------------------------------------------------------------

    @property
    def _cell(self) -> float:
        """One packet's slot, in percent of the axis."""
        return 100 / max(1, len(self.replay.packets))

    def _xpos(self, number: int) -> float:
        """Where packet ``number``'s slot starts, in percent of the axis."""
        return self._x.get(number, 0) * self._cell

    def _fill(self, rec: DecodedRecord) -> str:
        if rec.kind in KINDS:
            return KINDS[rec.kind]
        return name_colour(rec.name)

    # -- rendering ------------------------------------------------------------------

    def records_at(self, number: int) -> list[DecodedRecord]:
        """The records completed by packet ``number`` (the last packet that carried them)."""
        return [r for r in self.replay.records if r.packets and r.packets[-1] == number]

    def records_upto(self, number: int) -> list[DecodedRecord]:
        """Every record of the shown flows completed by packet ``number`` or earlier (what
        the picker lists: the whole conversation so far, not just the last packet)."""
        return [r for r in self.replay.records
                if r.packets and r.packets[-1] <= number and r.flow_id in self.flows]

    def html(self, *, with_css: bool = True) -> str:
        rp = self.replay
        cell = self._cell
        openers = Openers(f"replay {rp.name} {self.upto} {self.flows}")
        clickable = self._clickable()
        spans = self.timers()
        lanes = []
        for fid in self.flows:
            stats = next(s for s in rp.flows if s.flow.id == fid)
            ticks = []
            for p in rp.packets:
                if p.flow_id != fid:
                    continue
                top = 6 if p.dir == Direction.C2S else _LANE // 2 + 2
                faded = p.number > self.upto
                ticks.append(
                    f'<div title="packet {p.number}: {p.dir} {p.payload} B {p.note}" '
                    f'style="position:absolute;left:{self._xpos(p.number):.3f}%;top:{top}px;'
                    f'width:{cell:.3f}%;height:{_LANE // 2 - 8}px;'
                    f'border-left:1px solid {_TICK[p.note]};opacity:{0.25 if faded else 1}">'
                    f"</div>"
                )
            boxes = self._boxes(fid, cell, openers, clickable)
            cursor = self._xpos(self.upto) + cell
            lanes.append(
                f'<div style="display:flex;align-items:center;gap:8px;margin:2px 0">'
                f'<div class="nv-mono" style="flex:none;width:230px;font-size:11px">flow {fid}<br>'
                f"{esc(stats.flow.label)}<br><span class='nv-muted'>"
                f"{sum(stats.records.values())} records"
                f"{'' if stats.flow.syn_seen else ' · mid-stream'}</span></div>"
                f'<div style="position:relative;flex:1 1 0;min-width:0;max-width:{_WIDTH}px;'
                f'height:{_LANE}px;'
                f'background:#f9fafb;border:1px solid #e5e7eb">'
                f'<div style="position:absolute;left:0;right:0;top:{_LANE // 2}px;'
                f'border-top:1px dashed #d1d5db"></div>'
                f'{"".join(ticks)}{"".join(boxes)}'
                f'<div style="position:absolute;left:{cursor:.3f}%;top:0;bottom:0;'
                f'border-left:2px solid #2563eb"></div></div></div>'
                + self._timer_strip(fid, spans, cell)
            )
        legend = "".join(
            f'<span class="nv-chip" style="background:{name_colour(n)}">{esc(n)}</span>'
            for n in self._names
        ) + "".join(
            f'<span class="nv-chip" style="background:{c}">{k}</span>'
            for k, c in KINDS.items()
        )
        shown = [r for r in rp.records if r.packets and r.packets[-1] <= self.upto]
        title = (
            f'<div class="nv-title">{esc(rp.name)} <span class="nv-muted">· packet '
            f"{self.upto} of {len(rp.packets)} · {len(shown)} of {len(rp.records)} records · "
            f"c2s above the line, s2c below · orange: retransmission, red: missing bytes"
            f"</span></div>"
        )
        table = self._table(self.upto)
        some = len(clickable) < len(self.records_upto(self.upto))
        hint = (f'<div class="nv-muted" style="font-size:11px">click a box to open its bytes'
                f'{f" (the last {len(clickable)} records)" if some else ""}</div>'
                if clickable else "")
        return (
            f'{CSS if with_css else ""}{OPEN_CSS}{LINK_CSS if clickable else ""}'
            f'<div class="nsqviz nsqviz-replay nv-open">{title}'
            f'<div class="nv-legend">{legend}</div>{hint}{"".join(lanes)}{openers.html()}'
            f"{table}</div>"
        )

    def timers(self) -> list[tuple[int | None, TimerSpan]]:
        """(flow id, span) of every timer the records show, each protocol's found by that
        protocol (:meth:`nsqviz.protocols.protocol.Protocol.timers`); rows are packet numbers."""
        rows: dict[str, list[TimerRow]] = {}
        flows: dict[int, int | None] = {}
        stamp = {p.number: p.ts for p in self.replay.packets}
        for r in self.replay.records:
            if r.protocol is None or not r.packets or r.kind not in ("command", "frame"):
                continue
            last = r.packets[-1]
            rows.setdefault(r.protocol, []).append(TimerRow(
                last, stamp.get(last, 0.0), str(r.flow_id), r.event, r.dir == Direction.C2S))
            flows[last] = r.flow_id
        out = []
        for name, mine in rows.items():
            mine.sort(key=lambda row: (row.t, row.index))
            out += [(flows[s.first], s) for s in protocols.by_name(name).timers(mine)]
        return out

    def _timer_strip(self, fid: int | None, spans: list[tuple[int | None, TimerSpan]],
                     cell: float) -> str:
        """The timers of flow ``fid`` as bars under its lane, each labelled at its start."""
        # the few named by a command or the IDENTIFY first, then each message's msg_timeout
        mine = sorted((s for f, s in spans if f == fid),
                      key=lambda s: (s.name == "FrameTypeMessage", s.first))
        if not mine:
            return ""
        more = len(mine) - _TIMERS_SHOWN
        mine = mine[:_TIMERS_SHOWN]
        bars = []
        for k, s in enumerate(mine):
            left = self._xpos(s.first) + cell / 2
            right = 100 if s.last is None else self._xpos(s.last) + cell / 2
            col = ink(name_colour(s.name))
            end = "border-right:2px solid" if s.last is not None else "border-right:0"
            bars.append(
                f'<div title="{esc(s.label)}" style="position:absolute;left:{left:.3f}%;'
                f"top:{k * _TIMER_ROW + 12}px;width:max({right - left:.3f}%,2px);height:0;"
                f"border-top:2px {'solid' if s.last is not None else 'dashed'} {col};"
                f'border-left:2px solid {col};{end} {col};height:4px"></div>'
                # a label starting in the right half ends at the strip's end instead, and
                # none is wider than the room left of it (an ellipsis, whole in the tooltip):
                # no label runs past the lane or is cut by its edge
                f'<div class="nv-mono" title="{esc(s.label)}" style="position:absolute;'
                + (f"left:calc({left:.3f}% + 4px);max-width:calc({100 - left:.3f}% - 4px);"
                   if left <= 50 else "right:0;max-width:100%;")
                + f'top:{k * _TIMER_ROW}px;font-size:10px;line-height:11px;color:{col};'
                f'white-space:nowrap;overflow:hidden;text-overflow:ellipsis">'
                f"{esc(s.label)}</div>"
            )
        note = f"<br>+ {more} more" if more > 0 else ""
        return (f'<div style="display:flex;gap:8px;margin:0 0 4px">'
                f'<div class="nv-muted" style="flex:none;width:230px;font-size:11px;'
                f'text-align:right">timers{note}</div><div style="position:relative;flex:1 1 0;'
                f'min-width:0;max-width:{_WIDTH}px;height:{len(mine) * _TIMER_ROW + 6}px;'
                f'overflow:hidden">'
                f'{"".join(bars)}</div></div>')

    def _clickable(self) -> dict[int, int]:
        """Record index -> opener number, for the records a click opens: those of the
        shown flows completed by the current packet that have a hex view, the last
        :data:`~nsqviz.widgets.opener.MAX_OPENERS` of them; none when a packet's slot is
        narrower than :data:`_MIN_CELL` px (boxes too thin to aim at: use the picker), or
        when the view opens no bytes (``open_bytes``: shown in another view's pane, whose
        radio group its own would answer)."""
        if not self.open_bytes or self._cell * _WIDTH / 100 < _MIN_CELL:
            return {}
        done = [i for i, r in enumerate(self.replay.records)
                if r.packets and r.packets[-1] <= self.upto and r.flow_id in self.flows
                and self._hex_html(i)]
        return {i: k for k, i in enumerate(done[-MAX_OPENERS:])}

    def _hex_html(self, index: int) -> str:
        """Record ``index``'s hex view (cached: the slider redraws often), or ``""``."""
        if index not in self._hex:
            rec = self.replay.records[index]
            raw = getattr(rec.event, "raw", None)
            size = len(raw.data) if raw is not None else 0
            if size > MAX_OPEN_BYTES and rec.kind in ("command", "frame"):
                self._hex[index] = too_long(_pick_label(rec), size,
                                            "pick it in the live widget's picker")
            else:
                view = self.hexview(rec)
                if view is not None:
                    view.fold_over = MAX_OPEN_BYTES  # opened on purpose: unfolded
                self._hex[index] = view.html(with_css=False) if view is not None else ""
        return self._hex[index]

    def _boxes(self, fid: int, cell: float, openers: Openers,
               clickable: dict[int, int]) -> list[str]:
        """One box per record of flow ``fid``; frames sharing one packet split its slot.
        A box in ``clickable`` is a label that opens the record's hex view."""
        index = {id(r): i for i, r in enumerate(self.replay.records)}
        recs = [r for r in self.replay.records if r.flow_id == fid and r.packets]
        slots: dict[tuple[str | None, int], list[DecodedRecord]] = {}
        for r in recs:
            if len(r.packets) == 1:
                slots.setdefault((r.dir, r.packets[0]), []).append(r)
        out = []
        turn: dict[str | None, int] = {}
        for r in recs:
            # neighbouring boxes of one name alternate its fill and a lighter shade (the
            # sticky map's rule): 200 small messages read as 200 boxes, not one band
            nth = turn[r.dir] = turn.get(r.dir, -1) + 1
            fill = self._fill(r) if r.kind in KINDS else ordinal_colour(nth, r.name)
            first, last = r.packets[0], r.packets[-1]
            left, width = self._xpos(first), self._xpos(last) - self._xpos(first) + cell
            if len(r.packets) == 1:
                group = slots[(r.dir, first)]
                width = cell / len(group)
                left += group.index(r) * width
            top = 10 if r.dir == Direction.C2S else _LANE // 2 + 6
            faded = last > self.upto
            span = f"packets {first}..{last}" if last != first else f"packet {first}"
            style = (f"position:absolute;left:{left:.3f}%;top:{top}px;"
                     f"width:max({width:.3f}%,0.6px);height:{_LANE // 2 - 16}px;"
                     f"background:{fill};outline:1px solid rgba(0,0,0,.18);"
                     f"opacity:{0.15 if faded else 0.95}")
            tip = f"{r.name} ({r.dir}, {span})"
            k = clickable.get(index[id(r)])
            if k is None:
                out.append(f'<div title="{esc(tip)}" style="{style}"></div>')
                continue
            out.append(openers.box(k, "", style=style, title=f"{tip} · click: its bytes"))
            openers.pane(k, self._hex_html(index[id(r)]))
        return out

    def _table(self, number: int) -> str:
        recs = self.records_at(number)
        if not recs:
            return (f'<div class="nv-muted" style="margin-top:6px">packet {number} completes'
                    f" no command or frame</div>")
        rows = "".join(
            f"<tr><td>{r.flow_id}</td><td>{r.dir}</td><td>{esc(r.kind)}</td>"
            f'<td><span class="nv-chip" style="background:{self._fill(r)}">{esc(r.name)}'
            f'</span></td><td class="nv-mono">{esc(",".join(map(str, r.packets)))}</td>'
            f'<td class="nv-mono">{esc(_brief(r))}</td></tr>'
            for r in recs
        )
        return (
            f'<div style="margin-top:6px"><b>completed by packet {number}</b>'
            f'<table class="nv-table"><tr><th>flow</th><th>dir</th><th>kind</th><th>name</th>'
            f"<th>packets</th><th>fields</th></tr>{rows}</table></div>"
        )

    def _repr_html_(self) -> str:
        return once(self.html())

    def __repr__(self) -> str:
        return (f"ReplayView({self.replay.name!r}, upto={self.upto}, "
                f"{len(self.replay.records)} records)")

    # -- interactive ----------------------------------------------------------------

    def hexview(self, rec: DecodedRecord) -> HexView | None:
        """The bytes of a command or frame, coloured by grammar field."""
        raw = getattr(rec.event, "raw", None)
        if raw is None or rec.protocol is None or rec.kind not in ("command", "frame"):
            return None
        title = f"{rec.name} · {rec.dir} · packets {','.join(map(str, rec.packets))}"
        return unit_view(rec.protocol, rec.kind, rec.name, raw.data, title)

    def live(self) -> Live:
        """:meth:`widget` for a notebook cell: the live controls where widgets run, and a
        saved picture of the same state (lanes, the record picker's list, the first
        record's bytes) everywhere else."""
        recs = self.records_upto(self.upto)
        detail = ""
        if recs:
            view = self.hexview(recs[-1])
            detail = view.html(with_css=False) if view is not None else ""
        items = "".join(f"<option>{esc(_pick_label(r))}</option>" for r in recs)
        picker = (f"<div class='nv-title'>picker: {len(recs)} records up to packet {self.upto}"
                  f" <span class='nv-muted'>· a kernel makes it and the packet slider live"
                  f"</span></div><select size='6' class='nv-mono'>{items}</select>"
                  if recs else "")
        markup = self.html() + f'<div class="nsqviz">{picker}{detail}</div>'
        text = f"{self!r}\n{len(recs)} records up to packet {self.upto}" + (
            f", the last: {_pick_label(recs[-1])}" if recs else "")
        return Live(self.widget(), markup, text)

    def widget(self) -> Any:
        import ipywidgets as w

        numbers = [p.number for p in self.replay.packets] or [0]
        slider = w.IntSlider(value=self.upto, min=numbers[0], max=numbers[-1],
                             description="packet", layout=w.Layout(width="560px"))
        play = w.Play(value=self.upto, min=numbers[0], max=numbers[-1], interval=300)
        w.jslink((play, "value"), (slider, "value"))
        lanes = w.HTML(self.html())
        picker = w.Dropdown(description="show", layout=w.Layout(width="560px"))
        detail = w.HTML()

        def on_packet(change: Any = None) -> None:
            self.upto = slider.value
            lanes.value = self.html()
            recs = self.records_upto(self.upto)
            picker.options = [(_pick_label(r), i) for i, r in enumerate(recs)]
            picker.value = len(recs) - 1 if recs else None
            on_pick()

        def on_pick(change: Any = None) -> None:
            recs = self.records_upto(self.upto)
            if picker.value is None or picker.value >= len(recs):
                detail.value = ""
                return
            view = self.hexview(recs[picker.value])
            rec = recs[picker.value]
            detail.value = view.html() if view is not None else f"<pre>{esc(rec)}</pre>"

        slider.observe(on_packet, names="value")
        picker.observe(on_pick, names="value")
        on_packet()
        return w.VBox([w.HBox([play, slider]), lanes, picker, detail])


def _pick_label(rec: DecodedRecord) -> str:
    """A record as the picker lists it: its flow too, or two connections' magics look alike."""
    return (f"flow {rec.flow_id} {rec.dir} {rec.name} "
            f"(packets {','.join(map(str, rec.packets))})")


def _brief(rec: DecodedRecord) -> str:
    f = rec.fields
    parts = []
    for k, v in f.items():
        if isinstance(v, str) and len(v) > 24:
            v = v[:24] + "…"
        elif isinstance(v, dict | list):
            v = f"{type(v).__name__}[{len(v)}]"
        parts.append(f"{k}={v}")
    return " ".join(parts)
