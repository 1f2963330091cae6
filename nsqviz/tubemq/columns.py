"""TubeMQ's typed columns of the frames table: what its analyses
(:mod:`nsqviz.tubemq.analyses`) join and aggregate on, read off each request and answer.

A protobuf field name means the same in every message that has it (``clientId``,
``groupName``, ``partitionId``, ``currOffset`` ...), so the columns are filled by field
name, whatever the message; the string-encoded partitions (:mod:`nsqviz.tubemq.metadata`)
become partition keys ``brokerId:topic:partitionId``, the form the Master and its
consumers name a partition by.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from nsqviz.tubemq.events import ExceptionResponse, Request, Response
from nsqviz.tubemq.metadata import (
    MetadataError,
    format_partition_key,
    parse_failure_info,
    parse_partition,
    parse_subscribe_info,
    parse_topic_info,
)
from nsqviz.tubemq.protos import status_name
from nsqviz.tubemq.tables import METHOD_SEND_MESSAGE, METHODS, ErrorCode

__all__ = ["SCHEMA", "typed"]

SCHEMA = (
    ("rpc_serial", "int64"),  # serialNo: pairs an answer with its request
    ("rpc_method", "string"),  # the method's Java name (tables.METHODS)
    ("rpc_service", "int32"),  # a request's RequestHeader.serviceType
    ("rpc_status", "string"),  # an answer's ResponseHeader.status: SUCCESS / ERROR / FATAL
    ("err_code", "int32"),  # an answer's errCode (tables.ErrorCode)
    ("topic", "string"),  # topicName
    ("client_id", "string"),  # clientId
    ("group_name", "string"),  # groupName
    ("topics", "list<string>"),  # topicList: what a producer publishes, a consumer reads
    ("partition_id", "int32"),  # partitionId: storeId * 10000 + index, on its Broker
    ("partitions", "list<string>"),  # partition keys the unit lists (_PARTITION_LISTS)
    ("op_type", "int32"),  # RegisterRequestC2B.opType (31/32), else its EventProto's
    ("read_status", "int32"),  # RegisterRequestC2B.readStatus
    ("rebalance_id", "int64"),  # EventProto.rebalanceId
    ("event_status", "int32"),  # EventProto.status (what a consumer reports back)
    ("event_partitions", "list<string>"),  # EventProto.subscribeInfo, as partition keys
    ("last_pack_consumed", "bool"),  # a fetch's or commit's lastPackConsumed
    ("msg_ids", "list<int64>"),  # a send answer's messageId, a fetch answer's messages'
    ("curr_offset", "int64"),  # currOffset (an answer's: the partition's consume offset)
    ("max_offset", "int64"),  # maxOffset
    ("append_offset", "int64"),  # a send answer's appendOffset
)
"""``(column, arrow type)``: :attr:`nsqviz.protocols.protocol.Protocol.typed_schema`."""

_SCALARS = {
    "clientId": "client_id", "groupName": "group_name", "topicName": "topic",
    "partitionId": "partition_id", "opType": "op_type", "readStatus": "read_status",
    "lastPackConsumed": "last_pack_consumed", "errCode": "err_code",
    "currOffset": "curr_offset", "maxOffset": "max_offset", "appendOffset": "append_offset",
}
"""Scalar fields, by name in every message, and their column."""


def _keys(parse: Any) -> Any:
    """Partition keys of a list of one format's strings (a string that does not parse
    is left out: the record shows its error)."""
    def keys(texts: Any) -> list[str]:
        out = []
        for text in texts:
            try:
                out.append(parse(text)["partitionKey"])
            except MetadataError:
                continue
        return out
    return keys


def _topic_partitions(texts: Any) -> list[str]:
    """The partitions a producer may send to, from the Master's ``topicInfos``: every
    partition id of every Broker's stores."""
    out = []
    for text in texts:
        try:
            info = parse_topic_info(text)
        except MetadataError:
            continue
        out += [format_partition_key(b["brokerId"], info["topic"], pid)
                for b in info["brokers"] for pid in b["partitionIds"]]
    return out


_PARTITION_LISTS = {
    "subscribeInfo": _keys(parse_subscribe_info),  # held by a consumer (to the Master)
    "partitionInfo": _keys(parse_partition),  # held on a Broker (its heartbeat)
    "failureInfo": _keys(parse_failure_info),  # lost on a Broker (its heartbeat answer)
    "topicInfos": _topic_partitions,  # a producer's (the Master's heartbeat answer)
}
"""Fields that list partitions, each the partitions of the ``partitions`` column. A
consumer's heartbeat to the Master lists the partitions it holds only when it says the
list is whole (``reportSubscribeInfo``)."""


def _event(event: Message, out: dict[str, Any]) -> None:
    for field, value in event.ListFields():
        name = field.name
        if name == "rebalanceId":
            out["rebalance_id"] = value
        elif name == "opType":
            out["op_type"] = value
        elif name == "status":
            out["event_status"] = value
        elif name == "subscribeInfo":
            out["event_partitions"] = _PARTITION_LISTS[name](value)


def _message(msg: Message, out: dict[str, Any]) -> None:
    """The columns of an inner request or response message."""
    reported = True
    for field, value in msg.ListFields():
        name = field.name
        column = _SCALARS.get(name)
        if column is not None:
            out[column] = value
        elif name == "topicList":
            out["topics"] = list(value)
        elif name in _PARTITION_LISTS:
            out["partitions"] = _PARTITION_LISTS[name](value)
        elif name == "event":
            _event(value, out)
        elif name == "messages":
            out["msg_ids"] = [m.messageId for m in value]
        elif name == "messageId":
            out["msg_ids"] = [value]
        elif name == "reportSubscribeInfo":
            reported = value
    if not reported:
        out.pop("partitions", None)
    if not out.get("partitions"):
        out.pop("partitions", None)
    if not out.get("event_partitions"):
        out.pop("event_partitions", None)
    if not out.get("msg_ids"):
        out.pop("msg_ids", None)


def typed(event: Any) -> dict[str, Any]:
    """The typed columns of one request or answer (:data:`SCHEMA`)."""
    t = type(event)
    if t is not Request and t is not Response and t is not ExceptionResponse:
        return {}
    out: dict[str, Any] = {"rpc_serial": event.serialNo}
    request = event if t is Request else event.request
    method = event.body.method if t is not ExceptionResponse else (
        None if request is None else request.method)
    info = METHODS.get(method) if method is not None else None
    if info is not None:
        out["rpc_method"] = info.name
    if t is Request:
        out["rpc_service"] = event.header.serviceType
    else:
        out["rpc_status"] = status_name(event.header.status)
    message = event.message if t is not ExceptionResponse else None
    if message is not None:
        _message(message, out)
        if t is Response and method == METHOD_SEND_MESSAGE and "msg_ids" not in out:
            # messageId is optional: the Java Broker also writes the id as the success
            # answer's errMsg (for clients older than the field)
            text = getattr(message, "errMsg", "")
            if out.get("err_code") == ErrorCode.SUCCESS and text.lstrip("-").isdigit():
                out["msg_ids"] = [int(text)]
    return out
