"""A state machine drawn as a chain of states, the current one highlighted.

The states and transitions come from the codec (the session passes them in); this
module only draws: states left to right in the given order, transitions between
neighbours as straight arrows, any other transition as an arc over the top.
"""

from __future__ import annotations

import textwrap
from typing import Any

from nsqviz.widgets.style import CSS, StaticView, esc, unique_ids

__all__ = ["StateMachineView"]


class StateMachineView(StaticView):
    """States left to right, about :attr:`~nsqviz.widgets.sequence.SequenceDiagram.WIDTH`
    wide for NSQ's five (a neighbour's transition label wrapped to its gap), shown scaled
    to its container like the sequence diagram."""

    BOX_W = 100
    GAP = 66
    H = 30

    def __init__(
        self,
        states: list[str],
        transitions: list[tuple[str, str, str]],
        current: str | None,
        title: str = "",
        facts: dict[str, Any] | None = None,
    ):
        self.states = list(states)
        self.transitions = list(transitions)
        self.current = current
        self.title = title
        self.facts = dict(facts or {})

    def svg(self) -> str:
        step = self.BOX_W + self.GAP
        xs = {s: 10 + i * step for i, s in enumerate(self.states)}
        arcs = [t for t in self.transitions if not self._adjacent(t)]
        top = 30 + 16 * min(len(arcs), 4)  # and a wrapped label's second line
        width = 20 + len(self.states) * step - self.GAP
        height = top + self.H + 30
        out = [
            f'<svg class="nv-fsm" xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" '
            'font-size="11"><defs><marker id="nv-fsm-ah-@ID@" viewBox="0 0 10 10" refX="9" '
            'refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" '
            'fill="#6b7280"/></marker></defs>'
        ]
        cy = top + self.H / 2
        for src, dst, label in self.transitions:
            if src not in xs or dst not in xs:
                continue
            if self._adjacent((src, dst, label)):
                x1: float = xs[src] + self.BOX_W
                x2: float = xs[dst]
                if x2 < x1:  # backwards neighbour: draw under the boxes
                    x1, x2 = xs[src], xs[dst] + self.BOX_W
                lines = textwrap.wrap(label, int((self.GAP - 4) / 6.1)) or [""]
                mid = (x1 + x2) / 2
                text = "".join(
                    f'<tspan x="{mid:g}" dy="{0 if k == 0 else 11}">{esc(line)}</tspan>'
                    for k, line in enumerate(lines))
                out.append(
                    f'<line x1="{x1}" y1="{cy}" x2="{x2}" y2="{cy}" stroke="#6b7280" '
                    f'marker-end="url(#nv-fsm-ah-@ID@)"/><text class="nv-label" x="{mid:g}" '
                    f'y="{cy - 5 - 11 * (len(lines) - 1):g}" text-anchor="middle" '
                    f'font-size="10" fill="#374151">{text}</text>'
                )
        for i, (src, dst, label) in enumerate(arcs[:4]):
            if src not in xs or dst not in xs:
                continue
            x1 = xs[src] + self.BOX_W / 2
            x2 = xs[dst] + self.BOX_W / 2
            lift = top - 10 - 16 * i
            out.append(
                f'<path d="M{x1},{top} C{x1},{lift} {x2},{lift} {x2},{top}" fill="none" '
                f'stroke="#9ca3af" marker-end="url(#nv-fsm-ah-@ID@)"/>'
                f'<text x="{(x1 + x2) / 2}" y="{lift + 2}" text-anchor="middle" '
                f'fill="#6b7280" font-size="10">{esc(label)}</text>'
            )
        for s, x in xs.items():
            cur = s == self.current
            fill = "#fde68a" if cur else "#f9fafb"
            stroke = "#d97706" if cur else "#9ca3af"
            weight = "700" if cur else "400"
            cls = "nv-state nv-current" if cur else "nv-state"
            out.append(
                f'<g class="{cls}"><rect x="{x}" y="{top}" width="{self.BOX_W}" height="{self.H}" '
                f'rx="15" fill="{fill}" stroke="{stroke}" stroke-width="{2 if cur else 1}"/>'
                f'<text x="{x + self.BOX_W / 2}" y="{top + 19}" text-anchor="middle" '
                f'font-weight="{weight}">{esc(s)}</text></g>'
            )
        out.append("</svg>")
        return unique_ids("".join(out))

    def _adjacent(self, t: tuple[str, str, str]) -> bool:
        src, dst, _ = t
        if src not in self.states or dst not in self.states:
            return False
        return abs(self.states.index(src) - self.states.index(dst)) == 1

    def html(self, *, with_css: bool = True) -> str:
        title = f'<div class="nv-title">{esc(self.title)}</div>' if self.title else ""
        facts = ""
        if self.facts:
            facts = '<div class="nv-mono nv-muted">' + " · ".join(
                f"{esc(k)}={esc(v)}" for k, v in self.facts.items()
            ) + "</div>"
        return (
            f'{CSS if with_css else ""}<div class="nsqviz nsqviz-fsm">{title}{self.svg()}'
            f"{facts}</div>"
        )

    def text(self) -> str:
        chain = " → ".join(f"[{s}]" if s == self.current else s for s in self.states)
        facts = "  " + ", ".join(f"{k}={v}" for k, v in self.facts.items()) if self.facts else ""
        return chain + facts

