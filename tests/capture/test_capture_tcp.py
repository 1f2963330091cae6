"""TCP reassembly per direction: order, duplicates, overlaps, holes, wrap-around, ends."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.capture.layers import ACK, FIN, PSH, RST, SYN, Segment
from nsqviz.capture.tcp import Data, FlowEnd, FlowStart, FlowTracker, Gap
from nsqviz.capture.tcp_analysis import Retransmission
from nsqviz.nsq.protocol import NSQ

C, S = ("10.0.0.1", 50123), ("10.0.0.2", 4150)
STREAM = bytes(range(256)) * 40  # 10,240 bytes, every offset recognisable


class Wire:
    """Makes segments of one connection; offsets are relative to each side's ISN + 1."""

    def __init__(self, isn_c=1000, isn_s=900000):
        self.isn = {"c2s": isn_c, "s2c": isn_s}
        self.n = 0

    def seg(self, direction, rel, payload=b"", flags=ACK | PSH, ack_rel=0, missing=0):
        self.n += 1
        (src, sport), (dst, dport) = (C, S) if direction == "c2s" else (S, C)
        other = "s2c" if direction == "c2s" else "c2s"
        seq = (self.isn[direction] + 1 + rel) & 0xFFFFFFFF
        ack = (self.isn[other] + 1 + ack_rel) & 0xFFFFFFFF
        return Segment(self.n, float(self.n), src, sport, dst, dport, seq, ack, flags, payload,
                       missing)

    def handshake(self):
        c, s = self.isn["c2s"], self.isn["s2c"]
        self.n += 3
        return [
            Segment(self.n - 2, 0.0, *C, *S, c, 0, SYN, b""),
            Segment(self.n - 1, 0.0, *S, *C, s, c + 1, SYN | ACK, b""),
            Segment(self.n, 0.0, *C, *S, c + 1, s + 1, ACK, b""),
        ]


def run(segments):
    t = FlowTracker(server_ports=NSQ.server_ports)
    events = []
    for s in segments:
        events += t.feed(s)
    return events + t.finish()


def stream_of(events, direction="c2s"):
    """The delivered bytes, with each gap filled by NULs of its size -- offsets must agree."""
    out = bytearray()
    for e in events:
        if isinstance(e, Data | Gap) and e.direction == direction:
            assert e.offset == len(out), (e, len(out))
            out += e.data if isinstance(e, Data) else b"\0" * e.size
    return bytes(out)


def chunks(data, size):
    return [(i, data[i : i + size]) for i in range(0, len(data), size)]


def test_in_order_with_handshake_and_fin():
    w = Wire()
    segs = w.handshake() + [w.seg("c2s", off, p) for off, p in chunks(STREAM, 1000)]
    segs.append(w.seg("c2s", len(STREAM), flags=FIN | ACK))
    ev = run(segs)
    assert isinstance(ev[0], FlowStart) and ev[0].flow.syn_seen and ev[0].flow.client == C
    assert stream_of(ev) == STREAM
    ends = [e for e in ev if isinstance(e, FlowEnd)]
    assert (ends[0].direction, ends[0].how) == ("c2s", "fin")
    assert [e.how for e in ends[1:]] == ["capture"]
    assert [e.number for e in ev if isinstance(e, Data)] == list(range(4, 15))


def test_reordered_duplicated_and_overlapping_segments():
    w = Wire()
    pieces = [w.seg("c2s", off, p) for off, p in chunks(STREAM, 700)]
    rng = random.Random(5)
    shuffled = pieces[:]
    rng.shuffle(shuffled)
    dups = [pieces[3], pieces[0]]
    overlap = w.seg("c2s", 650, STREAM[650:2000])  # straddles three segments
    ev = run(w.handshake() + shuffled + dups + [overlap])
    assert stream_of(ev) == STREAM
    assert not [e for e in ev if isinstance(e, Gap)]
    retrans = [e for e in ev if isinstance(e, Retransmission)]
    assert sum(e.repeated for e in retrans) == 700 * 2 + 1350
    assert {e.number for e in retrans if e.repeated} == {p.number for p in [*dups, overlap]}


def test_partial_overlap_delivers_only_new_bytes():
    w = Wire()
    ev = run(w.handshake() + [w.seg("c2s", 0, STREAM[:100]), w.seg("c2s", 50, STREAM[50:300])])
    datas = [e for e in ev if isinstance(e, Data)]
    assert [(d.offset, len(d.data)) for d in datas] == [(0, 100), (100, 200)]
    (r,) = [e for e in ev if isinstance(e, Retransmission)]
    assert (r.offset, r.size, r.repeated) == (50, 250, 50)


def test_hole_proved_by_the_receivers_ack_becomes_a_gap():
    w = Wire()
    segs = w.handshake() + [
        w.seg("c2s", 0, STREAM[:1000]),
        # STREAM[1000:1500] is never captured
        w.seg("c2s", 1500, STREAM[1500:2000]),
        w.seg("s2c", 0, b"", flags=ACK, ack_rel=2000),  # the server got it all
        w.seg("c2s", 2000, STREAM[2000:2500]),
    ]
    ev = run(segs)
    (gap,) = [e for e in ev if isinstance(e, Gap)]
    assert (gap.direction, gap.offset, gap.size) == ("c2s", 1000, 500)
    assert gap.number == 6 and "acknowledged" in gap.reason
    assert stream_of(ev)[2000:] == STREAM[2000:2500]
    assert stream_of(ev)[:1000] == STREAM[:1000]


def test_hole_waits_for_a_late_segment_rather_than_guessing():
    w = Wire()
    late = w.seg("c2s", 1000, STREAM[1000:1500])
    segs = w.handshake() + [w.seg("c2s", 0, STREAM[:1000]), w.seg("c2s", 1500, STREAM[1500:2000]),
                            late]
    ev = run(segs)
    assert not [e for e in ev if isinstance(e, Gap)]
    assert stream_of(ev) == STREAM[:2000]


def test_hole_still_open_at_end_of_capture_is_reported():
    w = Wire()
    ev = run(w.handshake() + [w.seg("c2s", 0, STREAM[:10]), w.seg("c2s", 30, STREAM[30:40])])
    (gap,) = [e for e in ev if isinstance(e, Gap)]
    assert (gap.offset, gap.size) == (10, 20)
    assert "before the connection ended" in gap.reason
    assert stream_of(ev) == STREAM[:10] + b"\0" * 20 + STREAM[30:40]


def test_snaplen_cut_packet_gap_is_immediate_and_named():
    w = Wire()
    segs = w.handshake() + [
        w.seg("c2s", 0, STREAM[:100], missing=400),
        w.seg("c2s", 500, STREAM[500:600]),
    ]
    t = FlowTracker(server_ports=NSQ.server_ports)
    seen = []
    for s in segs:
        seen.append(t.feed(s))
    # declared by the cut packet itself: its end will never be captured
    gap = next(e for e in seen[-2] if isinstance(e, Gap))
    assert (gap.offset, gap.size, gap.number) == (100, 400, 4)
    assert gap.reason == "packet 4 was cut short by the capture's snaplen"
    assert not [e for e in seen[-1] if isinstance(e, Gap)]


def test_sequence_numbers_wrap_around():
    w = Wire(isn_c=0xFFFFFFFF - 2500)
    pieces = [w.seg("c2s", off, p) for off, p in chunks(STREAM, 1000)]
    pieces[2], pieces[3] = pieces[3], pieces[2]  # reorder across the wrap
    ev = run(w.handshake() + pieces)
    assert stream_of(ev) == STREAM
    assert not [e for e in ev if isinstance(e, Gap)]


def test_mid_stream_start_without_syn():
    w = Wire()
    segs = [w.seg("s2c", 5000, STREAM[:100], ack_rel=77), w.seg("c2s", 77, b"NOP\n")]
    ev = run(segs)
    start = ev[0]
    assert isinstance(start, FlowStart) and not start.flow.syn_seen and start.flow.midstream
    assert start.flow.client == C  # 4150 is the server port
    assert stream_of(ev, "s2c") == STREAM[:100]
    assert stream_of(ev, "c2s") == b"NOP\n"


def test_direction_from_magic_when_ports_do_not_tell():
    seg = Segment(1, 0.0, "10.0.0.9", 7000, "10.0.0.8", 40000, 1, 0, ACK, b"  V2")
    (start, data) = FlowTracker(client_hello=NSQ.client_hello).feed(seg)
    assert start.flow.client == ("10.0.0.9", 7000) and data.direction == "c2s"


def test_syn_ack_seen_first_makes_its_receiver_the_client():
    seg = Segment(1, 0.0, *S, *C, 5, 10, SYN | ACK, b"")
    (start,) = FlowTracker().feed(seg)
    assert start.flow.client == C


def test_rst_ends_both_directions_and_reports_open_holes():
    w = Wire()
    segs = w.handshake() + [w.seg("c2s", 0, STREAM[:10]), w.seg("c2s", 20, STREAM[20:30]),
                            w.seg("s2c", 0, b"", flags=RST | ACK, ack_rel=10)]
    ev = run(segs)
    ends = [(e.direction, e.how) for e in ev if isinstance(e, FlowEnd)]
    assert sorted(ends) == [("c2s", "rst"), ("s2c", "rst")]
    (gap,) = [e for e in ev if isinstance(e, Gap)]
    assert (gap.offset, gap.size) == (10, 10)


def test_port_reuse_after_close_is_a_new_flow():
    w = Wire()
    first = w.handshake() + [w.seg("c2s", 0, b"a"), w.seg("c2s", 1, flags=FIN | ACK, ack_rel=0),
                             w.seg("s2c", 0, flags=FIN | ACK, ack_rel=2)]
    w2 = Wire(isn_c=77777, isn_s=88888)
    w2.n = w.n
    second = w2.handshake() + [w2.seg("c2s", 0, b"b")]
    ev = run(first + second)
    starts = [e for e in ev if isinstance(e, FlowStart)]
    assert [s.flow.id for s in starts] == [0, 1]
    datas = [(e.flow.id, e.data) for e in ev if isinstance(e, Data)]
    assert datas == [(0, b"a"), (1, b"b")]


def test_tail_acknowledged_but_never_captured_is_a_gap():
    w = Wire()
    segs = w.handshake() + [w.seg("c2s", 0, STREAM[:10]),
                            w.seg("s2c", 0, b"", flags=ACK, ack_rel=50)]
    ev = run(segs)
    (gap,) = [e for e in ev if isinstance(e, Gap)]
    assert (gap.offset, gap.size) == (10, 40)


def test_ack_of_a_fin_is_not_a_missing_byte():
    w = Wire()
    segs = w.handshake() + [w.seg("s2c", 0, b"abc"), w.seg("s2c", 3, flags=FIN | ACK),
                            w.seg("c2s", 0, b"", flags=ACK, ack_rel=4)]
    ev = run(segs)
    assert not [e for e in ev if isinstance(e, Gap)]
    assert stream_of(ev, "s2c") == b"abc"


@st.composite
def lossy_wires(draw):
    """A stream cut into segments, some lost, the rest shuffled and some repeated."""
    n = draw(st.integers(1, 3000))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=25))) if n > 1 else []
    bounds = [0, *[c for c in cuts if c < n], n]
    pieces = [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    lost = draw(st.sets(st.integers(0, len(pieces) - 1), max_size=len(pieces) // 2))
    kept = [p for i, p in enumerate(pieces) if i not in lost]
    order = draw(st.permutations(kept))
    repeats = draw(st.lists(st.sampled_from(kept), max_size=4)) if kept else []
    return n, pieces, lost, list(order) + repeats, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=150, deadline=None)
@given(lossy_wires())
def test_delivered_bytes_and_gaps_tile_the_stream_exactly(case):
    n, pieces, lost, order, isn = case
    w = Wire(isn_c=isn)
    segs = w.handshake() + [w.seg("c2s", a, STREAM[a:b]) for a, b in order]
    segs.append(w.seg("s2c", 0, b"", flags=ACK, ack_rel=n))  # the receiver got everything
    ev = run(segs)
    tiled = stream_of(ev)  # asserts Data and Gap offsets are contiguous
    assert len(tiled) == n
    missing = bytearray(n)
    for i in lost:
        a, b = pieces[i]
        missing[a:b] = b"\1" * (b - a)
    for a, b in order:
        missing[a:b] = b"\0" * (b - a)
    gaps = [e for e in ev if isinstance(e, Gap)]
    gap_bytes = bytearray(n)
    for g in gaps:
        gap_bytes[g.offset : g.offset + g.size] = b"\1" * g.size
    assert gap_bytes == missing  # a gap exactly where bytes were never captured
    for i in range(n):
        if not missing[i]:
            assert tiled[i] == STREAM[i]
