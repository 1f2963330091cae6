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

_W, _LEFT, _LANE = 720, 110, 54  # px: axis width, label column, lane height
_OUTCOME_COLOUR = {"FIN": "#16a34a", "REQ": "#d97706", "timeout": "#dc2626", "open": "#6b7280"}


def _num(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) \
        else float(value)


class Lifecycle:
    """The lifecycle of one message id: ``rows`` are its rows of the messages table (one
    per channel); times are drawn relative to ``t0`` (the capture's first record)."""

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

        def x(t: float) -> float:
            return _LEFT + (t - lo) / (hi - lo) * (_W - 20)

        parts: list[str] = []
        for i, r in enumerate(self.rows):
            y = 24 + i * _LANE
            parts.append(f'<text x="4" y="{y + 14}" font-size="11">{escape(str(r["channel"]))}'
                         "</text>")
            pub = _num(r.get("publish_ts"))
            if pub is not None:
                parts.append(f'<circle cx="{x(pub):.1f}" cy="{y + 10}" r="4" fill="#2563eb">'
                             f'<title>{escape(str(r["publish_cmd"]))} packet '
                             f'{r["publish_packet"]} at +{pub - self.t0:.3f} s</title></circle>')
            for d in r["deliveries"]:
                start, end = float(d["ts"]), _num(d["outcome_ts"])
                timeout = _num(d["msg_timeout_ms"])
                if timeout:  # the msg_timeout that ran from the delivery
                    parts.append(f'<rect x="{x(start):.1f}" y="{y + 20}" width="'
                                 f'{max(x(min(start + timeout / 1000, hi)) - x(start), 1):.1f}"'
                                 f' height="4" fill="#e5e7eb"><title>msg_timeout {timeout:.0f}'
                                 " ms</title></rect>")
                colour = _OUTCOME_COLOUR.get(d["outcome"], "#6b7280")
                stop = end if end is not None else hi
                label = (f'delivery {d["delivery"]} (attempts {d["attempts"]}) packet '
                         f'{d["packet"]} at +{start - self.t0:.3f} s: {d["outcome"]}')
                if d["outcome_packet"] is not None and not (
                        isinstance(d["outcome_packet"], float) and math.isnan(d["outcome_packet"])):
                    label += f' packet {int(d["outcome_packet"])}'
                parts.append(f'<rect x="{x(start):.1f}" y="{y + 4}" width="'
                             f'{max(x(stop) - x(start), 2):.1f}" height="12" fill="{colour}" '
                             f'opacity="0.8"><title>{escape(label)}</title></rect>')
                delay = _num(d["req_delay_ms"])
                if d["outcome"] == "REQ" and delay and end is not None:
                    parts.append(f'<rect x="{x(end):.1f}" y="{y + 26}" width="'
                                 f'{max(x(end + delay / 1000) - x(end), 1):.1f}" height="4" '
                                 f'fill="#fcd34d"><title>REQ delay {delay:.0f} ms</title></rect>')
                seen, due = _num(d["next_delivery_ts"]), _num(d["requeue_due_ts"])
                if due is not None and seen is not None:  # after a timeout or a REQ
                    parts.append(f'<line x1="{x(due):.1f}" x2="{x(seen):.1f}" y1="{y + 34}" '
                                 f'y2="{y + 34}" stroke="{colour}" stroke-dasharray="3 2">'
                                 f'<title>{escape(str(d["outcome"]))}: requeue due '
                                 f'+{due - self.t0:.3f} s, redelivery seen '
                                 f'+{seen - self.t0:.3f} s ({seen - due:+.3f} s)</title></line>')
        height = 24 + len(self.rows) * _LANE
        axis = (f'<text x="{_LEFT}" y="12" font-size="10">+{lo - self.t0:.3f} s</text>'
                f'<text x="{_W + _LEFT - 20}" y="12" font-size="10" text-anchor="end">'
                f"+{hi - self.t0:.3f} s</text>")
        title = escape(f'message {self.rows[0]["msg_id"]} (topic {self.rows[0]["topic"]})')
        return (f'{CSS}<div class="nsqviz nsqviz-lifecycle"><div class="nv-title">{title}'
                f'</div><svg width="{_W + _LEFT}" height="{height}" '
                f'font-family="sans-serif">{axis}{"".join(parts)}</svg></div>')

    def __repr__(self) -> str:
        n = sum(len(r["deliveries"]) for r in self.rows)
        return f"Lifecycle({self.rows[0]['msg_id']}, {n} deliveries)"

    def _repr_html_(self) -> str:
        return once(self.html())
