"""TubeMQ RPC's display-filter fields (``tubemq.*``), with their value names from the tables.

The one declaration of ``tubemq.method``, ``tubemq.serial`` ...: the filter engine
evaluates them and the Lua generator declares them as the dissector's ``ProtoField`` s
(its keys are the names without ``tubemq.``). Method, service, protocol version and flag
names come from :mod:`nsqviz.tubemq.tables`, the RPC status names from the
``ResponseHeader`` message of the ``.proto`` sources.
"""

from __future__ import annotations

from nsqviz.fields import Field, FieldType
from nsqviz.tubemq import tables
from nsqviz.tubemq.messages import ResponseHeader

__all__ = ["FIELDS", "PREFIX", "status_names"]

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
