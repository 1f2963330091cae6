"""Sans-IO connections of the lookup protocol ``"  V1"``, one object per role, on the base
every protocol shares (:class:`nsqviz.sansio.Connection`), named as NSQ's and TubeMQ's.

:class:`ServerConnection` is nsqlookupd's side: bytes from nsqd go into ``receive`` and
come out as commands -- or as the :class:`~nsqviz.lookupd.events.Violation` nsqlookupd
answers (the command kept in it when its bytes frame as one); what it answers goes
through :meth:`~ServerConnection.respond` / :meth:`~ServerConnection.refuse`.
:class:`ClientConnection` is nsqd's side (the broker registering): ``send(command)``
gives the bytes (misuse raises :class:`~nsqviz.sansio.LocalProtocolError`),
``receive`` pairs each answer with the command that asked for it. Neither owns a socket
or a clock. Every byte is parsed and built by :mod:`nsqviz.lookupd.grammar`, cut by
:mod:`nsqviz.lookupd.framing`; states move as :data:`~nsqviz.lookupd.states.
TRANSITIONS` says. A ``passive`` connection (the capture :class:`~nsqviz.lookupd.
observer.Observer`'s) reads on after what it refuses and resynchronises after bytes
that do not frame; a ``midstream`` one does not know the state it starts in, so judges
nothing by it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Any

from nsqviz.lookupd import grammar
from nsqviz.lookupd.events import (
    COMMAND_EVENTS,
    Answer,
    BadAnswer,
    Command,
    Error,
    Event,
    Identify,
    Magic,
    Ping,
    Register,
    Unregister,
    Violation,
)
from nsqviz.lookupd.framing import CommandFraming, ResponseFraming
from nsqviz.lookupd.grammar import MAGIC_V1, ErrorCode, LookupError_, Refusal
from nsqviz.lookupd.states import INITIAL, State, next_state
from nsqviz.nsq.framing import DEFAULT_MAX_BODY_SIZE
from nsqviz.nsq.grammar_errors import GrammarError
from nsqviz.sansio import Connection, LocalProtocolError
from nsqviz.stream.reassembly import Garbage, RawFrame, Reassembler
from nsqviz.stream.reassembly import Truncated as StreamTruncated
from nsqviz.stream.sizes import SIZE_PREFIX

__all__ = ["ClientConnection", "ServerConnection", "command_of", "encode"]


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


def _as_sent(line: bytes) -> Command | None:
    """A well-framed REGISTER/UNREGISTER with a name the grammar refuses, as nsqd sent it
    (so the refusal is shown on that command); ``None`` for anything else."""
    verb, *params = line.rstrip(b"\n").decode("utf-8", "replace").split(" ")
    kind = COMMAND_EVENTS.get(verb)
    if not params or kind is not Register and kind is not Unregister:
        return None
    return kind(params[0], params[1] if len(params) > 1 else None)


def encode(cmd: Command) -> bytes:
    """The bytes of a command, built by the grammar."""
    if isinstance(cmd, Magic):
        return MAGIC_V1
    if isinstance(cmd, Identify):
        built: bytes = grammar.IDENTIFY.build({"body": cmd.info})
    elif isinstance(cmd, Ping):
        built = grammar.PING.build({})
    elif isinstance(cmd, Register | Unregister):
        con = grammar.REGISTER if isinstance(cmd, Register) else grammar.UNREGISTER
        channel = {"name": cmd.channel} if cmd.channel is not None else None
        built = con.build({"topic": cmd.topic, "channel": channel})
    else:  # pragma: no cover - every command is above
        raise TypeError(f"not a lookup command: {cmd!r}")
    return built


def _verb(cmd: Command) -> str:
    return next(v for v, k in COMMAND_EVENTS.items() if k is type(cmd))


# ------------------------------------------------------------------------------ common


class _Connection(Connection):
    """What both roles share beyond the sans-IO base: the state (``None``: not known,
    for a connection seen from its middle), the framing limit, the unit loop."""

    def __init__(self, *, max_body_size: int, provenance: bool, passive: bool,
                 midstream: bool) -> None:
        self.max_body_size = max_body_size
        self.state: State | None = None if midstream else INITIAL
        super().__init__(provenance=provenance, passive=passive)

    @property
    def closed(self) -> bool:
        """The connection is over: nothing more is read (nor, for nsqd, sent)."""
        return self.state is State.CLOSED

    def _receive(self, data: bytes, out: list[Any], segment: int | None,
                 now: float | None) -> None:
        for item in self._reasm.feed(data, segment=segment):
            if isinstance(item, RawFrame):
                self._on_unit(item, out)
            else:
                assert not isinstance(item, StreamTruncated)  # only finish() makes those
                self._on_garbage(item, out)
            if self.closed:
                break

    def _on_unit(self, raw: RawFrame, out: list[Any]) -> None:  # pragma: no cover
        raise NotImplementedError  # each role decodes its direction

    def _raw(self, raw: RawFrame) -> RawFrame | None:
        return raw if self.provenance else None

    def _stop(self) -> None:
        """A fatal violation: an active role is finished; a passive one reads on."""
        if not self.passive:
            self.state = State.CLOSED

    def _ended(self) -> None:
        self.state = State.CLOSED


# ------------------------------------------------------------------------------ server


class ServerConnection(_Connection):
    """nsqlookupd's side of one nsqd connection."""

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE,
                 provenance: bool = False, passive: bool = False, midstream: bool = False):
        self.info: dict[str, Any] | None = None
        self._expect_magic = not midstream
        super().__init__(max_body_size=max_body_size, provenance=provenance, passive=passive,
                         midstream=midstream)

    def _reassembler(self, *, after_gap: bool) -> Reassembler:
        if after_gap:
            self._expect_magic = False
        rule = CommandFraming(expect_magic=self._expect_magic, max_body_size=self.max_body_size)
        return Reassembler(rule, provenance=self.provenance, resync=self.passive)

    def _on_garbage(self, garbage: Garbage, out: list[Event]) -> None:
        """Bytes that are no command: nsqlookupd's answer (the bare code to a wrong
        magic), and it closes."""
        raw = RawFrame(garbage.data, garbage.offset, garbage.sources) \
            if self.provenance else None
        if garbage.code == ErrorCode.BAD_PROTOCOL:
            violation = Violation(garbage.code, Refusal.BAD_MAGIC.answer(), garbage.offset,
                                  field="magic", reason=garbage.reason,
                                  field_offset=garbage.offset, raw=raw)
        else:
            violation = Violation(garbage.code or ErrorCode.INVALID, garbage.reason,
                                  garbage.offset, reason=garbage.reason, raw=raw)
        out.append(violation)
        self._stop()

    def _on_unit(self, raw: RawFrame, out: list[Any]) -> None:
        if self._expect_magic:
            self._expect_magic = False
            self._advance(Magic)
            out.append(Magic(raw=self._raw(raw)))
            return
        try:
            cmd = command_of(raw.data)
        except LookupError_ as exc:
            at = None if exc.offset is None else raw.offset + exc.offset
            out.append(Violation(exc.code, exc.text, raw.offset, command=_as_sent(raw.data),
                                 field=exc.field, reason=exc.reason, field_offset=at,
                                 raw=self._raw(raw)))
            self._stop()
            return
        if self.provenance:
            cmd = _with_raw(cmd, raw)
        refusal = self._judge(cmd)
        if refusal is not None:
            text = refusal.answer(verb=_verb(cmd))
            body = refusal is Refusal.MISSING_FIELDS  # else: the verb, in this state
            at = raw.offset + raw.data.index(b"\n") + 1 + SIZE_PREFIX if body else None
            out.append(Violation(refusal.code, text, raw.offset, command=cmd,
                                 field="body" if body else None, reason=refusal.why,
                                 field_offset=at, raw=self._raw(raw)))
            self._stop()
            return
        out.append(cmd)

    def _judge(self, cmd: Command) -> Refusal | None:
        """What nsqlookupd answers ``cmd`` in the current state (``None``: it is accepted,
        and the state moves on) -- the state table first, then IDENTIFY's body, in the
        order nsqlookupd checks them."""
        nxt = next_state(self.state, type(cmd))
        if isinstance(nxt, Refusal):
            return nxt
        if isinstance(cmd, Identify):
            missing = grammar.identify_refusal(cmd.info)
            if missing is not None:
                return missing
            self.info = cmd.info
        if nxt is not None:
            self.state = nxt
        return None

    def _advance(self, command: type[Command]) -> None:
        nxt = next_state(self.state, command)
        if isinstance(nxt, State):
            self.state = nxt

    def answered_error(self) -> None:
        """nsqlookupd answered an error (an observer saw it): it closes, so nothing
        after is judged by the state table."""
        self.state = State.CLOSED

    def respond(self, data: bytes) -> bytes:
        """The bytes of an answer (``OK`` or the IDENTIFY JSON)."""
        return grammar.Response.build(data)

    def refuse(self, violation: Violation) -> bytes:
        """The bytes of the error answer to a refused command."""
        return grammar.Response.build(violation.error)


def _with_raw(cmd: Command, raw: RawFrame) -> Command:
    return replace(cmd, raw=raw)


# ------------------------------------------------------------------------------ client


class ClientConnection(_Connection):
    """nsqd's side of its connection to one nsqlookupd."""

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE,
                 provenance: bool = False, passive: bool = False, midstream: bool = False):
        self.pending: deque[Command] = deque()
        """The commands sent and not yet answered, oldest first (nsqlookupd answers in
        order)."""
        self.peer_info: dict[str, Any] | None = None
        super().__init__(max_body_size=max_body_size, provenance=provenance, passive=passive,
                         midstream=midstream)

    def _reassembler(self, *, after_gap: bool) -> Reassembler:
        return Reassembler(ResponseFraming(max_size=self.max_body_size),
                           provenance=self.provenance, resync=self.passive)

    def send(self, cmd: Command) -> bytes:
        """The bytes for ``cmd``; raises :class:`~nsqviz.sansio.LocalProtocolError` for
        what the protocol forbids now (what nsqlookupd would refuse)."""
        if self.closed:
            raise LocalProtocolError("the connection is closed")
        if (self.state is State.INIT) != (type(cmd) is Magic):
            raise LocalProtocolError("the magic comes first, and only once")
        nxt = next_state(self.state, type(cmd))
        if isinstance(nxt, Refusal):
            raise LocalProtocolError(nxt.answer(verb=_verb(cmd)))
        if nxt is None:
            raise LocalProtocolError(f"cannot send {type(cmd).__name__} now")
        self.state = nxt
        if type(cmd) is not Magic:
            self.pending.append(cmd)
        return encode(cmd)

    def sent(self, cmd: Command) -> None:
        """nsqd sent ``cmd`` (an observer saw it): its answer pairs with it."""
        if type(cmd) is not Magic:
            self.pending.append(cmd)

    def forget_pending(self) -> None:
        """A capture lost bytes: answers can no longer be paired with commands."""
        self.pending.clear()

    def _on_garbage(self, garbage: Garbage, out: list[Event]) -> None:
        """Bytes that are no answer: nsqd drops the connection."""
        raw = RawFrame(garbage.data, garbage.offset, garbage.sources) \
            if self.provenance else None
        out.append(Violation(garbage.code, garbage.reason, garbage.offset, field="size",
                             reason=garbage.reason, field_offset=garbage.offset, raw=raw))
        self._stop()

    def _on_unit(self, raw: RawFrame, out: list[Any]) -> None:
        payload = grammar.parse_response(raw.data)
        asked = self.pending.popleft() if self.pending else None
        kept = self._raw(raw)
        if payload.startswith(grammar.ERROR_PREFIX):
            code, _, text = payload.decode("utf-8", "replace").partition(" ")
            out.append(Error(asked, code, text, raw=kept))
            self._stop()  # nsqlookupd closes after an error
            return
        if type(asked) is Identify and not self.passive:
            try:
                self.peer_info = grammar.IDENTIFY_ANSWER.parse(payload)
            except GrammarError as exc:
                out.append(BadAnswer(asked, payload, exc.reason, raw.offset,
                                     field_offset=raw.offset + SIZE_PREFIX, raw=kept))
                self._stop()
                return
        out.append(Answer(asked, payload, raw=kept))
