"""nsqd's and nsqlookupd's HTTP APIs (v1.3.0) on one screen: one entry per endpoint.

Each :class:`Endpoint` says which method and path reach it, which server has it, which
query parameters it reads, what its request body is (:class:`BodyKind`: nothing, one
message, messages) and what it answers. The records name a request by its entry
(``POST /pub``), the analyses find publishes and lookups by it, the filter fields and
the reference read it; nothing else types a path.

What a publish carries into nsqd is read here too, as nsqd reads it (:func:`publish`):
``POST /pub?topic=T[&defer=MS]`` is one message, the body (a deferred one with
``defer``: nsqd has no ``/dpub``; its HTTP DPUB is ``/pub`` with ``defer``);
``POST /mpub?topic=T`` is one message per line (empty lines skipped, the newline not
part of a message), and with ``binary=true`` the body of an MPUB command, read by
NSQ's own grammar (:mod:`nsqviz.nsq.fastpath`). What nsqd refuses in a body is a
:class:`Refused` naming nsqd's code, the field and where in the body.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nsqviz.stream.sizes import INT32, SIZE_PREFIX

if TYPE_CHECKING:  # the events are what the observer makes: detection needs none
    from nsqviz.http.events import Request, Response

__all__ = [
    "BY_ROUTE",
    "ENDPOINTS",
    "LOOKUPD",
    "METHODS",
    "NSQD",
    "PUBLISH_PARAMS",
    "REQUEST",
    "RESPONSE",
    "SWITCHED",
    "UNDECODABLE",
    "AnswerKind",
    "BodyKind",
    "Endpoint",
    "Publish",
    "Refused",
    "endpoint",
    "json_answer",
    "lookup_producers",
    "publish",
    "request_name",
]

NSQD = "nsqd"
LOOKUPD = "nsqlookupd"


class BodyKind(enum.Enum):
    """What an endpoint reads of a request's body."""

    NONE = "none"
    MESSAGE = "message"  # the body is one message (/pub)
    MESSAGES = "messages"  # a message per line, or (binary) an MPUB body (/mpub)


class AnswerKind(enum.Enum):
    """What an endpoint answers when it succeeds (an error is always JSON:
    ``{"message": "CODE"}``)."""

    TEXT = "text"  # OK
    JSON = "json"
    EMPTY = "empty"  # nothing (200 with an empty body: the admin endpoints)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One endpoint: ``method`` and ``path``, the ``servers`` that have it, the query
    ``params`` it reads, its request ``body``, its ``answer``, and what it does."""

    method: str
    path: str
    servers: tuple[str, ...]
    params: tuple[str, ...]
    body: BodyKind
    answer: AnswerKind
    does: str

    @property
    def name(self) -> str:
        """The name its requests' records take: ``POST /pub``."""
        return f"{self.method} {self.path}"


_BOTH = (NSQD, LOOKUPD)
_N, _L = (NSQD,), (LOOKUPD,)
_NONE, _T, _J, _E = BodyKind.NONE, AnswerKind.TEXT, AnswerKind.JSON, AnswerKind.EMPTY

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/ping", _BOTH, (), _NONE, _T, "health: OK (nsqd: 500 after a disk error)"),
    Endpoint("GET", "/info", _BOTH, (), _NONE, _J, "version; nsqd: its addresses and ports"),
    Endpoint("POST", "/pub", _N, ("topic", "defer"), BodyKind.MESSAGE, _T,
             "publish the body as one message (deferred by defer ms)"),
    Endpoint("POST", "/mpub", _N, ("topic", "binary"), BodyKind.MESSAGES, _T,
             "publish a message per line, or (binary) an MPUB body"),
    Endpoint("GET", "/stats", _N, ("format", "topic", "channel", "include_clients"), _NONE,
             _J, "topics, channels, clients, depths"),
    Endpoint("POST", "/topic/create", _BOTH, ("topic",), _NONE, _E, "create a topic"),
    Endpoint("POST", "/topic/delete", _BOTH, ("topic",), _NONE, _E, "delete a topic"),
    Endpoint("POST", "/topic/empty", _N, ("topic",), _NONE, _E, "drop a topic's queue"),
    Endpoint("POST", "/topic/pause", _N, ("topic",), _NONE, _E, "stop a topic's fan-out"),
    Endpoint("POST", "/topic/unpause", _N, ("topic",), _NONE, _E, "resume it"),
    Endpoint("POST", "/channel/create", _BOTH, ("topic", "channel"), _NONE, _E,
             "create a channel"),
    Endpoint("POST", "/channel/delete", _BOTH, ("topic", "channel"), _NONE, _E,
             "delete a channel"),
    Endpoint("POST", "/channel/empty", _N, ("topic", "channel"), _NONE, _E,
             "drop a channel's queue"),
    Endpoint("POST", "/channel/pause", _N, ("topic", "channel"), _NONE, _E,
             "stop a channel's deliveries"),
    Endpoint("POST", "/channel/unpause", _N, ("topic", "channel"), _NONE, _E, "resume them"),
    Endpoint("GET", "/lookup", _L, ("topic",), _NONE, _J,
             "the nsqd (producers) that have a topic, and its channels"),
    Endpoint("GET", "/topics", _L, (), _NONE, _J, "every topic known"),
    Endpoint("GET", "/channels", _L, ("topic",), _NONE, _J, "a topic's channels"),
    Endpoint("GET", "/nodes", _L, (), _NONE, _J, "every nsqd registered, with its topics"),
    Endpoint("GET", "/debug", _L, (), _NONE, _J, "the registration database"),
    Endpoint("POST", "/topic/tombstone", _L, ("topic", "node"), _NONE, _E,
             "hide a topic of one nsqd from /lookup"),
)
"""Every endpoint of nsqd's and nsqlookupd's HTTP APIs (v1.3.0) but the debug profiles
(``/debug/pprof``) and nsqd's runtime options (``/config/``)."""

BY_ROUTE: dict[tuple[str, str], Endpoint] = {(e.method, e.path): e for e in ENDPOINTS}
"""The endpoint of each ``(method, path)``."""

METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")
"""HTTP's methods (RFC 9110, PATCH from RFC 5789): the name of a request to no endpoint
(another method is a request named :data:`REQUEST`)."""

REQUEST = "Request"
"""The name of a request with a method HTTP does not define."""

RESPONSE = "Response"
"""How records name a response."""

UNDECODABLE = "Undecodable"
"""The name of an error record for bytes no status is answered for."""

SWITCHED = "Switched"
"""The name of the error record of bytes after a switch to another protocol."""

PUBLISH_PARAMS = ("topic", "defer", "binary")
"""The query parameters a publish reads."""


def endpoint(request: Request) -> Endpoint | None:
    """The endpoint ``request`` reaches, or ``None``."""
    return BY_ROUTE.get((request.method, request.path))


def request_name(request: Request) -> str:
    """A request record's name: its endpoint's (``POST /pub``), else its method."""
    found = endpoint(request)
    if found is not None:
        return found.name
    return request.method if request.method in METHODS else REQUEST


# ----------------------------------------------------------------------------- publishes


@dataclass(frozen=True, slots=True)
class Publish:
    """What a publish request carries into nsqd: the ``topic``, the ``messages`` in
    order, the deferral (``defer_ms``, ``None``: none asked)."""

    topic: str | None
    messages: tuple[bytes, ...]
    defer_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """A publish body nsqd refuses: its ``code`` (``BAD_BODY``), its ``status`` (413),
    nsqd's ``reason``, the ``field`` at fault and its offset in the body."""

    code: str
    status: int
    reason: str
    field: str | None
    offset: int | None


def publish(request: Request) -> Publish | Refused | None:
    """What ``request`` publishes, or what nsqd refuses in its body; ``None`` for a
    request that is no publish. Judged by the body's grammar only: nsqd's limits
    (``--max-msg-size``, ``--max-body-size``) are its flags, which a capture does not
    show (its answer does)."""
    found = endpoint(request)
    if found is None or found.body is BodyKind.NONE:
        return None
    topic = request.arg("topic")
    if found.body is BodyKind.MESSAGE:
        defer = request.arg("defer")
        defer_ms = int(defer) if defer is not None and defer.lstrip("-").isdigit() else None
        return Publish(topic, (request.body,) if request.body else (), defer_ms)
    if request.arg("binary") in ("true", "1"):
        return _binary(topic, request.body)
    return Publish(topic, tuple(line for line in request.body.split(b"\n") if line))


def _binary(topic: str | None, body: bytes) -> Publish | Refused:
    """``/mpub?binary=true``: the body of an MPUB command (``[num messages]`` then each
    ``[message size][message]``), read by NSQ's grammar as nsqd's readMPUB reads it
    (imported here: the endpoint table, which detection reads, needs no NSQ)."""
    from nsqviz.nsq import fastpath
    from nsqviz.nsq.events import Mpub
    from nsqviz.nsq.grammar_errors import GrammarError
    from nsqviz.nsq.refusals import nsqd_answer

    line = b"MPUB t\n"
    command = line + INT32.pack(len(body)) + body
    try:
        event = fastpath.decode_command(command)
    except GrammarError as exc:
        code, text = nsqd_answer(command, len(line) - 1, exc)
        at = None if exc.offset is None else max(exc.offset - len(line) - SIZE_PREFIX, 0)
        # nsqd's HTTP answer is its TCP code without "E_", status 413
        return Refused(str(code)[2:] if code else "BAD_BODY", 413, text or exc.reason,
                       exc.field, at)
    assert isinstance(event, Mpub)  # the command is an MPUB's
    return Publish(topic, tuple(event.bodies))


# ------------------------------------------------------------------------------- answers


def json_answer(response: Response) -> Any:
    """The JSON document a response carries (nsqd's and nsqlookupd's are JSON objects),
    or ``None`` when its body is none (cut, or text)."""
    body = response.body
    if len(body) != response.body_size or body[:1] not in (b"{", b"["):
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def lookup_producers(response: Response) -> list[str] | None:
    """The nsqd a ``/lookup`` answer names, each ``broadcast_address:tcp_port`` (what a
    consumer connects to), in the answer's order; ``None`` for any other response."""
    request = response.request
    if request is None or endpoint(request) is not BY_ROUTE[("GET", "/lookup")]:
        return None
    doc = json_answer(response)
    if not isinstance(doc, dict):
        return None
    out = []
    for p in doc.get("producers") or ():
        if isinstance(p, dict):
            out.append(f"{p.get('broadcast_address')}:{p.get('tcp_port')}")
    return out
