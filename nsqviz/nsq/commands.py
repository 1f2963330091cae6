"""The NSQ V2 command set on one screen: one entry per verb.

Each :class:`CommandSpec` says what the verb's event class is, which parameters its line
carries (and of what kind), what body follows the line, what nsqd answers when it
succeeds, whether the auth service is asked, and nsqd's word for the parameters in its
errors. The grammar builds each command's ``construct`` definition from its entry, the
fast path decodes and encodes by it, framing finds bodies by it, the codec pairs answers
by it, and the labels, the stepper and the capture names list verbs from it. Which states
allow a verb is in the transition table (:mod:`nsqviz.nsq.states`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from nsqviz import sansio
from nsqviz.nsq import events as ev

__all__ = [
    "BODY_VERBS",
    "BY_EVENT",
    "BY_VERB",
    "CHANNEL",
    "COMMANDS",
    "COMMAND_NAMES",
    "FRAMES",
    "FRAME_NAMES",
    "MAGIC_NAME",
    "MESSAGE_ID",
    "TOPIC",
    "BodyKind",
    "CommandSpec",
    "Param",
    "ParamKind",
    "name_of",
]


class ParamKind(enum.Enum):
    """What a parameter of a command line holds."""

    NAME = "name"  # a topic or channel name: [.a-zA-Z0-9_-]{1,64}, optional #ephemeral
    DECIMAL = "decimal"  # an ASCII decimal integer, as nsqd's ByteToBase10 reads it
    ID = "id"  # a message id: 16 ASCII hex digits


class BodyKind(enum.Enum):
    """What follows a command's line (``[4-byte size][data]``, or nothing)."""

    NONE = "none"
    JSON = "JSON object"  # IDENTIFY; bounded by --max-body-size, E_BAD_BODY
    SECRET = "secret"  # AUTH; bounded by --max-body-size, E_BAD_BODY
    MESSAGE = "message"  # PUB, DPUB; bounded by --max-msg-size, E_BAD_MESSAGE
    MESSAGES = "messages"  # MPUB: [num messages]([size][data])*; --max-body-size


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a command line: the event's (and the grammar's) field name, its
    kind, the word nsqd's errors use for it, and -- where nsqd reads a missing one as a
    value -- that value (the spec requires the parameter all the same). ``column`` is
    its column in the typed frames table (:attr:`NsqProtocol.typed_schema
    <nsqviz.nsq.protocol.NsqProtocol.typed_schema>`); ``short`` and ``unit`` how a
    record's one-line summary shows it (``defer=100ms``). ``bound``: the limit nsqd
    holds a number to, a key of its IDENTIFY response (and its option's name): RDY's
    count and ``max_rdy_count``."""

    field: str
    kind: ParamKind
    words: str
    default: int | None = None
    column: str | None = None
    short: str | None = None
    unit: str = ""
    bound: str | None = None

    @property
    def summary_name(self) -> str:
        return self.short or self.field


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One verb of protocol V2."""

    verb: str
    event: type[ev.Command]
    params: tuple[Param, ...]
    body: BodyKind
    answer: str
    """What nsqd answers on success (``""``: nothing, only errors)."""
    auth: bool
    """Whether nsqd asks the auth service before it runs the command."""
    params_word: str = "parameters"
    """nsqd's word in ``<VERB> insufficient number of <word>``."""

    @property
    def wire(self) -> bytes:
        return self.verb.encode("ascii")

    @property
    def arity(self) -> int:
        return len(self.params)

    @property
    def answered(self) -> bool:
        return bool(self.answer)

    @property
    def grammar_body(self) -> str:
        """The grammar's name of the body field."""
        return "secret" if self.body is BodyKind.SECRET else "body"

    @property
    def event_body(self) -> str | None:
        """The event's name of the body field."""
        return _EVENT_BODY[self.body]


_EVENT_BODY = {
    BodyKind.NONE: None,
    BodyKind.JSON: "data",
    BodyKind.SECRET: "secret",
    BodyKind.MESSAGE: "body",
    BodyKind.MESSAGES: "bodies",
}

TOPIC = Param("topic", ParamKind.NAME, "topic", column="topic")
CHANNEL = Param("channel", ParamKind.NAME, "channel", column="channel")
MESSAGE_ID = Param("id", ParamKind.ID, "message ID", column="msg_id")
NONE, JSON, SECRET, MESSAGE, MESSAGES = BodyKind

COMMANDS: dict[str, CommandSpec] = {
    spec.verb: spec
    for spec in (
        CommandSpec("IDENTIFY", ev.Identify, (), JSON, "OK or JSON features", auth=False),
        CommandSpec("AUTH", ev.Auth, (), SECRET, "JSON identity", auth=False),
        CommandSpec("SUB", ev.Sub, (TOPIC, CHANNEL), NONE, "OK", auth=True),
        CommandSpec("PUB", ev.Pub, (TOPIC,), MESSAGE, "OK", auth=True),
        CommandSpec("MPUB", ev.Mpub, (TOPIC,), MESSAGES, "OK", auth=True),
        CommandSpec("DPUB", ev.Dpub, (TOPIC, Param("defer_time", ParamKind.DECIMAL, "timeout",
                                                    column="delay_ms", short="defer", unit="ms")),
                    MESSAGE, "OK", auth=True),
        CommandSpec("RDY", ev.Rdy, (Param("count", ParamKind.DECIMAL, "count", default=1,
                                          column="count", bound="max_rdy_count"),),
                    NONE, "", auth=False),
        CommandSpec("FIN", ev.Fin, (MESSAGE_ID,), NONE, "", auth=False, params_word="params"),
        CommandSpec("REQ", ev.Req, (MESSAGE_ID, Param("timeout", ParamKind.DECIMAL, "timeout",
                                                      column="delay_ms", unit="ms")),
                    NONE, "", auth=False, params_word="params"),
        CommandSpec("TOUCH", ev.Touch, (MESSAGE_ID,), NONE, "", auth=False,
                    params_word="params"),
        CommandSpec("NOP", ev.Nop, (), NONE, "", auth=False),
        CommandSpec("CLS", ev.Cls, (), NONE, "CLOSE_WAIT", auth=False),
    )
}
"""Every verb of protocol V2, in the spec's order."""

ENDS_FLIGHT: tuple[type[ev.Fin], type[ev.Req]] = (ev.Fin, ev.Req)
"""The commands that take their message out of flight (TOUCH keeps it there)."""

ABOUT_A_MESSAGE: tuple[type[ev.Fin], type[ev.Req], type[ev.Touch]] = (ev.Fin, ev.Req, ev.Touch)
"""The commands that name a message in flight by its id: a tuple for ``isinstance``, which
a union (``Fin | Req | Touch``) would have built anew per call."""

BY_VERB: dict[bytes, CommandSpec] = {spec.wire: spec for spec in COMMANDS.values()}
BY_EVENT: dict[type[sansio.Event], CommandSpec] = {spec.event: spec for spec in COMMANDS.values()}
BODY_VERBS: frozenset[bytes] = frozenset(s.wire for s in COMMANDS.values() if s.body is not NONE)
"""Verbs whose line is followed by a size-prefixed body."""

MAGIC_NAME = "magic"
"""How the magic ``"  V2"`` is named where verbs are listed (it has no verb)."""

FRAMES: dict[type[ev.ServerFrame], tuple[str, int]] = {
    ev.Response: ("FrameTypeResponse", 0),
    ev.Error: ("FrameTypeError", 1),
    ev.Message: ("FrameTypeMessage", 2),
}
"""nsqd's frames: the event class, the spec's name and the frame type on the wire."""

COMMAND_NAMES: dict[type[ev.Command], str] = {
    ev.Magic: MAGIC_NAME.upper(),
    **{spec.event: spec.verb for spec in COMMANDS.values()},
}
"""How a capture's records name each command (``MAGIC``, ``SUB`` ...)."""

FRAME_NAMES: dict[type[ev.ServerFrame], str] = {cls: name for cls, (name, _) in FRAMES.items()}
"""How a capture's records name each frame (``FrameTypeMessage`` ...)."""


def name_of(event: type[sansio.Event]) -> str:
    """The verb of a command class (``"magic"`` for the magic), else the class name."""
    if event is ev.Magic:
        return MAGIC_NAME
    spec = BY_EVENT.get(event)
    return spec.verb if spec is not None else event.__name__
