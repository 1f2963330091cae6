"""NSQ V2's display-filter fields (``nsq.*``), read off the command table and the grammar.

The one declaration of the names ``nsq.command``, ``nsq.topic``, ``nsq.msg.id`` ...: the
filter engine evaluates them and the Lua generator declares them as the dissector's
``ProtoField`` s (its keys are the names without ``nsq.``). Parameters come from
:data:`nsqviz.nsq.commands.COMMANDS`, the frame header and message layouts from
:mod:`nsqviz.nsq.grammar` (:func:`layout` reads a fixed-layout ``Struct``); only the
fields no table holds -- the dissector's marks for violations, cuts, resynchronisation,
compression and TLS -- are written out here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from construct import (
    Adapter,
    Bytes,
    FormatField,
    GreedyBytes,
    Rebuild,
    Renamed,
    Subconstruct,
)

from nsqviz.fields import Field, FieldType, by_abbrev
from nsqviz.nsq import grammar, grammar_frames
from nsqviz.nsq.commands import COMMANDS, BodyKind, CommandSpec, Param, ParamKind
from nsqviz.stream.direction import Direction

__all__ = ["FIELDS", "FRAME_HEADER", "LayoutField", "MESSAGE", "PREFIX", "layout", "param_abbrev",
           "param_title", "record_values"]

PREFIX = "nsq"
"""The first word of every NSQ field name (the dissector's ``Proto`` name)."""


@dataclass(frozen=True, slots=True)
class LayoutField:
    """A fixed-layout field of a frame or message: size 0 means "the rest"; ``type`` one
    of ``int32``, ``uint16``, ``int64``, ``hexid`` (16 ASCII hex digits), ``bytes``."""

    name: str
    type: str
    size: int


_FORMATS = {">l": ("int32", 4), ">i": ("int32", 4), ">q": ("int64", 8), ">H": ("uint16", 2)}


def _unwrap(con: Any) -> Any:
    while isinstance(con, Renamed | Rebuild) or (
        isinstance(con, Subconstruct) and type(con).__name__ == "_Located"
    ):
        con = con.subcon
    return con


def _layout_field(name: str, con: Any) -> LayoutField:
    con = _unwrap(con)
    while isinstance(con, Adapter) and not isinstance(con, FormatField):
        if type(con).__name__ == "_HexIDAdapter":
            size = _unwrap(con.subcon)
            if not isinstance(size, Bytes) or size.length != 16:
                raise TypeError(f"{name}: a message id of unknown size")
            return LayoutField(name, "hexid", 16)
        con = _unwrap(con.subcon)
    if isinstance(con, FormatField):
        if con.fmtstr not in _FORMATS:
            raise TypeError(f"{name}: format {con.fmtstr!r} not known to the field registry")
        typ, size = _FORMATS[con.fmtstr]
        return LayoutField(name, typ, size)
    if con is GreedyBytes:
        return LayoutField(name, "bytes", 0)
    raise TypeError(f"{name}: {con!r} is not a fixed-layout field")


def layout(struct: Any, names: tuple[str, ...] | None = None) -> tuple[LayoutField, ...]:
    """The fixed-layout fields of a grammar ``Struct`` (only ``names``, when given), in
    wire order; a shape this module does not know raises ``TypeError``, so a grammar
    change cannot silently leave the fields (and the dissector) behind."""
    return tuple(_layout_field(s.name, s) for s in struct.subcons
                 if names is None or s.name in names)


FRAME_HEADER = layout(grammar.Frame, ("size", "frame_type"))
"""The frame header's fields (``nsq.size``, ``nsq.frame_type``)."""
MESSAGE = layout(grammar.Message)
"""The message frame's fields (``nsq.msg.timestamp`` ... ``nsq.msg.body``)."""

_LAYOUT_TYPES = {"int32": FieldType.INT32, "int64": FieldType.INT64,
                 "uint16": FieldType.UINT16, "hexid": FieldType.STRING,
                 "bytes": FieldType.BYTES}


def param_abbrev(param: Param) -> str:
    """The filter name of a command parameter: message ids live under ``nsq.msg`` (so
    ``nsq.msg.id == X`` finds a message and its FIN/REQ/TOUCH alike)."""
    if param.kind is ParamKind.ID:
        return f"{PREFIX}.msg.{param.field}"
    return f"{PREFIX}.{param.field}"


def param_title(spec: CommandSpec, param: Param) -> str:
    """How nsqd's error texts name the parameter (``RDY count``, ``topic``)."""
    if param.kind is ParamKind.DECIMAL:
        return f"{spec.verb} {param.words}"
    return param.words


def _label(name: str) -> str:
    return name.replace("_", " ").capitalize()


def _n(suffix: str, type_: FieldType, title: str, description: str = "", *,
       values: dict[int, str] | None = None, base: str | None = None) -> Field:
    return Field(f"{PREFIX}.{suffix}", type_, title, description, values, base)


def _fields() -> tuple[Field, ...]:
    s, b, i32 = FieldType.STRING, FieldType.BYTES, FieldType.INT32
    out = [
        _n("dir", s, "Direction", "c2s: client to nsqd, s2c: back"),
        _n("magic", s, "Magic", "The protocol version the client opens with"),
        _n("command", s, "Command", "The verb of a command line"),
    ]
    for spec in COMMANDS.values():
        for p in spec.params:
            typ = FieldType.UINT64 if p.kind is ParamKind.DECIMAL else s
            title = param_title(spec, p)
            out.append(Field(param_abbrev(p), typ, title[0].upper() + title[1:]))
    out += [
        _n("body_size", i32, "Body size"),
        _n("body", b, "Body", "A command's body (PUB's message, IDENTIFY's JSON)"),
        _n("mpub.count", i32, "Number of messages", "MPUB's message count"),
        _n("mpub.size", i32, "Message size", "One MPUB message's size"),
        _n("mpub.body", b, "Message body", "One MPUB message's body"),
    ]
    frame_types = {v: k for k, v in grammar_frames.FRAME_TYPES.items()}
    for f in FRAME_HEADER:
        out.append(_n(f.name, _LAYOUT_TYPES[f.type], _label(f.name),
                      values=frame_types if f.name == "frame_type" else None))
    out += [
        _n("response", b, "Response data"),
        _n("response.text", s, "Response", "A response frame's data as text"),
        _n("error.code", s, "Error code", "An error frame's code (E_INVALID ...)"),
        _n("error.text", s, "Error text", "What follows the code in an error frame"),
    ]
    for f in MESSAGE:
        out.append(_n(f"msg.{f.name}", _LAYOUT_TYPES[f.type],
                      f"Message {f.name.replace('_', ' ')}"))
    out += [
        _n("msg.time", FieldType.ABSOLUTE_TIME, "Message time",
           "The message timestamp as a time", base="UTC"),
        _n("response_to", FieldType.FRAMENUM, "Answers the command in",
           "The packet of the command a response or error frame answers"),
        _n("response_in", FieldType.FRAMENUM, "Answered in",
           "The packet of the response that answers a command"),
        _n("violation", s, "Violation (nsqd's error code)",
           "What nsqd refuses in a unit: the code it would answer"),
        _n("violation.text", s, "Violation", "nsqd's error text for the violation"),
        _n("violation.fatal", FieldType.BOOL, "Fatal", "nsqd closes the connection"),
        _n("violation.kept", FieldType.BOOL,
           "Command kept (well framed; the violation is in its values)"),
        _n("skipped", b, "Skipped while resynchronising"),
        _n("skipped.reason", s, "Undecodable while resynchronising"),
        _n("cut", b, "Cut short by the capture's snaplen"),
        _n("cut.captured", FieldType.UINT32, "Bytes captured",
           "How much of a unit the snaplen cut was captured"),
        _n("cut.length", FieldType.UINT32, "Bytes sent",
           "The whole length of a unit the snaplen cut, when its size was captured"),
        _n("switch", s, "Stream switches to (after this frame, both directions)",
           "snappy, deflate or tls, as IDENTIFY's response negotiated"),
        _n("switch.level", FieldType.UINT16, "Deflate level"),
        _n("compressed", s, "Compression", "The algorithm of a compressed stream's data"),
        _n("compressed.data", b, "Compressed data"),
        _n("tls", b, "TLS data (negotiated by IDENTIFY)"),
    ]
    return tuple(by_abbrev(out).values())


FIELDS: tuple[Field, ...] = _fields()
"""Every NSQ field, in the dissector's tree order; a name several tables declare
(``nsq.topic`` for SUB, PUB ...; ``nsq.msg.id`` for FIN and the message) appears once,
as first declared."""


# ---------------------------------------------------------------------------- values
# What the dissector adds to the packet tree for one unit, read off the unit's event
# (and its reassembled bytes) so that a filter selects the packets tshark selects.

_N = PREFIX + "."
_MESSAGE_ATTRS = tuple((f"{_N}msg.{f.name}", f.name, f.type) for f in MESSAGE)
_FRAME_NUMBERS = dict(grammar_frames.FRAME_TYPES)
_SIZE, _FRAME_TYPE = (f"{_N}{f.name}" for f in FRAME_HEADER)
_PREFIX_SIZE = FRAME_HEADER[0].size
"""The width of a size prefix: a frame's, and (the same int32) a command body's."""
_AFTER_SIZE = sum(f.size for f in FRAME_HEADER[1:])
"""What a frame's size counts before its data: the frame type."""
_MESSAGE_FIXED = sum(f.size for f in MESSAGE)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _layout_value(typ: str, value: Any) -> Any:
    return value.decode("latin-1") if typ == "hexid" else value


def _command_values(out: dict[str, list[Any]], name: str, event: Any) -> None:
    out[_N + "command"] = [name]
    spec = next((s for s in COMMANDS.values() if isinstance(event, s.event)), None)
    if spec is None:  # the magic
        out[_N + "magic"] = [grammar.MAGIC_V2.decode("latin-1")]
        del out[_N + "command"]
        return
    for p in spec.params:
        value = getattr(event, p.field)
        out[param_abbrev(p)] = [value.decode("latin-1") if isinstance(value, bytes) else value]
    raw = event.raw
    if raw is None or spec.body is BodyKind.NONE:
        return
    data = raw.data
    line = data.index(b"\n") + 1
    body = data[line + _PREFIX_SIZE:]
    out[_N + "body_size"] = [int.from_bytes(data[line:line + _PREFIX_SIZE], "big",
                                            signed=True)]
    if spec.body is BodyKind.MESSAGES:
        bodies = event.bodies
        out[_N + "mpub.count"] = [len(bodies)]
        out[_N + "mpub.size"] = [len(b) for b in bodies]
        out[_N + "mpub.body"] = list(bodies)
    else:
        out[_N + "body"] = [body]


def _frame_values(out: dict[str, list[Any]], name: str, event: Any) -> None:
    out[_FRAME_TYPE] = [_FRAME_NUMBERS[name]]
    if name == "FrameTypeMessage":
        for abbrev, attr, typ in _MESSAGE_ATTRS:
            out[abbrev] = [_layout_value(typ, getattr(event, attr))]
        out[_N + "msg.time"] = [event.timestamp / 1e9]
        size = _AFTER_SIZE + _MESSAGE_FIXED + len(event.body)
    else:
        data = event.data
        size = _AFTER_SIZE + len(data)
        if name == "FrameTypeError":
            code, sp, text = data.partition(b" ")
            out[_N + "error.code"] = [_text(code)]
            if sp:
                out[_N + "error.text"] = [_text(text)]
        else:
            out[_N + "response"] = [data]
            if data:
                out[_N + "response.text"] = [_text(data)]
    out[_SIZE] = [size]


_BY_VERB = {spec.verb.encode(): spec for spec in COMMANDS.values()}


def _framed_line(out: dict[str, list[Any]], data: bytes) -> None:
    """Bytes refused as a command: when they are one whole command by the framing rule
    (a line, and for a verb with a body its size and body), the dissector shows the
    verb (and body size) of the unit it refuses, as it does for ``BOGUS``."""
    nl = data.find(b"\n")
    if nl < 0:
        return
    line = data[:nl].removesuffix(b"\r")
    verb = line.split(b" ", 1)[0]
    spec = _BY_VERB.get(verb)
    if spec is None or spec.body is BodyKind.NONE or line.count(b" ") < len(spec.params):
        if len(data) == nl + 1:
            out[_N + "command"] = [_text(verb)]
        return
    start = nl + 1 + _PREFIX_SIZE
    size = int.from_bytes(data[nl + 1:start], "big", signed=True)
    if len(data) >= start and size > 0 and len(data) == start + size:
        out[_N + "command"] = [_text(verb)]
        out[_N + "body_size"] = [size]


def _cut_values(out: dict[str, list[Any]], kind: str, name: str,
                fields: Mapping[str, Any]) -> None:
    """A unit the snaplen cut (no event): what was captured of it, as the dissector's
    ``cut_command``/``cut_frame`` show it."""
    if kind == "command":
        spec = COMMANDS.get(name)
        out[_N + "command"] = [name]
        if spec is None:
            return
        for p in spec.params:
            if p.field not in fields:
                break
            out[param_abbrev(p)] = [fields[p.field]]
        if "body_size" in fields:
            out[_N + "body_size"] = [fields["body_size"]]
            out[_N + "body"] = [bytes.fromhex(fields.get("body", ""))]
            if "messages" in fields:
                out[_N + "mpub.count"] = [fields["messages"]]
        return
    out[_FRAME_TYPE] = [_FRAME_NUMBERS[name]]
    length = fields["cut"].get("length")
    if length is not None:
        out[_SIZE] = [length - _PREFIX_SIZE]
    if name == "FrameTypeMessage":
        for abbrev, attr, _typ in _MESSAGE_ATTRS:
            if attr not in fields:
                break
            value = fields[attr]
            out[abbrev] = [bytes.fromhex(value) if attr == "body" else value]
    else:
        out[_N + "response"] = [bytes.fromhex(fields.get("data", ""))]


def record_values(kind: str, name: str, fields: Mapping[str, Any], direction: str | None,
                  event: Any) -> dict[str, list[Any]]:
    """One NSQ record's values of :data:`FIELDS`, as the dissector shows its unit."""
    out: dict[str, list[Any]] = {}
    if kind in ("command", "frame", "error") and direction:
        out[_N + "dir"] = [direction]
    problem = fields.get("violation") if kind == "command" else fields if kind == "error" \
        else None
    if event is None and kind in ("command", "frame") and "cut" in fields:
        _cut_values(out, kind, name, fields)
    elif kind == "command":
        command = getattr(event, "command", None) or event
        _command_values(out, name, command)
    elif kind == "frame":
        _frame_values(out, name, event)
        switch = fields.get("compression_starts")
        if switch:
            out[_N + "switch"] = [switch["kind"]]
            if switch.get("level") is not None:
                out[_N + "switch.level"] = [switch["level"]]
    elif kind == "tls" and "pending" in fields:
        out[_N + "switch"] = ["tls"]
    elif kind == "error" and direction == Direction.C2S and getattr(event, "raw", None):
        _framed_line(out, event.raw.data)
    elif kind == "gap" and name == "Skipped":
        out[_N + "skipped.reason"] = [fields.get("text", "")]
    if problem:
        out[_N + "violation"] = [problem["code"]]
        out[_N + "violation.text"] = [problem["text"]]
        out[_N + "violation.fatal"] = [bool(problem["fatal"])]
        if kind == "command":
            out[_N + "violation.kept"] = [True]
    cut = fields.get("cut")
    if cut is not None:
        out[_N + "cut"] = [b""]
        if isinstance(cut, Mapping):
            out[_N + "cut.captured"] = [cut["captured"]]
            if cut.get("length") is not None:
                out[_N + "cut.length"] = [cut["length"]]
    if "response_to" in fields:
        out[_N + "response_to"] = [fields["response_to"]]
    return out
