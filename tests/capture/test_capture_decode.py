"""Decoding NSQ from captures with known ground truth: clean, damaged, mid-stream, TLS."""

from __future__ import annotations

import io
import json

import pytest

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.layers import (
    ACK,
    LINKTYPE_ETHERNET,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
)
from nsqviz.capture.synth import NsqTalk, pubsub_session
from nsqviz.capture.writer import PcapngWriter, PcapWriter, TcpConversation
from nsqviz.nsq.events import Identify, Magic, Message, Pub, Response
from nsqviz.records import DecodedRecord

CLIENT, SERVER = ("10.0.0.1", 50000), ("10.0.0.2", 4150)
OPENED = 1_700_000_000.0 - 0.5  # just before NsqTalk's first write


def decode(raw: bytes, **kw) -> tuple[list[DecodedRecord], CaptureDecoder]:
    d = CaptureDecoder(**kw)
    return list(d.decode([io.BytesIO(raw)])), d


def events(records, kind):
    """The events of the whole units of ``kind`` (a unit a gap cut short has none)."""
    return [r.event for r in records if r.kind == kind and "cut" not in r.fields]


def write_session(mss=1000, compression=None, linktype=LINKTYPE_ETHERNET, client=CLIENT,
                  server=SERVER, vlan=None, **session):
    f = io.BytesIO()
    w = PcapWriter(f, linktype=linktype)
    conv = TcpConversation(w, client, server, mss=mss, vlan=vlan)
    conv.open(OPENED)
    talk = NsqTalk(conv)
    pubsub_session(talk, compression=compression, **session)
    conv.close(talk.ts + 0.001)
    return f.getvalue(), talk.written


@pytest.mark.parametrize("compression", [None, "snappy", "deflate"])
def test_clean_session_decodes_to_exactly_what_was_sent(compression):
    raw, truth = write_session(mss=300, compression=compression, messages=40,
                               body_sizes=(10, 400, 2000))
    recs, d = decode(raw)
    assert events(recs, "command") == truth.commands
    assert events(recs, "frame") == truth.frames
    assert not [r for r in recs if r.kind in ("error", "gap", "tls")]
    if compression:
        (switch,) = [r for r in recs if "compression_starts" in r.fields]
        assert switch.fields["compression_starts"]["kind"] == compression
    (stats,) = d.stats
    assert stats.protocol == "nsq" and stats.why == "magic"
    assert sum(stats.records.values()) == len(truth.commands) + len(truth.frames)


@pytest.mark.parametrize(
    "linktype,client,server,vlan",
    [
        (LINKTYPE_LINUX_SLL2, CLIENT, SERVER, None),
        (LINKTYPE_LINUX_SLL, CLIENT, SERVER, None),
        (LINKTYPE_NULL, ("::1", 40000), ("::1", 4150), None),
        (LINKTYPE_RAW, ("2001:db8::5", 40000), ("2001:db8::6", 4150), None),
        (LINKTYPE_ETHERNET, CLIENT, SERVER, 100),
    ],
)
def test_link_types_and_ipv6_end_to_end(linktype, client, server, vlan):
    raw, truth = write_session(linktype=linktype, client=client, server=server, vlan=vlan,
                               messages=5)
    recs, _ = decode(raw)
    assert events(recs, "frame") == truth.frames
    label = recs[0].flow
    assert label.endswith(":4150") and label.count("->") == 1
    if ":" in client[0]:
        assert label.startswith(f"[{client[0]}]:40000->")


def test_json_record_fields_and_packets():
    raw, truth = write_session(mss=100, messages=3, body_sizes=(250,))
    recs, _ = decode(raw)
    msg = next(r for r in recs if r.name == "FrameTypeMessage")
    obj = json.loads(json.dumps(msg.as_json()))
    assert set(obj) == {"ts", "flow", "dir", "kind", "name", "fields", "packets"}
    assert obj["flow"] == "10.0.0.1:50000->10.0.0.2:4150" and obj["dir"] == "s2c"
    assert bytes.fromhex(obj["fields"]["body"]) == truth.frames[4].body
    assert len(obj["packets"]) >= 3  # 4 + 8 + 2 + 16 + 250 bytes over 100-byte segments
    assert obj["packets"] == sorted(obj["packets"])
    assert isinstance(obj["ts"], float)


def test_pcapng_two_interfaces_two_flows():
    f = io.BytesIO()
    w = PcapngWriter(f)
    eth = w.add_interface(LINKTYPE_ETHERNET, tsresol=6)
    cooked = w.add_interface(LINKTYPE_LINUX_SLL2, tsresol=9)
    a = TcpConversation(w, CLIENT, SERVER, interface=eth, mss=200)
    b = TcpConversation(w, ("10.0.0.3", 51000), SERVER, interface=cooked, mss=200)
    a.open(OPENED)
    b.open(OPENED)
    ta, tb = NsqTalk(a), NsqTalk(b)
    ta.say(Magic(), Identify({"client_id": "a"}))
    tb.say(Magic(), Pub("t", b"from b" * 50))
    ta.answer(Response(b"OK"))
    tb.answer(Response(b"OK"))
    recs, d = decode(f.getvalue())
    by_flow = {}
    for r in recs:
        by_flow.setdefault(r.flow, []).append(r.name)
    assert by_flow == {
        "10.0.0.1:50000->10.0.0.2:4150": ["MAGIC", "IDENTIFY", "FrameTypeResponse"],
        "10.0.0.3:51000->10.0.0.2:4150": ["MAGIC", "PUB", "FrameTypeResponse"],
    }


def _segments(data: bytes, size: int):
    return [(i, data[i : i + size]) for i in range(0, len(data), size)]


def test_reordered_duplicated_overlapping_capture_decodes_the_same():
    talk = NsqTalk(None)
    pubsub_session(talk, messages=25, body_sizes=(30, 900, 2500))
    truth = talk.written
    f = io.BytesIO()
    w = PcapWriter(f)
    conv = TcpConversation(w, CLIENT, SERVER)
    conv.open(1.0)
    ts = 2.0
    n = 0
    for direction, start, data in truth.writes:
        stream = truth.c2s if direction == "c2s" else truth.s2c
        pieces = [(start + off, chunk) for off, chunk in _segments(data, 97)]
        # within each write: swap neighbours, repeat every 4th, overlap every 9th
        for i in range(0, len(pieces) - 1, 3):
            pieces[i], pieces[i + 1] = pieces[i + 1], pieces[i]
        for off, chunk in pieces:
            conv.segment(direction, off, chunk, ts)
            if n % 4 == 0:
                conv.segment(direction, off, chunk, ts)
            if n % 9 == 0:
                lo = max(0, off - 20)
                conv.segment(direction, lo, bytes(stream[lo : off + 40]), ts)
            n += 1
            ts += 0.001
    recs, d = decode(f.getvalue())
    assert events(recs, "command") == truth.commands
    assert events(recs, "frame") == truth.frames
    assert not [r for r in recs if r.kind in ("error", "gap")]
    assert d.stats[0].retransmitted_bytes > 0


def _lossy_capture(truth, drop_s2c: tuple[int, int], mss=100):
    """Write the conversation in order, leaving out s2c bytes [a, b) (acked by the client)."""
    f = io.BytesIO()
    w = PcapWriter(f)
    conv = TcpConversation(w, CLIENT, SERVER, mss=mss)
    conv.open(1.0)
    ts = 2.0
    a, b = drop_s2c
    for direction, stream in (("c2s", truth.c2s), ("s2c", truth.s2c)):
        for off, chunk in _segments(bytes(stream), mss):
            ts += 0.001
            if direction == "s2c" and off < b and off + len(chunk) > a:
                keep = [(off, chunk[: max(0, a - off)]), (b, chunk[max(0, b - off):])]
                for o, c in keep:
                    if c:
                        conv.segment(direction, o, c, ts)
                continue
            conv.segment(direction, off, chunk, ts)
    conv.sent = {"c2s": len(truth.c2s), "s2c": len(truth.s2c)}
    conv.close(ts + 0.001)  # the client's FIN acknowledges every s2c byte: the hole is proven
    return f.getvalue()


def _frame_offsets(truth):
    from nsqviz.nsq.fastpath import encode_frame

    offsets, pos = [], 0
    for fr in truth.frames:
        offsets.append(pos)
        pos += len(encode_frame(fr))
    return offsets


def test_gap_inside_a_large_frame_resumes_at_a_proven_boundary():
    talk = NsqTalk(None)
    pubsub_session(talk, messages=12, body_sizes=(5000,), batch=4)
    truth = talk.written
    offsets = _frame_offsets(truth)
    victim = 6  # a 5 KB message frame: lose 1000 bytes from its middle
    a = offsets[victim] + 1500
    raw = _lossy_capture(truth, (a, a + 1000))
    recs, _ = decode(raw)
    gap = next(r for r in recs if r.name == "Gap")
    assert gap.dir == "s2c" and gap.fields["offset"] == a and gap.fields["size"] == 1000
    assert "acknowledged" in gap.fields["reason"]
    resync = next(r for r in recs if r.name == "Resync")
    assert resync.fields["method"] == "proven"
    assert resync.fields["offset"] == offsets[victim + 1]
    frames = events(recs, "frame")
    assert frames == truth.frames[:victim] + truth.frames[victim + 1 :]
    assert not [r for r in recs if r.kind == "error"]
    # the lost frame is shown as far as it was captured: its header, the start of its body
    (cut,) = [r for r in recs if "cut" in r.fields]
    lost = truth.frames[victim]
    assert cut.name == "FrameTypeMessage" and cut.fields["id"] == lost.id.decode()
    assert cut.fields["body_size"] == len(lost.body)
    assert cut.fields["cut"] == {"captured": 1500, "length": 8 + 26 + len(lost.body)}
    assert bytes.fromhex(cut.fields["body"]) == lost.body[:1500 - 34]


def test_gap_over_several_frames_resumes_heuristically_and_says_so():
    talk = NsqTalk(None)
    pubsub_session(talk, messages=30, body_sizes=(300,), batch=10)
    truth = talk.written
    offsets = _frame_offsets(truth)
    a, b = offsets[6] + 10, offsets[9] + 50  # lose the end of 6, all of 7 and 8, start of 9
    raw = _lossy_capture(truth, (a, b))
    recs, _ = decode(raw)
    names = [r.name for r in recs if r.dir == "s2c" and r.kind == "gap"]
    assert names[0] == "Gap" and "Resync" in names
    resync = next(r for r in recs if r.name == "Resync")
    assert resync.fields["method"] == "heuristic"
    frames = events(recs, "frame")
    # everything before the hole, and every frame from the resync point on, is exact
    assert frames[:6] == truth.frames[:6]
    tail = frames[6:]
    assert tail and tail == truth.frames[len(truth.frames) - len(tail):]
    assert not [r for r in recs if r.kind == "error"]


def test_capture_starting_mid_connection():
    talk = NsqTalk(None)
    pubsub_session(talk, messages=20, body_sizes=(120,), batch=5)
    truth = talk.written
    offsets = _frame_offsets(truth)
    start_s2c = offsets[8] + 7  # inside a frame
    start_c2s = bytes(truth.c2s).index(b"FIN ") + 3  # inside a command
    f = io.BytesIO()
    w = PcapWriter(f)
    conv = TcpConversation(w, CLIENT, SERVER, mss=64)
    ts = 5.0
    for direction, stream, start in (("s2c", truth.s2c, start_s2c), ("c2s", truth.c2s, start_c2s)):
        for off, chunk in _segments(bytes(stream)[start:], 64):
            ts += 0.001
            conv.segment(direction, start + off, chunk, ts)
    recs, d = decode(f.getvalue())
    assert not d.stats[0].flow.syn_seen and d.stats[0].why == "server port"
    assert not [r for r in recs if r.kind == "error"]
    frames = events(recs, "frame")
    assert frames == truth.frames[len(truth.frames) - len(frames):] and len(frames) >= 10
    commands = events(recs, "command")
    assert commands == truth.commands[len(truth.commands) - len(commands):]
    assert {r.dir for r in recs if r.name == "Resync"} == {"c2s", "s2c"}


def test_tls_upgrade_is_shown_as_encrypted_not_garbage():
    f = io.BytesIO()
    w = PcapWriter(f)
    conv = TcpConversation(w, CLIENT, SERVER, mss=500)
    conv.open(OPENED)
    talk = NsqTalk(conv)
    talk.say(Magic(), Identify({"tls_v1": True, "feature_negotiation": True}))
    talk.answer(Response(json.dumps({"tls_v1": True, "max_rdy_count": 2500}).encode()))
    conv.send("c2s", b"\x16\x03\x01\x02\x00" + bytes(range(256)) * 2, talk.ts + 0.01)
    conv.send("s2c", b"\x16\x03\x03\x00\x7a" + bytes(range(122)), talk.ts + 0.02)
    conv.close(talk.ts + 0.03)
    recs, d = decode(f.getvalue())
    assert [(r.kind, r.name) for r in recs] == [
        ("command", "MAGIC"), ("command", "IDENTIFY"), ("frame", "FrameTypeResponse"),
        ("tls", "TLSUpgrade"), ("tls", "Encrypted"),
    ]
    assert d.stats[0].encrypted_bytes == 5 + 512 + 5 + 122


def test_snaplen_cut_packets_are_gaps_with_the_reason():
    talk = NsqTalk(None)
    pubsub_session(talk, messages=6, body_sizes=(3000,), batch=3)
    truth = talk.written
    f = io.BytesIO()
    w = PcapWriter(f, snaplen=1200)
    conv = TcpConversation(w, CLIENT, SERVER, mss=1400)
    conv.open(1.0)
    conv.send("c2s", bytes(truth.c2s), 2.0)
    conv.send("s2c", bytes(truth.s2c), 2.1)
    recs, _ = decode(f.getvalue())
    gaps = [r for r in recs if r.name == "Gap"]
    assert gaps and all("snaplen" in g.fields["reason"] for g in gaps)
    assert not [r for r in recs if r.kind == "error"]


def test_truncated_file_reports_and_keeps_what_came_before():
    raw, truth = write_session(messages=4)
    recs, d = decode(raw[:-30])
    warn = [r for r in recs if r.name == "CaptureWarning"]
    assert len(warn) == 1 and "file ends inside the record" in warn[0].fields["reason"]
    assert events(recs, "frame") == truth.frames


def test_a_flow_that_is_not_nsq_is_counted_not_decoded():
    f = io.BytesIO()
    w = PcapWriter(f)
    conv = TcpConversation(w, ("10.0.0.1", 50001), ("10.0.0.2", 22))  # no protocol of ours
    conv.open(1.0)
    conv.send("c2s", b"SSH-2.0-OpenSSH_9.2\r\n", 1.1)
    conv.send("s2c", b"SSH-2.0-OpenSSH_9.2\r\n", 1.2)
    conv.packet("c2s", 1.3, 1, 2, ACK)
    recs, d = decode(f.getvalue())
    assert recs == []
    assert d.stats[0].protocol == "" and d.stats[0].undecoded_bytes > 0


def test_message_event_keeps_packet_provenance():
    raw, truth = write_session(mss=50, messages=2, body_sizes=(100,))
    recs, _ = decode(raw)
    msg = next(r for r in recs if r.name == "FrameTypeMessage")
    assert isinstance(msg.event, Message)
    sources = msg.event.raw.sources
    assert [s.segment for s in sources] == list(msg.packets)
    assert sum(s.end - s.start for s in sources) == 4 + 4 + 26 + 100


def test_gap_in_a_compressed_stream_ends_decoding_of_that_direction_and_says_so():
    talk = NsqTalk(None)
    pubsub_session(talk, messages=20, body_sizes=(700,), batch=5, compression="deflate")
    truth = talk.written
    n = len(truth.s2c)
    a, b = n // 2, n // 2 + 40
    f = io.BytesIO()
    conv = TcpConversation(PcapWriter(f), CLIENT, SERVER, mss=100)
    conv.open(1.0)
    for direction, start, data in truth.writes:  # in causal order, s2c bytes [a, b) lost
        for off, chunk in _segments(data, 100):
            lo, hi = start + off, start + off + len(chunk)
            if direction == "s2c" and lo < b and hi > a:
                for o, c in ((lo, chunk[: max(0, a - lo)]), (b, chunk[max(0, b - lo):])):
                    if c:
                        conv.segment(direction, o, c, 2.0)
                continue
            conv.segment(direction, lo, chunk, 2.0)
    conv.sent = {"c2s": len(truth.c2s), "s2c": len(truth.s2c)}
    conv.close(3.0)
    raw = f.getvalue()
    recs, d = decode(raw)
    (gap,) = [r for r in recs if r.name == "Gap"]
    assert "cannot be decompressed" in gap.fields["consequence"]
    after = recs[recs.index(gap) + 1 :]
    assert not [r for r in after if r.dir == "s2c"]  # nothing invented after the hole
    assert not [r for r in recs if r.kind == "error"]
    assert d.stats[0].undecoded_bytes > 0
    assert events(recs, "command") == truth.commands  # the other direction is unaffected


def test_mutated_captures_never_crash_the_decoder():
    """Bad input is data: 200 randomly damaged copies of a real capture decode to records
    (errors, gaps, warnings) or a CaptureFormatError -- never an exception."""
    import random
    from pathlib import Path

    from nsqviz.capture.files import CaptureFormatError
    from nsqviz.records import json_line

    data_dir = Path(__file__).resolve().parents[2] / "data"
    originals = [(data_dir / n).read_bytes() for n in
                 ("pubsub-pynsq.pcap", "snappy-pynsq.pcap", "pubsub-pynsq.pcapng")]
    rng = random.Random(20261121)
    kinds = set()
    for _ in range(200):
        data = bytearray(rng.choice(originals))
        for _ in range(rng.randint(1, 12)):
            pos = rng.randrange(24, len(data))
            if rng.random() < 0.7:
                data[pos] = rng.randrange(256)
            else:
                del data[pos : pos + rng.randint(1, 40)]
        try:
            for rec in CaptureDecoder().decode([io.BytesIO(bytes(data))]):
                json_line(rec)
                kinds.add(rec.kind)
        except CaptureFormatError:
            kinds.add("format error")
    assert {"command", "frame", "error"} <= kinds


def test_idle_split_and_continuation_are_explicit_options():
    """One session in two files, then the same 4-tuple again an hour later without a
    handshake: one capture set continues the first connection into the second file and
    splits at the silence; per file, every file starts its own connections."""
    talk = NsqTalk(None)
    pubsub_session(talk, messages=6, body_sizes=(30,))
    truth = talk.written
    halves = []
    for t0 in (OPENED, OPENED + 3600):
        f = io.BytesIO()
        conv = TcpConversation(PcapWriter(f), CLIENT, SERVER, mss=300)
        if t0 == OPENED:
            conv.open(t0)
        for direction, start, data in truth.writes:
            conv.segment(direction, start, data, t0 + 1)
        halves.append(f.getvalue())
    one = CaptureDecoder()
    recs = list(one.decode([io.BytesIO(h) for h in halves]))
    assert [s.flow.syn_seen for s in one.stats] == [True, False]
    assert {r.flow_id for r in recs if r.kind == "command"} == {0, 1}
    never = CaptureDecoder(idle_split=None)
    assert {r.flow_id for r in never.decode([io.BytesIO(h) for h in halves])} == {0}
    each = CaptureDecoder(continuation=False, idle_split=None)
    list(each.decode([io.BytesIO(h) for h in halves]))
    assert [s.flow.id for s in each.stats] == [0, 1]
