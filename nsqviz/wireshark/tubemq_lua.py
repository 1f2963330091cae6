"""The TubeMQ RPC Lua dissector: tables generated from :mod:`nsqviz.tubemq` (grammar,
method table, services, limits, the envelope's protobuf field numbers), followed by the
protocol engine ``tubemq_engine.lua``.

The three protobuf messages of a frame's content, and the request or response message
inside, are handed to Wireshark's own protobuf dissector with their message names; the
``.proto`` sources are written next to the dissector (``tubemq-proto/``) and go on
Wireshark's protobuf search path, so every field shows by name (and, with
``protobuf.pbf_as_hf``, filters as ``pbf.<Message>.<field>``).
"""

from __future__ import annotations

from importlib import resources

from nsqviz.tubemq import grammar, protos, tables
from nsqviz.wireshark.lua import ProtoFieldDecl, declare_fields, engine, literal
from nsqviz.wireshark.nsq_spec import SpecError

__all__ = ["PROTO_DIR", "field_decls", "proto_sources", "render"]

PROTO_DIR = "tubemq-proto"
"""The folder, next to ``tubemq.lua``, that holds the ``.proto`` sources."""

ENVELOPE = {
    "conn": "RpcConnHeader",
    "request_header": "RequestHeader",
    "request_body": "RequestBody",
    "response_header": "ResponseHeader",
    "response_body": "RspResponseBody",
    "exception_body": "RspExceptionBody",
}
"""The content's three messages: RpcConnHeader, then a request's or an answer's header
and body (``RPC.proto``; :mod:`nsqviz.tubemq.messages` decodes the same)."""


def _field_numbers(name: str) -> dict[str, int]:
    try:
        desc = protos.MESSAGES[name].DESCRIPTOR
    except KeyError:
        raise SpecError(f"no message {name} in the .proto sources") from None
    return {f.name: f.number for f in desc.fields}


def _status_names() -> dict[int, str]:
    return {int(s): s.name for s in protos.RpcStatus}


def field_decls() -> list[ProtoFieldDecl]:
    methods = {m.id: m.name for m in tables.METHODS.values()}
    flags = {tables.RPC_FLAG_MSG_TYPE_REQUEST: "request",
             tables.RPC_FLAG_MSG_TYPE_RESPONSE: "response"}
    return [
        ProtoFieldDecl("dir", "string", "tubemq.dir", "Direction (c2s: client to server)"),
        ProtoFieldDecl("token", "bytes", "tubemq.token", "MsgToken"),
        ProtoFieldDecl("serial", "uint32", "tubemq.serial", "serialNo"),
        ProtoFieldDecl("list_size", "int32", "tubemq.list_size", "listSize"),
        ProtoFieldDecl("block", "bytes", "tubemq.block", "Block"),
        ProtoFieldDecl("block.length", "int32", "tubemq.block.length", "Block length"),
        ProtoFieldDecl("flag", "uint32", "tubemq.flag", "RpcConnHeader.flag", values=flags),
        ProtoFieldDecl("service", "uint32", "tubemq.service", "RequestHeader.serviceType",
                       values=dict(tables.SERVICES)),
        ProtoFieldDecl("protocol_ver", "uint32", "tubemq.protocol_ver", "protocolVer",
                       values=dict(tables.PROTOCOL_VERSIONS)),
        ProtoFieldDecl("method", "uint32", "tubemq.method", "Method", values=methods),
        ProtoFieldDecl("timeout", "uint64", "tubemq.timeout", "RequestBody.timeout (ms)"),
        ProtoFieldDecl("status", "uint32", "tubemq.status", "ResponseHeader.status",
                       values=_status_names()),
        ProtoFieldDecl("exception", "string", "tubemq.exception", "exceptionName"),
        ProtoFieldDecl("message", "string", "tubemq.message", "Message"),
        ProtoFieldDecl("request_in", "framenum", "tubemq.request_in", "Request in"),
        ProtoFieldDecl("response_in", "framenum", "tubemq.response_in", "Answered in"),
        ProtoFieldDecl("time", "relative_time", "tubemq.time", "Time since the request"),
        ProtoFieldDecl("violation", "string", "tubemq.violation", "Violation"),
        ProtoFieldDecl("violation.field", "string", "tubemq.violation.field", "Field"),
        ProtoFieldDecl("violation.reason", "string", "tubemq.violation.reason", "Reason"),
    ]


def _tables() -> str:
    limits = grammar.DEFAULT_LIMITS
    methods = {
        m.id: {"name": m.name, "const": m.const, "request": m.request,
               "response": m.response, "label": m.label, "services": list(m.services)}
        for m in tables.METHODS.values()
    }
    pb = {name: _field_numbers(name) for name in ENVELOPE.values()}
    values = {
        "TOKEN": grammar.BEGIN_TOKEN,
        "HEADER_SIZE": grammar.HEADER_SIZE,
        "LIMITS": {"max_list_size": limits.max_list_size,
                   "min_block_length": limits.min_block_length,
                   "max_block_length": limits.max_block_length},
        "SERVICES": dict(tables.SERVICES),
        "METHODS": methods,
        "FLAG_REQUEST": tables.RPC_FLAG_MSG_TYPE_REQUEST,
        "FLAG_RESPONSE": tables.RPC_FLAG_MSG_TYPE_RESPONSE,
        "STATUS": _status_names(),
        "STATUS_SUCCESS": int(protos.RpcStatus.SUCCESS),
        "ENVELOPE": ENVELOPE,
        "PB": pb,
        "SERVER_PORTS": [tables.DEFAULT_MASTER_PORT, tables.DEFAULT_BROKER_PORT],
    }
    return "\n".join(f"local {name} = {literal(value)}" for name, value in values.items())


def proto_sources() -> dict[str, str]:
    """``{file name: text}`` of the ``.proto`` sources, as :mod:`nsqviz.tubemq.protos`
    compiles them."""
    folder = resources.files("nsqviz.tubemq").joinpath("proto")
    return {name: folder.joinpath(name).read_text(encoding="utf-8")
            for name in protos.PROTO_FILES}


def render() -> str:
    """The complete ``tubemq.lua``."""
    head = (
        "-- Apache InLong TubeMQ RPC dissector for Wireshark >= 3.6 (Lua API).\n"
        "-- GENERATED by `nsqviz wireshark` from nsqviz.tubemq's grammar and tables: do\n"
        "-- not edit; re-generate instead. The protobuf messages go to Wireshark's protobuf\n"
        f"-- dissector: put {PROTO_DIR}/ on its search path (nsqviz wireshark says how).\n"
    )
    return "\n\n".join([
        head,
        "-- Tables (from nsqviz.tubemq.grammar / tables / protos)\n" + _tables(),
        'local tubemq = Proto("tubemq", "Apache InLong TubeMQ RPC")\n'
        + declare_fields(field_decls()),
        engine("tubemq_engine.lua"),
    ])
