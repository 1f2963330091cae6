"""Timers drawn where they act: their rows, their lengths, where the lengths come from."""

import re

from nsqviz.nsq import events as ev
from nsqviz.nsq.timers import timer_spans
from nsqviz.protocols.timers import TimerRow, TimerSpan
from nsqviz.servers.nsqd.options import Options
from nsqviz.widgets.sequence import Arrow, SequenceDiagram
from nsqviz.widgets.steps import server_options

MID = b"0a1b2c3d4e5f6071"


def _msg(attempts: int) -> ev.Message:
    return ev.Message(1, attempts, MID, b"hi")


def _rows(*items: tuple[float, object, bool]) -> list[TimerRow]:
    return [TimerRow(i, t, "consumer", item, c) for i, (t, item, c) in enumerate(items)]


def test_a_redelivery_is_drawn_msg_timeout_after_its_delivery():
    opts = Options(msg_timeout=1.0)
    rows = _rows((0.0, ev.Rdy(1), True), (0.01, _msg(1), False),
                 (1.2, _msg(2), False), (1.3, ev.Fin(MID), True))
    spans = [s for s in timer_spans(rows, opts) if s.name == "FrameTypeMessage"]
    first, second = spans
    assert (first.first, first.last) == (1, 2)  # from the delivery to the redelivery
    assert first.label.startswith("msg_timeout 1000 ms")
    assert rows[first.last].t - rows[first.first].t >= opts.msg_timeout
    assert (second.first, second.last) == (2, 3) and "FIN in time" in second.label
    diagram = SequenceDiagram(["consumer", "nsqd"],
                              [Arrow("consumer", "nsqd", str(i)) for i in range(4)],
                              spans=spans)
    svg = diagram.svg()
    bar = re.search(r'class="nv-timer-bar" x1="(\d+)" y1="(\d+)" x2="\1" y2="(\d+)"', svg)
    assert (int(bar[2]), int(bar[3])) == (diagram.row_y(1), diagram.row_y(2))


def test_a_touch_restarts_msg_timeout_and_a_late_fin_does_not_end_it():
    rows = _rows((0.0, _msg(1), False), (0.8, ev.Touch(MID), True),
                 (1.9, ev.Fin(MID), True), (2.5, ev.Nop(), True))
    spans = [s for s in timer_spans(rows, Options(msg_timeout=1.0)) if s.name != "RDY"]
    assert [(s.first, s.last) for s in spans] == [(0, 1), (1, 2)]
    assert "TOUCH in time" in spans[0].label and "restarted by TOUCH" in spans[1].label
    rows = _rows((0.0, _msg(1), False), (1.5, ev.Fin(MID), True))
    (late,) = [s for s in timer_spans(rows, Options(msg_timeout=1.0)) if s.name != "RDY"]
    assert late.last == 1 and late.label.endswith("ran out")


def test_req_delay_and_dpub_deferral_come_from_the_commands_parameters():
    rows = _rows((0.0, ev.Req(MID, 200), True), (0.1, ev.Nop(), True),
                 (0.25, _msg(2), False), (0.3, ev.Dpub("t", 1500, b"x"), True),
                 (2.0, ev.Nop(), True))
    spans = {s.name: s for s in timer_spans(rows, Options())}
    assert (spans["REQ"].first, spans["REQ"].last, spans["REQ"].label) == (0, 2, "REQ delay 200 ms")
    assert (spans["DPUB"].first, spans["DPUB"].last) == (3, 4)
    assert spans["DPUB"].label == "DPUB deferral 1500 ms"


def test_negotiated_values_beat_the_request_and_the_broker_option():
    answer = b'{"msg_timeout":5000,"output_buffer_timeout":100}'
    rows = _rows((0.0, ev.Identify({"heartbeat_interval": 1000, "msg_timeout": 3000}), True),
                 (0.01, ev.Response(answer), False), (0.02, ev.Rdy(1), True),
                 (0.12, _msg(1), False), (1.0, ev.Response(b"_heartbeat_"), False),
                 (2.0, ev.Response(b"_heartbeat_"), False),
                 (2.1, ev.Response(b"_heartbeat_"), False))
    labels = [s.label for s in timer_spans(rows, Options(msg_timeout=60))]
    assert ("output_buffer_timeout 100 ms (IDENTIFY response): nsqd may hold a message this "
            "long before it flushes") in labels
    (flush,) = [s for s in timer_spans(rows, Options()) if s.name == "RDY"]
    assert (flush.first, flush.last) == (2, 3)  # from the RDY to the first message
    assert "msg_timeout 5000 ms · running" in labels
    assert labels.count("heartbeat_interval 1000 ms (IDENTIFY request)") == 3
    assert [(s.first, s.last) for s in timer_spans(rows, Options())
            if s.name == "FrameTypeResponse"] == [(0, 4), (4, 5), (5, 6)]
    # silent since row 2 while heartbeats came: the two-interval read deadline, 2 s later
    deadline = next(s for s in timer_spans(rows, Options()) if s.label.startswith("read deadline"))
    assert (deadline.first, deadline.last) == (2, 6)
    assert "2000 ms" in deadline.label


def test_the_heartbeat_default_is_nsqds_client_timeout_over_two():
    rows = _rows((0.0, ev.Magic(), True), (1.0, ev.Response(b"_heartbeat_"), False))
    (beat,) = [s for s in timer_spans(rows, Options(client_timeout=4.0))
               if s.name == "FrameTypeResponse"]
    assert beat.label == "heartbeat_interval 2000 ms (client_timeout/2)"
    assert (beat.first, beat.last) == (0, 1)


def test_server_options_of_a_real_nsqd_read_its_flags():
    class Fake:
        flags = {"msg_timeout": 2.5, "tcp_address": "127.0.0.1:0"}

    assert server_options(Fake()).msg_timeout == 2.5
    assert server_options(None) == Options()


def test_open_spans_and_text():
    d = SequenceDiagram(["a", "b"], [Arrow("a", "b", "x"), Arrow("b", "a", "y")],
                        spans=[TimerSpan(0, None, "msg_timeout 1 s · running", "FrameTypeMessage")])
    assert "timer msg_timeout 1 s · running: row 1 to the end" in d.text()
    assert 'stroke-dasharray="2,2"' in d.svg()


def test_a_redelivery_seen_early_still_closes_as_redelivered():
    # the client saw the first delivery late (nsqd's buffer), so the gap looks short
    rows = _rows((0.0, ev.Rdy(1), True), (0.2, _msg(1), False), (1.1, _msg(2), False))
    (first, _second) = [s for s in timer_spans(rows, Options(msg_timeout=1.0))
                        if s.name == "FrameTypeMessage"]
    assert first.last == 2 and first.label.endswith("redelivered")
    rows = _rows((0.0, ev.Rdy(1), True), (0.2, _msg(1), False), (1.3, _msg(2), False))
    assert [s for s in timer_spans(rows, Options(msg_timeout=1.0))
            if s.name == "FrameTypeMessage"][0].label.endswith("redelivered")


def test_rows_may_be_numbered_like_packets():
    # a capture's rows are its packet numbers, not 0, 1, 2 ...
    rows = [TimerRow(n, t, "flow 0", item, True) for n, t, item in
            ((7, 0.0, ev.Req(MID, 0)), (12, 0.01, ev.Nop()), (30, 0.5, ev.Dpub("t", 300, b"x")),
             (31, 0.6, ev.Nop()), (40, 0.9, ev.Nop()))]
    spans = {s.name: (s.first, s.last) for s in timer_spans(rows, None)}
    assert spans == {"REQ": (7, 12), "DPUB": (30, 40)}


def test_a_capture_of_an_unknown_nsqd_draws_only_what_the_wire_says():
    rows = _rows((0.0, ev.Rdy(1), True), (0.1, _msg(1), False), (1.0, ev.Response(b"_heartbeat_"),
                                                                 False))
    assert timer_spans(rows, None) == []


def test_the_replay_draws_a_captures_dpub_deferral_from_its_own_parameter():
    from nsqviz.capture.replay import Replay
    from nsqviz.widgets.replay import ReplayView

    view = ReplayView(Replay.load("data/pubsub-pynsq.pcap"))
    (dpub,) = [s for _flow, s in view.timers() if s.name == "DPUB"]
    assert dpub.label == "DPUB deferral 300 ms"
    ts = {p.number: p.ts for p in view.replay.packets}
    assert ts[dpub.last] - ts[dpub.first] >= 0.3
    assert "DPUB deferral 300 ms" in view.html()


def test_output_buffer_timeout_starts_no_earlier_than_the_publish():
    rows = [TimerRow(0, 0.0, "c", ev.Rdy(1), True),
            TimerRow(1, 0.3, "p", ev.Pub("t", b"x"), True),
            TimerRow(2, 0.31, "p", ev.Response(b"OK"), False),
            TimerRow(3, 0.32, "c", _msg(1), False)]
    (flush,) = [s for s in timer_spans(rows, Options()) if s.name == "RDY"]
    assert (flush.first, flush.last) == (1, 3)


def test_timer_labels_never_overlap_and_stay_inside_the_picture():
    # four timers on one row and one on the next, the last rows of the diagram: the
    # labels a row's 38 px could not hold spill onto the next row's label, then below
    arrows = [Arrow("client", "nsqd", f"CMD {i}") for i in range(3)]
    spans = [TimerSpan(1, 2, f"timer {k}") for k in range(4)] + [TimerSpan(2, None, "next row")]
    d = SequenceDiagram(["client", "nsqd"], arrows, spans=spans)
    svg = d.svg()
    ys = [int(y) for y in re.findall(r'<text class="nv-timer-label" x="[\d.]+" y="(\d+)"', svg)]
    assert len(ys) == 5
    assert all(b - a >= SequenceDiagram.LABEL_GAP for a, b in zip(ys, ys[1:], strict=False))
    height = int(re.search(r'height="(\d+)"', svg).group(1))  # type: ignore[union-attr]
    assert max(ys) < height


def test_a_long_timer_label_is_wrapped_and_the_next_label_goes_below_its_last_line():
    arrows = [Arrow("client", "nsqd", f"CMD {i}") for i in range(2)]
    long = "msg_timeout 60000 ms: restarted by TOUCH, then FIN in time"
    spans = [TimerSpan(0, 1, long), TimerSpan(0, 1, "REQ delay 200 ms")]
    d = SequenceDiagram(["client", "nsqd"], arrows, spans=spans)
    lay = d.layout()
    assert len(lay.timer_lines[0]) > 1
    assert all(len(line) <= SequenceDiagram.TIMER_CHARS for line in lay.timer_lines[0])
    assert " ".join(lay.timer_lines[0]) == long
    first, second = lay.timer_ys
    assert second - first >= SequenceDiagram.LABEL_GAP * len(lay.timer_lines[0])
    assert lay.width <= SequenceDiagram.WIDTH and lay.height > second
