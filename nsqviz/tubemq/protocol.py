"""TubeMQ as the protocol-free parts of nsqviz see it (:class:`nsqviz.protocols.Protocol`).

Detection is the begin token ``FF 7F F4 FE`` that starts every frame in both
directions (a server's first frame an answer), and the Master's and Broker's default
ports (8715, 8123) for captures that start mid-connection. A flow's client is the side
whose first frame is a request (``RpcConnHeader.flag`` is not 1). Decoding is the codec's
:class:`~nsqviz.tubemq.codec.Observer`; requests become ``command`` items, answers
``frame`` items, and a violation about a request or answer rides on that item as its
``violation``.

Record fields are the decoded protobuf messages: ``serialNo``, the method, the envelope
(``RpcConnHeader``, ``RequestHeader``/``ResponseHeader``, the body without its
serialized inner message) and ``message``, the inner request or response, with the
string-encoded metadata and message payloads decoded into named fields beside the
original text (:mod:`nsqviz.tubemq.metadata`). Bytes are hex.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from nsqviz.protocols import (
    DetectionWords,
    Item,
    ItemKind,
    ObservedConnection,
    Protocol,
    RecordView,
    no_fields,
)
from nsqviz.sansio import violation_fields
from nsqviz.tubemq.analyses import ANALYSES
from nsqviz.tubemq.codec import Observer
from nsqviz.tubemq.columns import SCHEMA, typed
from nsqviz.tubemq.dissector import DISSECTOR
from nsqviz.tubemq.events import ExceptionResponse, Request, Response, Truncated, Violation
from nsqviz.tubemq.fields import FIELDS, record_values
from nsqviz.tubemq.grammar import BEGIN_TOKEN, HEADER_SIZE, FrameStruct
from nsqviz.tubemq.layout import frame_layout
from nsqviz.tubemq.metadata import STRING_FIELDS, MetadataError, decode_payload
from nsqviz.tubemq.report import REPORT
from nsqviz.tubemq.rules import RULES
from nsqviz.tubemq.tables import (
    DEFAULT_BROKER_PORT,
    DEFAULT_MASTER_PORT,
    ERRORS,
    METHODS,
    RPC_FLAG_MSG_TYPE_RESPONSE,
)

__all__ = ["TUBEMQ", "TubeMQProtocol", "message_fields"]

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


def _fields(event: Any) -> dict[str, Any]:
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
    if kind is Truncated:
        return {"offset": event.offset, "expected": event.expected, "data": event.data.hex()}
    return {}


def _items(events: list[Any], fields_of: Callable[[Any], dict[str, Any]] = _fields,
           ) -> list[Item]:
    out: list[Item] = []
    last: dict[int, Item] = {}  # id(raw frame) -> the item decoded from it
    for e in events:
        t = type(e)
        if t is Request or t is Response or t is ExceptionResponse:
            raw = e.raw
            kind = ItemKind.COMMAND if t is Request else ItemKind.FRAME
            item = Item(kind, e.name, fields_of(e), e, None if raw is None else raw.offset, raw)
            if raw is not None:
                last[id(raw)] = item
            out.append(item)
        elif t is Violation:
            about = last.get(id(e.raw)) if e.event is not None else None
            if about is not None:
                problems = about.fields.setdefault("violations", [])
                problems.append(violation_fields(e))
                about.fields.setdefault("violation", problems[0])
            else:
                fields = _fields(e)
                if e.raw is not None:
                    fields["data"] = e.raw.data.hex()
                out.append(Item(ItemKind.ERROR, e.code, fields, e, e.offset, e.raw))
        elif t is Truncated:
            out.append(Item(ItemKind.TRUNCATED, "Truncated", {
                **_fields(e), "reason": "the stream ended inside this frame"}, e, e.offset,
                e.raw))
        # ConnectionClosed is a TCP matter: the capture layer reports the flow's end.
    return out


def _rpc_flag(data: bytes) -> int | None:
    """The RpcConnHeader flag of the frame ``data`` starts with (1: response), or
    ``None`` when it does not start with one. The first block's content starts at byte
    16: the header's length, then ``08 flag``."""
    if not data.startswith(BEGIN_TOKEN) or len(data) < HEADER_SIZE + 4 + 3:
        return None
    at = HEADER_SIZE + 4
    return data[at + 2] if data[at] > 0 and data[at + 1] == 0x08 else None


def _is_request_frame(data: bytes) -> bool:
    """Does ``data`` start with a frame whose RpcConnHeader says request (flag != 1)?"""
    flag = _rpc_flag(data)
    return flag is not None and flag != RPC_FLAG_MSG_TYPE_RESPONSE


class TubeMQProtocol(Protocol):
    """Apache InLong TubeMQ's RPC protocol: clients with the Master and the Brokers."""

    name = "tubemq"
    title = "TubeMQ"
    package = "nsqviz.tubemq"
    server_ports = frozenset({DEFAULT_MASTER_PORT, DEFAULT_BROKER_PORT})
    filter_fields = FIELDS

    def record_names(self) -> frozenset[str]:
        return frozenset(n for m in METHODS.values() for n in (m.name, m.request, m.response)
                         if n)

    def filter_values(self, record: RecordView) -> dict[str, list[Any]]:
        return record_values(record.kind, record.fields, record.dir, record.event)

    def client_hello(self, data: bytes) -> bool:
        return _is_request_frame(data)

    detection_words = DetectionWords(
        "begin token FF7FF4FE", "no begin token: the server will close",
        "client's first bytes are not the begin token FF7FF4FE",
        "starts with the begin token FF7FF4FE", "no begin token, port not a TubeMQ port")

    def starts_hello(self, data: bytes) -> bool:
        return bool(data) and data[:4] == BEGIN_TOKEN[: len(data[:4])]

    def server_hello(self, data: bytes) -> bool | None:
        """A frame whose RpcConnHeader says response (a server closes on a bad token)."""
        if len(data) < HEADER_SIZE + 4 + 3:
            return None if self.starts_hello(data) or not data else False
        return _rpc_flag(data) == RPC_FLAG_MSG_TYPE_RESPONSE

    def looks_like(self, direction: str, data: bytes) -> bool:
        return len(data) >= 4 and self.starts_hello(data)

    def observer(self, *, midstream: bool, fields: bool = True) -> ObservedConnection:
        items = _items if fields else partial(_items, fields_of=no_fields)
        return ObservedConnection(Observer(provenance=True, midstream=midstream), items)

    def fields(self, event: Any) -> dict[str, Any]:
        return _fields(event)

    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in METHODS.values())

    def aliases(self) -> Mapping[str, str]:
        out: dict[str, str] = {}
        for m in METHODS.values():
            for message in (m.request, m.response):
                if message is not None:
                    out.setdefault(message, m.name)
        return out

    def summary(self, kind: str, name: str, fields: Mapping[str, Any]) -> str:
        parts = [f"#{fields.get('serialNo')}", str(fields.get("method", ""))]
        message = fields.get("message") or {}
        for key in ("clientId", "groupName", "topicName", "partitionId"):
            if key in message:
                parts.append(f"{key}={message[key]}")
        if "errCode" in message:
            code = message["errCode"]
            err = ERRORS.get(code)
            parts.append(f"{code} {err.name if err else ''} {message.get('errMsg', '')!r}")
        exc = fields.get("RspExceptionBody")
        if exc:
            parts.append(f"{fields.get('ResponseHeader', {}).get('status')} "
                         f"{exc.get('exceptionName', '')}")
        if "latency" in fields:
            parts.append(f"latency={fields['latency'] * 1000:.3f}ms")
        return " ".join(p for p in parts if p)

    def label(self, event: Any) -> tuple[str, str]:
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

    def grammars(self) -> tuple[Any, ...]:
        """The frame (its content's protobuf messages are compiled from ``.proto``
        sources: :mod:`nsqviz.tubemq.protos`)."""
        return (FrameStruct,)

    def record_name(self, event: Any) -> str | None:
        t = type(event)
        return event.name if t is Request or t is Response or t is ExceptionResponse else None

    def layout(self, kind: str, name: str) -> Any:
        """:func:`~nsqviz.tubemq.layout.frame_layout`: the frame's fields from the grammar
        and, inside the blocks, every protobuf field (a function of the bytes)."""
        if kind not in ("command", "frame"):
            return None
        return lambda data: frame_layout(data, response=kind == "frame")

    analyses = ANALYSES
    report = REPORT
    dissector = DISSECTOR
    rules = RULES

    typed_schema = SCHEMA

    def typed(self, event: Any) -> dict[str, Any]:
        return typed(event)


TUBEMQ = TubeMQProtocol()
"""The TubeMQ protocol, as registered in :data:`nsqviz.protocols.BUILTIN`."""
