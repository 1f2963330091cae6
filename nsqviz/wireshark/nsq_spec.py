"""What the NSQ Lua dissector needs to know, read off the grammar and the framing rule.

The dissector is generated from this description; the description is read from
:mod:`nsqviz.nsq.commands` (the command table: verbs, parameters, bodies, answers),
:mod:`nsqviz.nsq.grammar` (frame and message layouts), :mod:`nsqviz.nsq.framing`
(limits) and :mod:`nsqviz.nsq.events` (which errors are not fatal) -- nothing here
re-types a command, a parameter or a layout. A grammar shape this module does not understand
raises :class:`SpecError`, so a grammar change cannot silently leave the dissector
behind.
"""

from __future__ import annotations

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

from nsqviz.nsq import framing, grammar
from nsqviz.nsq.commands import COMMANDS, BodyKind, ParamKind
from nsqviz.nsq.commands import CommandSpec as TableEntry
from nsqviz.nsq.commands import Param as TableParam
from nsqviz.nsq.events import Response
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
    default: int | None = None  # what nsqd reads a missing one as (RDY's count: 1)


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
    server_ports: tuple[int, ...]
    heartbeat: bytes


def _unwrap(con: Any) -> Any:
    while isinstance(con, Renamed | Rebuild) or (
        isinstance(con, Subconstruct) and type(con).__name__ == "_Located"
    ):
        con = con.subcon
    return con


_FORMATS = {">l": ("int32", 4), ">i": ("int32", 4), ">q": ("int64", 8), ">H": ("uint16", 2)}


def _layout_field(name: str | None, con: Any) -> LayoutField:
    if name is None:
        raise SpecError("a layout field without a name")
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


_KINDS = {ParamKind.NAME: "name", ParamKind.DECIMAL: "decimal", ParamKind.ID: "message_id"}
_BODIES = {BodyKind.NONE: None, BodyKind.JSON: "json", BodyKind.SECRET: "bytes",
           BodyKind.MESSAGE: "bytes", BodyKind.MESSAGES: "messages"}


def _param(spec: TableEntry, p: TableParam) -> Param:
    what = f"{spec.verb} {p.words}" if p.kind is ParamKind.DECIMAL else p.words
    return Param(p.field, _KINDS[p.kind], what, p.default)


def _command(spec: TableEntry) -> CommandSpec:
    """One entry of the command table, checked against the grammar built from it."""
    names = [sub.name for sub in grammar.COMMANDS[spec.verb].subcons if sub.name]
    if names[1:] != [p.field for p in spec.params] + ([spec.grammar_body]
                                                       if spec.event_body else []):
        raise SpecError(f"{spec.verb}: the grammar and the command table disagree")
    return CommandSpec(
        spec.verb,
        tuple(_param(spec, p) for p in spec.params),
        _BODIES[spec.body],
        spec.body is BodyKind.MESSAGE,
        spec.answered,
    )


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
    commands = tuple(_command(spec) for spec in COMMANDS.values())
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
        server_ports=tuple(sorted(NSQ.server_ports)),
        heartbeat=heartbeat,
    )
