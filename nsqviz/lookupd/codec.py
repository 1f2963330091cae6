"""Sans-IO connections of the lookup protocol ``"  V1"``, one object per role.

:class:`LookupServerConnection` is nsqlookupd's side: bytes from nsqd go into
``receive`` and come out as command events; what it answers goes through ``respond`` /
``refuse``. :class:`LookupClientConnection` is nsqd's side (the broker registering):
``send(command)`` gives the bytes, ``receive`` pairs each answer with the command that
asked for it. Neither owns a socket or a clock. Framing uses the shared stream
:class:`~nsqviz.stream.Reassembler`; every byte is parsed and built by
:mod:`nsqviz.lookupd.grammar`. States and their transitions are in :data:`TRANSITIONS`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from struct import Struct as _Struct
from typing import Any

from nsqviz.lookupd import grammar
from nsqviz.lookupd.grammar import BODY_VERBS, MAGIC_V1, ErrorCode, LookupError_
from nsqviz.nsq.grammar import GrammarError
from nsqviz.stream.lines import SIZE_PREFIX, MagicLineFraming
from nsqviz.stream.reassembly import (
    Buffer,
    FramingError,
    Garbage,
    RawFrame,
    Reassembler,
    Truncated,
)

__all__ = [
    "Answer",
    "BadAnswer",
    "COMMAND_EVENTS",
    "Closed",
    "CommandFraming",
    "command_of",
    "Identify",
    "LookupClientConnection",
    "LookupEvent",
    "LookupProtocolError",
    "LookupServerConnection",
    "Magic",
    "Ping",
    "Refused",
    "Register",
    "ResponseFraming",
    "State",
    "TRANSITIONS",
    "Unregister",
]

_I32 = _Struct(">i")
DEFAULT_MAX_BODY_SIZE = 5 * 1024 * 1024
"""nsqd's --max-body-size, the bound nsqd puts on an answer it reads."""


class LookupProtocolError(Exception):
    """We were about to send something the lookup protocol forbids."""


# ------------------------------------------------------------------------------ events


@dataclass(frozen=True, slots=True)
class LookupEvent:
    """Base of everything that happens on a lookup connection. ``raw`` is the unit's
    bytes with the packets they came from, where a capture's observer knows them (the
    replay's hex view reads it); the roles leave it ``None``."""

    raw: RawFrame | None = field(default=None, kw_only=True, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Magic(LookupEvent):
    """The 4 bytes ``"  V1"``."""


@dataclass(frozen=True, slots=True)
class Identify(LookupEvent):
    """IDENTIFY: the nsqd's address and ports (``broadcast_address``, ``tcp_port`` ...)."""

    info: dict[str, Any]

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.info)))


@dataclass(frozen=True, slots=True)
class Register(LookupEvent):
    """REGISTER: this nsqd has ``topic`` (and ``channel`` when given)."""

    topic: str
    channel: str | None = None


@dataclass(frozen=True, slots=True)
class Unregister(LookupEvent):
    """UNREGISTER: this nsqd no longer has ``topic`` (or only ``channel`` of it)."""

    topic: str
    channel: str | None = None


@dataclass(frozen=True, slots=True)
class Ping(LookupEvent):
    """PING: the nsqd's heartbeat (every 15 s); keeps it active in /lookup answers."""


@dataclass(frozen=True, slots=True)
class Answer(LookupEvent):
    """nsqlookupd's answer to ``command``: ``OK`` or, for IDENTIFY, its JSON."""

    command: LookupEvent | None
    data: bytes


@dataclass(frozen=True, slots=True)
class BadAnswer(LookupEvent):
    """An answer to ``command`` that nsqd cannot read (an IDENTIFY answer that is not a
    JSON object): nsqd logs ``parsing response`` and closes, so the connection is
    finished; ``reason`` says what is wrong, ``offset`` where the answer starts."""

    command: LookupEvent | None
    data: bytes
    reason: str
    offset: int


@dataclass(frozen=True, slots=True)
class Refused(LookupEvent):
    """A command nsqlookupd refuses (always fatal): ``code`` from the error table."""

    code: str
    text: str
    offset: int | None = None

    @property
    def error(self) -> bytes:
        return f"{self.code} {self.text}".rstrip().encode()


@dataclass(frozen=True, slots=True)
class Closed(LookupEvent):
    """The peer closed its side."""


Command = Magic | Identify | Register | Unregister | Ping

COMMAND_EVENTS: dict[str, type[Identify | Register | Unregister | Ping]] = {
    "IDENTIFY": Identify,
    "REGISTER": Register,
    "UNREGISTER": Unregister,
    "PING": Ping,
}
"""The event of each verb of :data:`nsqviz.lookupd.grammar.COMMANDS` (a test checks the
two tables name the same verbs)."""


# ------------------------------------------------------------------------------ states


class State(enum.Enum):
    """``INIT`` before the magic, ``CONNECTED`` after it, ``IDENTIFIED`` after IDENTIFY
    (REGISTER/UNREGISTER allowed), ``CLOSED`` after an error or EOF."""

    INIT = "INIT"
    CONNECTED = "CONNECTED"
    IDENTIFIED = "IDENTIFIED"
    CLOSED = "CLOSED"


TRANSITIONS: dict[tuple[State, type], State | str] = {
    (State.INIT, Magic): State.CONNECTED,
    (State.CONNECTED, Identify): State.IDENTIFIED,
    (State.CONNECTED, Ping): State.CONNECTED,
    (State.CONNECTED, Register): f"{ErrorCode.INVALID} client must IDENTIFY",
    (State.CONNECTED, Unregister): f"{ErrorCode.INVALID} client must IDENTIFY",
    (State.IDENTIFIED, Identify): f"{ErrorCode.INVALID} cannot IDENTIFY again",
    (State.IDENTIFIED, Register): State.IDENTIFIED,
    (State.IDENTIFIED, Unregister): State.IDENTIFIED,
    (State.IDENTIFIED, Ping): State.IDENTIFIED,
}
"""``(state, command) -> next state``, or the error nsqlookupd answers (then closes)."""


# ----------------------------------------------------------------------------- framing


class CommandFraming(MagicLineFraming):
    """nsqd to nsqlookupd: the magic once, then ``VERB params\\n`` lines, IDENTIFY's
    followed by ``[ 4-byte size ][ body ]``."""

    name = "nsq-lookup-commands"
    magic = MAGIC_V1
    bad_magic_code = ErrorCode.BAD_PROTOCOL

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE, max_line: int = 16384):
        super().__init__(expect_magic=True, max_line=max_line)
        self.max_body_size = max_body_size

    def measure_line(self, buf: bytes, pos: int, nl: int) -> int | None:
        verb = buf[pos:nl].split(b" ", 1)[0].strip()
        if verb not in BODY_VERBS:
            return nl + 1 - pos
        size = self.body_size(buf, nl)
        if size is None:
            return None
        if not 0 <= size <= self.max_body_size:
            raise FramingError(f"IDENTIFY body size {size} out of range", code=ErrorCode.BAD_BODY)
        return nl + 1 - pos + SIZE_PREFIX + size

    def resync(self, buf: Buffer, pos: int) -> int | None:
        return -1  # nsqlookupd closes on the first error: nothing after it is read


class ResponseFraming:
    """nsqlookupd to nsqd: ``[ 4-byte size ][ data ]``."""

    name = "nsq-lookup-responses"

    def __init__(self, *, max_size: int = DEFAULT_MAX_BODY_SIZE):
        self.max_size = max_size

    def measure(self, buf: bytes, pos: int) -> int | None:
        if len(buf) - pos < 4:
            return None
        size: int = _I32.unpack_from(buf, pos)[0]
        if not 0 <= size <= self.max_size:
            raise FramingError(f"response body size ({size}) is greater than limit "
                               f"({self.max_size})")
        return 4 + size

    def resync(self, buf: Buffer, pos: int) -> int | None:
        return -1


# -------------------------------------------------------------------------- conversion


def command_of(data: bytes) -> Command:
    """The command event of one whole command's bytes (not the magic); raises
    :class:`~nsqviz.lookupd.grammar.LookupError_` for what nsqlookupd refuses."""
    parsed = grammar.parse_command(data)
    verb = data.split(b"\n", 1)[0].split(b" ", 1)[0].decode("ascii")
    kind = COMMAND_EVENTS[verb]
    if kind is Identify:
        return Identify(dict(parsed.body))
    if kind is Ping:
        return Ping()
    channel = parsed.channel.name if parsed.channel is not None else None
    return Register(parsed.topic, channel) if kind is Register else \
        Unregister(parsed.topic, channel)


def encode(cmd: Command) -> bytes:
    """The bytes of a command, built by the grammar."""
    if isinstance(cmd, Magic):
        return MAGIC_V1
    if isinstance(cmd, Identify):
        built: bytes = grammar.IDENTIFY.build({"body": cmd.info})
    elif isinstance(cmd, Ping):
        built = grammar.PING.build({})
    else:
        con = grammar.REGISTER if isinstance(cmd, Register) else grammar.UNREGISTER
        channel = {"name": cmd.channel} if cmd.channel is not None else None
        built = con.build({"topic": cmd.topic, "channel": channel})
    return built


# ------------------------------------------------------------------------------ server


class LookupServerConnection:
    """nsqlookupd's side of one nsqd connection."""

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE):
        self.state = State.INIT
        self.info: dict[str, Any] | None = None
        self._reasm = Reassembler(CommandFraming(max_body_size=max_body_size),
                                  provenance=False, resync=False)

    def receive(self, data: bytes) -> list[LookupEvent]:
        """Bytes from nsqd; ``b""`` is EOF. After a :class:`Refused` nothing more is read
        (send its :meth:`refuse` bytes and close, as nsqlookupd does)."""
        out: list[LookupEvent] = []
        if self.state is State.CLOSED:
            return out
        if not data:
            self.state = State.CLOSED
            return [Closed()]
        for item in self._reasm.feed(data):
            ev = self._decode(item)
            out.append(ev)
            if isinstance(ev, Refused):
                self.state = State.CLOSED
                break
        return out

    def _decode(self, item: RawFrame | Garbage | Truncated) -> LookupEvent:
        assert not isinstance(item, Truncated)  # only Reassembler.finish() makes those
        if isinstance(item, Garbage):
            if item.code == ErrorCode.BAD_PROTOCOL:  # nsqlookupd sends the bare code
                return Refused(item.code, "", item.offset)
            return Refused(item.code or ErrorCode.INVALID, item.reason, item.offset)
        if self.state is State.INIT:
            self.state = State.CONNECTED
            return Magic()
        try:
            ev = command_of(item.data)
        except LookupError_ as exc:
            off = item.offset + exc.offset if exc.offset is not None else item.offset
            return Refused(exc.code, exc.text, off)
        nxt = TRANSITIONS[(self.state, type(ev))]
        if isinstance(nxt, str):
            code, text = nxt.split(" ", 1)
            return Refused(code, text, item.offset)
        if type(ev) is Identify:
            bad = grammar.identify_refusal(ev.info)
            if bad is not None:
                return Refused(bad.code, bad.text, item.offset)
            self.info = ev.info
        self.state = nxt
        return ev

    def respond(self, data: bytes) -> bytes:
        """The bytes of an answer (``OK`` or the IDENTIFY JSON)."""
        return grammar.Response.build(data)

    def refuse(self, refused: Refused) -> bytes:
        """The bytes of the error answer to a refused command."""
        return grammar.Response.build(refused.error)


# ------------------------------------------------------------------------------ client


class LookupClientConnection:
    """nsqd's side of its connection to one nsqlookupd."""

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE):
        self.state = State.INIT
        self.pending: list[Command] = []
        self.peer_info: dict[str, Any] | None = None
        self._reasm = Reassembler(ResponseFraming(max_size=max_body_size),
                                  provenance=False, resync=False)

    def send(self, cmd: Command) -> bytes:
        """The bytes for ``cmd``; raises :class:`LookupProtocolError` on misuse."""
        if self.state is State.CLOSED:
            raise LookupProtocolError("the connection is closed")
        if (self.state is State.INIT) != (type(cmd) is Magic):
            raise LookupProtocolError("the magic comes first, and only once")
        nxt = TRANSITIONS.get((self.state, type(cmd)))
        if not isinstance(nxt, State):
            raise LookupProtocolError(nxt or f"cannot send {type(cmd).__name__} now")
        self.state = nxt
        if type(cmd) is not Magic:
            self.pending.append(cmd)
        return encode(cmd)

    def receive(self, data: bytes) -> list[LookupEvent]:
        """Answers from nsqlookupd, each paired with its command; ``b""`` is EOF. Bytes
        that are not an answer end in a :class:`Refused` or :class:`BadAnswer` event
        (the connection is then finished); no input raises."""
        if not data:
            self.state = State.CLOSED
            return [Closed()]
        out: list[LookupEvent] = []
        for item in self._reasm.feed(data):
            if isinstance(item, Garbage):
                self.state = State.CLOSED
                out.append(Refused("", item.reason, item.offset))
                break
            payload = grammar.parse_response(item.data)
            asked = self.pending.pop(0) if self.pending else None
            if payload.startswith(grammar.ERROR_PREFIX):
                code, _, text = payload.decode("utf-8", "replace").partition(" ")
                self.state = State.CLOSED
                out.append(Refused(code, text, item.offset))
                break
            if type(asked) is Identify:
                try:
                    self.peer_info = grammar.IDENTIFY_ANSWER.parse(payload)
                except GrammarError as exc:
                    self.state = State.CLOSED
                    out.append(BadAnswer(asked, payload, exc.reason, item.offset))
                    break
            out.append(Answer(asked, payload))
        return out
