"""TubeMQ's framing rule: any chunking gives the same frames and provenance; errors are
the grammar's, each refused as soon as its bytes are in; resync on the next MsgToken."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.stream import Garbage, RawFrame, Reassembler, Truncated
from nsqviz.tubemq.framing import TubeFraming
from nsqviz.tubemq.grammar import BEGIN_TOKEN, CPP_READER, frame_bytes
from tests.tubemq._vectors import be32

SIZES = st.one_of(st.integers(0, 40), st.sampled_from([8191, 8192, 8193, 16384, 20000]))


def feed_all(chunks: list[bytes], rule=None) -> list:
    r = Reassembler(rule or TubeFraming())
    events = []
    for i, chunk in enumerate(chunks):
        events += r.feed(chunk, segment=10 + i)
    return events + r.finish()


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def tiles(frame: RawFrame, chunks: list[bytes]) -> bool:
    """The frame's sources are exactly its bytes, chunk by chunk, in order."""
    got = b"".join(chunks[s.segment - 10][s.start : s.end] for s in frame.sources)
    return got == frame.data


@settings(max_examples=80, deadline=None)
@given(st.lists(SIZES, min_size=1, max_size=5), st.data())
def test_any_chunking_gives_the_same_frames_and_provenance(sizes, data):
    frames = [frame_bytes(i + 1, bytes([i]) * n) for i, n in enumerate(sizes)]
    stream = b"".join(frames)
    mode = data.draw(st.sampled_from(["glued", "random", "small"]))
    if mode == "glued":
        chunks = [stream]
    elif mode == "small":
        step = data.draw(st.integers(1, 3000))
        chunks = [stream[i : i + step] for i in range(0, len(stream), step)]
    else:
        chunks = cut(stream, data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    events = feed_all(chunks)
    assert [type(e) for e in events] == [RawFrame] * len(frames)
    assert [e.data for e in events] == frames
    offsets = [sum(len(f) for f in frames[:i]) for i in range(len(frames))]
    assert [e.offset for e in events] == offsets
    assert all(tiles(e, chunks) for e in events)


def test_each_frame_comes_out_of_the_chunk_that_completes_it():
    frame = frame_bytes(1, bytes(20000))
    r = Reassembler(TubeFraming())
    for i in range(0, len(frame) - 1, 1000):
        assert r.feed(frame[i : min(i + 1000, len(frame) - 1)]) == []
    [out] = r.feed(frame[-1:] + frame[:5])
    assert out.data == frame
    assert r.buffered == frame[:5]


def test_bad_token_is_refused_at_its_first_wrong_byte():
    r = Reassembler(TubeFraming(), resync=False)
    assert r.feed(b"\xff\x7f") == []
    [garbage] = r.feed(b"\x00")
    assert type(garbage) is Garbage and garbage.code == "BadToken"
    assert "MsgToken" in garbage.reason and not garbage.resynced


def test_block_length_refused_before_its_data_arrives():
    r = Reassembler(TubeFraming(CPP_READER), resync=False)
    head = BEGIN_TOKEN + be32(1) + be32(2) + be32(3) + b"abc"
    assert r.feed(head) == []
    [garbage] = r.feed(be32(9000))
    assert garbage.code == "BadBlockLength"
    assert "block[1].length at frame offset 19" in garbage.reason


def test_resync_on_the_next_token_is_reported():
    good = frame_bytes(5, b"hello")
    stream = b"noise" + good + BEGIN_TOKEN + be32(1) + be32(99999) + good
    events = feed_all([stream[i : i + 7] for i in range(0, len(stream), 7)])
    kinds = [(type(e).__name__, getattr(e, "code", "")) for e in events]
    assert kinds == [("Garbage", "BadToken"), ("RawFrame", ""), ("Garbage", "BadListSize"),
                     ("RawFrame", "")]
    assert all(e.resynced for e in events if type(e) is Garbage)
    assert [e.offset for e in events] == [0, 5, 5 + len(good), 17 + len(good)]


def test_truncated_frame_at_the_end_is_reported():
    frame = frame_bytes(5, bytes(10000))
    [t] = feed_all([frame[:9000]])
    assert type(t) is Truncated and t.data == frame[:9000]


def test_a_huge_frame_in_small_chunks_is_joined_once():
    """Linear time: the reassembler keeps the chunks unjoined while the rule walks."""
    frame = frame_bytes(1, bytes(1000 * 8192))
    r = Reassembler(TubeFraming(), provenance=False)
    joins = 0
    original = r._join

    def counting_join():
        nonlocal joins
        joins += bool(r._parts)
        original()

    r._join = counting_join
    out = []
    for i in range(0, len(frame), 1448):
        out += r.feed(frame[i : i + 1448])
    assert [len(f.data) for f in out] == [len(frame)]
    assert joins <= 2
