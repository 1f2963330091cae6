"""What NSQ's Lua dissector needs to know, read off the grammar and the framing rule.

The dissector is generated from this description; the description is read from
:mod:`nsqviz.nsq.commands` (the command table: verbs, parameters, bodies, answers),
:mod:`nsqviz.nsq.grammar` (frame and message layouts, as :mod:`nsqviz.nsq.fields`
reads them), :mod:`nsqviz.nsq.framing`
(limits) and :mod:`nsqviz.nsq.events` (which errors are not fatal) -- nothing here
re-types a command, a parameter or a layout. A grammar shape this module does not understand
raises :class:`SpecError`, so a grammar change cannot silently leave the dissector
behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from nsqviz.nsq import framing, grammar, grammar_frames
from nsqviz.nsq import wire as nsq_wire
from nsqviz.nsq.commands import COMMANDS, ENDS_FLIGHT, BodyKind, ParamKind
from nsqviz.nsq.commands import CommandSpec as TableEntry
from nsqviz.nsq.commands import Param as TableParam
from nsqviz.nsq.events import NON_FATAL_ERRORS, Response
from nsqviz.nsq.fields import FRAME_HEADER, MESSAGE, LayoutField, param_abbrev
from nsqviz.nsq.identify_fields import FEATURE_NEGOTIATION_FIELDS
from nsqviz.nsq.server_connection import ServerConfig
from nsqviz.nsq.wire import HEARTBEAT, MAGIC_V2
from nsqviz.wireshark.lua import SpecError

__all__ = [
    "CommandSpec",
    "LayoutField",
    "NsqSpec",
    "Param",
    "SpecError",
    "nsq_spec",
]


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a command line: ``kind`` is ``name`` (topic/channel rule),
    ``decimal`` (ASCII integer) or ``message_id`` (16 hex digits)."""

    name: str
    kind: str
    what: str  # the grammar's word for it, used in the nsqd error texts
    abbrev: str  # its display-filter field (nsqviz.nsq.fields)
    default: int | None = None  # what nsqd reads a missing one as (RDY's count: 1)
    bound: str | None = None  # the negotiated limit nsqd holds it to (max_rdy_count)


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
    ends_flight: bool  # it takes its message out of flight (FIN, REQ: not TOUCH)


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
    heartbeat: bytes
    bounds: dict[str, int]
    """Each limit a parameter is held to (:attr:`Param.bound`), as nsqd sets it by
    default: what holds until its IDENTIFY response says otherwise."""


_KINDS = {ParamKind.NAME: "name", ParamKind.DECIMAL: "decimal", ParamKind.ID: "message_id"}
_BODIES = {BodyKind.NONE: None, BodyKind.JSON: "json", BodyKind.SECRET: "bytes",
           BodyKind.MESSAGE: "bytes", BodyKind.MESSAGES: "messages"}


def _param(spec: TableEntry, p: TableParam) -> Param:
    what = f"{spec.verb} {p.words}" if p.kind is ParamKind.DECIMAL else p.words
    return Param(p.field, _KINDS[p.kind], what, param_abbrev(p), p.default, p.bound)


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
        spec.event in ENDS_FLIGHT,
    )


def _name_rule() -> tuple[int, str]:
    """The topic/channel rule, checked against the grammar's regular expression (the
    Lua side spells it as a character class plus an optional suffix)."""
    pattern = nsq_wire.NAME_RE.pattern
    if pattern != r"^[.a-zA-Z0-9_-]+(#ephemeral)?$":
        raise SpecError(f"name rule {pattern!r} changed: teach the generator")
    ok = nsq_wire.is_valid_topic_name
    if not (ok("a" * 64) and not ok("a" * 65)):
        raise SpecError("name length limit changed: teach the generator")
    return 64, "#ephemeral"


def nsq_spec() -> NsqSpec:
    """The description of NSQ V2 that the Lua generator renders."""
    commands = tuple(_command(spec) for spec in COMMANDS.values())
    name_max, suffix = _name_rule()
    heartbeat = HEARTBEAT
    if not Response(heartbeat).is_heartbeat:
        raise SpecError("the heartbeat response changed: teach the generator")
    defaults = ServerConfig()
    bounds = {p.bound: getattr(defaults, p.bound) for c in commands for p in c.params
              if p.bound is not None}
    if not set(bounds) <= set(FEATURE_NEGOTIATION_FIELDS):
        raise SpecError(f"{sorted(bounds)}: a bound nsqd's IDENTIFY response does not name")
    return NsqSpec(
        magic=MAGIC_V2,
        commands=commands,
        frame_header=FRAME_HEADER,
        frame_types=dict(grammar_frames.FRAME_TYPES),
        message=MESSAGE,
        max_line=framing.DEFAULT_MAX_LINE,
        max_body_size=framing.DEFAULT_MAX_BODY_SIZE,
        max_msg_size=framing.DEFAULT_MAX_MSG_SIZE,
        max_frame_size=framing.DEFAULT_MAX_FRAME_SIZE,
        name_max=name_max,
        name_suffix=suffix,
        non_fatal_errors=tuple(sorted(NON_FATAL_ERRORS)),
        heartbeat=heartbeat,
        bounds=bounds,
    )
