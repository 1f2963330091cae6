"""NSQ's framing rules: where one frame ends and the next begins, in each direction.

Server to client, every frame is ``[4-byte size][size bytes]``. Client to server, the
stream starts with the 4-byte magic, then each command is a line ending in ``\\n``,
followed -- for IDENTIFY, AUTH, PUB, MPUB and DPUB -- by ``[4-byte size][size bytes]``.
These rules only find boundaries; the grammar decides what the bytes mean. Limits
protect against a hostile size prefix: an HTTP request sent to nsqd reads ``"HTTP"``
as a size of 1,213,486,160 bytes, which is refused without waiting for (or allocating)
those bytes.
"""

from __future__ import annotations

import re
from struct import Struct as _Struct

from nsqviz.nsq.commands import BODY_VERBS, BY_VERB, BodyKind
from nsqviz.nsq.errors import ErrorCode
from nsqviz.nsq.lexer import line_end, verb_of
from nsqviz.nsq.lines import MagicLineFraming
from nsqviz.nsq.wire import MAGIC_V2
from nsqviz.stream.reassembly import Buffer, FramingError
from nsqviz.stream.sizes import INT32

__all__ = [
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_MAX_LINE",
    "DEFAULT_MAX_MSG_SIZE",
    "SIZE_PREFIX",
    "CommandFraming",
    "FrameFraming",
]

_HEADER = _Struct(">ii")

SIZE_PREFIX = INT32.size
"""Bytes of every size prefix of protocol V2: bodies, frames, MPUB's count and messages."""

DEFAULT_MAX_FRAME_SIZE = 5 * 1024 * 1024 + 1024
"""Largest frame from nsqd we accept: --max-body-size (5 MiB) plus room for headers."""

DEFAULT_MAX_BODY_SIZE = 5 * 1024 * 1024
"""nsqd's --max-body-size default: the largest IDENTIFY, AUTH or MPUB body."""

DEFAULT_MAX_MSG_SIZE = 1024 * 1024
"""nsqd's --max-msg-size default: the largest PUB or DPUB message."""

DEFAULT_MAX_LINE = 16 * 1024
"""nsqd reads a command line with a 16 KiB buffered reader; longer lines cannot be read."""

_VERB_STARTS = frozenset(verb[0] for verb in BY_VERB)
_BODY_VERB_STARTS = frozenset(verb[0] for verb in BODY_VERBS)
"""First bytes of the verbs with a body: a line starting otherwise (FIN, RDY ...) needs
no look at its verb to be known body-less."""
_BODY_LINE = re.compile(b"\n[" + bytes(sorted(_BODY_VERB_STARTS)) + b"]")
"""A newline, then a line that may start a command with a body."""


def _run_of_one_length(buf: bytes, pos: int, ends: list[int], limit: int) -> int:
    """:meth:`CommandFraming.scan` for the lines from ``pos`` that all have the first
    one's length and start like no verb with a body -- a consumer's FINs -- without a
    loop in Python: the newlines found every ``length`` bytes by a strided slice (and
    none between them), the ends appended as a range. Returns where the run stopped."""
    nl = buf.find(b"\n", pos, pos + limit + 1)
    if nl < 0 or buf[pos] in _BODY_VERB_STARTS:
        return pos
    size = nl + 1 - pos
    body_line = _BODY_LINE.search(buf, pos)
    stop = body_line.start() + 1 if body_line is not None else len(buf)
    newlines = buf[nl : stop : size]
    k = len(newlines) - len(newlines.lstrip(b"\n"))  # lines whose newline is in place
    if k < 2 or buf.count(b"\n", pos, pos + k * size) != k:
        return pos  # a shorter line among them: the loop sorts it out
    ends.extend(range(pos + size, pos + k * size + 1, size))
    return pos + k * size


class FrameFraming:
    """Frames sent by nsqd: ``[size:int32][frame type:int32][data]``."""

    name = "nsq-frames"
    resync_lookahead = 8  # resync judges a position by the 8 bytes from it

    def __init__(self, *, max_size: int = DEFAULT_MAX_FRAME_SIZE):
        self.max_size = max_size

    def measure(self, buf: bytes, pos: int) -> int | None:
        size: int
        ftype: int | None
        avail = len(buf) - pos
        if avail >= 8:
            size, ftype = _HEADER.unpack_from(buf, pos)
            if 4 <= size <= self.max_size and 0 <= ftype <= 2:
                return 4 + size
        elif avail >= 4:
            (size,) = INT32.unpack_from(buf, pos)
            ftype = None  # not known yet
        else:
            return None
        if size < 4:
            raise FramingError(f"frame size {size} is smaller than the 4-byte frame type")
        if size > self.max_size:
            raise FramingError(f"frame size {size} is beyond the limit {self.max_size}")
        if ftype is None:
            # A sane size alone is not a frame yet: the reassembler stops re-measuring
            # once it has a length, so the type must be checked before one is given.
            return None
        if not 0 <= ftype <= 2:
            raise FramingError(f"unknown frame type {ftype}")
        return 4 + size

    def scan(self, buf: bytes, pos: int, ends: list[int]) -> int:
        """Append the ends of the complete, well-formed frames from ``pos`` on; return
        where it stopped. A bulk :meth:`measure` for the reassembler's hot loop: anything
        unusual (a partial or malformed header) is left for ``measure`` to explain."""
        n = len(buf)
        limit = self.max_size
        unpack = _HEADER.unpack_from
        append = ends.append
        while n - pos >= 8:
            size, ftype = unpack(buf, pos)
            end = pos + 4 + size
            if not (4 <= size <= limit and 0 <= ftype <= 2) or end > n:
                break
            append(end)
            pos = end
        return pos

    def resync(self, buf: Buffer, pos: int) -> int | None:
        """The next offset whose 8 bytes look like a frame header (sane size, known type)."""
        end = len(buf) - 8
        limit = self.max_size
        for p in range(pos, end + 1):
            size, ftype = _HEADER.unpack_from(buf, p)
            if 4 <= size <= limit and 0 <= ftype <= 2:
                return p
        return None


class CommandFraming(MagicLineFraming):
    """Commands sent by a client: the magic once, then ``VERB params\\n[size][body]``."""

    name = "nsq-commands"
    magic = MAGIC_V2
    bad_magic_code = ErrorCode.BAD_PROTOCOL
    resync_lookahead = 2  # resync judges a position by the newline before it

    def __init__(
        self,
        *,
        expect_magic: bool = True,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        max_msg_size: int = DEFAULT_MAX_MSG_SIZE,
        max_line: int = DEFAULT_MAX_LINE,
    ):
        super().__init__(expect_magic=expect_magic, max_line=max_line)
        self.max_body_size = max_body_size
        self.max_msg_size = max_msg_size

    def measure_line(self, buf: bytes, pos: int, nl: int) -> int | None:
        verb = verb_of(buf, pos, nl)
        line_len = nl + 1 - pos
        spec = BY_VERB.get(verb)
        if spec is None or spec.body is BodyKind.NONE:
            return line_len
        # nsqd checks the parameters before it reads a body: a body command whose line
        # lacks them is answered (and the connection closed) with no body read.
        if buf.count(b" ", pos, line_end(buf, pos, nl)) < spec.arity:
            return line_len
        size = self.body_size(buf, nl)
        if size is None:
            return None
        # nsqd checks a body size as soon as it has read it, before reading the body;
        # the reasons below are the texts nsqd v1.3.0 answers with.
        name = spec.verb
        if spec.body is BodyKind.MESSAGE:
            if size <= 0:
                raise FramingError(
                    f"{name} invalid message body size {size}", code=ErrorCode.BAD_MESSAGE
                )
            if size > self.max_msg_size:
                raise FramingError(
                    f"{name} message too big {size} > {self.max_msg_size}",
                    code=ErrorCode.BAD_MESSAGE,
                )
        else:
            if size <= 0:
                raise FramingError(f"{name} invalid body size {size}", code=ErrorCode.BAD_BODY)
            if size > self.max_body_size:
                raise FramingError(
                    f"{name} body too big {size} > {self.max_body_size}",
                    code=ErrorCode.BAD_BODY,
                )
        return line_len + SIZE_PREFIX + size

    def scan(self, buf: bytes, pos: int, ends: list[int]) -> int:
        """Append the ends of complete body-less commands (FIN, RDY, REQ, TOUCH, NOP ...)
        from ``pos`` on; stop at anything else for :meth:`measure`. A consumer's stream
        is mostly FINs, and this saves a call per command."""
        if self.expect_magic:
            return pos
        find = buf.find
        append = ends.append
        limit = self.max_line
        pos = _run_of_one_length(buf, pos, ends, limit)
        while True:
            nl = find(b"\n", pos, pos + limit + 1)
            if nl < 0:
                return pos
            if buf[pos] in _BODY_VERB_STARTS and verb_of(buf, pos, nl) in BODY_VERBS:
                return pos
            pos = nl + 1
            append(pos)

    def resync(self, buf: Buffer, pos: int) -> int | None:
        """The start of the next line that begins like a command verb."""
        if self.expect_magic:
            return -1  # without the magic this is not protocol V2 at all
        while True:
            nl = buf.find(b"\n", pos)
            if nl < 0 or nl + 1 >= len(buf):
                return None
            if buf[nl + 1] in _VERB_STARTS:
                return nl + 1
            pos = nl + 1
