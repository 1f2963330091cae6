"""TubeMQ's protobuf messages, compiled at import time from the ``.proto`` sources.

The sources in ``nsqviz/tubemq/proto/`` (``RPC.proto``, ``MasterService.proto``,
``BrokerService.proto``) are the one definition of every message. They use a small
subset of proto2 -- messages, a nested enum, ``required``/``optional``/``repeated``
scalar and message fields, comments and file options -- which :func:`parse_proto`
reads into a ``FileDescriptorProto``; the ``protobuf`` package's descriptor pool
then builds the message classes. Nothing is generated or checked in.

``MESSAGES`` maps every message name (there is no proto package, as in the originals)
to its class; :func:`message_class` looks one up. :class:`RpcStatus` is ``RPC.proto``'s
``ResponseHeader.Status``, its numbers read from the compiled descriptor.
"""

from __future__ import annotations

import enum
import re
from importlib import resources

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

__all__ = ["MESSAGES", "PROTO_FILES", "ProtoSyntaxError", "RpcStatus", "message_class",
           "parse_proto", "status_name"]

PROTO_FILES = ("RPC.proto", "MasterService.proto", "BrokerService.proto")
"""The three sources, in dependency order (none imports another)."""

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64,
    "uint64": _F.TYPE_UINT64, "int32": _F.TYPE_INT32, "fixed64": _F.TYPE_FIXED64,
    "fixed32": _F.TYPE_FIXED32, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES, "uint32": _F.TYPE_UINT32, "sfixed32": _F.TYPE_SFIXED32,
    "sfixed64": _F.TYPE_SFIXED64, "sint32": _F.TYPE_SINT32, "sint64": _F.TYPE_SINT64,
}
_LABELS = {
    "required": _F.LABEL_REQUIRED, "optional": _F.LABEL_OPTIONAL,
    "repeated": _F.LABEL_REPEATED,
}
_TOKEN = re.compile(r'\s*(?:(//[^\n]*)|("[^"]*")|(-?\w+)|(\S))')
_FIELD = re.compile(r"^(required|optional|repeated) (\w+) (\w+) = (\d+)$")


class ProtoSyntaxError(ValueError):
    """A ``.proto`` source uses something outside the subset this reader knows."""


def _statements(text: str) -> list[tuple[str, int]]:
    """Split a source into statements: ``message X {``, ``}`` and ``... ;`` lines,
    comments dropped, each with the line it starts on."""
    out: list[tuple[str, int]] = []
    words: list[str] = []
    line = start = 1
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # only trailing whitespace is left
            break
        line += text.count("\n", pos, m.start(m.lastindex or 0))
        pos = m.end()
        comment, string, word, punct = m.groups()
        if comment:
            continue
        if not words:
            start = line
        tok = string or word or punct
        if tok in ("{", "}", ";"):
            if tok != ";":
                words.append(tok)
            out.append((" ".join(words), start))
            words = []
        else:
            words.append(tok)
    if words:
        raise ProtoSyntaxError(f"line {start}: unterminated statement {' '.join(words)!r}")
    return out


def parse_proto(name: str, text: str) -> descriptor_pb2.FileDescriptorProto:
    """Read a proto2 source of the subset described above into a descriptor."""
    fdp = descriptor_pb2.FileDescriptorProto(name=name)
    stack: list[descriptor_pb2.DescriptorProto] = []
    enum: descriptor_pb2.EnumDescriptorProto | None = None
    for stmt, line in _statements(text):
        words = stmt.split(" ")
        if stmt == "}":
            if enum is not None:
                enum = None
            elif stack:
                stack.pop()
            else:
                raise ProtoSyntaxError(f"line {line}: '}}' without an open block")
        elif words[0] == "syntax":
            if words[-1] != '"proto2"':
                raise ProtoSyntaxError(f"line {line}: only proto2 is supported")
            fdp.syntax = "proto2"
        elif words[0] == "option" and not stack:
            continue  # file options (java_outer_classname ...) do not change the wire
        elif words[0] == "message" and len(words) == 3 and words[2] == "{":
            msg = stack[-1].nested_type.add() if stack else fdp.message_type.add()
            msg.name = words[1]
            stack.append(msg)
        elif words[0] == "enum" and len(words) == 3 and words[2] == "{" and enum is None:
            enum = (stack[-1].enum_type if stack else fdp.enum_type).add(name=words[1])
        elif enum is not None and len(words) == 3 and words[1] == "=":
            enum.value.add(name=words[0], number=int(words[2]))
        elif stack and (m := _FIELD.match(stmt)):
            label, typ, fname, number = m.groups()
            field = stack[-1].field.add(name=fname, number=int(number), label=_LABELS[label])
            if typ in _SCALARS:
                field.type = _SCALARS[typ]
            else:
                field.type_name = typ  # resolved below, once every type is known
        else:
            raise ProtoSyntaxError(f"line {line}: cannot read {stmt!r}")
    if stack or enum is not None:
        raise ProtoSyntaxError(f"{name}: a block is not closed")
    _resolve(fdp)
    return fdp


def _resolve(fdp: descriptor_pb2.FileDescriptorProto) -> None:
    """Turn bare type names into full names and mark them as message or enum."""
    enums: dict[str, str] = {e.name: f".{e.name}" for e in fdp.enum_type}
    messages = {m.name: f".{m.name}" for m in fdp.message_type}
    for msg in fdp.message_type:
        for e in msg.enum_type:
            enums[e.name] = f".{msg.name}.{e.name}"
    for msg in fdp.message_type:
        for field in msg.field:
            if not field.type_name:
                continue
            bare = field.type_name
            local_enum = next((e for e in msg.enum_type if e.name == bare), None)
            if local_enum is not None:
                field.type_name, field.type = f".{msg.name}.{bare}", _F.TYPE_ENUM
            elif bare in messages:
                field.type_name, field.type = messages[bare], _F.TYPE_MESSAGE
            elif bare in enums:
                field.type_name, field.type = enums[bare], _F.TYPE_ENUM
            else:
                raise ProtoSyntaxError(f"{fdp.name}: {msg.name}.{field.name}: unknown type {bare}")


def _load() -> dict[str, type[Message]]:
    pool = descriptor_pool.DescriptorPool()
    classes: dict[str, type[Message]] = {}
    folder = resources.files("nsqviz.tubemq") / "proto"
    for fname in PROTO_FILES:
        fdp = parse_proto(fname, (folder / fname).read_text(encoding="utf-8"))
        pool.Add(fdp)
        file_desc = pool.FindFileByName(fname)
        for name, desc in file_desc.message_types_by_name.items():
            if name in classes:
                raise ProtoSyntaxError(f"{fname}: message {name} defined twice")
            classes[name] = message_factory.GetMessageClass(desc)
    return classes


MESSAGES: dict[str, type[Message]] = _load()
"""Every TubeMQ message class by its name in the ``.proto`` sources."""


def message_class(name: str) -> type[Message]:
    """The class of the message called ``name`` (``KeyError`` if there is none)."""
    return MESSAGES[name]


_STATUS = {v.name: v.number
           for v in MESSAGES["ResponseHeader"].DESCRIPTOR.enum_types_by_name["Status"].values}


class RpcStatus(enum.IntEnum):
    """``ResponseHeader.Status`` of ``RPC.proto``: SUCCESS carries an ``RspResponseBody``,
    ERROR and FATAL an ``RspExceptionBody``. The numbers come from the ``.proto`` source;
    the names are spelled here so that code and type checker can name them, and the
    import fails if they ever differ from the source's."""

    SUCCESS = _STATUS["SUCCESS"]
    ERROR = _STATUS["ERROR"]
    FATAL = _STATUS["FATAL"]


if set(RpcStatus.__members__) != set(_STATUS):
    raise ProtoSyntaxError(f"RPC.proto's ResponseHeader.Status is {sorted(_STATUS)}, "
                           f"RpcStatus names {sorted(RpcStatus.__members__)}")


def status_name(status: int) -> str:
    """The name of a ``ResponseHeader.status`` value (its number, for one RPC.proto lacks)."""
    return RpcStatus(status).name if status in RpcStatus._value2member_map_ else str(status)
