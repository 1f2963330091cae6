"""nsqd's and nsqlookupd's HTTP APIs as the protocol-free parts of nsqviz see them
(:class:`nsqviz.protocols.Protocol`).

Detection is a status line in the server's first answer, a request line in a client's
first bytes, the APIs' ports (nsqd's 4151, nsqlookupd's 4161, and any ``--port
http:N``), or -- mid-connection -- bytes that start like a request or a status line.
Decoding is :class:`~nsqviz.http.observer.Observer` (h11 on both sides). A request is a
``command`` record named by its endpoint (``POST /pub``; another request by its method),
a response a ``frame`` record (:data:`RESPONSE`) that says which request it answers; a
request whose body nsqd refuses carries the refusal as its ``violation``. Fields keep
bodies as hex (``nsqviz decode -V`` shows them as text) beside what they mean: a
publish's topic and messages, a JSON answer decoded, the nsqd a ``/lookup`` answer
names. The Info column reads as tshark's: ``POST /pub?topic=orders HTTP/1.1``,
``HTTP/1.1 200 OK  (text/plain)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from functools import partial
from http import HTTPStatus
from typing import Any

from nsqviz.http import api, grammar
from nsqviz.http.analyses import ANALYSES
from nsqviz.http.dissector import DISSECTOR
from nsqviz.http.events import Message, Request, Response, Switched, Truncated, Violation
from nsqviz.http.fields import FIELDS, HEADER_FIELDS, PREFIX
from nsqviz.http.framing import REQUEST_START, RESPONSE_START
from nsqviz.http.observer import Answered, Observer
from nsqviz.http.report import REPORT
from nsqviz.http.rules import RULES
from nsqviz.protocols import (
    DetectionWords,
    Item,
    ItemKind,
    Lost,
    ObservedConnection,
    Protocol,
    RecordView,
    no_fields,
)
from nsqviz.sansio import violation_fields
from nsqviz.stream.direction import Direction
from nsqviz.stream.reassembly import RawFrame

__all__ = ["HTTP", "HttpProtocol", "PORTS", "RESPONSE", "SWITCHED", "UNDECODABLE"]

PORTS = frozenset({4151, 4161})
"""nsqd's and nsqlookupd's HTTP ports (``--http-address`` defaults)."""

RESPONSE = "Response"
"""How records name a response."""
UNDECODABLE = "Undecodable"
"""The name of an error record for bytes no status is answered for."""
SWITCHED = "Switched"
"""The name of the error record of bytes after a switch to another protocol."""


def _full_uri(request: Request) -> str:
    """``http://Host/target``, as Wireshark's ``http.request.full_uri``."""
    if "://" in request.target:
        return request.target
    return f"http://{request.header('host') or ''}{request.target}"


def _sha1(body: bytes) -> str:
    return hashlib.sha1(body).hexdigest()


def _message_fields(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"version": m.version, "headers": [list(h) for h in m.headers],
                           "body_size": m.body_size}
    if m.body:
        out["body"] = m.body.hex()
    if len(m.body) < m.body_size:
        out["body_kept"] = len(m.body)
    if m.chunked:
        out["chunked"] = True
    return out


def _request_fields(r: Request, *, whole: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"method": r.method, "uri": r.target, "full_uri": _full_uri(r),
                           "number": r.number, **_message_fields(r)}
    for name in ("topic", "channel"):
        value = r.arg(name)
        if value is not None:
            out[name] = value
    published = api.publish(r) if whole else None
    if isinstance(published, api.Publish):
        out["messages"] = [m.hex() for m in published.messages]
        if published.defer_ms is not None:
            out["defer_ms"] = published.defer_ms
    return out


def _response_fields(r: Response) -> dict[str, Any]:
    out: dict[str, Any] = {"status": r.status, "reason": r.reason, **_message_fields(r)}
    if r.number:
        out["number"] = r.number
    doc = api.json_answer(r)
    if doc is not None:
        out["json"] = doc
    request = r.request
    if request is not None:
        out["answers"] = api.request_name(request)
        out["response_for"] = _full_uri(request)
        producers = api.lookup_producers(r)
        if producers is not None:
            out["producers"] = producers
    return out


def _fields(event: Any) -> dict[str, Any]:
    kind = type(event)
    if kind is Request:
        return _request_fields(event)
    if kind is Response:
        return _response_fields(event)
    return {}


def _items(events: list[Any], fields_of: Callable[[Any], dict[str, Any]] = _fields,
           ) -> list[Item]:
    """The observer's events as items: requests (one nsqd refuses with its violation),
    responses and what they answer, undecodable bytes, a message the stream ended in."""
    out: list[Item] = []
    for e in events:
        kind = type(e)
        raw = e.raw
        offset = None if raw is None else raw.offset
        if kind is Request:
            out.append(Item(ItemKind.COMMAND, api.request_name(e), fields_of(e), e, offset,
                            raw))
        elif kind is Response:
            out.append(Item(ItemKind.FRAME, RESPONSE, fields_of(e), e, offset, raw))
        elif kind is Answered:
            out.append(Item(ItemKind.ANNOTATION, "Answered", {"response_to": e.packet}, e))
        elif kind is Violation and e.message is not None:
            fields = fields_of(e.message)
            fields["violation"] = violation_fields(e)
            out.append(Item(ItemKind.COMMAND, api.request_name(e.message), fields, e,
                            e.offset, raw))
        elif kind is Violation or kind is Switched:
            fields = violation_fields(e) if kind is Violation else {
                "reason": f"not HTTP: the connection switched to {e.protocol}"}
            if raw is not None:
                fields["data"] = raw.data.hex()
            if e.continued:
                out.append(Item(ItemKind.SKIPPED, SWITCHED if kind is Switched else
                                UNDECODABLE, fields, e, e.offset, raw))
            else:
                name = SWITCHED if kind is Switched else (e.code or UNDECODABLE)
                out.append(Item(ItemKind.ERROR, name, fields, e, e.offset, raw))
        elif kind is Truncated:
            out.append(Item(ItemKind.TRUNCATED, "Truncated", {
                "offset": e.offset, "expected": e.expected, "data": e.data.hex(),
                "reason": "the stream ended inside this message"}, e, e.offset))
        # ConnectionClosed is a TCP matter: the capture layer reports the flow's end.
    return out


class _Observed(ObservedConnection):
    """The observer behind :class:`~nsqviz.protocols.ConnectionObserver`: a gap that
    cuts a message whose head arrived gives that message as far as it was captured."""

    __slots__ = ()
    codec: Observer

    def gap(self, direction: str) -> Lost:
        codec = self.codec
        role = codec.server if direction == Direction.C2S else codec.client
        head = role.in_progress()
        raw = role.remaining()
        partial, length = codec.gap(direction)
        if head is None:
            return Lost(partial, length)
        cut = {"captured": len(partial), "length": length}
        if isinstance(head, Request):
            fields = _request_fields(head, whole=False)
            item = Item(ItemKind.COMMAND, api.request_name(head), {**fields, "cut": cut},
                        None, raw.offset, raw)
        else:
            assert isinstance(head, Response)
            item = Item(ItemKind.FRAME, RESPONSE, {**_response_fields(head), "cut": cut},
                        None, raw.offset, raw)
        return Lost(partial, length, unit=item)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def _media_type(fields: Mapping[str, Any]) -> str:
    value = next((v for n, v in fields.get("headers", ()) if n.lower() == "content-type"),
                 "")
    return str(value).split(";", 1)[0].strip()


class HttpProtocol(Protocol):
    """nsqd's and nsqlookupd's HTTP APIs: HTTP/1.1."""

    name = PREFIX
    title = "HTTP"
    package = "nsqviz.http"
    server_ports = PORTS

    def client_hello(self, data: bytes) -> bool:
        """A whole request line (``POST /pub?topic=orders HTTP/1.1``)."""
        line, nl, _ = data.partition(b"\n")
        return bool(nl) and REQUEST_START.match(line) is not None and \
            line.rstrip(b"\r").rsplit(b" ", 1)[-1].startswith(b"HTTP/1.")

    def starts_hello(self, data: bytes) -> bool:
        return REQUEST_START.match(data) is not None

    def server_hello(self, data: bytes) -> bool | None:
        """A status line's start (``HTTP/1.1 200``): Go's server answers in HTTP what it
        cannot read as a request too (another protocol's magic gets a 400)."""
        if RESPONSE_START.match(data):
            return True
        if len(data) < len(b"HTTP/1.1 200") and data[:7] == b"HTTP/1."[:len(data)]:
            return None
        return False

    detection_words = DetectionWords(
        "request line", "no request line: the server will answer 400",
        "the client's first bytes are no HTTP request", "looks like HTTP/1.x",
        "no request line, port not an HTTP API port, not HTTP-like")

    def looks_like(self, direction: str, data: bytes) -> bool:
        start = REQUEST_START if direction == Direction.C2S else RESPONSE_START
        return start.match(data) is not None

    def observer(self, *, midstream: bool, fields: bool = True) -> ObservedConnection:
        items = _items if fields else partial(_items, fields_of=no_fields)
        return _Observed(Observer(midstream=midstream), items)

    def fields(self, event: Any) -> dict[str, Any]:
        return _fields(event)

    def summary(self, kind: str, name: str, fields: Mapping[str, Any]) -> str:
        if "method" in fields:
            text = f"{fields['method']} {fields['uri']} HTTP/{fields['version']}"
        elif "status" in fields:
            text = f"HTTP/{fields['version']} {fields['status']} {fields['reason']}".rstrip()
        else:
            return ""
        media = _media_type(fields)
        return f"{text}  ({media})" if media and fields.get("body_size") else text

    def label(self, event: Any) -> tuple[str, str]:
        kind = type(event)
        if kind is Request:
            return f"{event.method} {event.target}"[:60], "command"
        if kind is Response:
            text = f"{event.status} {event.reason}"
            if event.body and len(event.body) <= 40 and event.body_size == len(event.body):
                text += f" {_text(event.body)}"
            return text, "error" if event.status >= 400 else "response"
        if kind is Violation:
            if event.message is not None:
                return self.label(event.message)
            return f"{event.code} {event.reason}".strip()[:60], "error"
        if kind is Switched:
            return f"switched to {event.protocol}", "error"
        return kind.__name__, "command"

    def names(self) -> tuple[str, ...]:
        return (*(e.name for e in api.ENDPOINTS), *api.METHODS, api.REQUEST, RESPONSE)

    def record_names(self) -> frozenset[str]:
        refused = (str(s.value) for s in HTTPStatus if s.value >= 400)
        return frozenset([*self.names(), UNDECODABLE, SWITCHED, *refused])

    def grammars(self) -> tuple[Any, ...]:
        return (grammar.Request, grammar.Response)

    def record_name(self, event: Any) -> str | None:
        kind = type(event)
        if kind is Request:
            return api.request_name(event)
        if kind is Response:
            return RESPONSE
        if kind is Violation and event.message is not None:
            return api.request_name(event.message)
        return None

    def layout(self, kind: str, name: str) -> Any:
        if kind == "command":
            return grammar.Request
        if kind == "frame":
            return grammar.Response
        return None

    bytes_fields = frozenset({"body"})

    filter_fields = FIELDS

    def filter_values(self, record: RecordView) -> Mapping[str, list[Any]]:
        """As Wireshark's ``http`` dissector shows the message: its lines' parts, its
        headers' values, the packet of the request an answer answers."""
        fields, kind = record.fields, record.kind
        if kind not in ("command", "frame") or "version" not in fields:
            return {}
        p = PREFIX
        raw = getattr(record.event, "raw", None)
        lines = _header_lines(raw.data if isinstance(raw, RawFrame) else None, fields)
        out: dict[str, list[Any]] = {}
        if "method" in fields:
            uri = str(fields["uri"])
            path, _, query = uri.partition("?")
            out[f"{p}.request"] = [True]
            out[f"{p}.request.method"] = [fields["method"]]
            out[f"{p}.request.uri"] = [uri]
            if query:  # Wireshark splits the target only where it has a query
                out[f"{p}.request.uri.path"] = [path]
                out[f"{p}.request.uri.query"] = [query]
                out[f"{p}.request.uri.query.parameter"] = query.split("&")
            out[f"{p}.request.version"] = [f"HTTP/{fields['version']}"]
            out[f"{p}.request.full_uri"] = [fields["full_uri"]]
            out[f"{p}.request.line"] = lines
            if fields.get("number"):
                out[f"{p}.request_number"] = [fields["number"]]
        else:
            out[f"{p}.response"] = [True]
            out[f"{p}.response.code"] = [fields["status"]]
            out[f"{p}.response.phrase"] = [fields["reason"]]
            out[f"{p}.response.version"] = [f"HTTP/{fields['version']}"]
            out[f"{p}.response.line"] = lines
            if "response_for" in fields:
                out[f"{p}.response_for.uri"] = [fields["response_for"]]
            if fields.get("response_to") is not None:
                out[f"{p}.request_in"] = [fields["response_to"]]
            if fields.get("number"):
                out[f"{p}.response_number"] = [fields["number"]]
        for name, value in fields["headers"]:
            field = HEADER_FIELDS.get(name.lower())
            if field is not None:
                out.setdefault(f"{p}.{field}", []).append(value)
        length = out.get(f"{p}.content_length_header")
        if length and str(length[0]).strip().isdigit():
            out[f"{p}.content_length"] = [int(length[0])]
        return {k: v for k, v in out.items() if v}

    analyses = ANALYSES
    dissector = DISSECTOR
    report = REPORT
    rules = RULES

    typed_schema = (
        ("http_method", "string"),
        ("http_path", "string"),
        ("http_status", "int32"),
        ("http_request", "int64"),  # a request's number, or the one a response answers
        ("topic", "string"),
        ("channel", "string"),
        ("bodies", "list<string>"),  # sha1 of each message a publish carries
        ("delay_ms", "int64"),  # a publish's defer
        ("data", "string"),  # a response's body (nsqd's JSON, OK)
        ("http_error", "string"),  # an error answer's {"message": CODE}
        ("http_tcp_port", "int64"),  # an /info answer's tcp_port (nsqd's)
        ("producers", "list<string>"),  # the nsqd a /lookup answer names
    )

    def typed(self, event: Any) -> dict[str, Any]:
        kind = type(event)
        if kind is Violation and event.message is not None:
            event, kind = event.message, Request
        if kind is Request:
            out: dict[str, Any] = {"http_method": event.method, "http_path": event.path,
                                   "http_request": event.number}
            for name in ("topic", "channel"):
                value = event.arg(name)
                if value is not None:
                    out[name] = value
            published = api.publish(event)
            if isinstance(published, api.Publish):
                out["bodies"] = [_sha1(m) for m in published.messages]
                if published.defer_ms is not None:
                    out["delay_ms"] = published.defer_ms
            return out
        if kind is Response:
            out = {"http_status": event.status}
            request = event.request
            if request is not None:
                out["http_request"] = request.number
                out["http_method"], out["http_path"] = request.method, request.path
                topic = request.arg("topic")
                if topic is not None:
                    out["topic"] = topic
            if event.body and len(event.body) == event.body_size:
                out["data"] = _text(event.body)
            doc = api.json_answer(event)
            if isinstance(doc, dict):
                if event.status >= 400 and isinstance(doc.get("message"), str):
                    out["http_error"] = doc["message"]
                port = doc.get("tcp_port")
                if isinstance(port, int) and not isinstance(port, bool):
                    out["http_tcp_port"] = port
            producers = api.lookup_producers(event)
            if producers is not None:
                out["producers"] = producers
            return out
        return {}

    def typed_unit(self, kind: str, name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """A message the capture cut short: what its head says (a request's method,
        path, number, topic and channel; a response's status) -- not a publish's
        messages or an answer's body, which the lost rest would change."""
        if "method" in fields:
            out: dict[str, Any] = {"http_method": fields["method"],
                                   "http_path": str(fields["uri"]).partition("?")[0],
                                   "http_request": fields.get("number")}
            for arg in ("topic", "channel"):
                if arg in fields:
                    out[arg] = fields[arg]
            return out
        if "status" in fields:
            return {"http_status": fields["status"]}
        return {}


def _header_lines(data: bytes | None, fields: Mapping[str, Any]) -> list[str]:
    """Each header line as sent, CRLF included (Wireshark's ``http.request.line``): from
    the message's bytes when there, else as its fields say it."""
    if data:
        head = data.split(b"\r\n\r\n", 1)[0]
        return [_text(line) + "\r\n" for line in head.split(b"\r\n")[1:]]
    return [f"{n}: {v}\r\n" for n, v in fields.get("headers", ())]


HTTP = HttpProtocol()
"""nsqd's and nsqlookupd's HTTP APIs, as registered in :data:`nsqviz.protocols.BUILTIN`."""
