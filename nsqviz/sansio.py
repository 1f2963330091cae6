"""The sans-IO base every protocol's connections and observer stand on (h11's shape).

A protocol's connection object per role (:class:`Connection`) owns no socket, thread or
clock: ``receive(data, segment=..., now=...)`` returns the events the bytes completed
(``b""``: the peer closed its side), ``gap()`` says the capture lost bytes here, and
``closed`` says nothing more will be read. What every protocol shares lives here once:

* **receive and end of stream**: bytes go through the protocol-free
  :class:`~nsqviz.stream.Reassembler` with the protocol's framing rule; at the end the
  frame in progress becomes a :class:`Truncated` event, undecodable bytes the protocol's
  violation, and :class:`ConnectionClosed` ends the list -- the two events every
  protocol shares, declared here once on the base of every protocol's events
  (:class:`Event`);
* **gaps and resync**: after lost bytes the frame in progress is dropped and handed back
  with the length it was to have (proven boundary) or ``None`` (a resync guess follows);
  a ``passive`` connection (a capture's observer) resynchronises after bytes that do not
  frame, an active one stops there as the real peer would;
* **provenance**: with ``provenance=True`` every event keeps the reassembled
  :class:`~nsqviz.stream.RawFrame` it came from (which packets, which offsets); off by
  default for both roles, because the hot paths (a broker, a client library, the
  benchmarks) do not pay for it -- observers default to it, since captures want it;
* **one error family**: :class:`ProtocolError`, with :class:`LocalProtocolError` (we
  were about to send what the protocol forbids) and :class:`GrammarError` (bytes that do
  not fit the grammar, naming offset, field and reason) below it;
* **violations**: a peer's misbehaviour is data, an event with ``code``, ``text``,
  ``field``, ``reason``, ``offset``, ``field_offset`` and ``fatal``, each with one meaning
  in every protocol (:class:`Violation`; :func:`violation_fields` is how every record
  shows one);
* **the observer** (:class:`Observer`): both roles, passive, fed the two directions in
  capture order; a protocol tells one role what the other saw through the roles' public
  methods, never their private ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any, Protocol

from nsqviz.stream.direction import Direction
from nsqviz.stream.reassembly import FramingError, Garbage, RawFrame, Reassembler
from nsqviz.stream.reassembly import Truncated as StreamTruncated

__all__ = [
    "Connection",
    "ConnectionClosed",
    "Event",
    "GrammarError",
    "LocalProtocolError",
    "Observer",
    "ProtocolError",
    "Truncated",
    "Violation",
    "truncated_fields",
    "violation_fields",
]


class Event:
    """Base of every protocol's events (each protocol's ``Event`` derives from it), and
    of the two they all share: :class:`Truncated` and :class:`ConnectionClosed`. Events
    are frozen dataclasses; this base holds no field, so that each protocol chooses its
    own (NSQ's commands and frames keep their ``raw`` frame positional, say)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Truncated(Event):
    """The stream ended inside a unit (a frame, a message): ``data`` is the part that
    arrived, from stream offset ``offset``; ``expected`` the unit's full size when its
    length had arrived, else ``None``. ``raw``: those bytes with the packets they came
    from, where the connection keeps provenance."""

    offset: int
    data: bytes
    expected: int | None
    raw: RawFrame | None = _field(default=None, kw_only=True, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ConnectionClosed(Event):
    """The peer closed its side of the connection: nothing more comes from it."""


def truncated_fields(t: Truncated) -> dict[str, Any]:
    """A :class:`Truncated` event's fields as every record shows them (a truncated
    unit's record adds the reason, in its protocol's word for the unit)."""
    return {"offset": t.offset, "expected": t.expected, "data": t.data.hex()}


class ProtocolError(Exception):
    """Base of every error a protocol's grammar or codec raises."""


class LocalProtocolError(ProtocolError):
    """We were about to send something the protocol forbids in the current state."""


class GrammarError(ProtocolError):
    """Bytes that do not fit a grammar: ``offset`` where in the input it was noticed,
    ``field`` the field that failed in the protocol's words (``None``/empty: the frame's
    own structure) and ``reason`` why; ``path``, when a ``construct`` grammar raised it,
    where in the grammar. Not a ``ConstructError``: the hot paths (the struct-based
    decoders, the sans-IO connections) raise it without importing construct, and
    construct's parsers let any exception through (its ``Select`` and greedy repeats
    try the next choice on any exception alike)."""

    def __init__(self, reason: str, *, offset: int | None = None, field: str | None = None,
                 path: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.offset = offset
        self.field = field
        self.path = path

    def __str__(self) -> str:
        where = f" at offset {self.offset}" if self.offset is not None else ""
        return f"{type(self).__name__}{where}: {self.reason}"


class Violation(Protocol):
    """What every protocol's violation event carries, with one meaning in all of them
    (NSQ's, nsqlookupd's and TubeMQ's ``Violation`` are each this; a test holds them to
    it). Offsets are stream offsets of the direction the bytes came in, counted from the
    first byte the connection object read."""

    @property
    def code(self) -> str:
        """The kind of violation in the protocol's words: the error code the server
        answers it with (``E_BAD_TOPIC``), or the decoder's name for it where the
        protocol has no code (TubeMQ's ``BadToken``); ``""`` when the server answers
        nothing."""
        ...

    @property
    def text(self) -> str:
        """What the server says about it (the text of its error answer), or
        :attr:`reason` where the server says nothing of its own."""
        ...

    @property
    def field(self) -> str | None:
        """The field at fault, in the protocol's words (``topic``, ``listSize``);
        ``None`` when the unit as a whole is (bytes that do not frame)."""
        ...

    @property
    def reason(self) -> str:
        """Why, for a reader: what is wrong with the field or the bytes."""
        ...

    @property
    def offset(self) -> int | None:
        """Where the unit the violation is about starts -- the command or frame, or the
        undecodable bytes (as a record's ``offset`` is); ``None``: not known."""
        ...

    @property
    def field_offset(self) -> int | None:
        """Where the field at fault starts (the offending byte, where the grammar knows
        it); ``None`` when no field is (then :attr:`offset` is where to look)."""
        ...

    @property
    def fatal(self) -> bool:
        """The real peer closes the connection here."""
        ...


def violation_fields(v: Violation) -> dict[str, Any]:
    """A violation as every record shows it (a command's ``violation``, an error record's
    fields): the same keys, with the same meanings, for every protocol."""
    return {"code": v.code, "text": v.text, "fatal": v.fatal, "field": v.field,
            "reason": v.reason, "offset": v.offset, "field_offset": v.field_offset}


class Connection(ABC):
    """One role of a connection: receive, end of stream, gaps, provenance, ``closed``.

    A subclass gives its framing rule (:meth:`_reassembler`), decodes what the
    reassembler cut (:meth:`_receive`) and names its event for undecodable bytes
    (:meth:`_on_garbage`); a frame cut short by the end is a :class:`Truncated`, the end
    itself a :class:`ConnectionClosed`, in every protocol.
    """

    def __init__(self, *, provenance: bool = False, passive: bool = False) -> None:
        self.provenance = provenance
        self.passive = passive
        self._eof = False
        self._reasm = self._reassembler(after_gap=False)

    @property
    def closed(self) -> bool:
        """The connection is over: nothing more is read (nor, for an active role, sent)."""
        return self._eof

    def receive(self, data: bytes, *, segment: int | None = None,
                now: float | None = None) -> list[Any]:
        """Feed bytes that arrived (at the caller's time ``now``, where the protocol
        measures latencies); ``b""`` means the peer closed its side."""
        out: list[Any] = []
        if self._eof:
            return out
        if not data:
            self._eof = True
            for item in self._reasm.finish():
                if isinstance(item, StreamTruncated):
                    raw = (RawFrame(item.data, item.offset, item.sources) if self.provenance
                           else None)
                    out.append(Truncated(item.offset, item.data, item.expected, raw=raw))
                else:
                    self._on_garbage(item, out)
            out.append(ConnectionClosed())
            self._ended()
            return out
        if self.closed:
            return out
        self._receive(data, out, segment, now)
        return out

    def gap(self) -> tuple[bytes, int | None]:
        """Bytes are missing from the stream here (a capture lost them).

        The frame in progress is lost: it is dropped and returned, with the length it
        was to have when its length fields had arrived (``None`` otherwise), so that the
        caller knows whether the next frame boundary is proven or must be searched for.
        A live socket never loses bytes; only a capture needs this.
        """
        partial = self._reasm.take_remaining()
        self._reasm = self._reassembler(after_gap=True)
        try:
            length = self._reasm.rule.measure(partial, 0) if partial else None
        except FramingError:
            length = None
        return partial, length

    def _ended(self) -> None:  # noqa: B027 - a hook; a protocol without states needs none
        """The stream has ended (after the events that say so); a state to move."""

    @abstractmethod
    def _reassembler(self, *, after_gap: bool) -> Reassembler:
        """A reassembler with this role's framing rule (``after_gap``: for the bytes after
        a capture lost some, or after the stream changed form)."""

    @abstractmethod
    def _receive(self, data: bytes, out: list[Any], segment: int | None,
                 now: float | None) -> None:
        """Frame and decode ``data`` into ``out``."""

    @abstractmethod
    def _on_garbage(self, garbage: Garbage, out: list[Any]) -> None:
        """Bytes that do not frame: the protocol's violation."""


class Observer(ABC):
    """Both roles of someone else's connection, passive, for captures.

    ``server`` decodes what the client sent, ``client`` what the server sent; after each
    direction's events the protocol's :meth:`_saw_c2s`/:meth:`_saw_s2c` tell the other
    role what it could not see for itself (through its public methods).
    """

    server: Connection
    client: Connection
    encrypted: bool = False
    """True once the connection switched to TLS: nothing more is decodable."""

    def c2s(self, data: bytes, *, segment: int | None = None,
            now: float | None = None) -> list[Any]:
        """Bytes the client sent; returns its commands or requests (and violations)."""
        if self.encrypted:
            return []
        events = self.server.receive(data, segment=segment, now=now)
        return self._saw_c2s(events, now)

    def s2c(self, data: bytes, *, segment: int | None = None,
            now: float | None = None) -> list[Any]:
        """Bytes the server sent; returns its frames or answers (and violations)."""
        if self.encrypted:
            return []
        events = self.client.receive(data, segment=segment, now=now)
        return self._saw_s2c(events, now)

    def gap(self, direction: Direction | str) -> tuple[bytes, int | None]:
        """Bytes of ``direction`` are missing here; see :meth:`Connection.gap`."""
        return (self.server if direction == Direction.C2S else self.client).gap()

    @abstractmethod
    def _saw_c2s(self, events: list[Any], now: float | None) -> list[Any]:
        """Tell the client role about the client's events; return what to report."""

    @abstractmethod
    def _saw_s2c(self, events: list[Any], now: float | None) -> list[Any]:
        """Tell the server role about the server's events; return what to report."""
