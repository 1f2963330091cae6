"""Where the lookup protocol's units end, for the stream :class:`~nsqviz.stream.Reassembler`.

nsqd to nsqlookupd: the magic once, then ``VERB params\\n`` lines, IDENTIFY's followed
by ``[ 4-byte size ][ body ]`` (:class:`CommandFraming`); nsqlookupd to nsqd:
``[ 4-byte size ][ data ]`` (:class:`ResponseFraming`). An active connection reads
nothing after bytes that do not frame (nsqlookupd and nsqd both close); a passive one
(a capture's observer) resynchronises with each rule's ``resync``.
"""

from __future__ import annotations

from nsqviz.lookupd.grammar import BODY_VERBS, ErrorCode, Refusal
from nsqviz.lookupd.wire import ANSWER_STARTS, MAGIC_V1
from nsqviz.nsq.framing import DEFAULT_MAX_BODY_SIZE
from nsqviz.nsq.lines import MagicLineFraming
from nsqviz.stream.reassembly import Buffer, FramingError
from nsqviz.stream.sizes import INT32, SIZE_PREFIX

__all__ = ["CommandFraming", "ResponseFraming"]


class CommandFraming(MagicLineFraming):
    """nsqd to nsqlookupd: the magic once, then ``VERB params\\n`` lines, IDENTIFY's
    followed by ``[ 4-byte size ][ body ]`` of at most ``max_body_size`` bytes (nsqd's
    --max-body-size)."""

    name = "nsq-lookup-commands"
    magic = MAGIC_V1
    bad_magic_code = ErrorCode.BAD_PROTOCOL

    def __init__(self, *, expect_magic: bool = True,
                 max_body_size: int = DEFAULT_MAX_BODY_SIZE, max_line: int = 16384):
        super().__init__(expect_magic=expect_magic, max_line=max_line)
        self.max_body_size = max_body_size

    def measure_line(self, buf: bytes, pos: int, nl: int) -> int | None:
        verb = buf[pos:nl].split(b" ", 1)[0].strip()
        if verb not in BODY_VERBS:
            return nl + 1 - pos
        size = self.body_size(buf, nl)
        if size is None:
            return None
        if not 0 <= size <= self.max_body_size:
            raise FramingError(Refusal.BODY_SIZE.answer(size=size), code=Refusal.BODY_SIZE.code)
        return nl + 1 - pos + SIZE_PREFIX + size

    def resync(self, buf: Buffer, pos: int) -> int | None:
        """After a line that is not a command: the next line. After a magic that is not
        nsqlookupd's: nothing -- it refuses it and closes, reading no more."""
        if self.expect_magic:
            return -1
        nl = buf.find(b"\n", pos)
        return None if nl < 0 else nl + 1


class ResponseFraming:
    """nsqlookupd to nsqd: ``[ 4-byte size ][ data ]``, at most ``max_size`` bytes (the
    bound nsqd puts on an answer it reads: its --max-body-size)."""

    name = "nsq-lookup-responses"

    def __init__(self, *, max_size: int = DEFAULT_MAX_BODY_SIZE):
        self.max_size = max_size

    def measure(self, buf: bytes, pos: int) -> int | None:
        if len(buf) - pos < SIZE_PREFIX:
            return None
        size: int = INT32.unpack_from(buf, pos)[0]
        if not 0 <= size <= self.max_size:
            raise FramingError(f"response body size ({size}) is greater than limit "
                               f"({self.max_size})")
        return SIZE_PREFIX + size

    def resync(self, buf: Buffer, pos: int) -> int | None:
        """After bytes that are not an answer: the next offset whose size prefix fits and
        whose data starts like an answer (a guess, said so by the capture layer)."""
        end = len(buf) - SIZE_PREFIX - 2
        while pos <= end:
            size = int.from_bytes(buf[pos:pos + SIZE_PREFIX], "big")
            head = bytes(buf[pos + SIZE_PREFIX:pos + SIZE_PREFIX + 2])
            if 2 <= size <= self.max_size and head in ANSWER_STARTS:
                return pos
            pos += 1
        return None
