"""The ``"  V1"`` protocol nsqd speaks to nsqlookupd, as ``construct`` grammars.

nsqd opens a TCP connection to each ``--lookupd-tcp-address``, sends the 4-byte magic
``"  V1"``, then one command per line::

    IDENTIFY\\n[ 4-byte size ][ N-byte JSON: broadcast_address, tcp_port, http_port ... ]
    REGISTER <topic> [<channel>]\\n
    UNREGISTER <topic> [<channel>]\\n
    PING\\n

nsqlookupd answers every command with ``[ 4-byte size ][ N-byte data ]`` -- no frame
type: ``OK``, the IDENTIFY answer (a JSON object), or an error ``E_CODE description``.
Every error of this protocol is fatal (nsqlookupd closes after sending it); the
:data:`ERRORS` table says when each is sent. Names are those of nsqlookupd's
``lookup_protocol_v1.go``; topic and channel names follow nsqd's rule (the same
validators as protocol V2).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from construct import Const, GreedyBytes, Int32sb, Prefixed, SizeofError, Struct, Subconstruct
from construct.core import stream_read, stream_seek

from nsqviz.nsq.commands import MAGIC_NAME
from nsqviz.nsq.grammar import LF, SP, JSONObject, body, name_field
from nsqviz.nsq.grammar_base import parse_exactly
from nsqviz.nsq.grammar_errors import GrammarError
from nsqviz.nsq.wire import NAME_RULE

__all__ = [
    "BODY_VERBS",
    "COMMANDS",
    "ERRORS",
    "ERROR_PREFIX",
    "ErrorCode",
    "IDENTIFY",
    "IDENTIFY_ANSWER",
    "IDENTIFY_REQUIRED",
    "MAGIC_V1",
    "Magic",
    "PING",
    "REGISTER",
    "Response",
    "UNREGISTER",
    "LookupError_",
    "identify_refusal",
    "parse_command",
    "parse_response",
]

MAGIC_V1 = b"  V1"
"""The magic nsqd sends first; anything else is answered ``E_BAD_PROTOCOL`` and closed."""

Magic = MAGIC_NAME / Const(MAGIC_V1)
"""The magic as a grammar (what a hex view colours its 4 bytes with)."""


class SpaceThen(Subconstruct):  # type: ignore[type-arg]
    """An optional trailing parameter: present when the next byte is a space (so a bad
    channel name is reported as one, not as a missing newline); ``None`` when absent."""

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        nxt = stream_read(stream, 1, path)
        stream_seek(stream, -1, 1, path)
        return self.subcon._parsereport(stream, context, path) if nxt == b" " else None

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        return None if obj is None else self.subcon._build(obj, stream, context, path)

    def _sizeof(self, context: Any, path: Any) -> int:
        raise SizeofError("an optional parameter has no fixed size", path=path)


def _TopicChannel(verb: bytes) -> Struct:
    """``VERB <topic>[ <channel>]\\n``: the channel is optional (a topic-only entry)."""
    return Struct(
        "verb" / Const(verb),
        SP,
        "topic" / name_field("topic"),
        "channel" / SpaceThen(Struct(SP, "name" / name_field("channel"))),
        LF,
    )


IDENTIFY = Struct(
    "verb" / Const(b"IDENTIFY"),
    LF,
    "body" / body(JSONObject, what="IDENTIFY body"),
)
REGISTER = _TopicChannel(b"REGISTER")
UNREGISTER = _TopicChannel(b"UNREGISTER")
PING = Struct("verb" / Const(b"PING"), LF)

COMMANDS: dict[str, Struct] = {
    "IDENTIFY": IDENTIFY,
    "REGISTER": REGISTER,
    "UNREGISTER": UNREGISTER,
    "PING": PING,
}
"""Every command of the lookup protocol, by verb."""

BODY_VERBS = frozenset({b"IDENTIFY"})
"""Verbs whose line is followed by a size-prefixed body."""

Response = Prefixed(Int32sb, GreedyBytes)
"""nsqlookupd's answer to every command: ``[ 4-byte size ][ N-byte data ]``."""

IDENTIFY_ANSWER = JSONObject
"""nsqlookupd's answer to IDENTIFY: a JSON object of its own ``tcp_port``,
``http_port``, ``version``, ``broadcast_address`` and ``hostname``."""

IDENTIFY_REQUIRED = ("broadcast_address", "tcp_port", "http_port", "version")
"""IDENTIFY keys nsqlookupd requires (non-empty/non-zero); ``hostname``,
``topology_zone`` and ``topology_region`` are optional."""


class ErrorCode(enum.StrEnum):
    """An nsqlookupd error code; ``ErrorCode.INVALID == "E_INVALID"``. All are fatal."""

    BAD_PROTOCOL = "E_BAD_PROTOCOL"
    INVALID = "E_INVALID"
    BAD_TOPIC = "E_BAD_TOPIC"
    BAD_CHANNEL = "E_BAD_CHANNEL"
    BAD_BODY = "E_BAD_BODY"


ERROR_PREFIX = b"E_"
"""How every error answer starts (each :class:`ErrorCode` does)."""

MISSING_FIELDS = "IDENTIFY missing fields"
"""nsqlookupd's text for an IDENTIFY without one of :data:`IDENTIFY_REQUIRED`."""

# The error table: code -> (when nsqlookupd sends it, the text's pattern).
ERRORS: dict[ErrorCode, tuple[str, str]] = {
    ErrorCode.BAD_PROTOCOL: ("the first 4 bytes are not the magic \"  V1\"", ""),
    ErrorCode.INVALID: (
        "unknown verb; REGISTER/UNREGISTER before IDENTIFY or without a topic; "
        "a second IDENTIFY",
        "invalid command {verb} | client must IDENTIFY | {verb} insufficient number of "
        "params | cannot IDENTIFY again",
    ),
    ErrorCode.BAD_TOPIC: ("the topic name breaks nsqd's naming rule",
                    "{verb} topic name '{name}' is not valid"),
    ErrorCode.BAD_CHANNEL: ("the channel name breaks nsqd's naming rule",
                      "{verb} channel name '{name}' is not valid"),
    ErrorCode.BAD_BODY: (
        "the IDENTIFY body cannot be read, is not JSON, or lacks a required field",
        "IDENTIFY failed to read body size | IDENTIFY failed to read body | "
        f"IDENTIFY failed to decode JSON body | {MISSING_FIELDS}",
    ),
}


class LookupError_(GrammarError):  # noqa: N801 - LookupError is a builtin
    """A command nsqlookupd refuses: ``code`` from :data:`ERRORS` and nsqlookupd's text."""

    def __init__(self, code: str, text: str, *, offset: int | None = None):
        super().__init__(text, offset=offset)
        self.code = code
        self.text = text


def parse_command(data: bytes) -> Any:
    """Parse exactly one command (the line and, for IDENTIFY, its body).

    Raises :class:`LookupError_` with nsqlookupd's code and text (and the offset of the
    field at fault) for what nsqlookupd refuses.
    """
    nl = data.find(b"\n")
    line = data[: nl if nl >= 0 else len(data)]
    verb = line.split(b" ", 1)[0].strip()
    name = verb.decode("ascii", "replace")
    con = COMMANDS.get(name)
    if con is None:
        raise LookupError_(ErrorCode.INVALID, f"invalid command {name}", offset=0)
    if verb in (b"REGISTER", b"UNREGISTER") and not line[len(verb) + 1:].strip():
        raise LookupError_(ErrorCode.INVALID, f"{name} insufficient number of params",
                           offset=len(verb))
    try:
        return parse_exactly(con, data)
    except GrammarError as exc:
        raise _refusal(name, exc) from None


def _refusal(verb: str, exc: GrammarError) -> LookupError_:
    path = exc.path or ""
    # nsqlookupd's text ends at "is not valid": the rule the grammar adds for a reader
    # is not on its wire
    said = exc.reason.removesuffix(f": {NAME_RULE}")
    if "channel" in path:
        return LookupError_(ErrorCode.BAD_CHANNEL, f"{verb} {said}", offset=exc.offset)
    if "topic" in path:
        return LookupError_(ErrorCode.BAD_TOPIC, f"{verb} {said}", offset=exc.offset)
    if verb == "IDENTIFY":
        return LookupError_(ErrorCode.BAD_BODY, "IDENTIFY failed to decode JSON body",
                            offset=exc.offset)
    return LookupError_(ErrorCode.INVALID, f"invalid command {verb}: {exc.reason}",
                        offset=exc.offset)


def identify_refusal(info: Mapping[str, Any]) -> LookupError_ | None:
    """The error nsqlookupd answers an IDENTIFY whose JSON lacks a required field
    (one absent, empty or zero), else ``None``."""
    if all(info.get(k) for k in IDENTIFY_REQUIRED):
        return None
    return LookupError_(ErrorCode.BAD_BODY, MISSING_FIELDS)


def parse_response(data: bytes) -> bytes:
    """The data of one whole response frame."""
    data_: bytes = parse_exactly(Response, data)
    return data_

