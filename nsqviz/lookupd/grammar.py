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
error table (:class:`Refusal`) says what each is sent for, in which words. Names are
those of nsqlookupd's
``lookup_protocol_v1.go``; topic and channel names follow nsqd's rule (the same
validators as protocol V2).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from construct import Const, GreedyBytes, Int32sb, Prefixed, SizeofError, Struct, Subconstruct
from construct.core import stream_read, stream_seek

from nsqviz.lookupd.wire import ERROR_PREFIX, MAGIC_V1, VERBS
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
    "NAME_REFUSALS",
    "PARAM_VERBS",
    "Refusal",
    "identify_refusal",
    "parse_command",
    "parse_response",
]

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

COMMANDS: dict[str, Struct] = dict(zip(VERBS, (IDENTIFY, REGISTER, UNREGISTER, PING),
                                       strict=True))
"""Every command of the lookup protocol, by verb (:data:`~nsqviz.lookupd.wire.VERBS`)."""

BODY_VERBS = frozenset({b"IDENTIFY"})
"""Verbs whose line is followed by a size-prefixed body."""

PARAM_VERBS = frozenset({b"REGISTER", b"UNREGISTER"})
"""Verbs whose line carries parameters (a topic, perhaps a channel)."""

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



class Refusal(enum.Enum):
    """The error table: everything nsqlookupd refuses, each with the answer it sends --
    ``code`` and ``text`` (a template: ``{verb}`` is the command's verb, ``{name}`` the
    name at fault, ``{size}`` a body size) -- and ``why``. Every one is fatal: nsqlookupd
    closes after sending it. The codec, the observer and the Wireshark dissector take
    their texts from here (:meth:`answer`)."""

    code: ErrorCode
    text: str
    why: str

    def __init__(self, code: ErrorCode, text: str, why: str) -> None:
        self.code = code
        self.text = text
        self.why = why

    BAD_MAGIC = (ErrorCode.BAD_PROTOCOL, "", 'the first 4 bytes are not the magic "  V1" '
                 "(nsqlookupd sends the bare code)")
    UNKNOWN_VERB = (ErrorCode.INVALID, "invalid command {verb}",
                    "a verb the protocol does not have")
    MUST_IDENTIFY = (ErrorCode.INVALID, "client must IDENTIFY",
                     "REGISTER or UNREGISTER before IDENTIFY")
    FEW_PARAMS = (ErrorCode.INVALID, "{verb} insufficient number of params",
                  "REGISTER or UNREGISTER without a topic")
    IDENTIFY_AGAIN = (ErrorCode.INVALID, "cannot IDENTIFY again", "a second IDENTIFY")
    BAD_TOPIC = (ErrorCode.BAD_TOPIC, "{verb} topic name '{name}' is not valid",
                 "the topic name breaks nsqd's naming rule")
    BAD_CHANNEL = (ErrorCode.BAD_CHANNEL, "{verb} channel name '{name}' is not valid",
                   "the channel name breaks nsqd's naming rule")
    NO_BODY_SIZE = (ErrorCode.BAD_BODY, "IDENTIFY failed to read body size",
                    "the connection ends before IDENTIFY's body size")
    NO_BODY = (ErrorCode.BAD_BODY, "IDENTIFY failed to read body",
               "the connection ends inside IDENTIFY's body")
    BODY_SIZE = (ErrorCode.BAD_BODY, "IDENTIFY body size {size} out of range",
                 "a body size below 0 or beyond nsqd's --max-body-size: nsqlookupd would "
                 "wait for that many bytes; nsqviz refuses it at once")
    NOT_JSON = (ErrorCode.BAD_BODY, "IDENTIFY failed to decode JSON body",
                "the IDENTIFY body is not a JSON object")
    MISSING_FIELDS = (ErrorCode.BAD_BODY, "IDENTIFY missing fields",
                      "the IDENTIFY body lacks one of " + ", ".join(IDENTIFY_REQUIRED)
                      + " (or it is empty or zero)")

    def answer(self, **words: object) -> str:
        """The text nsqlookupd sends, its template filled in with ``words``."""
        return self.text.format(**words)


NAME_REFUSALS: dict[str, Refusal] = {"topic": Refusal.BAD_TOPIC, "channel": Refusal.BAD_CHANNEL}
"""What nsqlookupd answers a bad name in each name parameter of the grammar."""

ERRORS: dict[ErrorCode, tuple[Refusal, ...]] = {
    code: tuple(r for r in Refusal if r.code is code) for code in ErrorCode}
"""The error table by code: the refusals each code is sent for."""


class LookupError_(GrammarError):  # noqa: N801 - LookupError is a builtin
    """A command nsqlookupd refuses: ``refusal`` (its row of :class:`Refusal`), ``code``
    and ``text`` what nsqlookupd answers, ``field`` the parameter at fault and
    ``offset`` where it starts in the command."""

    def __init__(self, refusal: Refusal, text: str, *, offset: int | None = None,
                 field: str | None = None, reason: str = ""):
        super().__init__(reason or text, offset=offset, field=field)
        self.refusal = refusal
        self.code = refusal.code
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
        raise LookupError_(Refusal.UNKNOWN_VERB, Refusal.UNKNOWN_VERB.answer(verb=name),
                           offset=0)
    if verb in PARAM_VERBS and not line[len(verb) + 1:].strip():
        raise LookupError_(Refusal.FEW_PARAMS, Refusal.FEW_PARAMS.answer(verb=name),
                           offset=len(verb))
    try:
        return parse_exactly(con, data)
    except GrammarError as exc:
        raise _refusal(name, exc) from None


def _refusal(verb: str, exc: GrammarError) -> LookupError_:
    path = exc.path or ""
    for param, refusal in NAME_REFUSALS.items():
        if param in path:
            # nsqlookupd's text ends at "is not valid": the rule the grammar adds for a
            # reader is not on its wire
            said = exc.reason.removesuffix(f": {NAME_RULE}")
            return LookupError_(refusal, f"{verb} {said}", offset=exc.offset, field=param,
                                reason=exc.reason)
    if verb == "IDENTIFY":
        return LookupError_(Refusal.NOT_JSON, Refusal.NOT_JSON.answer(), offset=exc.offset,
                            field="body", reason=exc.reason)
    text = f"{Refusal.UNKNOWN_VERB.answer(verb=verb)}: {exc.reason}"
    return LookupError_(Refusal.UNKNOWN_VERB, text, offset=exc.offset, field=exc.field,
                        reason=exc.reason)


def identify_refusal(info: Mapping[str, Any]) -> Refusal | None:
    """What nsqlookupd answers an IDENTIFY whose JSON lacks a required field (one
    absent, empty or zero): :attr:`Refusal.MISSING_FIELDS`; else ``None``."""
    if all(info.get(k) for k in IDENTIFY_REQUIRED):
        return None
    return Refusal.MISSING_FIELDS


def parse_response(data: bytes) -> bytes:
    """The data of one whole response frame."""
    data_: bytes = parse_exactly(Response, data)
    return data_

