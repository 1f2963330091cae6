"""Linear time on any input: resynchronisation remembers how far it has searched.

Issue 14: a capture starting mid-connection with TLS on port 4150 took 4.1 s for
0.28 MB and 40.6 s for 1.1 MB, because every chunk made the framing rule search the
whole stalled stretch again. The work is counted here (bytes a rule's ``resync``
examines, plus one per ``measure`` call) for adversarial streams of n and 8n bytes:
linear work grows 8-fold, the old search ~64-fold. One end-to-end check compares CPU
time of the passive decoder (the path of ``nsqviz decode``) on 1x and 8x input in the
same process, with a generous bound.
"""

from __future__ import annotations

import random
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.nsq.framing import CommandFraming, FrameFraming
from nsqviz.nsq.observer import Observer
from nsqviz.stream.reassembly import STALL_LIMIT, Garbage, RawFrame, Reassembler, Truncated
from nsqviz.tubemq.framing import TubeFraming


class Counting:
    """A framing rule that counts the work asked of it."""

    def __init__(self, rule):
        self.rule = rule
        self.name = rule.name
        self.resync_lookahead = rule.resync_lookahead
        self.work = 0

    def measure(self, buf, pos):
        self.work += 1
        return self.rule.measure(buf, pos)

    def resync(self, buf, pos):
        found = self.rule.resync(buf, pos)
        stop = found if found is not None and found >= 0 else len(buf)
        self.work += max(1, stop - pos)
        return found


def _rules():
    return {"frames": lambda: FrameFraming(),
            "commands": lambda: CommandFraming(expect_magic=False),
            "tubemq": lambda: TubeFraming()}


def _work(kind: str, stream: bytes, chunk: int) -> tuple[int, int]:
    rule = Counting(_rules()[kind]())
    r = Reassembler(rule, provenance=False)
    total = 0
    for i in range(0, len(stream), chunk):
        for ev in r.feed(stream[i : i + chunk]):
            total += len(ev.data)
    for ev in r.finish():
        total += len(ev.data)
    return rule.work, total


patterns = st.one_of(
    st.binary(min_size=1, max_size=24),  # anything, repeated
    st.just(b"\xff"),  # never a plausible frame header, never a newline
    st.just(b"x"),  # a command line that never ends
    st.just(b"\x00\x00\x00\x04\x00\x00\x00\x07"),  # a sane size, an unknown frame type
    st.just(b"\n\x01"),  # newlines never followed by a verb
    st.just(b"\xff\x7f\xf4"),  # TubeMQ's MsgToken, one byte short, over and over
    st.just(b"\xff\x7f\xf4\xfe\x00\x00\x00\x01\x7f\xff\xff\xff"),  # tokens, bad listSize
)


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(sorted(_rules())), pattern=patterns,
       chunk=st.integers(8, 1460), seed=st.integers(0, 2**32 - 1))
def test_framing_work_grows_linearly_with_the_stream(kind, pattern, chunk, seed):
    rng = random.Random(seed)
    n = 24_000  # both sizes past the 16 KiB command line limit
    small = (pattern * (n // len(pattern) + 1))[:n]
    noise = bytes(rng.randrange(256) for _ in range(64))
    small = noise + small
    large = noise + (pattern * (8 * n // len(pattern) + 1))[: 8 * n]
    w1, got1 = _work(kind, small, chunk)
    w8, got8 = _work(kind, large, chunk)
    assert (got1, got8) == (len(small), len(large))  # every byte reported once
    assert w8 <= 8 * w1 * 1.5 + 20_000, (w1, w8)


def test_garbage_that_never_frames_is_handed_on_in_bounded_pieces():
    r = Reassembler(FrameFraming(), provenance=False)
    out = []
    for _ in range(3 * STALL_LIMIT // 4096 + 1):
        out += r.feed(b"\xff" * 4096)
        assert len(r.buffered) <= STALL_LIMIT + 4096 + 8
    out += r.finish()
    assert all(isinstance(ev, Garbage) and not ev.resynced for ev in out)
    assert len(out) >= 2
    assert sum(len(ev.data) for ev in out) == (3 * STALL_LIMIT // 4096 + 1) * 4096
    assert [ev.offset for ev in out] == sorted(ev.offset for ev in out)


def test_resync_found_after_a_long_stall_gives_exact_frames():
    """The remembered search point must not skip a start that straddles two chunks."""
    frame = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
    for split in range(1, len(frame)):
        r = Reassembler(FrameFraming(), provenance=False)
        events = r.feed(b"\xff" * 5000 + frame[:split])
        events += r.feed(frame[split:] + frame)
        frames = [ev for ev in events if isinstance(ev, RawFrame)]
        assert [f.data for f in frames] == [frame, frame], split
        (garbage,) = [ev for ev in events if isinstance(ev, Garbage)]
        assert garbage.data == b"\xff" * 5000 and garbage.resynced
        assert not [ev for ev in r.finish() if isinstance(ev, Truncated)]
    line = b"\nNOP\n"
    for split in range(1, len(line)):
        r = Reassembler(CommandFraming(expect_magic=False), provenance=False)
        events = r.feed(b"x" * 20_000 + line[:split])
        events += r.feed(line[split:] + b"NOP\n")
        assert [ev.data for ev in events if isinstance(ev, RawFrame)] == [b"NOP\n", b"NOP\n"]


def _decode_cpu(stream: bytes) -> float:
    best = float("inf")
    for _ in range(3):
        obs = Observer(midstream=True)
        t0 = time.process_time()
        for i in range(0, len(stream), 1448):
            obs.s2c(stream[i : i + 1448])
            obs.c2s(stream[i : i + 1448])
        best = min(best, time.process_time() - t0)
    return best


def test_passive_decoding_of_tls_like_bytes_is_linear():
    """What ``nsqviz decode`` does with a TLS connection on port 4150 seen mid-stream."""
    rng = random.Random(14)
    large = rng.randbytes(8 * 160_000)
    small = large[:160_000]
    t1, t8 = _decode_cpu(small), _decode_cpu(large)
    assert t8 <= 24 * max(t1, 0.002), (t1, t8)  # linear ~8x; the old search was ~64x
