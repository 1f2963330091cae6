"""Matplotlib views of the pipeline's tables (pandas DataFrames read from its Parquet).

Only drawing happens here: every number comes from :mod:`nsqviz.pipeline.analyses`.
Each function takes the table and an optional ``ax`` and returns the axes, so a notebook
can lay several out in one figure. Lines named after a command or frame take its colour
from :mod:`nsqviz.palette` (the diagrams' colours); legends sit beside the data, not on
it; counts that span decades get a log axis, numbers a numeric one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from nsqviz.palette import ink, name_colour
from nsqviz.stream.direction import Direction

if TYPE_CHECKING:  # imported by whoever draws
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.legend import Legend

__all__ = ["frames_per_packet", "latency_distribution", "legend_beside", "rdy_in_flight"]


def legend_beside(ax: Axes, **kw: Any) -> Legend:
    """The legend right of the axes, outside the data (``tight_layout`` makes room)."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                     fontsize=8, **kw)


def _axes(ax: Axes | None, size: tuple[float, float] = (7, 3.2)) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _fig, ax = plt.subplots(figsize=size)
    return ax


def latency_distribution(messages: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Histogram (log-spaced bins, milliseconds) of end-to-end and processing latency."""
    import numpy as np

    ax = _axes(ax)
    series = {
        "end to end (PUB -> FIN)": messages["end_to_end_latency_s"].dropna() * 1000,
        "processing (last delivery -> FIN)": messages["processing_latency_s"].dropna() * 1000,
    }
    colours = [ink(name_colour("PUB")), ink(name_colour("FIN"))]
    values = np.concatenate([s.to_numpy() for s in series.values()])
    values = values[values > 0]
    if len(values) == 0:
        ax.text(0.5, 0.5, "no finished messages", ha="center", transform=ax.transAxes)
        return ax
    bins = np.logspace(np.log10(values.min()), np.log10(values.max()), 30)
    # one filled, one outlined: where they overlap both stay readable
    kinds: tuple[Literal["stepfilled", "step"], ...] = ("stepfilled", "step")
    for (label, s), col, kind in zip(series.items(), colours, kinds, strict=True):
        # matplotlib's stubs take bins as Sequence[float], which an ndarray is not declared
        ax.hist(s[s > 0], bins=bins,  # type: ignore[arg-type]
                histtype=kind, alpha=0.45 if kind == "stepfilled" else 1,
                linewidth=2, color=col, label=f"{label}, n={len(s)}")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("messages per bin")
    ax.set_title("Message latency")
    legend_beside(ax)
    return ax


def rdy_in_flight(flow_control: pd.DataFrame, conn_id: str, ax: Axes | None = None, *,
                  label: str | None = None) -> Axes:
    """RDY and in-flight of one connection over time, starved moments marked."""
    ax = _axes(ax)
    fc = flow_control[flow_control.conn_id == conn_id].sort_values(["ts", "event"])
    ax.set_title(label or conn_id.split("@")[0])
    if fc.empty or not (fc.event == "MSG").any():
        # nothing to draw is a finding, said in words instead of an empty frame
        last = fc.rdy.dropna().iloc[-1] if not fc.empty and fc.rdy.notna().any() else 0
        ax.text(0.5, 0.5, f"no message delivered (RDY {int(last)} throughout)",
                ha="center", va="center", transform=ax.transAxes, color="#6b7280")
        ax.tick_params(axis="y", left=False, labelleft=False)  # x may be shared: kept
        return ax
    t = fc.ts - fc.ts.min()
    ax.step(t, fc.rdy.ffill().fillna(0), where="post", label="RDY (last sent)",
            color=ink(name_colour("RDY")))
    ax.step(t, fc.in_flight, where="post", label="in flight",
            color=ink(name_colour("FrameTypeMessage")))
    starved = fc.starved.astype(bool)
    ax.plot(t[starved], fc.in_flight[starved], "o", ms=3, color="#d62728",
            label="starved (in flight >= 85% of RDY)")
    ax.set_xlabel("seconds since the connection's first event")
    ax.set_ylabel("messages")
    legend_beside(ax)
    return ax


def frames_per_packet(sticky: pd.DataFrame, ax: Axes | None = None, *,
                      title: str = "Frames per packet") -> Axes:
    """Bar chart of the frames-per-packet distribution, one bar group per direction."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax = _axes(ax)
    fpp = sticky[sticky.measure == "frames_per_packet"]
    ns = sorted(int(n) for n in fpp.n.unique())
    step = 10 ** 0.07  # each bar a fixed width on the log axis, c2s left of n, s2c right
    for k, direction in enumerate((Direction.C2S, Direction.S2C)):
        d = fpp[fpp.dir == direction].set_index("n")["count"]
        lefts = [n / step if k == 0 else n for n in ns]
        widths = [n - n / step if k == 0 else n * step - n for n in ns]
        ax.bar(lefts, [int(d.get(n, 0)) for n in ns], widths, align="edge",
               label=str(direction))
    ax.set_xscale("log")
    top = max(ns, default=1)
    ticks = [t for t in (1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000) if t <= top * 1.5]
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(1 / step ** 1.5, top * step ** 1.5)
    ax.set_yscale("log")
    ax.set_xlabel("NSQ frames carried by one TCP packet (log scale)")
    ax.set_ylabel("packets (log scale)")
    ax.set_title(title)
    legend_beside(ax)
    return ax
