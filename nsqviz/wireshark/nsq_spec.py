"""What the NSQ Lua dissector needs to know, read off the grammar and the framing rule.

The dissector is generated from this description; the description is computed from
:mod:`nsqviz.nsq.grammar` (the ``construct`` definitions of every command and frame),
:mod:`nsqviz.nsq.framing` (limits, which bodies are messages) and
:mod:`nsqviz.nsq.events` (which errors are not fatal) -- nothing here re-types a
command, a parameter or a layout. A grammar shape this module does not understand
raises :class:`SpecError`, so a grammar change cannot silently leave the dissector
behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from construct import (
    Adapter,
    Bytes,
    Const,
    FormatField,
    GreedyBytes,
    Prefixed,
    RawCopy,
    Rebuild,
    Renamed,
    Struct,
    Subconstruct,
)

from nsqviz.nsq import codec, framing, grammar
from nsqviz.nsq.events import NON_FATAL_ERRORS, Response
from nsqviz.nsq.protocol import NSQ

__all__ = [
    "CommandSpec",
    "LayoutField",
    "NsqSpec",
    "Param",
    "SpecError",
    "nsq_spec",
]


class SpecError(Exception):
    """The grammar has a shape the Wireshark generator does not know how to render."""


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a command line: ``kind`` is ``name`` (topic/channel rule),
    ``decimal`` (ASCII integer) or ``message_id`` (16 hex digits)."""

    name: str
    kind: str
    what: str  # the grammar's word for it, used in the nsqd error texts


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One command: its verb, line parameters and body (``None``, ``bytes``, ``json``
    or ``messages`` for MPUB's count-prefixed list); ``message`` says whether the body
    is one message (nsqd's E_BAD_MESSAGE and --max-msg-size) or a whole body."""

    verb: str
    params: tuple[Param, ...]
    body: str | None
    message: bool
    answered: bool  # nsqd answers it with a response frame (others only when they fail)


@dataclass(frozen=True, slots=True)
class LayoutField:
    """A fixed-layout field of a frame or message: size 0 means "the rest"."""

    name: str
    type: str  # int32, uint16, int64, hexid, bytes
    size: int


@dataclass(frozen=True, slots=True)
class NsqSpec:
    magic: bytes
    commands: tuple[CommandSpec, ...]
    frame_header: tuple[LayoutField, ...]
    frame_types: dict[str, int]
    message: tuple[LayoutField, ...]
    max_line: int
    max_body_size: int
    max_msg_size: int
    max_frame_size: int
    name_max: int
    name_suffix: str
    non_fatal_errors: tuple[str, ...]
    server_ports: tuple[int, ...]
    heartbeat: bytes


def _unwrap(con):
    while isinstance(con, Renamed | Rebuild) or (
        isinstance(con, Subconstruct) and type(con).__name__ == "_Located"
    ):
        con = con.subcon
    return con


_FORMATS = {">l": ("int32", 4), ">i": ("int32", 4), ">q": ("int64", 8), ">H": ("uint16", 2)}


def _layout_field(name: str, con) -> LayoutField:
    con = _unwrap(con)
    while isinstance(con, Adapter) and not isinstance(con, FormatField):
        if type(con).__name__ == "_HexIDAdapter":
            size = _unwrap(con.subcon)
            if not isinstance(size, Bytes) or size.length != 16:
                raise SpecError(f"{name}: a message id of unknown size")
            return LayoutField(name, "hexid", 16)
        con = _unwrap(con.subcon)
    if isinstance(con, FormatField):
        if con.fmtstr not in _FORMATS:
            raise SpecError(f"{name}: format {con.fmtstr!r} not rendered")
        typ, size = _FORMATS[con.fmtstr]
        return LayoutField(name, typ, size)
    if con is GreedyBytes:
        return LayoutField(name, "bytes", 0)
    raise SpecError(f"{name}: {con!r} is not a fixed-layout field")


def _param(name: str, con) -> Param:
    inner = _unwrap(con)
    kind = type(inner).__name__
    if kind == "_NameAdapter":
        return Param(name, "name", inner.kind)
    if kind == "_DecimalAdapter":
        return Param(name, "decimal", inner.what)
    if kind == "_HexIDAdapter":
        return Param(name, "message_id", "message ID")
    raise SpecError(f"parameter {name}: {inner!r} not rendered")


def _body(verb: str, con: Prefixed) -> str:
    inner = con.subcon
    if inner is GreedyBytes:
        return "bytes"
    if isinstance(inner, RawCopy) and _unwrap(inner.subcon) is _unwrap(grammar.JSONObject):
        return "json"
    if isinstance(inner, Struct):
        names = [s.name for s in inner.subcons if s.name]
        if names == ["messages"]:  # construct's PrefixedArray: a count, then the items
            return "messages"
    raise SpecError(f"{verb} body: {inner!r} not rendered")


def _command(verb: str, struct: Struct) -> CommandSpec:
    params: list[Param] = []
    body = None
    for sub in struct.subcons:
        inner = _unwrap(sub)
        if sub.name == "verb":
            if not isinstance(inner, Const) or inner.value != verb.encode():
                raise SpecError(f"{verb}: the verb is not the constant {verb!r}")
            continue
        if sub.name is None:  # separators
            if not isinstance(inner, Const) or inner.value not in (b" ", b"\n"):
                raise SpecError(f"{verb}: unnamed {inner!r}")
            continue
        if isinstance(inner, Prefixed):
            body = _body(verb, inner)
        else:
            params.append(_param(sub.name, sub))
    if (body is not None) != (verb.encode() in grammar.BODY_VERBS):
        raise SpecError(f"{verb}: body and BODY_VERBS disagree")
    message = verb.encode() in framing._MESSAGE_VERBS
    answered = any(cls.__name__.upper() == verb for cls in codec._ANSWERED)
    return CommandSpec(verb, tuple(params), body, message, answered)


def _name_rule() -> tuple[int, str]:
    """The topic/channel rule, checked against the grammar's regular expression (the
    Lua side spells it as a character class plus an optional suffix)."""
    pattern = grammar._NAME_RE.pattern
    if pattern != r"^[.a-zA-Z0-9_-]+(#ephemeral)?$":
        raise SpecError(f"name rule {pattern!r} changed: teach the generator")
    ok = grammar.is_valid_topic_name
    if not (ok("a" * 64) and not ok("a" * 65)):
        raise SpecError("name length limit changed: teach the generator")
    return 64, "#ephemeral"


def nsq_spec() -> NsqSpec:
    """The description of NSQ V2 that the Lua generator renders."""
    commands = tuple(_command(verb, struct) for verb, struct in grammar.COMMANDS.items())
    header = tuple(
        _layout_field(s.name, s) for s in grammar.Frame.subcons if s.name in ("size", "frame_type")
    )
    message = tuple(_layout_field(s.name, s) for s in grammar.Message.subcons)
    name_max, suffix = _name_rule()
    heartbeat = b"_heartbeat_"
    if not Response(heartbeat).is_heartbeat:
        raise SpecError("the heartbeat response changed: teach the generator")
    return NsqSpec(
        magic=grammar.MAGIC_V2,
        commands=commands,
        frame_header=header,
        frame_types=dict(grammar.FRAME_TYPES),
        message=message,
        max_line=framing.DEFAULT_MAX_LINE,
        max_body_size=framing.DEFAULT_MAX_BODY_SIZE,
        max_msg_size=framing.DEFAULT_MAX_MSG_SIZE,
        max_frame_size=framing.DEFAULT_MAX_FRAME_SIZE,
        name_max=name_max,
        name_suffix=suffix,
        non_fatal_errors=tuple(sorted(NON_FATAL_ERRORS)),
        server_ports=tuple(sorted(NSQ.server_ports)),
        heartbeat=heartbeat,
    )
