"""TubeMQ as the protocol-free parts of nsqviz see it (:class:`nsqviz.protocols.protocol.Protocol`).

Detection is the begin token ``FF 7F F4 FE`` that starts every frame in both
directions (a server's first frame an answer), and the Master's and Broker's default
ports (8715, 8123) for captures that start mid-connection. A flow's client is the side
whose first frame is a request (``RpcConnHeader.flag`` is not 1). Decoding is the codec's
:class:`~nsqviz.tubemq.codec.Observer`, its events turned into items and record fields
by :mod:`nsqviz.tubemq.items`.

Detection reads only the tables: this module imports nothing else of TubeMQ, so that
offering a capture's flows to every protocol costs no protobuf compilation. The codec,
the items, the filter fields, the analyses, the report, the rules and the typed columns
are imported where they are first asked for (the observer of the first TubeMQ flow).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nsqviz.protocols.detection import DetectionWords
from nsqviz.protocols.items import ObservedConnection, no_fields
from nsqviz.protocols.protocol import Part, Protocol, RecordView
from nsqviz.tubemq.dissector import DISSECTOR
from nsqviz.tubemq.tables import (
    BEGIN_TOKEN,
    DEFAULT_BROKER_PORT,
    DEFAULT_MASTER_PORT,
    ERRORS,
    HEADER_SIZE,
    METHODS,
    RPC_FLAG_MSG_TYPE_RESPONSE,
)

if TYPE_CHECKING:
    from nsqviz.doctor.rule import Rule
    from nsqviz.fields import Field
    from nsqviz.report import Report
    from nsqviz.sql import Analyses

__all__ = ["TUBEMQ", "TubeMQProtocol"]

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

    filter_fields: Part[tuple[Field, ...]] = Part("nsqviz.tubemq.fields:FIELDS")

    def record_names(self) -> frozenset[str]:
        return frozenset(n for m in METHODS.values() for n in (m.name, m.request, m.response)
                         if n)

    def filter_values(self, record: RecordView) -> dict[str, list[Any]]:
        from nsqviz.tubemq.fields import record_values
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
        from nsqviz.tubemq.codec import Observer
        from nsqviz.tubemq.items import Items
        items = Items() if fields else Items(no_fields)
        return ObservedConnection(Observer(provenance=True, midstream=midstream), items)

    def fields(self, event: Any) -> dict[str, Any]:
        from nsqviz.tubemq.items import event_fields
        return event_fields(event)

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
        from nsqviz.tubemq.items import label
        return label(event)

    def grammars(self) -> tuple[Any, ...]:
        """The frame (its content's protobuf messages are compiled from ``.proto``
        sources: :mod:`nsqviz.tubemq.protos`)."""
        from nsqviz.tubemq.grammar import FrameStruct
        return (FrameStruct,)

    def record_name(self, event: Any) -> str | None:
        from nsqviz.tubemq.items import record_name
        return record_name(event)

    def layout(self, kind: str, name: str) -> Any:
        """:func:`~nsqviz.tubemq.layout.frame_layout`: the frame's fields from the grammar
        and, inside the blocks, every protobuf field (a function of the bytes)."""
        if kind not in ("command", "frame"):
            return None
        from nsqviz.tubemq.layout import frame_layout
        return lambda data: frame_layout(data, response=kind == "frame")

    analyses: Part[Analyses] = Part("nsqviz.tubemq.analyses:ANALYSES")
    report: Part[Report] = Part("nsqviz.tubemq.report:REPORT")
    dissector = DISSECTOR
    rules: Part[tuple[Rule, ...]] = Part("nsqviz.tubemq.rules:RULES")
    typed_schema: Part[tuple[tuple[str, str], ...]] = Part("nsqviz.tubemq.columns:SCHEMA")

    def typed(self, event: Any) -> dict[str, Any]:
        from nsqviz.tubemq.columns import typed
        return typed(event)


TUBEMQ = TubeMQProtocol()
"""The TubeMQ protocol, as registered in :data:`nsqviz.protocols.BUILTIN`."""
