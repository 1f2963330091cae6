"""Where HTTP/1.1 messages end, for the stream :class:`~nsqviz.stream.Reassembler`, and
where one may start again after bytes that are none.

HTTP's framing -- a head up to a blank line, then a body by ``Content-Length``, by
chunks, or up to the connection's end, and none at all for a HEAD's answer or a 204 --
is h11's to judge (:mod:`nsqviz.http.reader` feeds it every byte first). The reassembler
here only cuts where h11 said a message ended (:class:`MessageFraming`), so each message
comes out as one :class:`~nsqviz.stream.RawFrame` knowing its packets, and the bytes of
a long message wait unjoined until its end. After bytes that are not HTTP (a capture
that starts mid-body, a gap that lost a message's end) :class:`StartSearch` finds where
a head plausibly starts: a guess, which the capture layer says it is.
"""

from __future__ import annotations

import re
from collections import deque

from nsqviz.http.api import METHODS

__all__ = [
    "GO_MAX_HEADER_BYTES",
    "MAX_KEPT",
    "PIECE",
    "REQUEST_LINE",
    "REQUEST_START",
    "RESPONSE_START",
    "START_LINE_MAX",
    "STATUS_LINE",
    "MessageFraming",
    "StartSearch",
]

GO_MAX_HEADER_BYTES = (1 << 20) + 4096
"""The longest head nsqd's and nsqlookupd's server reads: Go's ``http.DefaultMaxHeaderBytes``
(1 MiB) plus the 4096 bytes of bufio slack its server allows (past it: 431). A codec's
h11 reads heads up to this long, as the servers do."""

MAX_KEPT = 16 << 20
"""The most bytes of one message a codec keeps (its head and the start of its body):
past them the body is counted, its messages' digests taken, and its bytes let go (a
capture's 100 MB upload holds no 100 MB). Above nsqd's largest default body (its
``--max-body-size``, 5 MiB)."""

PIECE = 4096
"""Bytes handed to h11 at a time: where a message ends is read off what h11 has not yet
consumed, which is at most this much plus a head still incomplete."""

REQUEST_START = re.compile(
    rb"(?:" + b"|".join(m.encode() for m in METHODS) + rb") [/*A-Za-z0-9]")
"""A request line's start: an HTTP method, a space and the target's first byte (what a
client's first bytes are recognised by)."""

RESPONSE_START = re.compile(rb"HTTP/1\.[01] [1-5][0-9][0-9]")
"""A status line's start: the version, a space and a status code."""

REQUEST_LINE = re.compile(
    rb"(?:" + b"|".join(m.encode() for m in METHODS) + rb") [^ \r\n]+ HTTP/1\.[01]\r?\n")
"""A whole request line: where a search for the next request may stop."""

STATUS_LINE = re.compile(rb"HTTP/1\.[01] [1-5][0-9][0-9][^\r\n]*\r?\n")
"""A whole status line."""

_HEAD_LINE = re.compile(rb"\r?\n|[!#$%&'*+.^_`|~0-9A-Za-z-]+:[^\r\n]*\r?\n")
"""A header line (RFC 9112's field-line), or the blank line that ends a head."""

START_LINE_MAX = 4096
"""The longest start line a search finds: the bytes a search keeps while no start shows
(a start line longer than this is not resynchronised to; nsqd's are a few dozen)."""


class StartSearch:
    """Where the next message starts, in bytes that are none (from the middle of a
    connection, after a gap, after bytes h11 refused): a start line, header lines, the
    blank line -- a head h11 may then read. Linear in the bytes searched: a head whose
    line ``x`` is no header line rules out every start before ``x`` (the search goes on
    from there), the search resumes where it stopped when more bytes come, and while no
    start line shows only the last :data:`START_LINE_MAX` bytes are kept.

    ``feed`` returns the stream offset of a start, or ``None``; the bytes from there are
    :meth:`held`. ``after`` is the offset of the first byte searched; ``at`` that of the
    first of ``data``."""

    def __init__(self, line: re.Pattern[bytes], at: int, after: int,
                 data: bytes | bytearray = b"") -> None:
        self.line = line
        self.buf = bytearray(data)
        self.base = at  # the stream offset of buf[0]
        self.next = after  # where the search for a start line resumes
        self.candidate: int | None = None  # a start line found, its head being checked
        self.checked = 0  # ... up to this offset
        self.head_end = 0  # the end of the head of the last start found

    def feed(self, data: bytes) -> int | None:
        self.buf += data
        buf, base = self.buf, self.base
        while True:
            if self.candidate is None:
                found = self.line.search(buf, max(self.next - base, 0))
                if found is None:
                    self.next = base + max(self.next - base, len(buf) - START_LINE_MAX, 0)
                    return None
                self.candidate, self.checked = base + found.start(), base + found.end()
            i = self.checked - base
            while True:
                found = _HEAD_LINE.match(buf, i)
                if found is None:
                    if buf.find(b"\n", i) < 0:  # the line is still coming
                        if base + len(buf) - self.candidate > GO_MAX_HEADER_BYTES:
                            self.next, self.candidate = self.candidate + 1, None
                            break  # too long a head to be one
                        self.checked = base + i
                        return None
                    self.next, self.candidate = base + i, None  # no header line: on
                    break
                i = found.end()
                if found.end() - found.start() <= 2:  # the blank line: a whole head
                    start, self.candidate = self.candidate, None
                    self.head_end = base + i
                    return start

    def held(self, start: int) -> bytes:
        """The bytes from stream offset ``start`` on."""
        return bytes(self.buf[start - self.base:])

    def searched(self) -> int:
        """The stream offset before which no start can be found any more: the bytes
        before it can go (reported as what they are)."""
        done = self.next if self.candidate is None else min(self.next, self.candidate)
        return max(done, self.base)

    def drop(self, before: int) -> None:
        """Forget the bytes before stream offset ``before``."""
        cut = before - self.base
        if cut > 0:
            del self.buf[:cut]
            self.base = before


class MessageFraming:
    """Cuts the stream where the codec's h11 said each message (or stretch of
    undecodable bytes) ended: the codec queues those stream offsets (:meth:`cut`) before
    it feeds the same bytes to the reassembler, and says how long the message in
    progress is once its head tells (:attr:`expected`), so that its body's chunks wait
    unjoined. ``follow`` keeps a message whose length no head told (chunks, a body up to
    the close) unjoined until its end is queued."""

    name = "http-messages"

    def __init__(self) -> None:
        self.ends: deque[int] = deque()
        self.at = 0  # stream offset of the next unit's start
        self.expected: int | None = None  # where the message in progress ends, when known

    def cut(self, end: int) -> None:
        """A unit ends at stream offset ``end``."""
        self.ends.append(end)
        self.expected = None

    def measure(self, buf: bytes, pos: int) -> int | None:
        if self.ends:
            end = self.ends.popleft()
            length, self.at = end - self.at, end
            return length
        if self.expected is not None and self.expected - self.at > len(buf) - pos:
            return self.expected - self.at  # not all here yet: wait for that much
        return None  # h11 has not said where it ends

    def follow(self, chunk: bytes) -> int:
        return 0 if self.ends else 1

    def resync(self, buf: bytes | bytearray, pos: int) -> int | None:
        return None  # every unit is cut where h11 said: nothing to search for here
