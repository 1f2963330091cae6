"""nsqd's and nsqlookupd's HTTP APIs as the protocol-free parts of nsqviz see them
(:class:`nsqviz.protocols.protocol.Protocol`).

Detection is a status line in the server's first answer, a request line in a client's
first bytes, the APIs' ports (nsqd's 4151, nsqlookupd's 4161, and any ``--port
http:N``), or -- mid-connection -- bytes that start like a request or a status line.
Decoding is :class:`~nsqviz.http.observer.Observer` (h11 on both sides), its events
turned into items and record fields by :mod:`nsqviz.http.items` (``nsqviz decode -V``
shows bodies as text). The Info column reads as tshark's: ``POST /pub?topic=orders
HTTP/1.1``, ``HTTP/1.1 200 OK  (text/plain)``.

Detection reads only the endpoint table and the framing's patterns: the observer (h11),
the items, the analyses, the report and the rules are imported where they are first
asked for, so offering a capture's flows to every protocol imports none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from nsqviz.http import api
from nsqviz.http.api import RESPONSE, SWITCHED, UNDECODABLE
from nsqviz.http.dissector import DISSECTOR
from nsqviz.http.fields import FIELDS, HEADER_FIELDS, PREFIX
from nsqviz.http.framing import REQUEST_START, RESPONSE_START
from nsqviz.protocols.detection import DetectionWords
from nsqviz.protocols.items import ObservedConnection, no_fields
from nsqviz.protocols.protocol import Part, Protocol, RecordView
from nsqviz.stream.direction import Direction
from nsqviz.stream.reassembly import RawFrame

if TYPE_CHECKING:
    from nsqviz.doctor.rule import Rule
    from nsqviz.report import Report
    from nsqviz.sql import Analyses

__all__ = ["HTTP", "HttpProtocol", "PORTS"]

PORTS = frozenset({4151, 4161})
"""nsqd's and nsqlookupd's HTTP ports (``--http-address`` defaults)."""



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
        from nsqviz.http.items import Observed, items
        from nsqviz.http.observer import Observer
        return Observed(Observer(midstream=midstream),
                        items if fields else partial(items, fields_of=no_fields))

    def fields(self, event: Any) -> dict[str, Any]:
        from nsqviz.http.items import event_fields
        return event_fields(event)

    def summary(self, kind: str, name: str, fields: Mapping[str, Any]) -> str:
        if "method" in fields:
            text = f"{fields['method']} {fields['uri']} HTTP/{fields['version']}"
        elif "status" in fields:
            text = f"HTTP/{fields['version']} {fields['status']} {fields['reason']}".rstrip()
        else:
            return ""
        media = _media_type(fields)
        return f"{text}  ({media})" if media and fields.get("body_size") else text

    def names(self) -> tuple[str, ...]:
        return (*(e.name for e in api.ENDPOINTS), *api.METHODS, api.REQUEST, RESPONSE)

    def record_names(self) -> frozenset[str]:
        refused = (str(s.value) for s in HTTPStatus if s.value >= 400)
        return frozenset([*self.names(), UNDECODABLE, SWITCHED, *refused])

    def label(self, event: Any) -> tuple[str, str]:
        from nsqviz.http.items import label
        return label(event)

    def grammars(self) -> tuple[Any, ...]:
        from nsqviz.http import grammar
        return (grammar.Request, grammar.Response)

    def record_name(self, event: Any) -> str | None:
        from nsqviz.http.items import record_name
        return record_name(event)

    def layout(self, kind: str, name: str) -> Any:
        from nsqviz.http import grammar
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

    analyses: Part[Analyses] = Part("nsqviz.http.analyses:ANALYSES")
    dissector = DISSECTOR
    report: Part[Report] = Part("nsqviz.http.report:REPORT")
    rules: Part[tuple[Rule, ...]] = Part("nsqviz.http.rules:RULES")
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
        from nsqviz.http.items import typed
        return typed(event)

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
