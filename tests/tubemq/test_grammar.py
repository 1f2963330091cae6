"""The TubeMQ frame grammar: golden frames, round trips for any content size and any
block cuts, named errors, and the fast splitter agreeing with the grammar."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.tubemq.framing import join_content, join_frame, split_content, split_frame
from nsqviz.tubemq.grammar import (
    CPP_READER,
    DEFAULT_LIMITS,
    JAVA_READER,
    RPC_MAX_BUFFER_SIZE,
    BadBlockLength,
    BadContent,
    BadListSize,
    BadToken,
    Content,
    FrameParts,
    GrammarError,
    Incomplete,
    TrailingBytes,
    build_content,
    build_frame,
    cut_blocks,
    frame_bytes,
    parse_content,
    parse_frame,
)
from tests.tubemq._vectors import CLOSE_REQUEST_HEX, CLOSE_RESPONSE_HEX, be32

# ------------------------------------------------------------------------ golden


@pytest.mark.parametrize("hexdata", [CLOSE_REQUEST_HEX, CLOSE_RESPONSE_HEX])
def test_golden_frames_parse_and_build_back(hexdata):
    data = bytes.fromhex(hexdata)
    parts = parse_frame(data)
    assert parts.serialNo == 42
    assert len(parts.blocks) == 1
    assert build_frame(parts) == data
    content = parse_content(parts.content)
    assert build_content(content) == parts.content


def test_golden_request_content_is_the_three_messages():
    content = parse_content(parse_frame(bytes.fromhex(CLOSE_REQUEST_HEX)).content)
    assert content == Content(bytes.fromhex("0800"), bytes.fromhex("08011003"),
                              bytes.fromhex("080310904e1a040a027031"))


def test_block_size_is_8192_not_8196():
    assert RPC_MAX_BUFFER_SIZE == 8192
    blocks = cut_blocks(bytes(8192 * 2 + 5))
    assert [len(b) for b in blocks] == [8192, 8192, 5]
    assert cut_blocks(bytes(8192)) == (bytes(8192),)  # no empty trailing block
    assert cut_blocks(b"") == ()  # as Go sends it: listSize 0


def test_reader_limits_are_the_real_readers():
    assert JAVA_READER.max_list_size == 3584
    assert CPP_READER.max_list_size == 1024
    assert (CPP_READER.min_block_length, CPP_READER.max_block_length) == (1, 8192)
    assert DEFAULT_LIMITS.max_list_size == 3584


# ---------------------------------------------------------------- round trips


@st.composite
def contents(draw) -> bytes:
    """Three delimited messages; sizes around the varint steps (127/128, 16383/16384)
    and the block size, so cuts fall inside varints and inside messages."""
    sizes = st.one_of(st.integers(0, 300), st.sampled_from([127, 128, 8190, 8192, 16383,
                                                             16384, 20000]))
    parts = [bytes([i]) * draw(sizes) for i in range(3)]
    return build_content(Content(*parts))


@st.composite
def cuttings(draw, content: bytes) -> tuple[bytes, ...]:
    """The senders' 8192-byte cut, or cuts anywhere (empty blocks included), each piece
    then cut again into blocks of at most 8192 bytes."""
    if draw(st.booleans()):
        return cut_blocks(content)
    bounds = [0, *sorted(draw(st.lists(st.integers(0, len(content)), max_size=8))),
              len(content)]
    blocks: list[bytes] = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        blocks += cut_blocks(content[a:b]) or [b""]
    return tuple(blocks)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_frame_round_trips(data):
    content = data.draw(contents())
    serial = data.draw(st.integers(0, 2**32 - 1))
    blocks = data.draw(cuttings(content))
    frame = build_frame(FrameParts(serial, blocks))
    parts = parse_frame(frame)
    assert parts == FrameParts(serial, blocks)
    assert build_frame(parts) == frame
    assert parts.content == content
    assert build_content(parse_content(content)) == content
    assert split_frame(frame) == (serial, content, [o for o, _ in parts.block_offsets()])


def test_block_boundary_inside_a_varint():
    body = bytes(20000)  # its length varint is 3 bytes: a 8192 cut can split it
    content = build_content(Content(b"\x08\x00", b"\x08\x01", body))
    # Cut right after the first byte of the body's length varint.
    cut = 2 + 1 + 2 + 1 + 1
    frame = build_frame(FrameParts(7, (content[:cut], *cut_blocks(content[cut:]))))
    parts = parse_frame(frame)
    assert parse_content(parts.content).body == body
    assert build_frame(parts) == frame


# --------------------------------------------------------------------- errors


def _frame(listsize: int, *blocks: bytes, token: bytes = b"\xff\x7f\xf4\xfe") -> bytes:
    return token + be32(9) + be32(listsize) + b"".join(be32(len(b)) + b for b in blocks)


@pytest.mark.parametrize(
    ("data", "cls", "offset", "field"),
    [
        (_frame(1, b"ab", token=b"\xff\x7f\xf4\xff"), BadToken, 0, "MsgToken"),
        (_frame(-1), BadListSize, 8, "listSize"),
        (_frame(3585), BadListSize, 8, "listSize"),
        (_frame(2, b"ab") + be32(8193) + b"x", BadBlockLength, 18, "block[1].length"),
        (_frame(1) + be32(-5), BadBlockLength, 12, "block[0].length"),
        (_frame(2, b"ab"), Incomplete, 18, ""),
        (_frame(1, b"ab")[:-1], Incomplete, 17, ""),
        (_frame(1, b"ab") + b"z", TrailingBytes, 18, ""),
        (b"\xff\x7f", Incomplete, 2, ""),
    ],
)
def test_frame_errors_name_offset_and_field(data, cls, offset, field):
    with pytest.raises(cls) as info:
        parse_frame(data)
    assert (info.value.offset, info.value.field) == (offset, field)
    assert str(offset) in str(info.value)
    # The fast splitter refuses alike: same class, offset and field.
    with pytest.raises(cls) as fast:
        split_frame(data)
    assert (fast.value.offset, fast.value.field) == (offset, field)


def test_cpp_limits_refuse_empty_blocks_and_long_lists():
    with pytest.raises(BadBlockLength):
        parse_frame(_frame(1, b""), CPP_READER)
    with pytest.raises(BadListSize):
        parse_frame(_frame(1025), CPP_READER)
    assert parse_frame(_frame(1, b""), JAVA_READER).blocks == (b"",)


@pytest.mark.parametrize(
    ("content", "cls", "offset", "field"),
    [
        (b"\x80\x00", BadContent, 0, "connHeader.length"),  # not minimal
        (b"\x02\x08\x00\xff\xff\xff\xff\x0f", BadContent, 3, "header.length"),  # > int32
        (b"\x02\x08", Incomplete, 2, ""),
        (b"\x02\x08\x00\x00\x00\x01", TrailingBytes, 5, ""),
    ],
)
def test_content_errors(content, cls, offset, field):
    with pytest.raises(cls) as info:
        parse_content(content)
    assert (info.value.offset, info.value.field) == (offset, field)


# ------------------------------------------------------- fast path == grammar


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_split_frame_agrees_with_the_grammar_on_any_bytes(data):
    """Same accept/reject, same error class, offset and field, on valid frames with
    random bytes changed, cut short or extended."""
    content = data.draw(st.binary(max_size=300))
    frame = bytearray(frame_bytes(data.draw(st.integers(0, 2**32 - 1)), content))
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    frame = bytes(frame)
    frame = data.draw(st.sampled_from([frame, frame[: data.draw(st.integers(0, len(frame)))],
                                       frame + data.draw(st.binary(max_size=5))]))
    limits = data.draw(st.sampled_from([DEFAULT_LIMITS, JAVA_READER, CPP_READER]))
    try:
        parts = parse_frame(frame, limits)
    except GrammarError as exc:
        with pytest.raises(type(exc)) as fast:
            split_frame(frame, limits)
        assert (fast.value.offset, fast.value.field) == (exc.offset, exc.field)
    else:
        serial, got, _ = split_frame(frame, limits)
        assert (serial, got) == (parts.serialNo, parts.content)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=40), contents().map(lambda c: c[:60])), st.data())
def test_split_content_agrees_with_the_grammar_on_any_bytes(content, data):
    if content and data.draw(st.booleans()):
        content = bytearray(content)
        content[data.draw(st.integers(0, len(content) - 1))] = data.draw(st.integers(0, 255))
        content = bytes(content)
    try:
        want = parse_content(content)
    except GrammarError as exc:
        with pytest.raises(type(exc)) as fast:
            split_content(content)
        assert (fast.value.offset, fast.value.field) == (exc.offset, exc.field)
    else:
        assert split_content(content) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=300),
                          st.sampled_from([127, 128, 8191, 16384, 20000]).map(bytes)),
                min_size=3, max_size=3),
       st.integers(0, 2**32 - 1))
def test_join_builds_what_the_grammar_builds(parts, serial):
    """The send path's fast build gives the grammar's bytes: the three delimited
    messages (varint lengths across their 1/2/3-byte steps) and the frame cut into
    8192-byte blocks, for content from empty to several blocks."""
    content = build_content(Content(*parts))
    assert join_content(Content(*parts)) == content
    assert join_frame(serial, content) == frame_bytes(serial, content)
