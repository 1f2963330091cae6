"""The plots: legends beside the data, no blank panel, numeric (log) axes for counts."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from nsqviz.conformance.rules import Connection, Seen  # noqa: E402
from nsqviz.conformance.timeline import plot_rdy  # noqa: E402
from nsqviz.nsq import events as ev  # noqa: E402
from nsqviz.palette import ink, name_colour  # noqa: E402
from nsqviz.pipeline import plots  # noqa: E402
from nsqviz.stream.direction import Direction  # noqa: E402


def _legend_outside(ax) -> bool:
    fig = ax.figure
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    return legend.x0 >= ax.get_window_extent().x1


def test_frames_per_packet_spaces_counts_on_a_numeric_log_axis():
    sticky = pd.DataFrame({"measure": "frames_per_packet", "n": [1, 2, 5, 200, 1],
                           "dir": ["c2s", "c2s", "c2s", "s2c", "s2c"],
                           "count": [700, 12, 1, 1, 250]})
    fig, ax = plt.subplots()
    plots.frames_per_packet(sticky, ax)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    xs = sorted(p.get_x() for p in ax.patches if p.get_height() > 0)
    assert xs[-1] > 100  # the 200 bar stands at 200, not at the 4th category slot
    assert _legend_outside(ax)
    plt.close(fig)


def test_rdy_in_flight_says_idle_instead_of_an_empty_panel_and_keeps_the_legend_off_data():
    fc = pd.DataFrame({"conn_id": ["a@x"] * 3 + ["idle@x"], "ts": [0.0, 0.1, 0.2, 0.0],
                       "event": ["RDY", "MSG", "FIN", "RDY"], "rdy": [1, None, None, 0],
                       "in_flight": [0, 1, 0, 0], "starved": [False, True, False, False]})
    fig, (busy, idle) = plt.subplots(2, 1, sharex=True)
    plots.rdy_in_flight(fc, "a@x", busy)
    plots.rdy_in_flight(fc, "idle@x", idle)
    assert _legend_outside(busy)
    assert [t.get_text() for t in idle.texts] == ["no message delivered (RDY 0 throughout)"]
    assert idle.yaxis.get_tick_params()["labelleft"] is False
    assert len(busy.get_xticks()) > 1  # the shared time axis keeps its ticks
    assert busy.get_lines()[0].get_color() == ink(name_colour("RDY"))
    plt.close(fig)


def test_latency_legend_beside_and_units():
    messages = pd.DataFrame({"end_to_end_latency_s": [0.01, 1.0, 2.0],
                             "processing_latency_s": [0.002, 0.003, 0.004]})
    fig, ax = plt.subplots()
    plots.latency_distribution(messages, ax)
    assert "ms" in ax.get_xlabel() and ax.get_xscale() == "log"
    assert _legend_outside(ax)
    plt.close(fig)


def test_plot_rdy_labels_only_rdy_values_and_keeps_the_legend_off_data():
    seen = [Seen(0.0, Direction.C2S, ev.Sub("t", "c"), ()), Seen(0.1, Direction.C2S, ev.Rdy(5), ()),
            Seen(0.2, Direction.S2C, ev.Message(1, 1, b"0" * 16, b"x"), ()),
            Seen(0.3, Direction.C2S, ev.Req(b"0" * 16, 0), ())]
    fig, ax = plt.subplots()
    plot_rdy([Connection("c->127.0.0.1:4150", seen)], ax, max_in_flight=5)
    assert min(ax.get_yticks()) >= 0
    assert _legend_outside(ax)
    assert "REQ" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(fig)


def test_plot_rdy_zooms_on_a_start_crowded_into_its_first_milliseconds():
    """Three connections given RDY 1, then their share, within 4 ms of a 0.3-s run: an
    inset draws those milliseconds; lines on one value all show (widest first)."""
    def conn(port: int, steps: list[tuple[float, int]]) -> Connection:
        seen = [Seen(steps[0][0], Direction.C2S, ev.Sub("t", "c"), ())]
        seen += [Seen(t, Direction.C2S, ev.Rdy(v), ()) for t, v in steps]
        seen += [Seen(0.01 * i, Direction.S2C, ev.Message(1, 1, b"0" * 16, b"x"), ())
                 for i in range(1, 30)]
        return Connection(f"c->127.0.0.1:{port}", seen)

    conns = [conn(4150, [(0.0005, 1), (0.0021, 15), (0.0032, 10)]),
             conn(4151, [(0.0012, 1), (0.0025, 10)]), conn(4152, [(0.0024, 1), (0.0036, 10)])]
    fig, ax = plt.subplots()
    plot_rdy(conns, ax, max_in_flight=30)
    (inset,) = ax.child_axes
    lo, hi = inset.get_xlim()
    assert lo < 0.0005 and 0.0036 < hi < 0.01  # the changes, in milliseconds
    assert "ms" in inset.get_title()
    widths = [line.get_linewidth() for line in ax.get_lines()[:3]]
    assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1]
    plt.close(fig)
    fig, ax = plt.subplots()  # changes spread over the run: no inset
    plot_rdy([conn(4150, [(0.0, 1), (0.1, 5), (0.2, 3)])], ax, max_in_flight=5)
    assert not ax.child_axes
    plt.close(fig)
