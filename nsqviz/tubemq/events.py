"""The things that happen on a TubeMQ connection, as small frozen dataclasses.

A :class:`Request` is what a client sends and a server receives; a :class:`Response`
or :class:`ExceptionResponse` the answer, paired with its request by serialNo. Each
holds the three protobuf messages of the frame's content exactly as decoded (or to be
encoded) -- ``connHeader`` (RpcConnHeader), ``header`` (RequestHeader/ResponseHeader),
``body`` (RequestBody/RspResponseBody/RspExceptionBody) -- and ``message``, the inner
request or response the body carries. The rest are the codec's observations: a
:class:`Violation` (with offset, field and reason); the stream ending inside a frame
(:class:`Truncated`) and the peer closing (:class:`ConnectionClosed`) are the events
every protocol shares (:mod:`nsqviz.sansio`).

Events decoded off the wire carry their reassembled frame in ``raw`` (which bytes, from
which segments); it is left out of equality, like the pairing and the latency.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from dataclasses import field as _field
from typing import Any, ClassVar

from google.protobuf import text_format
from google.protobuf.message import Message

from nsqviz import sansio
from nsqviz.sansio import ConnectionClosed, Truncated
from nsqviz.stream.reassembly import RawFrame
from nsqviz.tubemq.tables import METHODS, Method

__all__ = [
    "Answer",
    "ConnectionClosed",
    "Event",
    "ExceptionResponse",
    "Observation",
    "Request",
    "Response",
    "Truncated",
    "Violation",
]

def _aside() -> Any:
    """A field left out of equality and repr: the raw frame, the pairing, the latency."""
    return field(default=None, compare=False, repr=False)


class Event(sansio.Event):
    """Base of everything the TubeMQ codec returns or accepts."""

    __slots__ = ()

    def __repr__(self) -> str:
        """The fields shown by the dataclass, protobuf messages on one line each."""
        parts = []
        for f in fields(self):  # type: ignore[arg-type]
            if f.repr:
                value = getattr(self, f.name)
                shown = (f"<{text_format.MessageToString(value, as_one_line=True)}>"
                         if isinstance(value, Message) else repr(value))
                parts.append(f"{f.name}={shown}")
        return f"{type(self).__name__}({', '.join(parts)})"


class Observation(Event):
    """Base of what the codec itself observes: a violation (the end of the stream is
    :class:`Truncated` and :class:`ConnectionClosed`, which every protocol shares)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True, repr=False)
class _Call(Event):
    """What a request and its SUCCESS answer hold alike: the frame's three messages, the
    inner ``message`` the body carries, and the method the body names."""

    _side: ClassVar[str]  # which message of the method's row this event carries

    serialNo: int
    connHeader: Message
    header: Message
    body: Message
    message: Message | None

    @property
    def method(self) -> int:
        return int(self.body.method)

    @property
    def info(self) -> Method | None:
        """The method's row in :data:`~nsqviz.tubemq.tables.METHODS`."""
        return METHODS.get(self.body.method)

    @property
    def name(self) -> str:
        """The message's name (request or response), or the method's where it has none."""
        info = self.info
        if info is None:
            return f"method {self.body.method}"
        return getattr(info, self._side) or info.name


@dataclass(frozen=True, slots=True, repr=False)
class Request(_Call):
    """A request frame: ``body.method`` says which call, ``message`` is its decoded
    request (``None`` when the method has no request message or the bytes would not
    parse -- a :class:`Violation` then says why)."""

    _side = "request"

    raw: RawFrame | None = _aside()


@dataclass(frozen=True, slots=True, repr=False)
class Response(_Call):
    """A SUCCESS answer: ``body`` is RspResponseBody, ``message`` its decoded data.
    ``request`` is the request it answers (same serialNo) and ``latency`` the time
    between them, when the times were passed in."""

    _side = "response"

    raw: RawFrame | None = _aside()
    request: Request | None = _aside()
    latency: float | None = _aside()


@dataclass(frozen=True, slots=True, repr=False)
class ExceptionResponse(Event):
    """An ERROR or FATAL answer: ``body`` is RspExceptionBody (the Java exception's class
    name and message)."""

    serialNo: int
    connHeader: Message
    header: Message
    body: Message
    raw: RawFrame | None = _aside()
    request: Request | None = _aside()
    latency: float | None = _aside()

    @property
    def status(self) -> int:
        return int(self.header.status)

    @property
    def method(self) -> int | None:
        return None if self.request is None else self.request.method

    @property
    def name(self) -> str:
        return "RspExceptionBody"


Answer = Response | ExceptionResponse


@dataclass(frozen=True, slots=True, repr=False)
class Violation(Observation):
    """The peer broke the protocol, or sent bytes that do not decode (a
    :class:`nsqviz.sansio.Violation`, with the meanings every protocol gives it).

    ``code`` names the kind (:class:`~nsqviz.tubemq.tables.ViolationCode`); ``field``
    the field in the protocol's words; ``offset`` where the frame (or the bytes that do
    not frame) starts in the stream, ``field_offset`` where the field at fault does;
    ``reason`` says what is wrong (TubeMQ's servers answer none of these with a text of
    their own, so it is also the :attr:`text`). ``fatal``: a Java peer would close the
    connection here. ``resynced`` (framing errors only): whether decoding resumed at a
    later MsgToken (a guess) rather than giving up on the stream.
    """

    code: str
    field: str
    reason: str
    offset: int | None = None
    fatal: bool = False
    resynced: bool | None = None
    raw: RawFrame | None = _aside()
    event: Any = _aside()
    """The decoded event the violation is about, when there is one."""
    field_offset: int | None = _field(default=None, kw_only=True)

    @property
    def text(self) -> str:
        return self.reason
