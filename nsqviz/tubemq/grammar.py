"""The TubeMQ RPC frame as a declarative ``construct`` grammar.

This module is the reference definition of TubeMQ's framing bytes (Apache InLong's
``NettyProtocolEncoder``/``NettyProtocolDecoder``); :mod:`nsqviz.tubemq.framing`'s
splitter is a second one for hot loops, tested against it::

    MsgToken  FF 7F F4 FE          4 bytes, RPC_PROTOCOL_BEGIN_TOKEN
    serialNo                       4 bytes, chosen by the requester, echoed by the answer
    listSize                       4 bytes, the number of blocks
    listSize x [length][data]      4-byte length, then that many bytes

All integers are big-endian. There is no total length: a reader walks the blocks to
find where a frame ends. The blocks joined are the *content*: three protobuf messages,
each preceded by its length as a base-128 varint (protobuf's ``writeDelimitedTo``) --
``RpcConnHeader``, then ``RequestHeader``/``ResponseHeader``, then ``RequestBody``,
``RspResponseBody`` or ``RspExceptionBody``. Senders cut the content into blocks of
exactly ``RPC_MAX_BUFFER_SIZE`` (8192) bytes plus a shorter last one, ignoring message
boundaries: a cut may fall inside a message or inside a varint.

``parse_frame``/``build_frame`` and ``parse_content``/``build_content`` are exact
inverses on valid input (``build(parse(x)) == x``, whatever the block cuts), and every
refusal is a :class:`GrammarError` naming the offset, the field in the protocol's words
and the reason. The limits are the readers' (:class:`Limits`). What the protobuf
messages hold is :mod:`nsqviz.tubemq.messages`' business.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from construct import (
    Array,
    Bytes,
    Construct,
    ConstructError,
    GreedyBytes,
    Int32sb,
    Int32ub,
    Prefixed,
    Rebuild,
    Struct,
    Subconstruct,
    VarInt,
    len_,
    this,
)
from construct.core import StreamError, stream_read, stream_tell, stream_write

from nsqviz import sansio
from nsqviz.tubemq.tables import BEGIN_TOKEN, HEADER_SIZE, ViolationCode

if TYPE_CHECKING:
    from construct import Subconstruct
    from construct.core import Context, PathType, StreamType

    ConstructBase: TypeAlias = Construct[Any, Any]
    SubconstructBase: TypeAlias = Subconstruct[Any, Any, Any, Any]
else:
    ConstructBase, SubconstructBase = Construct, Subconstruct

Grammar: TypeAlias = "Construct[Any, Any]"

__all__ = [
    "CPP_READER",
    "DEFAULT_LIMITS",
    "JAVA_READER",
    "RPC_MAX_BUFFER_SIZE",
    "BadBlockLength",
    "BadContent",
    "BadListSize",
    "BadToken",
    "Content",
    "ContentStruct",
    "FrameParts",
    "FrameStruct",
    "GrammarError",
    "Incomplete",
    "Limits",
    "TrailingBytes",
    "build_content",
    "build_frame",
    "cut_blocks",
    "frame_bytes",
    "parse_content",
    "parse_context",
    "parse_frame",
]

RPC_MAX_BUFFER_SIZE = 8192
"""The block size senders cut the content into (Java, Go and C++ agree; not 8196)."""

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Limits:
    """What a reader refuses. ``max_list_size`` bounds listSize (a negative one is always
    refused); a block length outside ``[min_block_length, max_block_length]`` is refused."""

    max_list_size: int
    min_block_length: int
    max_block_length: int
    name: str = ""


JAVA_READER = Limits((20 + 8) * 1024 * 1024 // RPC_MAX_BUFFER_SIZE, 0, _INT32_MAX, "Java")
"""The Java decoder: listSize at most MAX_FRAME_MAX_LIST_SIZE = 3584, any block length."""

CPP_READER = Limits(8 * 1024 * 1024 // RPC_MAX_BUFFER_SIZE, 1, RPC_MAX_BUFFER_SIZE, "C++")
"""The C++ client: listSize at most 1024, every block 1..8192 bytes."""

DEFAULT_LIMITS = Limits(JAVA_READER.max_list_size, 0, RPC_MAX_BUFFER_SIZE, "default")
"""The Java decoder's listSize limit and the senders' block size: no sender writes a
longer block, and a bound keeps a hostile length from making a reader wait for 2 GiB."""

# ---------------------------------------------------------------------------- errors


class GrammarError(sansio.GrammarError):
    """Bytes that do not fit TubeMQ's grammar (the shared :class:`nsqviz.sansio.
    GrammarError`): ``offset`` where, ``field`` which field (in the protocol's words:
    ``MsgToken``, ``listSize``, ``block[2].length`` ...), and why; ``code``: the kind of
    violation the codec reports it as."""

    field: str
    code: ClassVar[ViolationCode] = ViolationCode.BAD_CONTENT

    def __init__(self, reason: str, *, offset: int | None = None, field: str = ""):
        super().__init__(reason, offset=offset, field=field)

    def __str__(self) -> str:
        where = f" at offset {self.offset}" if self.offset is not None else ""
        what = f" ({self.field})" if self.field else ""
        return f"{type(self).__name__}{where}{what}: {self.reason}"


class BadToken(GrammarError):
    """The frame does not start with MsgToken FF 7F F4 FE (Java: UnknownProtocolException)."""

    code = ViolationCode.BAD_TOKEN


class BadListSize(GrammarError):
    """listSize is negative or beyond the reader's limit."""

    code = ViolationCode.BAD_LIST_SIZE


class BadBlockLength(GrammarError):
    """A block length is negative or outside the reader's limits."""

    code = ViolationCode.BAD_BLOCK_LENGTH


class Incomplete(GrammarError):
    """The bytes end before the frame (or a content message) does."""

    code = ViolationCode.INCOMPLETE


class TrailingBytes(GrammarError):
    """Bytes after the frame's last block, or after the content's third message."""

    code = ViolationCode.TRAILING_BYTES


class BadContent(GrammarError):
    """The content is not three varint-length-delimited messages (a bad varint, a length
    past the end)."""

    code = ViolationCode.BAD_CONTENT


# ------------------------------------------------------------------------ primitives


class _Token(ConstructBase):
    """MsgToken: always written as FF 7F F4 FE; anything else read is a :class:`BadToken`."""

    def __init__(self) -> None:
        super().__init__()
        self.flagbuildnone = True

    def _parse(self, stream: StreamType, context: Context, path: PathType) -> bytes:
        start = stream_tell(stream, path)
        got = stream_read(stream, 4, path)
        if got != BEGIN_TOKEN:
            raise BadToken(
                f"expected {BEGIN_TOKEN.hex()}, got {got.hex()}", offset=start, field="MsgToken"
            )
        return got

    def _build(self, obj: object, stream: StreamType, context: Context, path: PathType) -> Any:
        stream_write(stream, BEGIN_TOKEN, 4, path)
        return BEGIN_TOKEN

    def _sizeof(self, context: Context, path: PathType) -> int:
        return 4


class _Limited(SubconstructBase):
    """An Int32sb count/length checked against the :class:`Limits` passed to parse."""

    def __init__(self, subcon: Grammar, error: type[GrammarError], field: str, low: str,
                 high: str):
        super().__init__(subcon)
        self.error, self.field_name, self.low, self.high = error, field, low, high

    def _field(self, context: Context) -> str:
        index = getattr(context._, "_index", None) if "_" in context else None
        return self.field_name.format(index=index)

    def _parse(self, stream: StreamType, context: Context, path: PathType) -> int:
        start = stream_tell(stream, path)
        value: int = self.subcon._parsereport(stream, context, path)
        limits: Limits = context._params.limits
        low, high = getattr(limits, self.low), getattr(limits, self.high)
        if not low <= value <= high:
            what = "negative" if value < 0 else f"outside {low}..{high} ({limits.name} limits)"
            raise self.error(f"{value} is {what}", offset=start, field=self._field(context))
        return value

    def _build(self, obj: object, stream: StreamType, context: Context, path: PathType) -> Any:
        return self.subcon._build(obj, stream, context, path)


Block = Struct(
    "length" / Rebuild(
        _Limited(Int32sb, BadBlockLength, "block[{index}].length",
                 "min_block_length", "max_block_length"),
        len_(this.data),
    ),
    "data" / Bytes(this.length),
)
"""One ``[length][data]`` block."""

FrameStruct = Struct(
    "token" / _Token(),
    "serialNo" / Int32ub,
    "listSize" / Rebuild(
        _Limited(Int32sb, BadListSize, "listSize", "min_list_size", "max_list_size"),
        len_(this.blocks),
    ),
    "blocks" / Array(this.listSize, Block),
)
"""The frame: MsgToken, serialNo, listSize, then listSize blocks."""


class _MinimalVarInt(SubconstructBase):
    """protobuf's base-128 varint length as ``writeDelimitedTo`` writes it: minimal, and
    at most 2**31-1 (Java reads it as an int32). Anything else is :class:`BadContent`."""

    def _parse(self, stream: StreamType, context: Context, path: PathType) -> int:
        start = stream_tell(stream, path)
        value: int = self.subcon._parsereport(stream, context, path)
        end = stream_tell(stream, path)
        if end - start > 1 and value < 1 << (7 * (end - start - 1)):
            raise BadContent("length varint is not minimal", offset=start, field=_name(path))
        if value > _INT32_MAX:
            raise BadContent(f"length {value} does not fit an int32", offset=start,
                             field=_name(path))
        return value

    def _build(self, obj: object, stream: StreamType, context: Context, path: PathType) -> Any:
        return self.subcon._build(obj, stream, context, path)


def _name(path: str) -> str:
    """The last field name of a construct path, with ``.length`` (for errors)."""
    return path.rsplit(" -> ", 1)[-1] + ".length"


_Delimited = Prefixed(_MinimalVarInt(VarInt), GreedyBytes)

ContentStruct = Struct(
    "connHeader" / _Delimited,  # RpcConnHeader
    "header" / _Delimited,  # RequestHeader or ResponseHeader
    "body" / _Delimited,  # RequestBody, RspResponseBody or RspExceptionBody
)
"""The content: three varint-length-delimited protobuf messages."""

# ------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class FrameParts:
    """A parsed frame: ``serialNo`` and the blocks as they were cut."""

    serialNo: int
    blocks: tuple[bytes, ...]

    @property
    def content(self) -> bytes:
        """The blocks joined: the three delimited messages."""
        return b"".join(self.blocks)

    @property
    def size(self) -> int:
        return HEADER_SIZE + sum(4 + len(b) for b in self.blocks)

    def block_offsets(self) -> tuple[tuple[int, int], ...]:
        """``(frame offset of block i's data, content offset of block i's data)``."""
        out = []
        frame_at, content_at = HEADER_SIZE, 0
        for b in self.blocks:
            out.append((frame_at + 4, content_at))
            frame_at += 4 + len(b)
            content_at += len(b)
        return tuple(out)

    def frame_offset(self, content_offset: int) -> int:
        """Where content byte ``content_offset`` is in the frame (past the block lengths)."""
        for frame_at, content_at in reversed(self.block_offsets()):
            if content_at <= content_offset:
                return frame_at + content_offset - content_at
        return HEADER_SIZE + 4


@dataclass(frozen=True, slots=True)
class Content:
    """The content's three messages, still serialized (``bytes`` each)."""

    connHeader: bytes
    header: bytes
    body: bytes


@dataclass(frozen=True, slots=True)
class _WithMinList:
    """The limits as a parse sees them: a count's lower bound is 0."""

    limits: Limits

    @property
    def min_list_size(self) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.limits, name)


# ------------------------------------------------------------------------ functions


def _parse_whole(con: Grammar, data: bytes, what: str, **params: Any) -> Any:
    stream = io.BytesIO(data)
    try:
        value = con.parse_stream(stream, **params)
    except GrammarError:
        raise
    except StreamError:
        raise Incomplete(f"the {what} ends early ({len(data)} bytes)", offset=len(data)) from None
    except ConstructError as exc:  # pragma: no cover - every construct failure is named above
        raise GrammarError(str(exc).strip(), offset=stream_tell(stream, None)) from None
    rest = len(data) - stream.tell()
    if rest:
        raise TrailingBytes(f"{rest} bytes after the {what}", offset=stream.tell())
    return value


def parse_context(limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """The keywords :data:`FrameStruct` needs to parse (``FrameStruct.parse(data,
    **parse_context(limits))``): the limits it checks."""
    return {"limits": _WithMinList(limits)}


def parse_frame(data: bytes, limits: Limits = DEFAULT_LIMITS) -> FrameParts:
    """Parse exactly one frame; a :class:`GrammarError` names offset, field and reason."""
    value = _parse_whole(FrameStruct, data, "frame", **parse_context(limits))
    return FrameParts(value.serialNo, tuple(b.data for b in value.blocks))


def build_frame(parts: FrameParts) -> bytes:
    """The bytes of a frame with exactly these blocks (``build_frame(parse_frame(x)) == x``)."""
    return FrameStruct.build(
        {"serialNo": parts.serialNo, "blocks": [{"data": b} for b in parts.blocks]},
        limits=_WithMinList(JAVA_READER),
    )


def cut_blocks(content: bytes, size: int = RPC_MAX_BUFFER_SIZE) -> tuple[bytes, ...]:
    """Cut content as the Java and Go senders do: blocks of ``size`` bytes and a shorter
    last one; no empty trailing block (empty content gives no block, as Go sends it)."""
    return tuple(content[i : i + size] for i in range(0, len(content), size))


def frame_bytes(serialNo: int, content: bytes) -> bytes:
    """The frame a sender writes for ``content``."""
    return build_frame(FrameParts(serialNo, cut_blocks(content)))


def parse_content(content: bytes) -> Content:
    """Split content into its three serialized messages (offsets count in the content)."""
    value = _parse_whole(ContentStruct, content, "content")
    return Content(value.connHeader, value.header, value.body)


def build_content(parts: Content) -> bytes:
    """The content for three serialized messages (``build_content(parse_content(x)) == x``)."""
    return ContentStruct.build(
        {"connHeader": parts.connHeader, "header": parts.header, "body": parts.body}
    )
