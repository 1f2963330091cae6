"""One direction of an HTTP connection read through h11: what both sans-IO roles of
:mod:`nsqviz.http.codec` share, on the base every protocol shares
(:class:`nsqviz.sansio.Connection`).

A :class:`MessageReader` feeds every byte to an ``h11.Connection`` of its role -- a
server-role one reads requests, a client-role one responses -- so HTTP's framing
(``Content-Length``, chunks, a body up to the close, a HEAD's answer without one,
pipelined requests, ``Connection: close``, a protocol switch) is judged once, by the
library nsqviz's own servers speak HTTP with; :mod:`nsqviz.http.framing` cuts each message
out of the stream where h11 said it ended, with the packets it came from. What h11
refuses becomes a :class:`~nsqviz.http.events.Violation` with the offset of the message
it is in, the field at fault in HTTP's words (:func:`field_of`) and h11's reason;
decoding goes on at the next plausible message head (:class:`nsqviz.http.framing.
StartSearch`, a guess), as after a gap that lost where a message ends, and from the
middle of a connection. Time is linear in the bytes fed (h11 searches its buffer once
and is given at most :data:`~nsqviz.http.framing.PIECE` bytes at a time) and memory
bounded (a message is kept up to :data:`~nsqviz.http.framing.MAX_KEPT` bytes).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import replace
from http import HTTPStatus
from typing import Any

import h11

from nsqviz.http.events import (
    Event,
    Message,
    Request,
    Switched,
    Violation,
)
from nsqviz.http.framing import (
    GO_MAX_HEADER_BYTES,
    MAX_KEPT,
    PIECE,
    MessageFraming,
    StartSearch,
)
from nsqviz.sansio import Connection
from nsqviz.stream.reassembly import STALL_LIMIT, Garbage, RawFrame, Reassembler

__all__ = ["MessageReader", "chunked", "field_of", "headers", "latin1"]

# what a cut of the stream is (a reader queues one per cut, in stream order)
_UNIT, _PIECE, _GARBAGE, _SWITCHED = range(4)

_FIELDS = (
    # h11's reasons, by words in them, as the field RFC 9112's grammar names
    ("request line", "request-line"),
    ("status line", "status-line"),
    ("header line", "field-line"),
    ("header name", "field-name"),
    ("header value", "field-value"),
    ("ontent-length", "Content-Length"),
    ("ransfer-encoding", "Transfer-Encoding"),
    ("chunk", "chunk"),
    ("Host", "Host"),
    ("HTTP version", "HTTP-version"),
    ("Receive buffer too long", "head"),
    ("complete message body", "message-body"),
)


def field_of(reason: str) -> str | None:
    """The field an h11 reason is about, in HTTP's words (``None``: the message as a
    whole)."""
    return next((field for word, field in _FIELDS if word in reason), None)


_BYTEARRAY = re.compile(r"bytearray\((b'.*'|b\".*\")\)")


def _answer_text(status: int) -> str:
    """A server's status line words for ``status`` (``400 Bad Request``)."""
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def latin1(value: bytes) -> str:
    """Bytes of a head as text (HTTP's heads are octets: latin-1 keeps each)."""
    return value.decode("latin-1")


def headers(event: Any) -> tuple[tuple[str, str], ...]:
    """An h11 head's header lines, names as sent."""
    return tuple((latin1(n), latin1(v)) for n, v in event.headers.raw_items())


def chunked(event: Any) -> bool:
    """Does an h11 head say its body comes in chunks (any ``Transfer-Encoding``)?"""
    return any(n.lower() == b"transfer-encoding" for n, _ in event.headers.raw_items())


class MessageReader(Connection):
    """What both roles share: an h11 connection of :attr:`role` fed every byte, a
    reassembler cutting each message where h11 said it ended, the message in progress,
    and the search for the next message after bytes h11 refuses."""

    role: Any  # h11.SERVER (reads requests) or h11.CLIENT (reads responses)
    starts: Any  # the pattern the peer's messages start with
    _switch_to = ""

    def __init__(self, *, provenance: bool = False, passive: bool = False,
                 midstream: bool = False) -> None:
        self._done: deque[tuple[int, Any]] = deque()  # what each queued cut is
        self._early: deque[tuple[int, Event]] = deque()  # events no cut carries, each
        # after the cuts queued before it
        self._cuts = 0  # cuts queued in this stream
        self._flushed = 0  # cuts turned into events
        self._kept: RawFrame | None = None  # the kept start of a long message
        self._chunk = b""  # this receive's bytes (not yet given to the reassembler)
        self._segment: int | None = None  # ... and their packet
        self._total = 0  # bytes received in this stream
        self._start = 0
        self._restart(0)
        # while the bytes are no message: where the next starts (from the middle: anywhere)
        self._search: StartSearch | None = StartSearch(self.starts, 0, 0) \
            if midstream else None
        self._resumed: tuple[int, int] | None = None  # the last start found, its head's end
        self._refusal: Violation | None = None  # the violation the search began with
        self._switched: str | None = None  # what the connection switched to
        self._switch_told = False
        super().__init__(provenance=provenance, passive=passive)

    # -- the message in progress ---------------------------------------------------

    def _restart(self, at: int, held: bytes = b"") -> None:
        """A fresh h11 for the stream from offset ``at``; ``held``: the bytes from there
        the old one had not read."""
        self._h11 = h11.Connection(self.role, max_incomplete_event_size=GO_MAX_HEADER_BYTES)
        self._origin = at  # stream offset of the first byte given to this h11
        self._fed = 0
        self._start = at  # where the unit in progress starts
        self._head: Message | None = None
        self._head_end = at
        self._body = bytearray()
        self._body_size = 0
        self._pieced = False  # the message in progress is past MAX_KEPT: cut in pieces
        if held:
            self._h11.receive_data(held)
            self._fed = len(held)

    def _consumed(self) -> int:
        """The stream offset up to which h11 has read (its buffer is small here: the rest
        of one piece)."""
        return self._origin + self._fed - len(self._h11.trailing_data[0])

    def _held(self) -> bytes:
        return self._h11.trailing_data[0]

    def remaining(self) -> RawFrame:
        """The bytes of the unit in progress, with the packets they came from."""
        return self._reasm.remaining()

    def in_progress(self) -> Message | None:
        """The message whose head was read and whose end was not seen yet, with its body
        so far (``None``: none)."""
        head = self._head
        if head is None:
            return None
        return replace(head, body=bytes(self._body), body_size=self._body_size)

    # -- receive -----------------------------------------------------------------------

    def _reassembler(self, *, after_gap: bool) -> Reassembler:
        self._rule = MessageFraming()
        return Reassembler(self._rule, provenance=self.provenance, resync=False)

    def _receive(self, data: bytes, out: list[Any], segment: int | None,
                 now: float | None) -> None:
        self._total += len(data)
        self._chunk = data
        self._segment = segment
        self._parse(data)
        self._flush(self._reasm.feed(data, segment=segment), out)

    def receive(self, data: bytes, *, segment: int | None = None,
                now: float | None = None) -> list[Any]:
        if data or self.closed:
            return super().receive(data, segment=segment, now=now)
        # the end: a body that runs to the close ends here; what is left was cut short
        self._chunk = b""
        self._at_end()
        out: list[Any] = []
        if self._done:
            self._flush(self._reasm.feed(b"", segment=segment), out)
        else:
            self._flush([], out)
        return out + super().receive(b"", segment=segment, now=now)

    def _flush(self, items: list[Any], out: list[Any]) -> None:
        """The events of the cuts the reassembler made (``items``), in stream order with
        the events no cut carries."""
        early = self._early
        for frame in items:
            while early and early[0][0] <= self._flushed:
                out.append(early.popleft()[1])
            assert type(frame) is RawFrame  # the rule cuts, it never refuses
            kind, event = self._done.popleft()
            self._flushed += 1
            if kind == _PIECE:
                self._kept = frame if self._kept is None else RawFrame(
                    self._kept.data, self._kept.offset, self._kept.sources + frame.sources)
                continue
            if self._kept is not None:
                frame = RawFrame(self._kept.data, self._kept.offset,
                                 self._kept.sources + frame.sources)
                self._kept = None
            out.append(replace(event, raw=frame) if self.provenance else event)
        while early:
            out.append(early.popleft()[1])

    def _cut(self, end: int, kind: int, event: Any) -> None:
        """The unit from :attr:`_start` ends at stream offset ``end``: it was ``event``."""
        self._rule.cut(end)
        self._done.append((kind, event))
        self._cuts += 1
        self._start = end

    def _parse(self, data: bytes) -> None:
        work = data
        while True:
            if self._switched is not None:
                self._switched_to(self._total)
                return
            if self._search is not None:
                work = self._resync(work)
                if self._search is not None:
                    return
            elif not self._drain():  # what h11 holds and can read now (after an answer)
                continue  # refused (now resyncing) or switched
            elif not work:
                return
            else:
                work = self._feed(work)

    def _feed(self, work: bytes) -> bytes:
        """Give ``work`` to h11 a piece at a time. Returns ``b""``: after h11 refused
        bytes the role searches for the next start in what h11 held, which
        :meth:`_refused` took from the reassembler and this receive's bytes."""
        pos = 0
        while pos < len(work):
            self._before_piece()
            piece = work[pos:pos + PIECE]
            self._h11.receive_data(piece)
            self._fed += len(piece)
            pos += len(piece)
            if not self._drain():
                break
        return b""

    def _drain(self) -> bool:
        """Every event h11 has; ``False`` when it refused the bytes or the connection
        switched protocols."""
        while True:
            conn = self._h11
            try:
                ev = conn.next_event()
            except h11.RemoteProtocolError as exc:
                self._refused(str(exc), exc.error_status_hint)
                return False
            if ev is h11.NEED_DATA or ev is h11.PAUSED:
                if conn.their_state is h11.SWITCHED_PROTOCOL:
                    self._switch()
                    return False
                return True
            kind = type(ev)
            if isinstance(ev, h11.Data):
                self._on_data(ev.data)
            elif kind is h11.EndOfMessage:
                self._complete()
                self._next_cycle()
            elif kind is h11.InformationalResponse:
                self._on_head(ev)
                self._complete()
            elif kind is h11.Request or kind is h11.Response:
                self._on_head(ev)
            # ConnectionClosed: the end of the stream says so

    def _on_head(self, ev: Any) -> None:
        """A head was read: the message in progress (its body follows)."""
        self._head_end = self._consumed()
        head = self._head_event(ev, self._head_end - self._start)
        self._head = head
        body = self._body_hint(head)
        if body is not None:
            self._rule.expected = self._head_end + body

    def _on_data(self, data: bytes) -> None:
        self._body_size += len(data)
        room = MAX_KEPT - len(self._body)
        if room > 0:
            self._body += data[:room]
        consumed = self._consumed()
        if self._pieced or consumed - self._start > MAX_KEPT:
            # the kept start stays; the rest of a long message goes as it comes
            self._pieced = True
            self._rule.ends.append(consumed)
            self._done.append((_PIECE, None))
            self._cuts += 1

    def _complete(self) -> None:
        head = self._head
        assert head is not None
        message = replace(head, body=bytes(self._body), body_size=self._body_size)
        self._cut(self._consumed(), _UNIT, self._judge(message))
        self._head = None
        self._body, self._body_size, self._pieced = bytearray(), 0, False

    def _refused(self, reason: str, status: int) -> None:
        """h11 refused the bytes of the unit in progress: a violation from its start, then
        (a passive role) a search for the next start after it."""
        head = self.in_progress()
        code = self._code(status)
        start = self._start
        reason = self._reason(_BYTEARRAY.sub(r"\1", reason))
        self._refusal = Violation(
            code, _answer_text(status) if code else reason, start,
            message=head if isinstance(head, Request) else None, field=field_of(reason),
            reason=reason, field_offset=self._head_end if head is not None else None)
        self._head = None
        self._on_refusal(start, head)
        # every byte from just after the unit's start is searched for the next start --
        # from the end of its head if it was one a search found (h11 read it as a head)
        after = start + 1
        if head is None and self._resumed is not None and self._resumed[0] == start:
            after = self._resumed[1]
        self._resumed = None
        self._search = StartSearch(self.starts, self._reasm.offset, after,
                                   self._reasm.buffered + self._chunk)
        self._search.drop(start)

    def _resync(self, work: bytes) -> bytes:
        """Look for the next message start in ``work`` (and what was held back); returns
        what a fresh h11 reads from there, or ``b""`` (none yet)."""
        search = self._search
        assert search is not None
        if not self.passive:  # a real peer reads nothing more
            self._stalled_to(self._total)
            return b""
        at = search.feed(work)
        if at is None:
            done = search.searched()
            search.drop(done)
            if done - self._start > STALL_LIMIT:  # a long stretch goes on as it grows
                self._stalled_to(done)
            return b""
        self._stalled_to(at)
        self._reported = False
        rest = search.held(at)
        self._resumed = (at, search.head_end)
        self._search = None
        self._restart(at)
        return rest

    def _stalled_to(self, end: int) -> None:
        """The bytes from :attr:`_start` to ``end`` are no message: the refusal that began
        the search, else undecodable bytes (continuing a reported stretch, or not)."""
        if end <= self._start:
            return
        violation = self._refusal
        if violation is None:
            reason = (f"not {'a request' if self.role is h11.SERVER else 'a response'}: "
                      "no message starts here")
            violation = Violation("", reason, self._start, reason=reason, fatal=False,
                                  continued=self._reported)
        self._refusal = None
        self._reported = True
        self._cut(end, _GARBAGE, violation)

    _reported = False

    def _switch(self) -> None:
        """The connection switched protocols: what h11 holds and all that follows is not
        HTTP."""
        self._switched = self._switch_to
        self._start = self._consumed()

    def _switched_to(self, end: int) -> None:
        if end > self._start:
            self._cut(end, _SWITCHED, Switched(self._switched or "", self._start,
                                               continued=self._switch_told))
            self._switch_told = True

    def _at_end(self) -> None:
        """The peer closed: what h11 still has."""
        if self._search is None and self._switched is None:
            self._drain()  # what it held while a request waited for its answer
        if self._switched is not None:
            self._switched_to(self._total)
            return
        if self._search is not None:
            self._stalled_to(self._total)
            return
        self._h11.receive_data(b"")
        try:
            while True:
                ev = self._h11.next_event()
                kind = type(ev)
                if isinstance(ev, h11.Data):
                    self._on_data(ev.data)
                elif kind is h11.EndOfMessage:
                    self._complete()
                elif ev is h11.NEED_DATA or ev is h11.PAUSED or kind is h11.ConnectionClosed:
                    return
        except h11.RemoteProtocolError:
            return  # cut short: the reassembler's end reports what arrived

    # -- what each role adds -------------------------------------------------------------

    def _head_event(self, ev: Any, head_size: int) -> Message:
        raise NotImplementedError

    def _body_hint(self, head: Message) -> int | None:
        """How long the body is, as the head says (``None``: chunks, or up to the close)
        -- a hint for the reassembler, which waits for h11's own end all the same."""
        if head.header("transfer-encoding") is not None:
            return None
        return head.content_length if head.content_length is not None else 0

    def _judge(self, message: Message) -> Event:
        """The event of a whole message (a role may find a violation in it)."""
        return message

    def _code(self, status: int) -> str:
        """What the peer answers bytes h11 refuses (the server's status; nothing to the
        server's own bytes)."""
        return ""

    def _reason(self, reason: str) -> str:
        """h11's reason, in this role's words."""
        return reason

    def _on_refusal(self, start: int, head: Message | None) -> None:
        """h11 refused the unit starting at stream offset ``start`` (``head``: the
        message whose head was read, if any)."""

    def _packet_at(self, offset: int) -> int | None:
        """The packet the byte at stream offset ``offset`` came in (where known)."""
        if offset >= self._total - len(self._chunk):
            return self._segment
        held = self._reasm.remaining()
        for source in held.sources:
            if offset - held.offset < source.end - source.start:
                return source.segment
            offset -= source.end - source.start
        return None

    def _before_piece(self) -> None:
        """Before h11 reads more bytes (a role keeps its h11 in step here)."""

    def _next_cycle(self) -> None:
        """A message ended: make h11 ready for the next."""

    # -- the sans-IO base's hooks ---------------------------------------------------------

    def _on_garbage(self, garbage: Garbage, out: list[Any]) -> None:  # pragma: no cover
        raise AssertionError("the framing rule cuts, it never refuses")

    def gap(self) -> tuple[bytes, int | None]:
        """Bytes are missing here. The message in progress is lost: its bytes so far are
        returned with its full length when its head said it (``Content-Length``: the next
        message starts right after it, a proven boundary), else ``None``: the next start
        is searched for. The stream's offsets start again after the gap."""
        expected = self._rule.expected
        start = self._start
        partial = self._reasm.take_remaining()
        length = None if expected is None or self._search is not None else expected - start
        self._done.clear()
        self._cuts = self._flushed = 0
        self._kept = None
        self._reasm = self._reassembler(after_gap=True)
        self._total = 0
        self._restart(0)
        self._search = StartSearch(self.starts, 0, 0) \
            if length is None and self._switched is None else None
        self._resumed, self._refusal = None, None
        self._reported = False
        return partial, length
