"""NSQ's framing rules on their own: where a frame or command ends, and what is refused."""

from __future__ import annotations

import pytest

from nsqviz.nsq.framing import DEFAULT_MAX_FRAME_SIZE, CommandFraming, FrameFraming
from nsqviz.stream import FramingError
from tests.nsq._vectors import GOLDEN_COMMANDS, GOLDEN_FRAMES, be32

OK = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"


# ------------------------------------------------------------------ server frames


@pytest.mark.parametrize("wire", [v[1] for v in GOLDEN_FRAMES], ids=[v[0] for v in GOLDEN_FRAMES])
def test_frame_length_is_4_plus_size(wire):
    rule = FrameFraming()
    assert rule.measure(wire, 0) == len(wire)
    # known as soon as the 8-byte header (size and frame type) is in, without the data;
    # a size alone is not enough: the type could still make it garbage
    assert rule.measure(wire[:8], 0) == len(wire)
    assert rule.measure(wire[:7], 0) is None
    assert rule.measure(b"junk" + wire, 4) == len(wire)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 6, 7])
def test_frame_needs_its_8_byte_header_to_give_a_length(n):
    assert FrameFraming().measure(OK[:n], 0) is None


@pytest.mark.parametrize(
    "head, words",
    [
        (be32(3), ["3", "smaller"]),
        (be32(0), ["0"]),
        (be32(-1), ["-1"]),
        (be32(DEFAULT_MAX_FRAME_SIZE + 1), [str(DEFAULT_MAX_FRAME_SIZE + 1), "limit"]),
        (b"HTTP", ["1213486160", "limit"]),
        (be32(6) + be32(3), ["frame type", "3"]),
        (be32(6) + be32(-1), ["frame type", "-1"]),
    ],
)
def test_frame_header_refused_with_reason(head, words):
    with pytest.raises(FramingError) as exc:
        FrameFraming().measure(head, 0)
    for w in words:
        assert w in exc.value.reason


def test_frame_limit_is_configurable():
    rule = FrameFraming(max_size=100)
    assert rule.measure(be32(100) + be32(0), 0) == 104
    with pytest.raises(FramingError, match="101"):
        rule.measure(be32(101), 0)


def test_frame_resync_finds_the_next_plausible_header():
    rule = FrameFraming()
    buf = b"\xffgarbage" + OK + OK
    assert rule.resync(buf, 1) == 8
    assert rule.resync(buf, 9) == 18
    assert rule.resync(buf, 19) is None  # fewer than 8 bytes after 19 that could be a header
    assert rule.resync(b"\xff" * 50, 1) is None


# ---------------------------------------------------------------- client commands


def test_magic_comes_first_and_only_once():
    rule = CommandFraming()
    assert rule.measure(b"  V2NOP\n", 0) == 4
    assert rule.measure(b"  V2NOP\n", 4) == 4  # now a command, not the magic
    assert rule.expect_magic is False


@pytest.mark.parametrize("partial", [b"", b" ", b"  ", b"  V"])
def test_partial_magic_waits(partial):
    assert CommandFraming().measure(partial, 0) is None


@pytest.mark.parametrize("wrong", [b"G", b" V", b"  V1", b"V2  ", b"NOP\n"])
def test_wrong_magic_is_refused_as_soon_as_it_differs(wrong):
    with pytest.raises(FramingError, match="magic"):
        CommandFraming().measure(wrong, 0)


@pytest.mark.parametrize(
    "wire", [v[1] for v in GOLDEN_COMMANDS], ids=[v[0] for v in GOLDEN_COMMANDS]
)
def test_command_length(wire):
    rule = CommandFraming(expect_magic=False)
    assert rule.measure(wire, 0) == len(wire)
    assert rule.measure(b"NOP\n" + wire, 4) == len(wire)
    nl = wire.index(b"\n")
    # a line alone is not enough for a command with a body: the size must be in
    if wire[:nl].split(b" ")[0] in (b"IDENTIFY", b"AUTH", b"PUB", b"MPUB", b"DPUB"):
        assert rule.measure(wire[: nl + 1], 0) is None
        assert rule.measure(wire[: nl + 4], 0) is None
        assert rule.measure(wire[: nl + 5], 0) == len(wire)
    else:
        assert rule.measure(wire[:nl], 0) is None


def test_carriage_return_before_newline_is_tolerated_like_nsqd():
    # nsqd trims a trailing \r from a command line
    rule = CommandFraming(expect_magic=False)
    assert rule.measure(b"NOP\r\n", 0) == 5
    assert rule.measure(b"IDENTIFY\r\n\x00\x00\x00\x02{}", 0) == 16


@pytest.mark.parametrize(
    "wire, size",
    [
        (b"PUB t\n" + be32(0), "0"),
        (b"PUB t\n" + be32(-1), "-1"),
        (b"DPUB t 5\n" + be32(-7), "-7"),
        (b"IDENTIFY\n" + be32(0), "0"),
        (b"AUTH\n" + be32(-2), "-2"),
        (b"MPUB t\n" + be32(10**9), str(10**9)),
        (b"IDENTIFY\n" + b"HTTP", "1213486160"),
    ],
)
def test_body_size_refused_before_the_body_arrives(wire, size):
    with pytest.raises(FramingError) as exc:
        CommandFraming(expect_magic=False).measure(wire, 0)
    assert size in exc.value.reason


def test_body_limit_is_configurable():
    rule = CommandFraming(expect_magic=False, max_body_size=10)
    assert rule.measure(b"MPUB t\n" + be32(10), 0) == 7 + 4 + 10
    with pytest.raises(FramingError, match="11"):
        rule.measure(b"MPUB t\n" + be32(11), 0)


def test_line_limit():
    rule = CommandFraming(expect_magic=False, max_line=8)
    assert rule.measure(b"RDY 1234\n", 0) == 9  # 8 bytes and the newline
    assert rule.measure(b"RDY 1234", 0) is None
    with pytest.raises(FramingError, match="8"):
        rule.measure(b"RDY 12345", 0)
    with pytest.raises(FramingError, match="8"):
        rule.measure(b"RDY 12345\n", 0)


def test_command_resync_goes_to_the_next_line_that_starts_like_a_verb():
    rule = CommandFraming(expect_magic=False)
    buf = b"PUB t\n\xff\xff\xff\xffzz\nxx\nNOP\n"
    assert rule.resync(buf, 1) == buf.index(b"NOP")
    assert rule.resync(b"junk\n", 1) is None  # nothing after the newline yet
    assert CommandFraming().resync(b"xx\nNOP\n", 1) == -1  # never before the magic


@pytest.mark.parametrize("line", [b"PUB\n", b"MPUB\n", b"DPUB t\n", b"DPUB\n"])
def test_body_command_missing_parameters_is_cut_at_its_line(line):
    # nsqd checks the parameters before reading a body: it answers at once, so the
    # framing must not wait for a body that will never be read
    assert CommandFraming(expect_magic=False).measure(line + b"rest", 0) == len(line)
