"""TubeMQ RPC's display-filter fields (``tubemq.*``), with their value names from the tables.

The one declaration of ``tubemq.method``, ``tubemq.serial`` ...: the filter engine
evaluates them and the Lua generator declares them as the dissector's ``ProtoField`` s
(its keys are the names without ``tubemq.``). Method, service, protocol version and flag
names come from :mod:`nsqviz.tubemq.tables`, the RPC status names from the
``ResponseHeader`` message of the ``.proto`` sources.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nsqviz.fields import Field, FieldType
from nsqviz.tubemq import grammar, tables
from nsqviz.tubemq.events import ExceptionResponse, Request, Response
from nsqviz.tubemq.messages import ResponseHeader

__all__ = ["FIELDS", "PREFIX", "record_values", "status_names"]

PREFIX = "tubemq"
"""The first word of every TubeMQ field name (the dissector's ``Proto`` name)."""


def status_names() -> dict[int, str]:
    """The RPC status values and their names, as ``RPC.proto`` defines the enum."""
    status = ResponseHeader.DESCRIPTOR.fields_by_name["status"].enum_type
    return {v.number: v.name for v in status.values}


def _t(suffix: str, type_: FieldType, title: str, description: str = "", *,
       values: dict[int, str] | None = None) -> Field:
    return Field(f"{PREFIX}.{suffix}", type_, title, description, values)


def _fields() -> tuple[Field, ...]:
    s, b, u32, i32 = FieldType.STRING, FieldType.BYTES, FieldType.UINT32, FieldType.INT32
    methods = {m.id: m.name for m in tables.METHODS.values()}
    flags = {tables.RPC_FLAG_MSG_TYPE_REQUEST: "request",
             tables.RPC_FLAG_MSG_TYPE_RESPONSE: "response"}
    return (
        _t("dir", s, "Direction", "c2s: client to server, s2c: back"),
        _t("token", b, "MsgToken", "The frame's begin token"),
        _t("serial", u32, "serialNo", "Pairs a request with its answer"),
        _t("list_size", i32, "listSize", "The number of blocks"),
        _t("block", b, "Block"),
        _t("block.length", i32, "Block length"),
        _t("flag", u32, "RpcConnHeader.flag", values=flags),
        _t("service", u32, "RequestHeader.serviceType", values=dict(tables.SERVICES)),
        _t("protocol_ver", u32, "protocolVer", values=dict(tables.PROTOCOL_VERSIONS)),
        _t("method", u32, "Method", values=methods),
        _t("timeout", FieldType.UINT64, "RequestBody.timeout (ms)"),
        _t("status", u32, "ResponseHeader.status", values=status_names()),
        _t("exception", s, "exceptionName", "The Java exception an answer carries"),
        _t("message", s, "Message", "The request's or response's protobuf message name"),
        _t("request_in", FieldType.FRAMENUM, "Request in",
           "The packet of the request an answer answers"),
        _t("response_in", FieldType.FRAMENUM, "Answered in",
           "The packet of the answer to a request"),
        _t("time", FieldType.RELATIVE_TIME, "Time since the request"),
        _t("violation", s, "Violation", "What the codec refuses in a frame"),
        _t("violation.field", s, "Field", "The field the violation is in"),
        _t("violation.reason", s, "Reason"),
    )


FIELDS: tuple[Field, ...] = _fields()
"""Every TubeMQ field, in the dissector's tree order."""


# ---------------------------------------------------------------------------- values
# What the dissector adds to the packet tree for one frame, read off the frame's event
# (and its reassembled bytes) so that a filter selects the packets tshark selects.

_N = PREFIX + "."


def _has(message: Any, name: str) -> bool:
    return message is not None and message.HasField(name)


_BLOCK_PREFIX = grammar.Block.subcons[0].sizeof()
"""The width of a block's length prefix."""


def _envelope(out: dict[str, list[Any]], event: Any) -> None:
    raw = event.raw
    try:
        parts = grammar.parse_frame(raw.data) if raw is not None else None
    except grammar.GrammarError:  # framed under other limits than the default ones
        parts = None
    if parts is not None:
        out[_N + "token"] = [tables.BEGIN_TOKEN]
        out[_N + "list_size"] = [len(parts.blocks)]
        out[_N + "block"] = [len(b).to_bytes(_BLOCK_PREFIX, "big") + b for b in parts.blocks]
        out[_N + "block.length"] = [len(b) for b in parts.blocks]
    out[_N + "serial"] = [event.serialNo]
    if _has(event.connHeader, "flag"):
        out[_N + "flag"] = [event.connHeader.flag]


def _request_in(out: dict[str, list[Any]], event: Any) -> None:
    request = event.request
    if request is not None and request.raw is not None and request.raw.sources:
        out[_N + "request_in"] = [request.raw.sources[-1].segment]
        if event.latency is not None:
            out[_N + "time"] = [event.latency]


def record_values(kind: str, fields: Mapping[str, Any], direction: str | None,
                  event: Any) -> dict[str, list[Any]]:
    """One TubeMQ record's values of :data:`FIELDS`, as the dissector shows its frame."""
    out: dict[str, list[Any]] = {}
    if kind not in ("command", "frame", "error"):
        return out
    if direction:
        out[_N + "dir"] = [direction]
    t = type(event)
    if t is Request or t is Response or t is ExceptionResponse:
        _envelope(out, event)
        header, body = event.header, event.body
        if t is Request:
            for name, attr, msg in (("service", "serviceType", header),
                                    ("protocol_ver", "protocolVer", header),
                                    ("method", "method", body), ("timeout", "timeout", body)):
                if _has(msg, attr):
                    out[_N + name] = [getattr(msg, attr)]
        else:
            if _has(header, "status"):
                out[_N + "status"] = [header.status]
            if _has(header, "protocolVer"):
                out[_N + "protocol_ver"] = [header.protocolVer]
            _request_in(out, event)
        if t is ExceptionResponse:
            out[_N + "exception"] = [body.exceptionName if _has(body, "exceptionName") else ""]
        elif t is Response and _has(body, "method"):
            out[_N + "method"] = [body.method]
        if t is not ExceptionResponse and event.message is not None and event.info is not None:
            out[_N + "message"] = [getattr(event.info, "request" if t is Request
                                           else "response")]
    problems = fields.get("violations") or ([fields] if kind == "error" else [])
    if problems:
        out[_N + "violation"] = [p["code"] for p in problems]
        out[_N + "violation.field"] = [p["field"] for p in problems]
        out[_N + "violation.reason"] = [p["text"] for p in problems]
    return out
