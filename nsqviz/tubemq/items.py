"""TubeMQ's events as the capture layer's items, and their records' fields.

What :class:`~nsqviz.tubemq.protocol.TubeMQProtocol` hands the capture layer once a flow
is TubeMQ's, kept apart from the protocol's instance so that choosing a flow's protocol
imports none of this (protobuf, the codec): requests become ``command`` items, answers
``frame`` items, and a violation about a request or answer rides on that item as its
``violation``. Each answer is followed by the number, among the connection's requests,
of the request the codec paired it with (by its serialNo): the capture layer's one
pairing (:data:`~nsqviz.protocols.items.ANSWERS`).

Record fields are the decoded protobuf messages: ``serialNo``, the method, the envelope
(``RpcConnHeader``, ``RequestHeader``/``ResponseHeader``, the body without its
serialized inner message) and ``message``, the inner request or response, with the
string-encoded metadata and message payloads decoded into named fields beside the
original text (:mod:`nsqviz.tubemq.metadata`). Bytes are hex.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from nsqviz.protocols.items import ANSWERS, Item, ItemKind, truncated_item
from nsqviz.sansio import violation_fields
from nsqviz.tubemq.events import ExceptionResponse, Request, Response, Truncated, Violation
from nsqviz.tubemq.metadata import STRING_FIELDS, MetadataError, decode_payload
from nsqviz.tubemq.tables import METHODS

__all__ = ["Items", "event_fields", "label", "message_fields", "record_name"]

_PAYLOADS = {"SendMessageRequestP2B": "data", "TransferedMessage": "payLoadData"}
"""Messages whose bytes field is a message payload (flag bit 0: attribute prefix)."""


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None:
        return message_fields(value)
    if field.enum_type is not None:
        v = field.enum_type.values_by_number.get(value)
        return v.name if v is not None else value
    if isinstance(value, bytes):
        return value.hex()
    parse = STRING_FIELDS.get(field.name) if isinstance(value, str) else None
    if parse is not None:
        try:
            return {"text": value, **parse(value)}
        except MetadataError as exc:
            return {"text": value, "error": str(exc)}
    return value


def message_fields(msg: Message) -> dict[str, Any]:
    """A protobuf message as JSON-ready data: every field that is set, in number order;
    metadata strings and message payloads decoded (see the module docstring)."""
    out: dict[str, Any] = {}
    for field, value in msg.ListFields():
        if field.is_repeated:
            out[field.name] = [_value(field, v) for v in value]
        else:
            out[field.name] = _value(field, value)
    payload = _PAYLOADS.get(msg.DESCRIPTOR.name)
    if payload is not None and msg.HasField(payload):
        data = getattr(msg, payload)
        try:
            decoded = decode_payload(data, msg.flag if msg.HasField("flag") else 0)
        except MetadataError as exc:
            out[f"{payload}Decoded"] = {"error": str(exc)}
        else:
            decoded["body"] = decoded["body"].hex()
            out[f"{payload}Decoded"] = decoded
    return out


def _envelope(event: Request | Response | ExceptionResponse) -> dict[str, Any]:
    body = message_fields(event.body)
    body.pop("request", None)  # shown decoded, as "message"
    body.pop("data", None)
    return {"RpcConnHeader": message_fields(event.connHeader),
            type(event.header).DESCRIPTOR.name: message_fields(event.header),
            type(event.body).DESCRIPTOR.name: body}


def event_fields(event: Any) -> dict[str, Any]:
    """An event's record fields (see the module docstring)."""
    kind = type(event)
    if kind is Request or kind is Response:
        info = METHODS.get(event.body.method)
        out = {"serialNo": event.serialNo, "method": info.name if info else event.body.method,
               **_envelope(event)}
        if event.message is not None:
            out["message"] = message_fields(event.message)
        if kind is Response and event.latency is not None:
            out["latency"] = event.latency
        return out
    if kind is ExceptionResponse:
        out = {"serialNo": event.serialNo, **_envelope(event)}
        if event.request is not None:
            info = event.request.info
            out["method"] = info.name if info else event.request.method
        return out
    if kind is Violation:
        return violation_fields(event)
    return {}


class Items:
    """One connection's events as items; it numbers the requests as the capture layer
    shows them (1: the first) and follows each answer with the number of the request
    it answers (an annotation), forgetting a request once answered."""

    __slots__ = ("fields_of", "requests", "waiting")

    def __init__(self, fields_of: Callable[[Any], dict[str, Any]] = event_fields) -> None:
        self.fields_of = fields_of
        self.requests = 0
        self.waiting: dict[int, int] = {}  # id(request) -> its number

    def __call__(self, events: list[Any]) -> list[Item]:
        out: list[Item] = []
        last: dict[int, Item] = {}  # id(raw frame) -> the item decoded from it
        for e in events:
            t = type(e)
            if t is Request or t is Response or t is ExceptionResponse:
                raw = e.raw
                kind = ItemKind.COMMAND if t is Request else ItemKind.FRAME
                item = Item(kind, e.name, self.fields_of(e), e,
                            None if raw is None else raw.offset, raw)
                if raw is not None:
                    last[id(raw)] = item
                out.append(item)
                if t is Request:
                    self.requests += 1
                    self.waiting[id(e)] = self.requests
                elif e.request is not None:
                    number = self.waiting.pop(id(e.request), None)
                    if number is not None:
                        out.append(Item(ItemKind.ANNOTATION, "Answered", {ANSWERS: number}, e))
            else:
                _other(e, last, out)
        return out


def _other(e: Any, last: dict[int, Item], out: list[Item]) -> None:
    """A violation (on the item it is about, else an error item) or a truncated
    frame."""
    t = type(e)
    if t is Violation:
        about = last.get(id(e.raw)) if e.event is not None else None
        if about is not None:
            problems = about.fields.setdefault("violations", [])
            problems.append(violation_fields(e))
            about.fields.setdefault("violation", problems[0])
        else:
            fields = event_fields(e)
            if e.raw is not None:
                fields["data"] = e.raw.data.hex()
            out.append(Item(ItemKind.ERROR, e.code, fields, e, e.offset, e.raw))
    elif t is Truncated:
        out.append(truncated_item(e, "frame"))


def label(event: Any) -> tuple[str, str]:
    """``(label, style)`` of an event for diagrams
    (:meth:`~nsqviz.protocols.protocol.Protocol.label`)."""
    t = type(event)
    if t is Request:
        return f"{event.name} #{event.serialNo}", "command"
    if t is Response:
        code = getattr(event.message, "errCode", None)
        return f"{event.name} {'' if code is None else code} #{event.serialNo}", "frame"
    if t is ExceptionResponse:
        return f"{event.body.exceptionName.rsplit('.', 1)[-1]} #{event.serialNo}", "error"
    if t is Violation:
        return f"{event.code}: {event.field}", "error"
    return type(event).__name__, "note"


def record_name(event: Any) -> str | None:
    """The name of a request's or answer's record; ``None`` for other events."""
    t = type(event)
    return event.name if t is Request or t is Response or t is ExceptionResponse else None
