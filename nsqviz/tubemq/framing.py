"""TubeMQ's framing rule for the stream reassembler, and the fast frame splitter.

A TubeMQ frame has no total length: its end is found by walking the blocks -- read
listSize, then each block's length, skip its data. :class:`TubeFraming` does that walk
*incrementally*: it remembers how far it got in the frame at the head of the stream,
and the reassembler hands it each further chunk (:meth:`TubeFraming.follow`) without
joining them, so a frame of N bytes in any chunking costs O(N / 8192 + chunks) steps and
one join -- linear time whatever the block count or the chunk size.

Resynchronisation after bad bytes is a **guess**: it jumps to the next occurrence of
MsgToken ``FF 7F F4 FE``, which may also occur inside a block's data (a message body);
the frame found there is then checked like any other (limits, then the grammar). The
Java decoder does not resynchronise at all: on a wrong token it closes the connection.

:func:`split_frame` is the codec's hot path for a frame the rule has measured: plain
``struct`` reads giving the same result, error class and offset as
:func:`nsqviz.tubemq.grammar.parse_frame` (differentially tested). :func:`join_content`
and :func:`join_frame` are the way back, for every frame the codec sends: the same bytes
as the grammar's ``build_content`` and ``frame_bytes`` (differentially tested).
"""

from __future__ import annotations

from struct import Struct as _Struct

from nsqviz.stream.reassembly import Buffer, FramingError
from nsqviz.stream.sizes import INT32
from nsqviz.tubemq.grammar import (
    DEFAULT_LIMITS,
    RPC_MAX_BUFFER_SIZE,
    BadBlockLength,
    BadContent,
    BadListSize,
    BadToken,
    Content,
    GrammarError,
    Incomplete,
    Limits,
    TrailingBytes,
)
from nsqviz.tubemq.tables import BEGIN_TOKEN, HEADER_SIZE

__all__ = ["TubeFraming", "join_content", "join_frame", "split_content", "split_frame"]

_HEADER = _Struct(">4sIi")


def _limit_error(cls: type[GrammarError], field: str, value: int, low: int, high: int,
                 limits: Limits, offset: int) -> GrammarError | None:
    """The grammar's refusal of ``value``, worded as the grammar words it."""
    if low <= value <= high:
        return None
    what = "negative" if value < 0 else f"outside {low}..{high} ({limits.name} limits)"
    return cls(f"{value} is {what}", offset=offset, field=field)


def split_frame(data: bytes, limits: Limits = DEFAULT_LIMITS) -> tuple[int, bytes, list[int]]:
    """``(serialNo, content, block data offsets)`` of exactly one frame.

    Raises the same :class:`~nsqviz.tubemq.grammar.GrammarError` (class, offset, field)
    as :func:`~nsqviz.tubemq.grammar.parse_frame` does for the same bytes.
    """
    n = len(data)
    if n < 4:
        raise Incomplete(f"the frame ends early ({n} bytes)", offset=n)
    if data[:4] != BEGIN_TOKEN:
        raise BadToken(f"expected {BEGIN_TOKEN.hex()}, got {data[:4].hex()}", offset=0,
                       field="MsgToken")
    if n < HEADER_SIZE:
        raise Incomplete(f"the frame ends early ({n} bytes)", offset=n)
    _, serial, count = _HEADER.unpack_from(data, 0)
    err = _limit_error(BadListSize, "listSize", count, 0, limits.max_list_size, limits, 8)
    if err is not None:
        raise err
    pos = HEADER_SIZE
    starts: list[int] = []
    lo, hi = limits.min_block_length, limits.max_block_length
    for i in range(count):
        if n - pos < 4:
            raise Incomplete(f"the frame ends early ({n} bytes)", offset=n)
        (length,) = INT32.unpack_from(data, pos)
        if not lo <= length <= hi:
            error = _limit_error(BadBlockLength, f"block[{i}].length", length, lo, hi, limits,
                                 pos)
            assert error is not None  # the value is outside lo..hi
            raise error
        pos += 4
        starts.append(pos)
        pos += length
        if pos > n:
            raise Incomplete(f"the frame ends early ({n} bytes)", offset=n)
    if pos < n:
        raise TrailingBytes(f"{n - pos} bytes after the frame", offset=pos)
    if count <= 1:
        return serial, data[HEADER_SIZE + 4 * count :], starts
    ends = [s - 4 for s in starts[1:]]
    ends.append(pos)
    return serial, b"".join([data[s:e] for s, e in zip(starts, ends, strict=True)]), starts


_INT32_MAX = 2**31 - 1
_SLOTS = ("connHeader", "header", "body")


def split_content(content: bytes) -> Content:
    """The three serialized messages of a frame's content; the same result and the same
    error (class, offset, field) as :func:`~nsqviz.tubemq.grammar.parse_content`."""
    n = len(content)
    pos = 0
    out = []
    for slot in _SLOTS:
        start = pos
        if pos < n and content[pos] < 0x80:  # the common case: a one-byte length
            length = content[pos]
            pos += 1
        else:
            length = shift = 0
            while True:
                if pos >= n:
                    raise Incomplete(f"the content ends early ({n} bytes)", offset=n)
                b = content[pos]
                pos += 1
                length |= (b & 0x7F) << shift
                shift += 7
                if b < 0x80:
                    break
            if pos - start > 1 and length < 1 << (7 * (pos - start - 1)):
                raise BadContent("length varint is not minimal", offset=start,
                                 field=f"{slot}.length")
            if length > _INT32_MAX:
                raise BadContent(f"length {length} does not fit an int32", offset=start,
                                 field=f"{slot}.length")
        end = pos + length
        if end > n:
            raise Incomplete(f"the content ends early ({n} bytes)", offset=n)
        out.append(content[pos:end])
        pos = end
    if pos < n:
        raise TrailingBytes(f"{n - pos} bytes after the content", offset=pos)
    return Content(*out)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def join_content(parts: Content) -> bytes:
    """The content for three serialized messages: each after its base-128 varint length.
    The same bytes as :func:`~nsqviz.tubemq.grammar.build_content` (differentially
    tested), without construct: the codec's hot path for every frame it sends."""
    return b"".join(_varint(len(m)) + m
                    for m in (parts.connHeader, parts.header, parts.body))


def join_frame(serialNo: int, content: bytes) -> bytes:
    """The frame a sender writes for ``content`` -- MsgToken, serialNo, listSize, then
    8192-byte blocks and a shorter last one, each after its length. The same bytes as
    :func:`~nsqviz.tubemq.grammar.frame_bytes` (differentially tested)."""
    size = RPC_MAX_BUFFER_SIZE
    blocks = [content[i : i + size] for i in range(0, len(content), size)]
    pack = INT32.pack
    return b"".join([_HEADER.pack(BEGIN_TOKEN, serialNo, len(blocks)),
                     *(pack(len(b)) + b for b in blocks)])


class TubeFraming:
    """Where TubeMQ frames end, for :class:`~nsqviz.stream.Reassembler`.

    ``measure`` walks the head frame's blocks from where the last call stopped;
    ``follow`` continues the walk over a chunk the reassembler keeps unjoined and says
    how many bytes must still arrive before ``measure`` can answer (0: answer now).
    The error a walk meets is the grammar's (:mod:`nsqviz.tubemq.grammar`), raised as a
    :class:`~nsqviz.stream.FramingError` whose ``code`` is the grammar error's class
    name and whose reason names the field and its offset in the frame.
    """

    name = "tubemq-frames"
    resync_lookahead = 4  # a MsgToken is 4 bytes: one may start in the last 3 searched

    def __init__(self, limits: Limits = DEFAULT_LIMITS):
        self.limits = limits
        self._restart()

    def _restart(self) -> None:
        self._seen = 0  # bytes of the head frame walked so far
        self._head = b""  # the 12-byte header, or a block length, while it is incomplete
        self._blocks = -1  # blocks still to walk (-1: header not read yet)
        self._index = 0  # number of the block whose length comes next
        self._skip = 0  # data bytes of the current block still to skip
        self._total: int | None = None
        self._error: GrammarError | None = None

    # -- the walk ------------------------------------------------------------------

    def _walk(self, data: bytes | memoryview, pos: int) -> None:
        """Walk ``data[pos:]``, the bytes of the head frame after the first ``_seen``."""
        n = len(data)
        while pos < n:
            if self._skip:
                step = min(self._skip, n - pos)
                self._skip -= step
                pos += step
                self._seen += step
                if self._skip:
                    return
                continue
            want = HEADER_SIZE if self._blocks < 0 else 4
            if not self._head and n - pos >= want:
                field = data[pos : pos + want]  # whole in this chunk: read it in place
                pos += want
                self._seen += want
            else:  # split between chunks: gather it
                piece = bytes(data[pos : pos + want - len(self._head)])
                self._head += piece
                pos += len(piece)
                self._seen += len(piece)
                if self._blocks < 0 and self._head[:4] != BEGIN_TOKEN[: len(self._head)]:
                    self._error = BadToken(
                        f"expected {BEGIN_TOKEN.hex()}, got {self._head[:4].hex()}",
                        offset=0, field="MsgToken")
                    return
                if len(self._head) < want:
                    return
                field, self._head = self._head, b""
            if self._head_field(field):
                return

    def _head_field(self, field: bytes | memoryview) -> bool:
        """Take the frame header or a block length; True when the walk is over."""
        limits = self.limits
        if self._blocks < 0:
            if field[:4] != BEGIN_TOKEN:
                got = bytes(field[:4]).hex()
                self._error = BadToken(f"expected {BEGIN_TOKEN.hex()}, got {got}", offset=0,
                                       field="MsgToken")
                return True
            count = INT32.unpack_from(field, 8)[0]
            self._error = _limit_error(BadListSize, "listSize", count, 0, limits.max_list_size,
                                       limits, 8)
            self._blocks = count
            if count == 0:
                self._total = HEADER_SIZE
            return self._error is not None or count == 0
        length = INT32.unpack_from(field, 0)[0]
        self._error = _limit_error(
            BadBlockLength, f"block[{self._index}].length", length,
            limits.min_block_length, limits.max_block_length, limits, self._seen - 4,
        )
        self._index += 1
        self._blocks -= 1
        self._skip = length
        if self._blocks == 0:  # the last length: the frame's end is known
            self._total = self._seen + length
        return self._error is not None or self._total is not None

    def measure(self, buf: bytes, pos: int) -> int | None:
        """The length of the frame at ``pos``, ``None`` until its last block length is in."""
        if self._total is None and self._error is None:
            self._walk(memoryview(buf)[pos:], self._seen)
        total, error = self._total, self._error
        if error is not None:
            self._restart()
            raise FramingError(f"{error.field} at frame offset {error.offset}: {error.reason}",
                               code=error.code)
        if total is not None:
            self._restart()
            return total
        return None

    def scan(self, buf: bytes, pos: int, ends: list[int]) -> int:
        """Append the ends of the complete, well-formed frames from ``pos`` on; return
        where it stopped. A bulk :meth:`measure` for the reassembler's hot loop: anything
        unusual (a frame still arriving, a bad token or limit) is left to ``measure``."""
        if self._seen:
            return pos  # measure is walking the head frame: let it finish
        n = len(buf)
        unpack = INT32.unpack_from
        limits = self.limits
        most, lo, hi = limits.max_list_size, limits.min_block_length, limits.max_block_length
        append = ends.append
        while n - pos >= HEADER_SIZE and buf.startswith(BEGIN_TOKEN, pos):
            count = unpack(buf, pos + 8)[0]
            if not 0 <= count <= most:
                break
            p = pos + HEADER_SIZE
            for _ in range(count):
                if n - p < 4:
                    return pos
                length = unpack(buf, p)[0]
                if not lo <= length <= hi:
                    return pos
                p += 4 + length
            if p > n:
                break
            append(p)
            pos = p
        return pos

    def follow(self, chunk: bytes) -> int:
        """Walk a chunk of the head frame held back unjoined; 0 when ``measure`` can say
        the length (or the error), else at least how many more bytes it needs."""
        if self._total is None and self._error is None:
            self._walk(memoryview(chunk), 0)
        if self._total is not None or self._error is not None:
            return 0
        if self._skip:
            return self._skip + 4 * max(self._blocks, 0)
        return max(1, (HEADER_SIZE if self._blocks < 0 else 4) - len(self._head))

    def resync(self, buf: Buffer, pos: int) -> int | None:
        """The next MsgToken at or after ``pos`` (a guess: see the module docstring)."""
        self._restart()
        found = buf.find(BEGIN_TOKEN, pos)
        return None if found < 0 else found
