"""Sans-IO NSQ connections, one object per role, in the style of h11: what both roles share.

A :class:`~nsqviz.nsq.client_connection.ClientConnection` or
:class:`~nsqviz.nsq.server_connection.ServerConnection` owns no socket, no thread and no
clock. Bytes that arrived go into ``receive(data)``, which returns the events they
completed; an event you want to send goes into ``send(event)``, which returns the bytes
to write. In between, the object tracks what the protocol says about the connection --
magic sent, identified, authenticated, subscribed, RDY, messages in flight, closing,
compression -- and refuses or reports what breaks it.

Both directions use the same pipeline (:class:`nsqviz.sansio.Connection`, the base every
protocol shares): optional decompression, the stream
:class:`~nsqviz.stream.Reassembler` with NSQ's framing rule, then the grammar's fast
path. That is what lets the broker, the notebook session, pcap replay and Spark show the
same events for the same bytes.

Misuse by *us* raises :class:`~nsqviz.sansio.LocalProtocolError` from ``send`` (h11's
rule: you cannot send what the protocol forbids -- unless you ask with ``check=False``,
which is how a notebook shows what nsqd answers to a bad command). Misbehaviour by the
*peer* is data: ``receive`` returns a :class:`~nsqviz.nsq.events.Violation` carrying the
error nsqd v1.3.0 would answer with, and after a fatal one the connection is ``CLOSED``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nsqviz import sansio
from nsqviz.nsq.compression import Deflate, Snappy, compressor
from nsqviz.nsq.events import (
    ConnectionClosed,
    Error,
    Event,
    TLSUpgrade,
    Violation,
)
from nsqviz.nsq.grammar_errors import BadJSON
from nsqviz.nsq.json_object import read_object
from nsqviz.nsq.states import TRANSITIONS, Role, State
from nsqviz.sansio import Connection
from nsqviz.stream.reassembly import FramingRule, Garbage, RawFrame, Reassembler

__all__ = ["DEFAULT_MAX_RDY_COUNT"]

_CLOSED = State.CLOSED  # read once a frame (see nsqviz.stream.direction.C2S)

DEFAULT_MAX_RDY_COUNT = 2500
"""nsqd's --max-rdy-count default; clients must assume it without feature negotiation."""


class _Connection(Connection):
    """What both roles share beyond the sans-IO base (:class:`nsqviz.sansio.Connection`):
    the state, the compression switch and the TLS switch point.

    A ``passive`` connection observes someone else's traffic (a capture): it decodes
    without judging -- the real peer's verdicts are in the other direction -- reads on
    after undecodable bytes by resynchronising, and is never closed by a violation.
    """

    role: Role  # whose row of the transition table this connection follows

    def __init__(self, *, provenance: bool, passive: bool = False) -> None:
        self.state = State.INIT  # sets _row too
        self.compression: str | None = None
        self.tls = False
        self._codec: Snappy | Deflate | None = None
        self._held = b""  # received before a compression switch, still to decompress
        super().__init__(provenance=provenance, passive=passive)

    def _reassembler(self, *, after_gap: bool) -> Reassembler:
        rule = self._rule(expect_magic=not after_gap)
        # an observer reports refused bytes where they start, as the peer answers them
        return Reassembler(rule, provenance=self.provenance, resync=self.passive,
                           report_at_start=self.passive)

    @property
    def state(self) -> State:
        """Where the connection is (:class:`~nsqviz.nsq.states.State`)."""
        return self._state

    @state.setter
    def state(self, state: State) -> None:
        self._state = state
        # the state's row of the table (what may happen now, and where it leads), kept
        # with it: a command sent or read looks up no enum member in the table
        self._row = TRANSITIONS[self.role][state]

    def _advance(self, event: type[sansio.Event]) -> None:
        """Take the transition ``event`` leads to from the current state, if any."""
        nxt = self._row.get(event)
        if nxt is not None and nxt is not self._state:
            self.state = nxt

    def took(self, event: type[sansio.Event]) -> None:
        """An observer saw a unit cut short by the capture that leads to ``event``'s
        transition: take it as if the unit had been read whole."""
        self._advance(event)

    def _fail(self) -> None:
        """A fatal violation: a peer closes; an observer reads on."""
        if not self.passive:
            self._advance(Error)

    # subclasses provide
    def _rule(self, *, expect_magic: bool) -> FramingRule:  # pragma: no cover - abstract
        raise NotImplementedError

    def _on_frame(
        self, buf: bytes, start: int, end: int, base: int, raw: RawFrame | None, out: list[Event]
    ) -> bool:  # pragma: no cover - abstract
        """Decode ``buf[start:end]`` (stream offset ``base + start``) into ``out``; return
        True if the stream changes form after it."""
        raise NotImplementedError

    def _ended(self) -> None:
        self._advance(ConnectionClosed)

    def _receive(self, data: bytes, out: list[Any], segment: int | None,
                 now: float | None) -> None:
        if self._held:
            data, self._held = self._held + data, b""
        codec = self._codec
        if codec is None:
            self._pump(data, out, segment)
            return
        for piece in self._decompress(codec, data, out):
            self._pump(piece, out, segment)
            if self.closed:
                break

    @property
    def closed(self) -> bool:
        """The connection is over: nothing more is read or sent."""
        return self._state is _CLOSED

    def _pump(self, data: bytes, out: list[Event], segment: int | None) -> None:
        """Frame and decode ``data``; if the stream changes form after a frame (TLS,
        compression), re-read the bytes after it in their new form.

        Runs of the frames that make up a busy connection's steady traffic (messages to
        a consumer, FINs from it) are handed to the role's ``_bulk`` hook, which decodes
        them without a call per frame; everything else goes frame by frame.
        """
        reasm = self._reasm
        buf, base, items = reasm.cut(data, segment=segment)
        prov = self.provenance
        bulk = None if prov else self._bulk
        on_frame = self._on_frame
        n = len(items)
        i = pos = 0
        while i < n:
            if bulk is not None:
                i, pos = bulk(buf, base, items, i, pos, out)
                if i >= n:
                    return
            item = items[i]
            i += 1
            if isinstance(item, int):
                start, pos = pos, item
                raw = reasm.frame(buf, base, start, item) if prov else None
                if on_frame(buf, start, item, base, raw, out):
                    self._switch(buf[pos:], out, segment)
                    return
            else:
                self._on_garbage(item, out)
                pos = item.offset - base + len(item.data)
            if self._state is _CLOSED:
                return

    def _bulk(
        self, buf: bytes, base: int, items: list[int | Garbage], i: int, pos: int,
        out: list[Event],
    ) -> tuple[int, int]:
        """Decode a run of common frames from ``items[i]`` on; return where it stopped."""
        return i, pos

    def _switch(self, rest: bytes, out: list[Event], segment: int | None) -> None:
        self._reasm = self._reassembler(after_gap=True)
        if not rest:
            return
        if self._tls_pending():
            out[-1] = TLSUpgrade(rest)  # handshake bytes: the caller's TLS layer reads them
            return
        codec = self._codec
        if codec is None:
            if not self.closed:
                self._pump(rest, out, segment)
            return
        for piece in self._decompress(codec, rest, out):
            if self.closed:
                break
            self._pump(piece, out, segment)

    def _tls_pending(self) -> bool:
        return False

    def unframed(self) -> RawFrame:
        """The bytes of the frame in progress, with the segments they came from."""
        return self._reasm.remaining()

    def gap(self) -> tuple[bytes, int | None]:
        """See :meth:`nsqviz.sansio.Connection.gap`; bytes held back for a compression
        switch go with the frame in progress."""
        self._held = b""
        return super().gap()

    def _decompress(self, codec: Snappy | Deflate, data: bytes, out: list[Event]
                    ) -> Iterator[bytes]:
        """The decompressed pieces of ``data``; a broken stream ends them with a fatal
        violation."""
        pieces = codec.decompress(data)
        while True:
            try:
                piece = next(pieces)
            except StopIteration:
                return
            except Exception as exc:  # snappy and zlib raise their own types
                text = f"bad {self.compression} stream: {exc}"
                out.append(Violation("", text, True, self._reasm.offset, reason=text))
                self._advance(Error)  # nothing after a broken stream is readable
                return
            yield piece

    def _start_compression(self, kind: str, level: int | None) -> None:
        self._codec = compressor(kind, level)
        self.compression = kind

    def _wrap(self, data: bytes) -> bytes:
        return self._codec.compress(data) if self._codec is not None else data


# ---------------------------------------------------------------- helpers both roles use


def _garbage_raw(garbage: Garbage) -> RawFrame:
    """Undecodable bytes as a frame of their own, so that a violation says which bytes
    (and, with provenance, which packets) it is about."""
    return RawFrame(garbage.data, garbage.offset, garbage.sources)


def _continued(garbage: Garbage) -> Violation:
    """The rest of undecodable bytes whose start was reported (with the peer's answer):
    shown, skipped to the next frame, answered by nobody."""
    return Violation("", garbage.reason, False, garbage.offset, _garbage_raw(garbage),
                     reason=garbage.reason, continued=True)


def _json_or_none(data: bytes) -> dict[str, Any] | None:
    try:
        return read_object(data)
    except BadJSON:
        return None
