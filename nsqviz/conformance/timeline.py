"""Pictures of a consumer's flow control, drawn from observed traffic (a capture or a tap).

:func:`rdy_series` turns the RDY commands of each connection into step series;
:func:`plot_rdy` draws them (one line per connection, their sum dashed, max_in_flight as
a ceiling) with the messages and failures as ticks underneath -- the RDY distribution
over time, the redistribution when ``max_in_flight < num_conns``, a backoff. Time is
seconds from the first event shown. Only what was on the wire is drawn.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from nsqviz.conformance.rules import Connection
from nsqviz.nsq.events import Cls, Message, Rdy, Req
from nsqviz.palette import ink, name_colour
from nsqviz.stream.direction import Direction

if TYPE_CHECKING:  # matplotlib is imported by whoever draws
    from matplotlib.axes import Axes

__all__ = ["plot_rdy", "rdy_series"]


def _short(label: str) -> str:
    """``client->server`` -> the server's port, which is what tells the nsqd apart."""
    return "nsqd :" + label.rpartition(":")[2]


def rdy_series(conns: Iterable[Connection]) -> dict[str, list[tuple[float, int]]]:
    """Per connection, ``[(t, rdy), ...]`` with a step at every RDY (a CLS sets 0)."""
    out: dict[str, list[tuple[float, int]]] = {}
    for c in conns:
        steps = [(s.t, s.event.count if type(s.event) is Rdy else 0) for s in c.seen
                 if s.direction == Direction.C2S and type(s.event) in (Rdy, Cls)]
        if steps:
            out[c.label] = steps
    return out


ZOOM_SHARE = 0.05
"""The RDY changes of a consumer's start that fall in the first this-much of the axis
(connections coming up: each gets RDY 1, then its share, the others lowered first) are
drawn again, zoomed, in an inset: at the full axis they are one vertical stroke."""


def _steps(ax: Axes, series: dict[str, list[tuple[float, int]]], t0: float, end: float,
           *, legend: bool) -> list[str]:
    """Each connection's RDY as a step line, the first widest so that lines on the same
    value show every colour; the colours used."""
    colours = [f"C{k}" for k in range(len(series))]
    for k, (label, steps) in enumerate(series.items()):
        xs = [t - t0 for t, _ in steps] + [end]
        ys = [v for _, v in steps] + [steps[-1][1]]
        ax.step(xs, ys, where="post", label=_short(label) if legend else None,
                linewidth=1.6 + 1.8 * (len(series) - 1 - k), color=colours[k], alpha=0.9)
    return colours


def _sums(series: dict[str, list[tuple[float, int]]]) -> tuple[list[float], list[int]]:
    """The times any RDY changed and the sum over the connections after each."""
    changes = sorted({t for steps in series.values() for t, _ in steps})
    totals = [sum(next((v for tt, v in reversed(steps) if tt <= t), 0)
                  for steps in series.values()) for t in changes]
    return changes, totals


def _emptiest(ax: Axes) -> tuple[float, float]:
    """Where, in axes fractions, an inset 0.42 wide and high covers the fewest points of
    ``ax``'s lines (step lines sampled along their treads, markers as they are)."""
    ax.autoscale_view()
    to_axes = ax.transData + ax.transAxes.inverted()
    points: list[tuple[float, float]] = []
    for line in ax.get_lines():
        xy: list[list[float]] = np.asarray(line.get_xydata(), dtype=float).tolist()
        xs, ys = [x for x, _ in xy], [y for _, y in xy]
        if line.get_drawstyle() == "steps-post":
            for (x1, y), x2 in zip(zip(xs, ys, strict=True), xs[1:], strict=False):
                points += [(x1 + (x2 - x1) * k / 24, y) for k in range(25)]
        elif line.get_marker() not in ("None", None, ""):
            points += list(zip(xs, ys, strict=True))
    where = [tuple(p) for p in to_axes.transform(points)] if points else []
    spots = [(x, y) for y in (0.46, 0.3, 0.14) for x in (0.32, 0.55, 0.08)]
    return min(spots, key=lambda s: sum(s[0] <= px <= s[0] + 0.42 and s[1] <= py <= s[1] + 0.42
                                        for px, py in where))


def _zoom(ax: Axes, series: dict[str, list[tuple[float, int]]], t0: float, end: float,
          max_in_flight: int | None) -> None:
    """An inset over the first RDY changes, in milliseconds, when three or more happen
    within :data:`ZOOM_SHARE` of the axis, where it hides the fewest of the plot's
    points (:func:`_emptiest`)."""
    changes, totals = _sums(series)
    # a RDY re-sent at the same value (the 25 % rule) changes nothing
    moved = sorted({t for steps in series.values()
                    for (t, v), before in zip(steps, [None, *steps], strict=False)
                    if before is None or v != before[1]})
    first = moved[0] - t0
    burst = [t - t0 for t in moved if t - t0 - first <= ZOOM_SHARE * end]
    if len(burst) < 3:
        return
    width = max(burst[-1] - first, 1e-4)
    lo, hi = first - 0.15 * width, burst[-1] + 0.35 * width
    inset = ax.inset_axes((*_emptiest(ax), 0.42, 0.42))
    _steps(inset, series, t0, end, legend=False)
    inset.step([t - t0 for t in changes] + [end], totals + totals[-1:], where="post",
               color="black", linestyle="--", linewidth=1)
    if max_in_flight is not None:
        inset.axhline(max_in_flight, color="grey", linestyle=":")
    inset.set_xlim(lo, hi)
    top = max(max(totals), max_in_flight or 0, 1)
    inset.set_ylim(-top * 0.05, top * 1.12)
    inset.xaxis.set_major_formatter(lambda v, _pos: f"{v * 1000:.1f}")
    inset.tick_params(labelsize="x-small")
    inset.set_title(f"zoom: the first {(hi - lo) * 1000:.1f} ms of RDY changes (x in ms)",
                    fontsize="x-small")
    ax.indicate_inset_zoom(inset, edgecolor="grey")


def plot_rdy(conns: Iterable[Connection], ax: Axes, *, max_in_flight: int | None = None,
             title: str = "") -> None:
    """Draw each connection's RDY over time on ``ax`` (a matplotlib Axes); the first
    milliseconds zoomed in an inset when the changes crowd there (:data:`ZOOM_SHARE`)."""
    conns = [c for c in conns if c.subscribed is not None]
    series = rdy_series(conns)
    if not series:
        ax.set_title(title or "no RDY sent")
        return
    t0 = min(s.t for c in conns for s in c.seen)
    end = max(s.t for c in conns for s in c.seen) - t0
    colours = _steps(ax, series, t0, end, legend=True)
    probed = False
    for colour, steps in zip(colours, series.values(), strict=True):
        # backoff's test of the waters (RDY 0 -> RDY 1) often lasts milliseconds, too short
        # for a step to show at this scale: a marker and a label make it visible
        probes = [t - t0 for (t, v), (_, before) in zip(steps[1:], steps, strict=False)
                  if v == 1 and before == 0]
        ax.plot(probes, [1] * len(probes), "o", color=colour, markersize=6,
                label="RDY 0 → RDY 1 (test the waters)" if probes and not probed else None)
        for x in probes:
            ax.annotate("RDY 1", (x, 1), textcoords="offset points", xytext=(3, 5),
                        fontsize="x-small", color=colour)
        probed = probed or bool(probes)
    changes, totals = _sums(series)
    ax.step([t - t0 for t in changes] + [end], totals + totals[-1:], where="post",
            color="black", linestyle="--", linewidth=1, label="sum")
    if max_in_flight is not None:
        ax.axhline(max_in_flight, color="grey", linestyle=":", label="max_in_flight")
    top = max(max(totals), max_in_flight or 0, 1)
    for k, c in enumerate(conns):
        msgs = [s.t - t0 for s in c.seen if type(s.event) is Message]
        reqs = [s.t - t0 for s in c.seen if type(s.event) is Req]
        y = -top * (0.08 + 0.06 * k)
        ax.plot(msgs, [y] * len(msgs), "|", color=f"C{k}", markersize=6)
        ax.plot(reqs, [y] * len(reqs), "x", color=ink(name_colour("REQ")), markersize=7,
                label="REQ" if k == 0 and reqs else None)
    ax.set_ylim(-top * (0.1 + 0.06 * len(conns)), top * 1.15)
    # below 0 is the ticks' strip, not an RDY: label only the RDY values
    ax.set_yticks([v for v in ax.get_yticks() if 0 <= v <= top * 1.15])
    ax.set_xlabel("seconds since the first event (ticks under 0: messages, one row per nsqd)")
    ax.set_ylabel("RDY (messages)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize="small")
    _zoom(ax, series, t0, end, max_in_flight)
