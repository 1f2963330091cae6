"""The reassembler: any chunking gives the same frames, and provenance tiles every frame.

Streams are built from hand-assembled NSQ frames and commands (``tests.nsq._vectors``)
and cut with NSQ's framing rules; one test uses a toy rule to show the reassembler does
not know about NSQ.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.nsq.framing import CommandFraming, FrameFraming
from nsqviz.stream import FramingError, Garbage, RawFrame, Reassembler, Source, Truncated
from tests.nsq._vectors import VERBS, be32, command_vectors, frame_vectors

# --------------------------------------------------------------------------- helpers


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    """Chunks of ``data`` cut at ``cuts`` (repeated cuts make empty chunks)."""
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@st.composite
def chunkings(draw, data: bytes) -> list[bytes]:
    """One byte at a time, all glued, or random splits (with empty chunks now and then)."""
    mode = draw(st.sampled_from(["one-byte", "glued", "random", "random"]))
    if mode == "one-byte":
        return [data[i : i + 1] for i in range(len(data))]
    if mode == "glued":
        return [data]
    return split(data, draw(st.lists(st.integers(0, len(data)), max_size=12)))


def segment_ids(n: int) -> list[int]:
    """Caller-chosen segment numbers (not 0..n-1), as a pcap reader would pass them."""
    return [100 + 3 * i for i in range(n)]


def run(rule, chunks: list[bytes], *, finish: bool = True) -> list:
    r = Reassembler(rule)
    events = []
    for seg, chunk in zip(segment_ids(len(chunks)), chunks, strict=True):
        events += r.feed(chunk, segment=seg)
    if finish:
        events += r.finish()
    return events


def strip(events: list) -> list:
    """The events without provenance, to compare runs over different chunkings."""
    out = []
    for e in events:
        if isinstance(e, RawFrame):
            out.append(("frame", e.offset, e.data))
        elif isinstance(e, Garbage):
            out.append(("garbage", e.offset, e.data, e.reason, e.resynced))
        else:
            out.append(("truncated", e.offset, e.data, e.expected))
    return out


def assert_tiles(event, chunks: list[bytes]) -> None:
    """``event.sources`` name exactly the bytes of ``event``, in stream order, no overlaps."""
    ids = segment_ids(len(chunks))
    start_of = {}
    pos = 0
    for seg, chunk in zip(ids, chunks, strict=True):
        start_of[seg] = pos
        pos += len(chunk)
    by_id = dict(zip(ids, chunks, strict=True))
    at = event.offset
    for src in event.sources:
        assert isinstance(src, Source)
        assert 0 <= src.start < src.end <= len(by_id[src.segment])
        assert start_of[src.segment] + src.start == at  # contiguous, no gap, no overlap
        at += src.end - src.start
    assert at == event.offset + len(event.data)
    assert b"".join(by_id[s.segment][s.start : s.end] for s in event.sources) == event.data
    segs = [s.segment for s in event.sources]
    assert segs == sorted(set(segs))


def frames_per_chunk(events: list, chunks: list[bytes]) -> dict[int, int]:
    """How many events each segment carried, by independent interval arithmetic."""
    out = {}
    pos = 0
    for seg, chunk in zip(segment_ids(len(chunks)), chunks, strict=True):
        lo, hi = pos, pos + len(chunk)
        n = sum(1 for e in events if e.offset < hi and lo < e.offset + len(e.data))
        if n and lo < hi:
            out[seg] = n
        pos = hi
    return out


frame_lists = st.lists(frame_vectors(), min_size=1, max_size=8)

# ------------------------------------------------------------------ any chunking


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_chunking_of_frames_gives_the_same_frames_with_exact_provenance(data):
    frames = data.draw(frame_lists)
    wires = [f[0] for f in frames]
    stream = b"".join(wires)
    chunks = data.draw(chunkings(stream))
    events = run(FrameFraming(), chunks)

    assert all(isinstance(e, RawFrame) for e in events)
    assert [e.data for e in events] == wires
    offsets = [sum(map(len, wires[:i])) for i in range(len(wires))]
    assert [e.offset for e in events] == offsets
    for e in events:
        assert_tiles(e, chunks)
    # which chunks carried several frames, as the sources tell it
    carried: dict[int, int] = {}
    for e in events:
        for s in e.sources:
            carried[s.segment] = carried.get(s.segment, 0) + 1
    assert carried == frames_per_chunk(events, chunks)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_any_chunking_of_commands_gives_the_same_commands(data):
    commands = data.draw(
        st.lists(st.sampled_from(VERBS).flatmap(command_vectors), min_size=1, max_size=8)
    )
    wires = [b"  V2"] + [c[0] for c in commands]
    stream = b"".join(wires)
    chunks = data.draw(chunkings(stream))
    events = run(CommandFraming(), chunks)
    assert [e.data for e in events] == wires
    assert all(isinstance(e, RawFrame) for e in events)
    for e in events:
        assert_tiles(e, chunks)


def test_glued_frames_in_one_chunk_and_one_frame_over_many_chunks():
    ok = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
    hb = b"\x00\x00\x00\x0f\x00\x00\x00\x00_heartbeat_"
    # three frames glued in chunk 0, the fourth split over chunks 0, 1 and 2
    chunks = [ok + hb + ok + hb[:3], hb[3:9], hb[9:]]
    events = run(FrameFraming(), chunks)
    assert [e.data for e in events] == [ok, hb, ok, hb]
    assert [e.sources for e in events] == [
        (Source(100, 0, 10),),
        (Source(100, 10, 29),),
        (Source(100, 29, 39),),
        (Source(100, 39, 42), Source(103, 0, 6), Source(106, 0, 10)),
    ]


def test_segments_are_numbered_from_zero_when_not_given():
    r = Reassembler(FrameFraming())
    ok = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
    assert r.feed(ok[:5]) == []
    [frame] = r.feed(ok[5:])
    assert frame.sources == (Source(0, 0, 5), Source(1, 0, 5))


def test_provenance_can_be_switched_off():
    r = Reassembler(FrameFraming(), provenance=False)
    ok = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
    events = r.feed(ok * 3)
    assert [(e.data, e.offset, e.sources) for e in events] == [
        (ok, 0, ()),
        (ok, 10, ()),
        (ok, 20, ()),
    ]


def test_buffered_and_offset_show_what_is_waiting():
    r = Reassembler(FrameFraming())
    ok = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
    r.feed(ok + ok[:7])
    assert (r.offset, r.buffered) == (10, ok[:7])
    assert r.take_remaining() == ok[:7]
    assert (r.offset, r.buffered) == (17, b"")


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_each_frame_is_emitted_by_the_chunk_that_completes_it(data):
    """Nothing is held back: a frame comes out of the very feed that brings its last byte."""
    wires = [f[0] for f in data.draw(frame_lists)]
    stream = b"".join(wires)
    chunks = data.draw(chunkings(stream))
    r = Reassembler(FrameFraming(), provenance=data.draw(st.booleans()))
    fed = 0
    for chunk in chunks:
        got = r.feed(chunk)
        lo, fed = fed, fed + len(chunk)
        assert all(lo < e.end <= fed for e in got)
        ends = [sum(map(len, wires[: i + 1])) for i in range(len(wires))]
        assert [e.end for e in got] == [end for end in ends if lo < end <= fed]


@settings(max_examples=100, deadline=None)
@given(
    st.data(),
    st.integers(4, 1 << 20),
    st.integers(3, 1000) | st.integers(-(2**31), -1),
)
def test_a_bad_header_is_refused_by_the_chunk_that_completes_it(data, size, ftype):
    """A connection that cannot resync learns of garbage at once, however it is chunked:
    in the feed that brings the 8th byte of a header with a sane size but a bad type."""
    wires = [f[0] for f in data.draw(st.lists(frame_vectors(), max_size=3))]
    head = b"".join(wires)
    stream = head + be32(size) + be32(ftype) + b"junk"
    chunks = data.draw(chunkings(stream))
    r = Reassembler(FrameFraming(), resync=False)
    fed, refused_in = 0, None
    for chunk in chunks:
        got = r.feed(chunk)
        lo, fed = fed, fed + len(chunk)
        if refused_in is None and any(isinstance(e, Garbage) for e in got):
            refused_in = (lo, fed)
    eighth = len(head) + 7  # stream offset of the header's last byte
    assert refused_in is not None
    assert refused_in[0] <= eighth < refused_in[1]


@settings(max_examples=100, deadline=None)
@given(
    st.data(),
    st.sampled_from([b"PUB t\n", b"DPUB t 5\n", b"MPUB t\n", b"IDENTIFY\n", b"AUTH\n"]),
    st.integers(-(2**31), 0) | st.integers(6 << 20, 2**31 - 1),
)
def test_a_bad_body_size_is_refused_by_the_chunk_that_completes_it(data, line, size):
    verbs = st.sampled_from(VERBS).flatmap(command_vectors)
    head = b"  V2" + b"".join(c[0] for c in data.draw(st.lists(verbs, max_size=3)))
    stream = head + line + be32(size) + b"body"
    chunks = data.draw(chunkings(stream))
    r = Reassembler(CommandFraming(), resync=False)
    fed, refused_in = 0, None
    for chunk in chunks:
        got = r.feed(chunk)
        lo, fed = fed, fed + len(chunk)
        if refused_in is None and any(isinstance(e, Garbage) for e in got):
            refused_in = (lo, fed)
    last = len(head) + len(line) + 3  # stream offset of the size's last byte
    assert refused_in is not None
    assert refused_in[0] <= last < refused_in[1]


# ------------------------------------------------------------------ truncated tail


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_truncated_tail_is_reported_at_finish(data):
    frames = data.draw(frame_lists)
    last = data.draw(frame_vectors())[0]
    keep = data.draw(st.integers(1, len(last) - 1))
    head = b"".join(f[0] for f in frames)
    stream = head + last[:keep]
    chunks = data.draw(chunkings(stream))

    r = Reassembler(FrameFraming())
    events = []
    for seg, c in zip(segment_ids(len(chunks)), chunks, strict=True):
        events += r.feed(c, segment=seg)
    assert all(isinstance(e, RawFrame) for e in events)  # nothing reported before the end
    [tail] = r.finish()
    assert isinstance(tail, Truncated)
    assert (tail.offset, tail.data) == (len(head), last[:keep])
    # once the 8-byte header (size and type) has arrived, the frame's length is known
    assert tail.expected == (len(last) if keep >= 8 else None)
    assert_tiles(tail, chunks)
    assert r.finish() == []


def test_finish_on_a_clean_boundary_reports_nothing():
    r = Reassembler(FrameFraming())
    r.feed(b"\x00\x00\x00\x06\x00\x00\x00\x00OK")
    assert r.finish() == []


# ----------------------------------------------------------- garbage and resync

# Bytes 1..255 never start a plausible frame header: as a size their first byte makes it
# at least 16 MiB (beyond the limit) or negative. So the resync point is exactly the
# next real frame, whatever the garbage is.
frame_garbage = st.binary(min_size=1, max_size=40).map(lambda b: bytes(x or 1 for x in b))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_garbage_between_frames_is_reported_and_framing_resyncs(data):
    before = [f[0] for f in data.draw(st.lists(frame_vectors(), max_size=3))]
    after = [f[0] for f in data.draw(st.lists(frame_vectors(), min_size=1, max_size=3))]
    junk = data.draw(frame_garbage)
    stream = b"".join(before) + junk + b"".join(after)
    chunks = data.draw(chunkings(stream))
    events = run(FrameFraming(), chunks)

    kinds = [type(e).__name__ for e in events]
    assert kinds == ["RawFrame"] * len(before) + ["Garbage"] + ["RawFrame"] * len(after)
    garbage = events[len(before)]
    assert garbage.offset == sum(map(len, before))
    assert garbage.data == junk
    assert garbage.resynced is True
    assert garbage.reason  # says why: size beyond the limit, negative, ...
    assert [e.data for e in events if isinstance(e, RawFrame)] == before + after
    for e in events:
        assert_tiles(e, chunks)
    # and the chunking does not change the story
    assert strip(events) == strip(run(FrameFraming(), [stream]))


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_garbage_between_commands_is_reported_and_framing_resyncs(data):
    verbs = st.sampled_from(VERBS).flatmap(command_vectors)
    before = [c[0] for c in data.draw(st.lists(verbs, max_size=3))]
    after = [c[0] for c in data.draw(st.lists(verbs, min_size=1, max_size=3))]
    # a PUB whose body size nsqd refuses, then junk up to the end of its line
    bad_size = data.draw(st.sampled_from([0, -5, 10**9]))
    filler = data.draw(st.binary(max_size=20).map(lambda b: b.replace(b"\n", b".")))
    junk = b"PUB t\n" + be32(bad_size) + filler + b"\n"
    stream = b"  V2" + b"".join(before) + junk + b"".join(after)
    chunks = data.draw(chunkings(stream))
    events = run(CommandFraming(), chunks)

    kinds = [type(e).__name__ for e in events]
    assert kinds == ["RawFrame"] * (1 + len(before)) + ["Garbage"] + ["RawFrame"] * len(after)
    garbage = events[1 + len(before)]
    assert garbage.offset == 4 + sum(map(len, before))
    assert garbage.data == junk
    assert garbage.resynced is True
    assert str(bad_size) in garbage.reason
    for e in events:
        assert_tiles(e, chunks)
    assert strip(events) == strip(run(CommandFraming(), [stream]))


def test_garbage_at_the_end_is_reported_unresynced_at_finish():
    ok = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
    r = Reassembler(FrameFraming())
    assert [e.data for e in r.feed(ok + b"\x7fjunk", segment=5)] == [ok]
    assert r.feed(b"more junk", segment=6) == []
    [g] = r.finish()
    assert isinstance(g, Garbage)
    assert (g.offset, g.data, g.resynced) == (10, b"\x7fjunkmore junk", False)
    assert g.sources == (Source(5, 10, 15), Source(6, 0, 9))


def test_a_line_too_long_is_garbage_and_framing_resyncs_at_the_next_command():
    long_line = b"X" * 100 + b"\n"
    events = run(
        CommandFraming(max_line=64), [b"  V2NOP\n", long_line[:50], long_line[50:] + b"NOP\n"]
    )
    assert [type(e).__name__ for e in events] == ["RawFrame", "RawFrame", "Garbage", "RawFrame"]
    assert events[2].offset == 8 and events[2].data == long_line
    assert "64" in events[2].reason
    assert events[3].data == b"NOP\n" and events[3].offset == 8 + 101


# ----------------------------------------------------------- hostile size prefix

HTTP_RESPONSE = b"HTTP/1.1 400 Bad Request\r\n\r\n"


def test_http_read_as_a_size_is_refused_without_waiting_for_the_bytes():
    # "HTTP" as a big-endian int32 is 1,213,486,160
    assert int.from_bytes(b"HTTP", "big") == 1213486160
    with pytest.raises(FramingError) as exc:
        FrameFraming().measure(b"HTTP", 0)  # four bytes are enough to refuse
    assert "1213486160" in exc.value.reason
    # a reassembler that may not resync says so at once
    r = Reassembler(FrameFraming(), resync=False)
    [g] = r.feed(HTTP_RESPONSE)
    assert isinstance(g, Garbage) and not g.resynced
    assert (g.offset, g.data) == (0, HTTP_RESPONSE)
    assert "1213486160" in g.reason
    [g2] = r.feed(b"<html>")  # everything after is garbage too, never a frame
    assert (g2.offset, g2.data, g2.resynced) == (len(HTTP_RESPONSE), b"<html>", False)
    assert r.finish() == []


def test_http_read_as_a_size_while_resyncing_is_garbage_never_a_truncated_frame():
    r = Reassembler(FrameFraming())
    assert r.feed(HTTP_RESPONSE) == []  # looking for a frame header to resync to
    [g] = r.finish()
    # reported as garbage, never as a frame truncated at 28 of 1.2 GB
    assert isinstance(g, Garbage) and not g.resynced
    assert (g.offset, g.data) == (0, HTTP_RESPONSE)
    assert "1213486160" in g.reason


@pytest.mark.parametrize("cut", range(1, 8))
def test_unknown_frame_type_is_refused_once_the_header_is_in_however_chunked(cut):
    # a plausible size (1 MiB) with a frame type nsqd never sends: refused when the
    # 8-byte header is complete, not after a megabyte has been waited for
    header = b"\x00\x10\x00\x00\x00\x00\x00\x07"
    r = Reassembler(FrameFraming(), resync=False)
    assert r.feed(header[:cut]) == []
    [g] = r.feed(header[cut:] + b"junk")
    assert isinstance(g, Garbage) and "unknown frame type 7" in g.reason
    assert (g.offset, g.data) == (0, header + b"junk")


def test_dead_stream_reports_no_empty_garbage():
    r = Reassembler(FrameFraming(), resync=False)
    assert len(r.feed(b"HTTP")) == 1
    assert r.feed(b"") == []


def test_http_request_to_the_command_side_is_refused_at_once():
    with pytest.raises(FramingError, match="magic"):
        CommandFraming().measure(b"G", 0)  # the first byte already differs from "  V2"
    r = Reassembler(CommandFraming())
    [g] = r.feed(b"GET / HTTP/1.1\r\n")  # no resync is possible before the magic
    assert isinstance(g, Garbage) and not g.resynced
    assert (g.offset, g.data) == (0, b"GET / HTTP/1.1\r\n")
    assert g.code == "E_BAD_PROTOCOL"  # what nsqd answers before closing
    [g2] = r.feed(b"Host: x\r\n\r\n")
    assert (g2.offset, g2.data, g2.resynced) == (16, b"Host: x\r\n\r\n", False)
    assert r.finish() == []


# ---------------------------------------------------------- protocol independence


class NetstringRule:
    """A toy framing rule (``<len>:<bytes>,``) to show the reassembler knows no NSQ."""

    name = "netstring"

    def measure(self, buf: bytes, pos: int) -> int | None:
        colon = buf.find(b":", pos)
        if colon < 0:
            return None
        return colon - pos + 1 + int(buf[pos:colon]) + 1

    def resync(self, buf: bytes, pos: int) -> int | None:
        return -1  # never used: the test feeds no garbage


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_the_reassembler_takes_any_framing_rule(data):
    items = data.draw(st.lists(st.binary(max_size=30), min_size=1, max_size=6))
    wires = [str(len(i)).encode() + b":" + i + b"," for i in items]
    stream = b"".join(wires)
    chunks = data.draw(chunkings(stream))
    events = run(NetstringRule(), chunks)
    assert [e.data for e in events] == wires
    for e in events:
        assert_tiles(e, chunks)


# ---------------------------------------------------------- large frames, many chunks


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_large_frame_over_many_small_chunks(data):
    """Chunks of a frame still short of its end may wait unjoined; nothing may change:
    frames, offsets, provenance, and what ``buffered`` shows whenever it is asked."""
    big = b"\x00\x00\x13\x8c\x00\x00\x00\x00" + bytes(i % 251 for i in range(5000))  # 5004
    small = [f[0] for f in data.draw(st.lists(frame_vectors(), max_size=3))]
    wires = [*small, big, *small]
    stream = b"".join(wires)
    size = data.draw(st.integers(1, 1500))
    chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
    ask = random.Random(data.draw(st.integers(0, 2**32)))  # when to look at `buffered`
    r = Reassembler(FrameFraming())
    events, fed = [], 0
    for seg, chunk in zip(segment_ids(len(chunks)), chunks, strict=True):
        events += r.feed(chunk, segment=seg)
        fed += len(chunk)
        if ask.random() < 0.1:
            assert r.buffered == stream[r.offset : fed]
    assert r.finish() == []
    assert [e.data for e in events] == wires
    for e in events:
        assert_tiles(e, chunks)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_take_remaining_hands_back_exactly_the_unframed_bytes(data):
    big = b"\x00\x00\x07\xd4\x00\x00\x00\x00" + b"x" * 2000  # 2008 bytes
    ok = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
    stream = ok + big + ok
    stop = data.draw(st.integers(0, len(stream)))
    size = data.draw(st.integers(1, 700))
    r = Reassembler(FrameFraming())
    emitted = []
    for i in range(0, stop, size):
        emitted += r.feed(stream[i : min(i + size, stop)])
    rest = r.take_remaining()
    assert b"".join(e.data for e in emitted) + rest == stream[:stop]
    assert r.offset == stop and r.buffered == b""
    assert r.finish() == []
