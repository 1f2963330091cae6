"""Property: however TCP cut, reordered and repeated a known NSQ stream, it decodes the same."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.synth import NsqTalk, pubsub_session
from nsqviz.capture.writer import PcapWriter, TcpConversation


def _truth(compression):
    talk = NsqTalk(None)
    pubsub_session(talk, messages=12, body_sizes=(1, 90, 700), batch=4, compression=compression)
    return talk.written


TRUTHS = {c: _truth(c) for c in (None, "snappy", "deflate")}


@st.composite
def damaged_wires(draw):
    """For each write: cut points, a local shuffle, and some duplicated or re-cut pieces."""
    compression = draw(st.sampled_from(sorted(TRUTHS, key=str)))
    truth = TRUTHS[compression]
    plan = []
    for direction, start, data in truth.writes:
        n = len(data)
        cuts = sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=min(6, n - 1))))
        bounds = [0, *cuts, n]
        pieces = [(start + a, data[a:b]) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
        order = draw(st.permutations(range(len(pieces))))
        segs = [pieces[i] for i in order]
        for _ in range(draw(st.integers(0, 2))):
            off, chunk = draw(st.sampled_from(pieces))
            lo = draw(st.integers(0, len(chunk) - 1))  # a retransmission of a tail
            segs.insert(draw(st.integers(0, len(segs))), (off + lo, chunk[lo:]))
        plan.append((direction, segs))
    seq_base = draw(st.integers(0, 2**32 - 1))
    return compression, plan, seq_base


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_wires())
def test_resegmented_reordered_duplicated_stream_decodes_to_the_same_frames(case):
    compression, plan, seq_base = case
    truth = TRUTHS[compression]
    f = io.BytesIO()
    w = PcapWriter(f)
    conv = TcpConversation(w, ("10.1.1.1", 33000), ("10.1.1.2", 4150),
                           isn=(seq_base, (seq_base * 7) & 0xFFFFFFFF))
    conv.open(1.0)
    ts = 1.0
    for direction, segs in plan:
        for off, chunk in segs:
            ts += 0.0001
            conv.segment(direction, off, chunk, ts)
    decoder = CaptureDecoder()
    records = list(decoder.decode([io.BytesIO(f.getvalue())]))
    assert [r.event for r in records if r.kind == "command"] == truth.commands
    assert [r.event for r in records if r.kind == "frame"] == truth.frames
    assert not [r for r in records if r.kind in ("error", "gap")]
