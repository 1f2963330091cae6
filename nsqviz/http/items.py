"""HTTP's events as the capture layer's items, and their records' fields and columns.

What :class:`~nsqviz.http.protocol.HttpProtocol` hands the capture layer once a flow is
HTTP's, kept apart from the protocol's instance so that choosing a flow's protocol
imports none of this (h11, the observer). A request is a ``command`` record named by its
endpoint (``POST /pub``; another request by its method), a response a ``frame`` record
(:data:`~nsqviz.http.api.RESPONSE`) that says which request it answers; a request whose
body nsqd refuses carries the refusal as its ``violation``. Fields keep bodies as hex
beside what they mean: a publish's topic and messages, a JSON answer decoded, the nsqd a
``/lookup`` answer names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from nsqviz.http import api
from nsqviz.http.api import RESPONSE, SWITCHED, UNDECODABLE
from nsqviz.http.events import (
    Message,
    Request,
    Response,
    Switched,
    Truncated,
    Violation,
)
from nsqviz.http.observer import Answered, Observer
from nsqviz.protocols.items import ANSWERS, Item, ItemKind, Lost, ObservedConnection, truncated_item
from nsqviz.sansio import violation_fields
from nsqviz.stream.direction import Direction

__all__ = ["Observed", "event_fields", "items", "label", "record_name", "request_fields",
           "response_fields", "typed"]


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


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


def request_fields(r: Request, *, whole: bool = True) -> dict[str, Any]:
    """A request's fields; not ``whole``: its head alone (no publish's messages)."""
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


def response_fields(r: Response) -> dict[str, Any]:
    """A response's fields, with what it answers and what its JSON says."""
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


def event_fields(event: Any) -> dict[str, Any]:
    """A request's or response's record fields (see the module docstring)."""
    kind = type(event)
    if kind is Request:
        return request_fields(event)
    if kind is Response:
        return response_fields(event)
    return {}


def items(events: list[Any], fields_of: Callable[[Any], dict[str, Any]] = event_fields,
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
            answered: dict[str, Any] = {"response_to": e.packet}
            if e.command is not None:
                answered[ANSWERS] = e.command
            out.append(Item(ItemKind.ANNOTATION, "Answered", answered, e))
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
            out.append(truncated_item(e, "message"))
    return out


class Observed(ObservedConnection):
    """The observer behind :class:`~nsqviz.protocols.items.ConnectionObserver`: a gap that
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
            fields = request_fields(head, whole=False)
            item = Item(ItemKind.COMMAND, api.request_name(head), {**fields, "cut": cut},
                        None, raw.offset, raw)
        else:
            assert isinstance(head, Response)
            item = Item(ItemKind.FRAME, RESPONSE, {**response_fields(head), "cut": cut},
                        None, raw.offset, raw)
        return Lost(partial, length, unit=item)


def label(event: Any) -> tuple[str, str]:
    """``(label, style)`` of an event for diagrams
    (:meth:`~nsqviz.protocols.protocol.Protocol.label`)."""
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
            return label(event.message)
        return f"{event.code} {event.reason}".strip()[:60], "error"
    if kind is Switched:
        return f"switched to {event.protocol}", "error"
    return kind.__name__, "command"


def record_name(event: Any) -> str | None:
    """The name of a request's or response's record; ``None`` for other events."""
    kind = type(event)
    if kind is Request:
        return api.request_name(event)
    if kind is Response:
        return RESPONSE
    if kind is Violation and event.message is not None:
        return api.request_name(event.message)
    return None


def typed(event: Any) -> dict[str, Any]:
    """The typed columns of a request or response (the protocol's ``typed_schema``)."""
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
