"""Matplotlib views of the pipeline's tables (pandas DataFrames read from its Parquet).

Only drawing happens here: every number comes from :mod:`nsqviz.pipeline.analyses`.
Each function takes the table and an optional ``ax`` and returns the axes, so a notebook
can lay several out in one figure.
"""

from __future__ import annotations

from nsqviz.stream.direction import Direction

__all__ = ["frames_per_packet", "latency_distribution", "rdy_in_flight"]


def _axes(ax, size=(7, 3.2)):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _fig, ax = plt.subplots(figsize=size)
    return ax


def latency_distribution(messages, ax=None):
    """Histogram (log-spaced bins, milliseconds) of end-to-end and processing latency."""
    import numpy as np

    ax = _axes(ax)
    series = {
        "end to end (publish -> FIN)": messages["end_to_end_latency_s"].dropna() * 1000,
        "processing (last delivery -> FIN)": messages["processing_latency_s"].dropna() * 1000,
    }
    values = np.concatenate([s.to_numpy() for s in series.values()])
    values = values[values > 0]
    if len(values) == 0:
        ax.text(0.5, 0.5, "no finished messages", ha="center", transform=ax.transAxes)
        return ax
    bins = np.logspace(np.log10(values.min()), np.log10(values.max()), 30)
    for label, s in series.items():
        ax.hist(s[s > 0], bins=bins, alpha=0.6, label=f"{label}, n={len(s)}")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("messages")
    ax.set_title("Message latency")
    ax.legend(fontsize=8)
    return ax


def rdy_in_flight(flow_control, conn_id: str, ax=None, *, label: str | None = None):
    """RDY and in-flight of one connection over time, starved moments marked."""
    ax = _axes(ax)
    fc = flow_control[flow_control.conn_id == conn_id].sort_values(["ts", "event"])
    if fc.empty:
        return ax
    t = fc.ts - fc.ts.min()
    ax.step(t, fc.rdy.ffill().fillna(0), where="post", label="RDY (last sent)", color="#888")
    ax.step(t, fc.in_flight, where="post", label="in flight", color="#1f77b4")
    starved = fc.starved.astype(bool)
    ax.plot(t[starved], fc.in_flight[starved], "o", ms=3, color="#d62728",
            label="starved (in-flight >= 85% of RDY)")
    ax.set_xlabel("seconds since the first event")
    ax.set_ylabel("messages")
    ax.set_title(label or conn_id.split("@")[0])
    ax.legend(fontsize=8, loc="upper right")
    return ax


def frames_per_packet(sticky, ax=None, *, title: str = "Frames per packet"):
    """Bar chart of the frames-per-packet distribution, one bar group per direction."""
    ax = _axes(ax)
    fpp = sticky[sticky.measure == "frames_per_packet"]
    ns = sorted(fpp.n.unique())
    width = 0.4
    for k, direction in enumerate((Direction.C2S, Direction.S2C)):
        d = fpp[fpp.dir == direction].set_index("n")["count"]
        xs = [i + (k - 0.5) * width for i in range(len(ns))]
        ax.bar(xs, [int(d.get(n, 0)) for n in ns], width, label=direction)
    ax.set_xticks(range(len(ns)), [str(n) for n in ns])
    ax.set_yscale("log")
    ax.set_xlabel("NSQ frames carried by one TCP packet")
    ax.set_ylabel("packets (log scale)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return ax
