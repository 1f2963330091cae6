"""The flow tracker's TCP analysis, case by case: zero-window periods, resets, the kinds
of retransmission, snaplen cuts, the packet after a hole. (tshark agrees on every sample
capture: test_capture_tcp_analysis_tshark.py.)"""

from __future__ import annotations

from nsqviz.capture.layers import ACK, FIN, PSH, RST, SYN, Segment
from nsqviz.capture.tcp import FlowEnd, FlowTracker, Gap
from nsqviz.capture.tcp_analysis import (
    Reset,
    Retransmission,
    Truncated,
    WindowOpen,
    ZeroWindow,
)

CLIENT, SERVER = ("10.0.0.1", 50000), ("10.0.0.2", 4150)
ISN = {"c2s": 100, "s2c": 700}


class Talk:
    """Packets of one connection, numbered from 1, each at the time given; offsets count
    from each side's first byte after its SYN."""

    def __init__(self) -> None:
        self.tracker = FlowTracker(server_ports={4150})
        self.n = 0
        self.events: list = []

    def send(self, way: str, ts: float, rel: int, data: bytes = b"", *, acks: int = 0,
             flags: int = ACK | PSH, window: int = 65535, missing: int = 0) -> int:
        self.n += 1
        (src, sport), (dst, dport) = (CLIENT, SERVER) if way == "c2s" else (SERVER, CLIENT)
        other = "s2c" if way == "c2s" else "c2s"
        seq = ISN[way] + (0 if flags & SYN else 1 + rel)
        self.events += self.tracker.feed(Segment(
            self.n, ts, src, sport, dst, dport, seq, ISN[other] + 1 + acks, flags, data,
            missing, window))
        return self.n

    def handshake(self, ts: float = 0.0) -> None:
        self.send("c2s", ts, 0, flags=SYN)
        self.send("s2c", ts + 0.0001, 0, flags=SYN | ACK)
        self.send("c2s", ts + 0.0002, 0, flags=ACK)

    def of(self, kind: type) -> list:
        return [e for e in self.events + self.tracker.finish() if isinstance(e, kind)]


def test_a_zero_window_period_from_its_first_packet_to_the_one_that_reopens_it():
    t = Talk()
    t.handshake()
    for i in range(4):  # the server sends 4,000 bytes
        t.send("s2c", 1.0 + i / 1000, i * 1000, b"m" * 1000)
    closed = t.send("c2s", 1.01, 0, acks=3000, window=0)  # reads up to 3,000, then stops
    t.send("s2c", 1.5, 4000, b"p")  # a zero-window probe: one byte at the next offset
    again = t.send("c2s", 1.5001, 0, acks=3000, window=0)
    reopened = t.send("c2s", 4.0, 0, acks=3000, window=8000)
    t.send("c2s", 5.0, 0, acks=4000, window=0)  # and stops again, to the end
    first, second, third = t.of(ZeroWindow)
    assert (first.number, first.direction, first.acked, first.in_flight, first.probes) == \
        (closed, "c2s", 3000, 1000, 0)
    assert (second.number, second.probes) == (again, 1)
    assert (third.acked, third.in_flight) == (4000, 0)  # it took all it was sent
    (opened,) = t.of(WindowOpen)
    assert (opened.number, opened.since, opened.window, opened.zero_windows, opened.probes) \
        == (reopened, 1.01, 8000, 2, 1)
    assert not t.of(Retransmission)  # a probe is no retransmission


def test_a_reset_names_its_sender_ends_its_direction_first_and_says_what_was_lost():
    t = Talk()
    t.handshake()
    t.send("c2s", 1.0, 0, b"SUB t c\n")
    t.send("s2c", 1.1, 0, b"x" * 500, acks=8)  # not acknowledged when ...
    rst = t.send("c2s", 1.2, 8, flags=RST | ACK)  # ... the client resets
    (reset,) = t.of(Reset)
    assert (reset.number, reset.direction, reset.in_flight, reset.unacked, reset.after_fin,
            reset.stopped_reading) == (rst, "c2s", 500, 0, False, None)
    ends = [(e.direction, e.how, e.sender) for e in t.of(FlowEnd)]
    assert ends == [("c2s", "rst", "c2s"), ("s2c", "rst", "c2s")]


def test_a_reset_after_a_fin_and_with_a_full_buffer():
    t = Talk()
    t.handshake()
    t.send("c2s", 1.0, 0, b"x" * 100)
    t.send("s2c", 1.1, 0, acks=100, window=0)  # the server stops reading
    t.send("c2s", 1.2, 100, flags=FIN | ACK)
    t.send("s2c", 1.3, 0, acks=101, flags=RST | ACK)
    (reset,) = t.of(Reset)
    assert (reset.direction, reset.after_fin, reset.stopped_reading) == ("s2c", True, 1.1)
    assert not t.of(WindowOpen)  # a RST does not reopen the window: it ends it all


def test_duplicate_acks_make_a_fast_retransmission_a_keep_alive_is_none():
    t = Talk()
    t.handshake()
    t.send("c2s", 1.0, 0, b"a" * 100)
    t.send("c2s", 1.0001, 100, b"b" * 100)
    for i in range(3):  # the first acknowledges, the next two repeat it
        t.send("s2c", 1.001 + i / 10_000, 0, acks=100)
    fast = t.send("c2s", 1.005, 100, b"b" * 100)
    t.send("s2c", 1.01, 0, acks=200)
    t.send("c2s", 2.0, 199)  # a keep-alive: one below the next sequence number
    later = t.send("c2s", 3.0, 100, b"b" * 100)  # acknowledged long ago
    kinds = [(e.number, e.kind, e.repeated) for e in t.of(Retransmission)]
    assert kinds == [(fast, "fast retransmission", 100),
                     (later, "spurious retransmission", 100)]


def test_what_the_snaplen_cut_is_summed_per_direction_where_it_ends():
    t = Talk()
    t.handshake()
    a = t.send("c2s", 1.0, 0, b"x" * 40, missing=60)
    t.send("c2s", 1.1, 100, b"y" * 100)
    b = t.send("c2s", 1.2, 200, b"z" * 40, missing=960)
    fin = t.send("c2s", 1.3, 1200, flags=FIN | ACK)
    (cut,) = t.of(Truncated)
    assert (cut.direction, cut.cut_packets, cut.size, cut.cut, cut.number) == \
        ("c2s", (a, b), 1100, 1020, fin)
    assert [(g.size, g.cut, g.after) for g in t.of(Gap)] == [(60, 60, None), (960, 960, None)]


def test_a_hole_names_the_first_packet_past_it_even_a_bare_ack():
    t = Talk()
    t.handshake()
    t.send("s2c", 1.0, 0, b"x" * 100)
    # s2c 100..600 never captured; the server's next packet (a bare ACK) is past it
    past = t.send("s2c", 2.0, 600, acks=0)
    t.send("c2s", 2.1, 0, acks=600)  # the client has it all
    t.send("s2c", 2.2, 600, b"y" * 10)
    # out of order, then filled: no hole, and nothing left to name a later one
    t.send("s2c", 2.3, 620, b"w" * 10)
    t.send("s2c", 2.3001, 610, b"v" * 10)
    (gap,) = t.of(Gap)
    assert (gap.offset, gap.size, gap.after) == (100, 500, past)
