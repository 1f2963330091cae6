"""One message's lifecycle as a picture: its publish, each delivery and its answer on a
time axis, with the timers that ran -- ``msg_timeout`` from each delivery, a REQ's delay
from the REQ, and, for a timeout or a REQ, when the requeue was due against when the
redelivery was seen.

Static SVG in HTML (no script), so a saved notebook shows it; one lane per channel the
message was copied to (nsqd copies a message to every channel of its topic).
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from nsqviz.widgets.style import CSS, once

__all__ = ["Lifecycle"]

_W, _LEFT, _RIGHT = 760, 96, 12  # px: the picture's width, the label column, a margin
_ROW = 13  # px: a line of annotation under a lane
_OUTCOME_COLOUR = {"FIN": "#16a34a", "REQ": "#d97706", "timeout": "#dc2626", "open": "#6b7280"}
_PUBLISH, _TIMER, _DELAY = "#2563eb", "#9ca3af", "#f59e0b"
_GLYPH = 5.6  # px: a 10-px sans glyph, on average


def _num(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) \
        else float(value)


def _ticks(lo: float, hi: float, most: int = 6) -> list[float]:
    """Round times between ``lo`` and ``hi`` (1, 2 or 5 times a power of ten apart)."""
    raw = (hi - lo) / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step + 1e-9) + 1)]


def _rows(notes: list[tuple[float, str, str]], right: float) -> list[tuple[float, int, str, str]]:
    """Annotations ``(x, text, colour)`` in lines under a lane: each in the first line
    where it does not run into the one before it (from its x, or ending at it near the
    right edge); ``(x, line, text, colour)``."""
    ends: list[float] = []
    out = []
    for x, text, colour in sorted(notes):
        width = len(text) * _GLYPH + 8
        left = x if x + width <= right else x - width
        line = next((k for k, end in enumerate(ends) if end <= left), len(ends))
        if line == len(ends):
            ends.append(0.0)
        ends[line] = left + width
        out.append((x, line, text, colour))
    return out


class Lifecycle:
    """The lifecycle of one message id: ``rows`` are its rows of the messages table (one
    per channel); times are drawn relative to ``t0`` (the capture's first record).

    Each lane draws the publish (a dot), each delivery as a bar until its answer,
    coloured by the answer, the ``msg_timeout`` that ran from it (a thin grey bar), a
    REQ's delay, and from when a requeue was due to when the redelivery was seen (a
    dashed line); under them every event's time in words, on a time axis with round
    ticks, and a legend."""

    def __init__(self, rows: list[dict[str, Any]], t0: float):
        self.rows = rows
        self.t0 = t0

    def _span(self) -> tuple[float, float]:
        times: list[float] = []
        for r in self.rows:
            times += [t for t in (_num(r.get("publish_ts")),) if t is not None]
            for d in r["deliveries"]:
                times += [t for t in (_num(d["ts"]), _num(d["outcome_ts"]),
                                      _num(d["next_delivery_ts"])) if t is not None]
                delay = _num(d["req_delay_ms"])
                if d["outcome"] == "REQ" and delay and _num(d["outcome_ts"]) is not None:
                    times.append(float(d["outcome_ts"]) + delay / 1000)
        lo, hi = min(times), max(times)
        return lo, max(hi, lo + 1e-3)

    def html(self) -> str:
        lo, hi = self._span()
        right = _W - _RIGHT

        def x(t: float) -> float:
            return _LEFT + (t - lo) / (hi - lo) * (right - _LEFT)

        def at(t: float) -> str:
            return f"+{t - self.t0:.3f} s"

        parts: list[str] = []
        y = 34  # the first lane's top, under the axis
        for r in self.rows:
            parts.append(f'<text x="4" y="{y + 14}" font-size="11" font-weight="600">'
                         f'{escape(str(r["channel"]))}</text>')
            notes: list[tuple[float, str, str]] = []
            pub = _num(r.get("publish_ts"))
            if pub is not None:
                parts.append(f'<circle cx="{x(pub):.1f}" cy="{y + 10}" r="4" fill="{_PUBLISH}">'
                             f'<title>{escape(str(r["publish_cmd"]))} packet '
                             f'{r["publish_packet"]} at {at(pub)}</title></circle>')
                notes.append((x(pub), f'{r["publish_cmd"]} {at(pub)}', _PUBLISH))
            for d in r["deliveries"]:
                start, end = float(d["ts"]), _num(d["outcome_ts"])
                timeout = _num(d["msg_timeout_ms"])
                if timeout:  # the msg_timeout that ran from the delivery
                    parts.append(f'<rect x="{x(start):.1f}" y="{y + 19}" width="'
                                 f'{max(x(min(start + timeout / 1000, hi)) - x(start), 3):.1f}"'
                                 f' height="5" fill="{_TIMER}"><title>msg_timeout {timeout:.0f}'
                                 " ms</title></rect>")
                colour = _OUTCOME_COLOUR.get(d["outcome"], "#6b7280")
                stop = end if end is not None else hi
                label = (f'delivery {d["delivery"]} (attempts {d["attempts"]}) packet '
                         f'{d["packet"]} at {at(start)}: {d["outcome"]}')
                if d["outcome_packet"] is not None and not (
                        isinstance(d["outcome_packet"], float) and math.isnan(d["outcome_packet"])):
                    label += f' packet {int(d["outcome_packet"])}'
                parts.append(f'<rect x="{x(start):.1f}" y="{y + 4}" width="'
                             f'{max(x(stop) - x(start), 3):.1f}" height="12" fill="{colour}" '
                             f'opacity="0.85"><title>{escape(label)}</title></rect>')
                notes.append((x(start), f'delivery {d["delivery"]} {at(start)}', "#374151"))
                if end is not None:
                    notes.append((x(end), f'{d["outcome"]} {at(end)}', colour))
                delay = _num(d["req_delay_ms"])
                if d["outcome"] == "REQ" and delay and end is not None:
                    parts.append(f'<rect x="{x(end):.1f}" y="{y + 26}" width="'
                                 f'{max(x(end + delay / 1000) - x(end), 3):.1f}" height="5" '
                                 f'fill="{_DELAY}"><title>REQ delay {delay:.0f} ms</title></rect>')
                seen, due = _num(d["next_delivery_ts"]), _num(d["requeue_due_ts"])
                if due is not None and seen is not None:  # after a timeout or a REQ
                    parts.append(f'<line x1="{x(due):.1f}" x2="{x(seen):.1f}" y1="{y + 34}" '
                                 f'y2="{y + 34}" stroke="{colour}" stroke-width="1.5" '
                                 f'stroke-dasharray="4 3"><title>{escape(str(d["outcome"]))}: '
                                 f'requeue due {at(due)}, redelivery seen {at(seen)} '
                                 f'({seen - due:+.3f} s)</title></line>'
                                 f'<line x1="{x(due):.1f}" x2="{x(due):.1f}" y1="{y + 30}" '
                                 f'y2="{y + 38}" stroke="{colour}" stroke-width="1.5"/>')
                    notes.append((x(due), f"requeue due {at(due)}, seen {seen - due:+.3f} s "
                                  "later", colour))
            placed = _rows(notes, right)
            lines = max((line for _, line, _, _ in placed), default=-1) + 1
            for nx, line, text, colour in placed:
                ty = y + 52 + line * _ROW
                anchor = "start" if nx + len(text) * _GLYPH + 8 <= right else "end"
                tx = nx + 2 if anchor == "start" else nx - 2
                parts.append(f'<line x1="{nx:.1f}" x2="{nx:.1f}" y1="{y + 40}" y2="{ty - 8}" '
                             f'stroke="{colour}" stroke-width="0.6" stroke-dasharray="1 2"/>'
                             f'<text x="{tx:.1f}" y="{ty}" font-size="10" fill="{colour}" '
                             f'text-anchor="{anchor}">{escape(text)}</text>')
            y += 52 + lines * _ROW + 8
        height = y
        axis = [f'<line x1="{_LEFT}" x2="{right}" y1="22" y2="22" stroke="#9ca3af"/>']
        for t in _ticks(lo - self.t0, hi - self.t0):
            tx = x(t + self.t0)
            axis.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="18" y2="{height - 4}" '
                        f'stroke="#e5e7eb"/><text x="{tx:.1f}" y="14" font-size="10" '
                        f'text-anchor="middle" fill="#6b7280">{t:g} s</text>')
        title = escape(f'message {self.rows[0]["msg_id"]} (topic {self.rows[0]["topic"]})')
        timeouts = sorted({f"{ms:.0f}" for r in self.rows for d in r["deliveries"]
                           if (ms := _num(d["msg_timeout_ms"]))})
        legend = [f'<span style="color:{_PUBLISH}">●</span> publish',
                  "▬ a delivery until its answer: " + ", ".join(
                      f'<span style="color:{c}">{o}</span>' for o, c in _OUTCOME_COLOUR.items()),
                  f'<span style="color:{_TIMER}">▬</span> msg_timeout'
                  + (f" ({', '.join(timeouts)} ms)" if timeouts else ""),
                  f'<span style="color:{_DELAY}">▬</span> REQ delay',
                  "┄ requeue due → redelivery seen",
                  "times since the capture's first packet"]
        return (f'{CSS}<div class="nsqviz nsqviz-lifecycle"><div class="nv-title">{title}'
                f'</div><svg class="nv-lifecycle" xmlns="http://www.w3.org/2000/svg" '
                f'width="{_W}" height="{height}" viewBox="0 0 {_W} {height}" '
                f'style="display:block;width:100%;max-width:{_W}px;height:auto;background:#fff"'
                f' font-family="sans-serif">{"".join(axis)}{"".join(parts)}</svg>'
                f'<div class="nv-muted" style="font-size:11px">{" · ".join(legend)}</div></div>')

    def __repr__(self) -> str:
        n = sum(len(r["deliveries"]) for r in self.rows)
        return f"Lifecycle({self.rows[0]['msg_id']}, {n} deliveries)"

    def _repr_html_(self) -> str:
        return once(self.html())
