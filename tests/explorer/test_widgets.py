"""Widgets render plain objects: checked through their HTML/text, without a browser."""

from __future__ import annotations

import re
import time
from html import unescape
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.clients.session import Session
from nsqviz.clients.session.sticky import loopback, message_frames, reassemble, simulate_segments
from nsqviz.layout import annotate
from nsqviz.nsq import grammar as g
from nsqviz.widgets.hexview import HexView
from nsqviz.widgets.sequence import Arrow, SequenceDiagram
from nsqviz.widgets.statemachine import StateMachineView
from nsqviz.widgets.sticky import StickyPlayground, StickyView


class _Bytes(HTMLParser):
    """Collects the hex cells of a HexView: (text, title) per byte."""

    def __init__(self):
        super().__init__()
        self.cells: list[tuple[str, str]] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "span" and "nv-b" in (a.get("class") or "").split():
            self._in = a.get("title", "")

    def handle_data(self, data):
        if self._in is not None:
            self.cells.append((data, self._in))
            self._in = None


def test_hexview_every_byte_is_a_cell_titled_by_its_field():
    data = g.Command.build({"verb": "PUB", "command": {"topic": "orders", "body": b"hi!"}})
    view = HexView(annotate(g.Command, data), "PUB")
    parser = _Bytes()
    parser.feed(view.html())
    assert "".join(c for c, _ in parser.cells) == data.hex()
    titles = [t for _, t in parser.cells]
    assert titles[:3] == ["command.verb"] * 3
    assert titles[4:10] == ["command.topic"] * 6
    assert titles[-3:] == ["command.body.data"] * 3
    assert "command.body.size" in view.html()  # legend and tree name it
    assert "nv-err" not in view.html(with_css=False)


def test_hexview_marks_error_offset_and_unparsed_bytes():
    view = HexView(annotate(g.Frame, b"\x00\x00\x00\x06\x00\x00\x00\x09OK"), "bad")
    html = view.html(with_css=False)
    assert "UnknownFrameType at offset 4" in html
    parser = _Bytes()
    parser.feed(html)
    assert parser.cells[8][1] == "(unparsed)"
    assert html.count("nv-bad") == 2  # the offending byte, in hex and in ASCII
    assert "ERROR" in view.text()


def test_hexview_html_is_deterministic():
    data = g.Frame.build({"frame_type": "FrameTypeResponse", "data": b"OK"})
    assert HexView.of(g.Frame, data).html() == HexView.of(g.Frame, data).html()


def test_sequence_diagram_draws_each_arrow_in_order():
    arrows = [Arrow("client", "nsqd", "SUB orders audit"), Arrow("nsqd", "client", "OK",
              "response"), Arrow("nsqd", "client", "_heartbeat_", "heartbeat", unasked=True)]
    svg = SequenceDiagram(["client", "nsqd"], arrows).svg()
    labels = [re.sub(r"<[^>]+>", "", t) for t in
              re.findall(r'class="nv-label"[^>]*>(.*?)</text>', svg)]
    assert labels == ["SUB orders audit", "OK", "_heartbeat_"]
    assert svg.count("stroke-dasharray=\"5,3\"") == 1
    assert svg.count("<line class=\"nv-arrow") == 3


def test_state_machine_highlights_only_the_current_state():
    view = StateMachineView(["A", "B", "C"], [("A", "B", "go"), ("A", "C", "jump")], "B")
    svg = view.svg()
    assert svg.count("nv-current") == 1
    assert re.search(r'nv-current.*?>B</text>', svg)
    assert view.text() == "A → [B] → C"


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 80), min_size=1, max_size=6),
       mss=st.integers(1, 200), coalesce=st.booleans())
def test_any_segmentation_reassembles_the_frames(sizes, mss, coalesce):
    frames = message_frames(sizes)
    segments = simulate_segments(frames, mss=mss, coalesce=coalesce)
    assert b"".join(segments) == b"".join(frames)
    assert all(0 < len(s) <= mss for s in segments)
    if not coalesce:  # no segment mixes two writes
        assert len(segments) == sum(-(-len(f) // mss) for f in frames)
    run = reassemble("t", frames, segments)
    assert run.intact
    # provenance: each frame's sources cover exactly its bytes
    for f in run.reassembled:
        assert sum(s.end - s.start for s in f.sources) == len(f.data)


def test_nagle_on_and_off_segment_differently():
    frames = message_frames([10] * 4)  # four 44-byte frames
    nagle = simulate_segments(frames, mss=48, coalesce=True)
    nodelay = simulate_segments(frames, mss=48, coalesce=False)
    assert [len(s) for s in nodelay] == [44, 44, 44, 44]  # each write leaves at once
    assert [len(s) for s in nagle] == [44, 48, 48, 36]  # the rest waited for the ACK
    assert nagle[0] == frames[0] and nagle[1] == (frames[1] + frames[2])[:48]
    # a big MSS: the three small writes that waited leave together
    assert [len(s) for s in simulate_segments(frames, mss=200, coalesce=True)] == [44, 132]
    # writes of a full MSS or more never wait
    big = message_frames([60, 60])
    assert simulate_segments(big, mss=48, coalesce=True)[0] == big[0][:48]


def test_sticky_view_rows_and_steps():
    pg = StickyPlayground(count=3, size=10, mss=50, coalesce=True)
    run = pg.run()
    # Nagle: F0 leaves alone; F1, F2 wait for its ACK, glued, cut at 50
    assert [len(s) for s in run.segments] == [44, 50, 38]
    html = StickyView(run).html()
    assert html.count(' nv-span"') == 4  # F0 | F1 F2 | F2
    assert "3 of 3 frames complete" in html and "✓ all reassembled" in html
    first = StickyView(run, upto=1)
    assert "1 segments" not in first.html() and "step 1/3" in first.html()
    second = StickyView(run, upto=2)
    assert "reassembler buffer" in second.html()  # 6 bytes of F2 are waiting
    assert second.text().splitlines()[2].split()[-2:] == ["6", "B"]


@pytest.mark.parametrize("protocol", ["nsq", "tubemq"])
def test_a_sticky_frame_opens_its_bytes(protocol):
    """Every span of frame k is a label opening pane k: frame k's hex view, laid out by
    its protocol's grammar (the click itself: tests/notebooks/test_static_render.py)."""
    run = StickyPlayground(count=3, size=30, mss=40, protocol=protocol).run()
    html = StickyView(run).html()
    spans = re.findall(r'<label class="nv-box nv-box-(\d+) nv-span"', html)
    assert sorted(set(spans)) == ["0", "1", "2"] and len(spans) > 3  # split frames
    panes = re.split(r'<div class="nv-pane nv-pane-', html)[1:]
    assert [p.split('"')[0] for p in panes] == ["0", "1", "2"]
    for k, pane in enumerate(panes):
        cells = _Bytes()
        cells.feed(pane)
        assert len(cells.cells) == len(run.frames[k])
        field = "frame_type" if protocol == "nsq" else "listSize"
        assert field in pane, pane[:400]


def test_real_loopback_glues_and_cuts_frames():
    frames = message_frames([10, 10, 10, 10])
    run = loopback(frames, recv_size=40)
    assert run.intact
    assert [len(s) for s in run.segments] == [40, 40, 40, 40, 16]
    assert run.steps[0].events == ()  # no frame is complete after the first recv()


@pytest.mark.slow
def test_stepper_drives_a_real_session_and_renders(broker):
    from nsqviz.widgets.stepper import Stepper

    stepper = Stepper(Session(broker.tcp_address, grace=0.05))
    widget = stepper.widget()
    for verb in ("magic", "IDENTIFY", "SUB"):
        assert stepper.do(verb) is not None
    assert stepper.do("SUB") is None and "codec refuses" in stepper.status
    stepper.selected = "publisher"
    stepper.do("magic")
    stepper.do("PUB", body="from the stepper")
    stepper.selected = "consumer"
    stepper.do("RDY", rdy=1)
    stepper.session.connections["consumer"].wait()
    html = unescape(stepper.html())
    for label in ("magic '  V2'", "SUB orders audit", "PUB orders", "RDY 1", "MSG "):
        assert label in html
    assert "nsqviz-hex" in html and "nv-seq" in html and "in flight" in html
    deadline = time.monotonic() + 5  # the reader thread redraws right after recording
    while "MSG " not in widget.children[-1].value and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "MSG " in widget.children[-1].value  # the arrival redrew the live widget
    step = stepper.do("FIN")
    assert step is not None and step.sent.startswith(b"FIN ")
    bundle = stepper._repr_mimebundle_()
    assert {"text/html", "text/plain",
            "application/vnd.jupyter.widget-view+json"} <= set(bundle)
    stepper.session.close()


def test_long_inputs_start_folded_but_keep_every_byte():
    body = {"client_id": "x" * 200}
    data = g.Command.build({"verb": "IDENTIFY", "command": {"body": {"value": body}}})
    html = HexView.of(g.Command, data).html(with_css=False)
    assert "<details>" in html and f"{len(data)} bytes in" in html
    parser = _Bytes()
    parser.feed(html)
    assert len(parser.cells) == len(data)
    short = HexView.of(g.Command, b"NOP\n").html(with_css=False)
    assert "<details>" not in short


def test_playground_widget_follows_its_controls_and_runs_real_loopback():
    pg = StickyPlayground(sizes=[5, 80, 20], mss=40)
    assert [len(f) for f in pg.frames()] == [39, 114, 54]  # 34 bytes of frame header each
    ui = pg.widget()
    (left, middle, right), out, real_out = ui.children[0].children, *ui.children[1:]
    assert "3 of 3 frames complete" in out.value and "✓ all reassembled" in out.value
    left.children[2].value = "1, 1"  # the sizes box overrides count x size
    assert "2 of 2 frames complete" in out.value and "✓ all reassembled" in out.value
    assert pg.body_sizes() == [1, 1]
    middle.children[2].value = 1  # feed only the first segment
    assert "step 1/" in out.value
    right.children[0].value = 16  # recv() size
    right.children[2].click()  # a real loopback connection
    assert "real loopback TCP, recv(16)" in real_out.value
    assert "2 of 2 frames complete" in real_out.value and "✓ all reassembled" in real_out.value


def test_a_sequence_arrow_opens_its_bytes():
    """An arrow with a detail gets a label over its row that opens the detail; the rows
    are placed in percent of the picture (the SVG scales down to fit)."""
    arrows = [Arrow("client", "nsqd", "NOP", detail="<b>nop bytes</b>"),
              Arrow("nsqd", "client", "note", "note"),
              Arrow("nsqd", "client", "OK", "response", detail="<b>ok bytes</b>")]
    html = SequenceDiagram(["client", "nsqd"], arrows).html()
    boxes = re.findall(r'<label class="nv-box nv-box-(\d+) " style="[^"]*top:([\d.]+)%', html)
    assert [k for k, _ in boxes] == ["0", "1"]
    height = SequenceDiagram.TOP + 3 * SequenceDiagram.ROW + 22
    assert [float(t) for _, t in boxes] == pytest.approx(
        [(SequenceDiagram.TOP + i * SequenceDiagram.ROW - 4) / height * 100 for i in (0, 2)],
        abs=1e-3)
    assert re.search(r'nv-pane-0" [^>]*>.*nop bytes', html)
    assert re.search(r'nv-pane-1" [^>]*>.*ok bytes', html)
    plain = SequenceDiagram(["client", "nsqd"], [Arrow("client", "nsqd", "NOP")]).html()
    assert "<label" not in plain and "nv-pane" not in plain


def _specificity(selector: str) -> tuple[int, int]:
    """(classes, elements) of a simple CSS selector (no ids, no pseudo-classes)."""
    tokens = selector.split()
    return selector.count("."), sum(t[0].isalpha() for t in tokens)


def test_table_cells_state_their_alignment_over_jupyterlabs_rule():
    # JupyterLab's ".jp-RenderedHTMLCommon td{text-align:right}" is (1 class, 1 element):
    # a value under a left-aligned header must be aligned by a more specific rule of ours
    from nsqviz.widgets.style import CSS
    lab = (1, 1)
    for table in ("nv-table", "nv-sticky"):
        rules = [(sel.strip(), body) for sels, body in re.findall(r"([^{}]+)\{([^{}]*)\}", CSS)
                 for sel in sels.split(",") if sel.strip().endswith(f"table.{table} td")]
        aligned = [sel for sel, body in rules if "text-align:left" in body]
        assert aligned, f"no rule aligns the cells of table.{table}"
        assert all(_specificity(sel) > lab for sel in aligned)


def test_the_magics_hex_view_names_its_one_field():
    # a unit that is one field has no path: its chip and tree row still say what it is
    from nsqviz.lookupd import grammar as lookupd_grammar
    for magic, data in ((g.Magic, b"  V2"), (lookupd_grammar.Magic, b"  V1")):
        markup = HexView.of(magic, data).html(with_css=False)
        assert re.findall(r'class="nv-chip"[^>]*>([^<]*)<', markup) == ["magic"]
        assert '<span class="nv-mono"></span>' not in markup


def test_a_sequence_diagram_is_laid_out_for_the_width_it_is_shown_in():
    """Lab 11's four lanes with timers, the rebalance's five (the idle producer left
    out): no wider than WIDTH, lanes at least MIN_COL apart, every label line within its
    arrow, shown at width 100 % and never wider than drawn."""
    from nsqviz.protocols.timers import TimerSpan

    long = "MSG 18ec05db8baa80ae #2 'job A' attempts=2"
    lab = SequenceDiagram(["dropper", "nsqd", "pub-dropped", "heir"], [
        Arrow("dropper", "nsqd", "SUB dropped lab", t="150.3 ms"),
        Arrow("nsqd", "heir", long, "message", t="1503.3 ms"),
        Arrow("pub-dropped", "nsqd", "PUB dropped 'job A'", t="309.8 ms")],
        spans=[TimerSpan(0, 1, "msg_timeout 1000 ms · redelivered after the connection dropped"),
               TimerSpan(1, None, "output_buffer_timeout 250 ms")])
    rebalance = SequenceDiagram(["producer", "Master", "Broker 1", "Broker 2", "A", "B"], [
        Arrow(c, s, f"{c} to {s}") for c in ("A", "B") for s in ("Master", "Broker 1",
                                                                  "Broker 2")])
    assert rebalance.participants == ["Master", "Broker 1", "Broker 2", "A", "B"]
    for d in (lab, rebalance):
        lay = d.layout()
        assert lay.width <= SequenceDiagram.WIDTH
        xs = sorted(lay.xs.values())
        assert min(b - a for a, b in zip(xs, xs[1:], strict=False)) >= SequenceDiagram.MIN_COL
        for a, lines in zip(d.arrows, lay.lines, strict=True):
            room = abs(lay.xs[a.dst] - lay.xs[a.src])
            assert all(len(line) * SequenceDiagram.GLYPH <= room for line in lines)
            assert "".join(lines).replace(" ", "") == a.label.replace(" ", "")  # nothing cut
        assert f"max-width:{lay.width}px" in d.html() and "width:100%" in d.html()
    assert lab.layout().timer_lines[0][0].startswith("msg_timeout 1000 ms")
    ident = "IDENTIFY {feature_negotiation,heartbeat_interval,output_buffer_timeout}"
    lines = SequenceDiagram(["c", "nsqd", "p"], [Arrow("c", "nsqd", ident)]).layout().lines[0]
    assert "output_buffer_timeout}" in lines and "".join(lines) == ident  # 05's was cut


def test_lanes_do_not_move_with_the_digits_of_a_runs_times():
    """A notebook's stored diagram is compared with a fresh run's (times masked): a
    slower run's ``104.2 ms`` where the stored one had ``98.7 ms`` must not shift the
    lanes."""
    def lanes(*times: str) -> dict[str, float]:
        arrows = [Arrow("client", "nsqd", f"step {n}", t=t) for n, t in enumerate(times)]
        return SequenceDiagram(["client", "nsqd"], arrows).layout().xs

    assert lanes("0.0 ms", "98.7 ms") == lanes("0.0 ms", "104.2 ms") == lanes("1234.5 ms")
    assert lanes("0.000s", "9.999s") == lanes("0.000s", "10.001s")
