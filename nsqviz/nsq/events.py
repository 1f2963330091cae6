"""The things that happen on an NSQ connection, as small frozen dataclasses.

Every event is an :class:`Event` (on :class:`nsqviz.sansio.Event`, the base of every
protocol's); commands are :class:`Command` (client to server), frames
:class:`ServerFrame` (server to client), and the codec's own observations
:class:`Observation`; the stream ending inside a frame (:class:`Truncated`) and the peer
closing (:class:`ConnectionClosed`) are the events every protocol shares
(:mod:`nsqviz.sansio`).

Commands (client to server) and frames (server to client) are the same objects whether
they are sent or received, parsed from a pcap or built in a notebook -- as in h11, where
a ``Request`` is both what a client sends and what a server receives. The remaining
events are the codec's own observations: a negotiated feature switched on, the TLS
switch point, a protocol violation, the end of the stream.

Each event that came off the wire carries the reassembled :class:`~nsqviz.stream.RawFrame`
it was decoded from in ``raw`` (excluded from equality), which says where its bytes were.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any

from nsqviz import sansio
from nsqviz.nsq.errors import ErrorCode
from nsqviz.nsq.wire import HEARTBEAT
from nsqviz.sansio import ConnectionClosed, Truncated
from nsqviz.stream.reassembly import RawFrame

__all__ = [
    "Auth",
    "Cls",
    "Command",
    "CompressionStarted",
    "ConnectionClosed",
    "Dpub",
    "Error",
    "Event",
    "Fin",
    "Identify",
    "Magic",
    "Message",
    "Mpub",
    "Answered",
    "Refused",
    "Nop",
    "Pub",
    "Rdy",
    "Req",
    "Response",
    "ServerFrame",
    "Sub",
    "TLSUpgrade",
    "Touch",
    "Truncated",
    "Violation",
    "NON_FATAL_ERRORS",
    "Observation",
]

_RAW = _field(default=None, compare=False, repr=False)


class Event(sansio.Event):
    """Base of everything the NSQ codec returns or accepts (h11's ``Event``)."""

    __slots__ = ()


class Command(Event):
    """Base of the commands a client sends (the magic included)."""

    __slots__ = ()

    raw: RawFrame | None
    """The frame it was decoded from (``None``: built, not received)."""


class ServerFrame(Event):
    """Base of the frames nsqd sends: :class:`Response`, :class:`Error`, :class:`Message`."""

    __slots__ = ()

    raw: RawFrame | None
    """The frame it was decoded from (``None``: built, not received)."""


class Observation(Event):
    """Base of what the codec itself observes: a switch, a violation, what an answer
    answers (the end of the stream is :class:`Truncated` and :class:`ConnectionClosed`,
    which every protocol shares)."""

    __slots__ = ()


# --------------------------------------------------------------------------- commands


@dataclass(frozen=True, slots=True)
class Magic(Command):
    """The 4 bytes ``"  V2"`` that open a connection and select protocol V2."""

    raw: RawFrame | None = _RAW


@dataclass(frozen=True, slots=True)
class Identify(Command):
    """IDENTIFY: client metadata and feature requests, as a JSON object."""

    data: dict[str, Any]
    raw: RawFrame | None = _RAW

    def __hash__(self) -> int:
        return hash(json.dumps(self.data, sort_keys=True))


@dataclass(frozen=True, slots=True)
class Auth(Command):
    """AUTH: the secret nsqd passes to its auth service."""

    secret: bytes
    raw: RawFrame | None = _RAW


@dataclass(frozen=True, slots=True)
class Sub(Command):
    """SUB: subscribe this connection to a topic's channel (once per connection)."""

    topic: str
    channel: str
    raw: RawFrame | None = _RAW


@dataclass(frozen=True, slots=True)
class Pub(Command):
    """PUB: publish one message."""

    topic: str
    body: bytes
    raw: RawFrame | None = _RAW


@dataclass(frozen=True, slots=True)
class Mpub(Command):
    """MPUB: publish several messages atomically."""

    topic: str
    bodies: tuple[bytes, ...]
    raw: RawFrame | None = _RAW


@dataclass(frozen=True, slots=True)
class Dpub(Command):
    """DPUB: publish one message, delivered after ``defer_time`` milliseconds."""

    topic: str
    defer_time: int
    body: bytes
    raw: RawFrame | None = _RAW


@dataclass(frozen=True, slots=True)
class Rdy(Command):
    """RDY: how many messages the client is ready to have in flight."""

    count: int
    raw: RawFrame | None = _RAW


@dataclass(frozen=True, slots=True)
class Fin(Command):
    """FIN: the message is done."""

    id: bytes
    raw: RawFrame | None = _RAW


@dataclass(frozen=True, slots=True)
class Req(Command):
    """REQ: requeue the message after ``timeout`` milliseconds (0: at once)."""

    id: bytes
    timeout: int
    raw: RawFrame | None = _RAW


@dataclass(frozen=True, slots=True)
class Touch(Command):
    """TOUCH: reset the in-flight timeout of a message."""

    id: bytes
    raw: RawFrame | None = _RAW


@dataclass(frozen=True, slots=True)
class Cls(Command):
    """CLS: start a clean close; nsqd answers CLOSE_WAIT and sends no more messages."""

    raw: RawFrame | None = _RAW


@dataclass(frozen=True, slots=True)
class Nop(Command):
    """NOP: no operation; the usual answer to a heartbeat."""

    raw: RawFrame | None = _RAW


# ----------------------------------------------------------------------------- frames


@dataclass(frozen=True, slots=True)
class Response(ServerFrame):
    """FrameTypeResponse: ``OK``, ``CLOSE_WAIT``, ``_heartbeat_`` or a JSON document."""

    data: bytes
    raw: RawFrame | None = _RAW

    @property
    def is_heartbeat(self) -> bool:
        return self.data == HEARTBEAT

    @property
    def is_ok(self) -> bool:
        return self.data == b"OK"

    def json(self) -> Any:
        return json.loads(self.data)


NON_FATAL_ERRORS = frozenset(code for code in ErrorCode if not code.fatal)
"""The only errors after which nsqd keeps the connection open."""


@dataclass(frozen=True, slots=True)
class Error(ServerFrame):
    """FrameTypeError: ``E_CODE description``."""

    data: bytes
    raw: RawFrame | None = _RAW

    @property
    def code(self) -> str:
        return self.data.split(b" ", 1)[0].decode("ascii", "replace")

    @property
    def text(self) -> str:
        parts = self.data.split(b" ", 1)
        return parts[1].decode("utf-8", "replace") if len(parts) > 1 else ""

    @property
    def fatal(self) -> bool:
        return self.code not in NON_FATAL_ERRORS


@dataclass(frozen=True, slots=True)
class Message(ServerFrame):
    """FrameTypeMessage: a message pushed to a subscribed client."""

    timestamp: int  # nanoseconds since the epoch
    attempts: int
    id: bytes  # 16 ASCII hex digits
    body: bytes
    raw: RawFrame | None = _RAW


# ---------------------------------------------------------------------- observations


@dataclass(frozen=True, slots=True)
class TLSUpgrade(Observation):
    """Both sides must now run the TLS handshake on the socket; ``pending`` are bytes that
    arrived after the IDENTIFY response and belong to the handshake."""

    pending: bytes = b""


@dataclass(frozen=True, slots=True)
class CompressionStarted(Observation):
    """From here on the stream (both directions) is ``"snappy"`` or ``"deflate"``."""

    kind: str
    level: int | None = None


@dataclass(frozen=True, slots=True)
class Violation(Observation):
    """The peer broke the protocol (or sent bytes that do not parse).

    ``code``/``text`` are what nsqd answers (``E_INVALID``, ``E_BAD_BODY`` ...); after a
    ``fatal`` one the connection is finished. ``code`` is empty where nsqd answers
    nothing: it just closes (``fatal``: an unreadable line, a broken compressed stream)
    or accepts the command as it is (not ``fatal``: parameters it never reads).

    A command whose bytes are well framed but whose values break the protocol is kept:
    ``command`` is the command as sent (``PUB bad*topic`` is a :class:`Pub`), ``field``
    names the field that failed in the protocol's words, ``field_offset`` is where in the
    stream that field goes wrong (the offending byte of a name, else the field's first
    byte) and ``reason`` says what is wrong with it. ``offset`` is
    where the command (or the undecodable bytes) start.
    """

    code: str
    text: str
    fatal: bool
    offset: int | None = None
    raw: RawFrame | None = _RAW
    command: Command | None = _field(default=None, compare=False)
    field: str | None = _field(default=None, compare=False)
    reason: str = _field(default="", compare=False)
    field_offset: int | None = _field(default=None, compare=False)
    continued: bool = _field(default=False, compare=False)
    """The rest of undecodable bytes an earlier violation reported the start of: skipped
    until the next frame, no answer of its own."""

    @property
    def error(self) -> bytes | None:
        """The data of the FrameTypeError nsqd sends for it (``None``: nsqd sends none)."""
        if not self.code:
            return None
        return f"{self.code} {self.text}".encode() if self.text else self.code.encode()

    @property
    def accepted(self) -> bool:
        """nsqd runs the command all the same (it never reads what is wrong with it)."""
        return not self.code and not self.fatal and self.command is not None


@dataclass(frozen=True, slots=True)
class Refused(Observation):
    """The well-formed command just before it is one nsqd refuses where it was sent: its
    connection's state forbids it (``cannot CLS in current state``) or its message id is
    not in flight. Only an observer that saw the whole connection judges so (the grammar's
    refusals are :class:`Violation` s); ``code``/``text`` are nsqd's answer."""

    code: str
    text: str
    fatal: bool
    command: Command = _field(compare=False)

    @property
    def answer(self) -> str:
        """nsqd's error frame as text: ``E_INVALID cannot CLS in current state``."""
        return f"{self.code} {self.text}"


@dataclass(frozen=True, slots=True)
class Answered(Observation):
    """The response or error frame just before it answers the command that completed in
    packet ``packet`` (an observer pairs them: nsqd answers in command order); ``command``
    is that command's number among the client's commands on the connection (1: its
    first, the magic), ``None`` when nsqd answered bytes that are no command."""

    packet: int
    command: int | None = None
