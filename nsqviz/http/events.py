"""The things that happen on a connection to nsqd's or nsqlookupd's HTTP API, as small
frozen dataclasses with a common base, as NSQ's, nsqlookupd's and TubeMQ's are.

A :class:`Request` is what the client sent (its head and its body, decoded from chunks
when it came chunked); a :class:`Response` what the server answered, with the request
it answers (HTTP/1.1 answers in order). The rest are the codec's observations: a
:class:`Violation` (a :class:`nsqviz.sansio.Violation`: bytes HTTP/1.1 does not allow
there, or a request nsqd refuses for its body, kept as sent), the connection switching
to another protocol (:class:`Switched`); the stream ending inside a message
(:class:`Truncated`) and the peer closing (:class:`ConnectionClosed`) are the events
every protocol shares (:mod:`nsqviz.sansio`).

Header names keep the case they were sent in; a body longer than a codec keeps
(:data:`nsqviz.http.framing.MAX_KEPT`) is kept as far as that, with its full size.
Events decoded off the wire carry the reassembled message in ``raw`` (which bytes, from
which packets), left out of equality.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from dataclasses import field as _field
from functools import cached_property

from nsqviz import sansio
from nsqviz.sansio import ConnectionClosed, Truncated
from nsqviz.stream.reassembly import RawFrame

__all__ = [
    "ConnectionClosed",
    "Event",
    "Message",
    "Observation",
    "Request",
    "RequestHead",
    "Response",
    "Switched",
    "Truncated",
    "Violation",
]

Headers = tuple[tuple[str, str], ...]
"""A message's header lines, as ``(name, value)`` in the order sent."""


@dataclass(frozen=True, slots=True)
class Event(sansio.Event):
    """Base of everything that happens on an HTTP connection. ``raw`` is the message's
    bytes with the packets they came from, where a connection keeps provenance."""

    raw: RawFrame | None = _field(default=None, kw_only=True, compare=False, repr=False)


@dataclass(frozen=True)
class Message(Event):
    """What a request and a response share: the HTTP ``version`` (``"1.1"``), the header
    lines, the ``body`` (decoded from its chunks; cut at what a codec keeps) and its full
    decoded ``body_size``, whether it came ``chunked``, and ``head_size``, the bytes of
    its head on the wire (the start line, the header lines and the blank line)."""

    version: str
    headers: Headers
    body: bytes
    body_size: int
    chunked: bool = False
    head_size: int = 0

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or ``None``."""
        wanted = name.lower()
        return next((v for n, v in self.headers if n.lower() == wanted), None)

    @cached_property
    def content_length(self) -> int | None:
        """The ``Content-Length`` it declared, or ``None`` (absent, or not a number)."""
        value = self.header("content-length")
        return int(value) if value is not None and value.strip().isdigit() else None


@dataclass(frozen=True)
class Request(Message):
    """A client's request: ``method`` and ``target`` as sent (``/pub?topic=orders``)."""

    method: str = _field(kw_only=True)
    target: str = _field(kw_only=True)
    number: int = _field(default=0, kw_only=True, compare=False)
    """Its place among the connection's requests (1: the first), what an answer is
    paired with it by."""

    @cached_property
    def path(self) -> str:
        """The target's path, without its query (``/pub``)."""
        return urllib.parse.urlsplit(self.target).path or self.target

    @cached_property
    def query(self) -> dict[str, list[str]]:
        """The target's query parameters, each with its values in order (as Go's
        ``url.ParseQuery`` reads them: blank values kept)."""
        query = urllib.parse.urlsplit(self.target).query
        return urllib.parse.parse_qs(query, keep_blank_values=True)

    def arg(self, name: str) -> str | None:
        """The first value of query parameter ``name``, or ``None``."""
        values = self.query.get(name)
        return values[0] if values else None


@dataclass(frozen=True)
class Response(Message):
    """A server's answer: ``status`` and ``reason`` (``200``, ``"OK"``); ``request`` is
    the request it answers, as far as its head (``None``: none was seen); a 1xx answer
    is ``interim``: the final answer to the same request follows."""

    status: int = _field(kw_only=True)
    reason: str = _field(kw_only=True)
    request: Request | None = _field(default=None, kw_only=True, compare=False)
    number: int = _field(default=0, kw_only=True, compare=False)
    """Its place among the connection's final answers (1: the first; 0 for a 1xx)."""

    @property
    def interim(self) -> bool:
        return 100 <= self.status < 200


@dataclass(frozen=True, slots=True)
class Observation(Event):
    """Base of what the codec itself observes: a violation, a request's head, a switch,
    what an answer answers (the end of the stream is :class:`Truncated` and
    :class:`ConnectionClosed`, which every protocol shares)."""


@dataclass(frozen=True, slots=True)
class Violation(Observation):
    """The peer broke the protocol (a :class:`nsqviz.sansio.Violation`).

    ``code``/``text``: what the server answers -- for a request Go's server refuses, its
    status (``"400"``) and words; for a body nsqd refuses, its message code
    (``BAD_BODY``) and reason; ``""`` where nothing answers (a response the client
    cannot read). ``message``: the request as sent when it framed as one (then the
    violation is about its body), ``None`` for bytes that do not frame. ``offset`` is
    where the unit starts, ``field_offset`` where the field at fault (``field``) does;
    ``fatal``: the real peer closes here.
    """

    code: str
    text: str
    offset: int | None = None
    message: Request | None = _field(default=None, compare=False)
    field: str | None = _field(default=None, compare=False)
    reason: str = _field(default="", compare=False)
    field_offset: int | None = _field(default=None, compare=False)
    fatal: bool = _field(default=True, compare=False)
    continued: bool = _field(default=False, compare=False)
    """More of undecodable bytes whose start an earlier violation reported."""


@dataclass(frozen=True, slots=True)
class RequestHead(Observation):
    """The head of the client's next request has been read (its body may still come):
    ``request`` holds the head, no body -- or, ``None``, bytes the server cannot read
    as a request began in ``packet`` (it answers them: Go's 400). What the server's
    role tells the client's, through the observer, as soon as it knows: the server may
    answer before the body is in (nsqd's 413 to a declared length past its limit, a
    ``100 Continue``), and how to read an answer depends on the request (a HEAD's has no
    body)."""

    request: Request | None
    packet: int | None = None


@dataclass(frozen=True, slots=True)
class Switched(Observation):
    """Bytes after the server switched the connection to ``protocol`` (a ``101
    Switching Protocols`` to an ``Upgrade``, a 2xx to CONNECT): not HTTP, not decoded.
    ``offset`` is where they start; ``continued``: more of them after the first."""

    protocol: str
    offset: int
    continued: bool = False
