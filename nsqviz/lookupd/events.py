"""The things that happen on a lookup connection (nsqd to nsqlookupd), as small frozen
dataclasses with a common base, as NSQ's and TubeMQ's are.

Commands (:class:`Command`: the magic, IDENTIFY, REGISTER, UNREGISTER, PING) are what
nsqd sends and nsqlookupd receives; :class:`Answer` and :class:`Error` what nsqlookupd
answers, each with the command it answers; the rest are the codec's observations -- a
:class:`Violation` (a :class:`nsqviz.sansio.Violation`: a command nsqlookupd refuses,
kept as sent when its bytes frame, or bytes that do not decode), an answer nsqd cannot
read (:class:`BadAnswer`); the stream ending inside a unit (:class:`Truncated`) and the
peer closing (:class:`ConnectionClosed`) are the events every protocol shares
(:mod:`nsqviz.sansio`).

Events decoded off the wire carry the reassembled frame in ``raw`` (which bytes, from
which packets; the replay's hex view reads it), left out of equality.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any

from nsqviz import sansio
from nsqviz.sansio import ConnectionClosed, Truncated
from nsqviz.stream.reassembly import RawFrame

__all__ = [
    "COMMAND_EVENTS",
    "Answered",
    "ERROR",
    "MAGIC",
    "NAMES",
    "RESPONSE",
    "Answer",
    "BadAnswer",
    "ConnectionClosed",
    "Command",
    "Error",
    "Event",
    "Identify",
    "Magic",
    "Observation",
    "Ping",
    "Register",
    "Truncated",
    "Unregister",
    "Violation",
]


@dataclass(frozen=True, slots=True)
class Event(sansio.Event):
    """Base of everything that happens on a lookup connection. ``raw`` is the unit's
    bytes with the packets they came from, where a connection keeps provenance."""

    raw: RawFrame | None = _field(default=None, kw_only=True, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Command(Event):
    """Base of what nsqd sends."""


@dataclass(frozen=True, slots=True)
class Observation(Event):
    """Base of what the codec itself observes: a violation, an answer nsqd cannot read,
    what an answer answers (the end of the stream is :class:`Truncated` and
    :class:`ConnectionClosed`, which every protocol shares)."""


# --------------------------------------------------------------------------- commands


@dataclass(frozen=True, slots=True)
class Magic(Command):
    """The 4 bytes ``"  V1"``."""


@dataclass(frozen=True, slots=True)
class Identify(Command):
    """IDENTIFY: the nsqd's address and ports (``broadcast_address``, ``tcp_port`` ...)."""

    info: dict[str, Any]

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.info)))


@dataclass(frozen=True, slots=True)
class Register(Command):
    """REGISTER: this nsqd has ``topic`` (and ``channel`` when given)."""

    topic: str
    channel: str | None = None


@dataclass(frozen=True, slots=True)
class Unregister(Command):
    """UNREGISTER: this nsqd no longer has ``topic`` (or only ``channel`` of it)."""

    topic: str
    channel: str | None = None


@dataclass(frozen=True, slots=True)
class Ping(Command):
    """PING: the nsqd's heartbeat (every 15 s); keeps it active in /lookup answers."""


# ---------------------------------------------------------------------------- answers


@dataclass(frozen=True, slots=True)
class Answer(Event):
    """nsqlookupd's answer to ``command``: ``OK`` or, for IDENTIFY, its JSON."""

    command: Command | None
    data: bytes


@dataclass(frozen=True, slots=True)
class Error(Event):
    """nsqlookupd's error answer to ``command`` (``E_CODE text``); it closes after it."""

    command: Command | None
    code: str
    text: str

    @property
    def data(self) -> bytes:
        """The answer's bytes, as nsqlookupd writes them."""
        return f"{self.code} {self.text}".rstrip().encode()


# ----------------------------------------------------------------------- observations


@dataclass(frozen=True, slots=True)
class Violation(Observation):
    """The peer broke the protocol (a :class:`nsqviz.sansio.Violation`).

    ``code``/``text`` are what nsqlookupd answers (every one of its errors is ``fatal``:
    it closes after it); ``code`` is empty for bytes nsqlookupd would not even answer
    (an answer nsqd cannot frame). ``command`` is the command as sent when its bytes
    frame as one (a REGISTER with a bad name, an IDENTIFY before its time), ``None`` for
    bytes that do not decode. ``offset`` is where the unit starts, ``field_offset``
    where the field at fault (``field``, in the grammar's words) does; ``reason`` says
    what is wrong with it.
    """

    code: str
    text: str
    offset: int | None = None
    command: Command | None = _field(default=None, compare=False)
    field: str | None = _field(default=None, compare=False)
    reason: str = _field(default="", compare=False)
    field_offset: int | None = _field(default=None, compare=False)
    fatal: bool = _field(default=True, compare=False)

    @property
    def error(self) -> bytes:
        """The data of the error answer nsqlookupd sends for it."""
        return f"{self.code} {self.text}".rstrip().encode()


@dataclass(frozen=True, slots=True)
class BadAnswer(Observation):
    """An answer to ``command`` that nsqd cannot read (an IDENTIFY answer that is not a
    JSON object): nsqd logs ``parsing response`` and closes, so the connection is
    finished -- a :class:`nsqviz.sansio.Violation` of nsqlookupd's (no code: nothing
    answers it); ``reason`` says what is wrong, ``offset`` where the answer starts."""

    command: Command | None
    data: bytes
    reason: str
    offset: int
    field_offset: int | None = _field(default=None, compare=False)

    code = ""
    field = "data"
    fatal = True

    @property
    def text(self) -> str:
        return self.reason


@dataclass(frozen=True, slots=True)
class Answered(Observation):
    """The answer just before it (an :class:`Answer` or :class:`Error`) answers the
    client's ``command``-th command on the connection (1: its magic): what an observer
    pairs, nsqlookupd answering in order."""

    command: int


# ------------------------------------------------------------------------------ names

COMMAND_EVENTS: dict[str, type[Identify | Register | Unregister | Ping]] = {
    "IDENTIFY": Identify,
    "REGISTER": Register,
    "UNREGISTER": Unregister,
    "PING": Ping,
}
"""The event of each verb of :data:`nsqviz.lookupd.grammar.COMMANDS` (a test checks the
two tables name the same verbs)."""

MAGIC = "MAGIC"
"""How records name the magic (it has no verb)."""
RESPONSE = "Response"
"""How records name nsqlookupd's answer ``OK`` or its IDENTIFY JSON."""
ERROR = "Error"
"""How records name nsqlookupd's error answer ``E_CODE text``."""

NAMES: dict[type[Event], str] = {
    Magic: MAGIC,
    **{kind: verb for verb, kind in COMMAND_EVENTS.items()},
    Answer: RESPONSE,
    Error: ERROR,
}
"""The record name of every command and answer event."""
