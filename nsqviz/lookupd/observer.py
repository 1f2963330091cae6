"""The passive observer of someone else's lookup connection (nsqd to nsqlookupd), for
captures.

It decodes both directions without taking part: commands through the grammar (a
command nsqlookupd would refuse -- a bad name, a REGISTER before IDENTIFY, an IDENTIFY
without its required fields -- is kept as that command with the refusal beside it, as
:data:`~nsqviz.lookupd.codec.TRANSITIONS` and the grammar's error table judge it), each
answer paired with the oldest command still waiting for one (nsqlookupd answers in
order). Unlike the roles in :mod:`nsqviz.lookupd.codec`, it reads on after what it
cannot decode, starts mid-connection (state unknown: nothing is judged by state) and
survives gaps in the capture.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from nsqviz.lookupd import grammar
from nsqviz.lookupd.codec import (
    COMMAND_EVENTS,
    TRANSITIONS,
    Answer,
    CommandFraming,
    Identify,
    LookupEvent,
    Magic,
    Refused,
    Register,
    ResponseFraming,
    State,
    Unregister,
    command_of,
)
from nsqviz.lookupd.grammar import LookupError_
from nsqviz.stream.reassembly import (
    Buffer,
    FramingError,
    Garbage,
    RawFrame,
    Reassembler,
    StreamEvent,
    Truncated,
)

__all__ = ["ANSWER_STARTS", "Observer", "Seen"]

ANSWER_STARTS = (b"OK", b"{", grammar.ERROR_PREFIX)
"""How every answer nsqlookupd sends begins: what a resynchronisation looks for."""


@dataclass(frozen=True, slots=True)
class Seen:
    """One unit the observer decoded: ``event`` (a command, an :class:`Answer`, or a
    :class:`Refused` -- an error answer from nsqlookupd, or bytes that do not decode),
    the bytes it came from, ``refused``: what nsqlookupd answers to this command, and
    ``asked``: the command an answer (an error too) answers."""

    event: LookupEvent
    raw: RawFrame | Garbage | Truncated | None
    refused: Refused | None = None
    asked: LookupEvent | None = None


class _PassiveResponses(ResponseFraming):
    """nsqlookupd's answers, read on after bad bytes: the next offset whose size prefix
    fits and whose data starts like an answer (a guess, said so by the capture layer)."""

    def resync(self, buf: Buffer, pos: int) -> int | None:
        end = len(buf) - 6
        while pos <= end:
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if 2 <= size <= self.max_size and bytes(buf[pos + 4:pos + 6]) in ANSWER_STARTS:
                return pos
            pos += 1
        return None


class _PassiveCommands(CommandFraming):
    """nsqd's commands, read on after a line that is not one: the next line."""

    def resync(self, buf: Buffer, pos: int) -> int | None:
        if self.expect_magic:
            return -1  # nsqlookupd refuses another magic and closes: nothing more is read
        nl = buf.find(b"\n", pos)
        return None if nl < 0 else nl + 1


class Observer:
    """Watches both directions of a lookup connection; feed them in capture order."""

    def __init__(self, *, midstream: bool = False) -> None:
        self.state: State | None = None if midstream else State.INIT
        self.pending: deque[LookupEvent] = deque()
        self._commands = self._command_stream(expect_magic=not midstream)
        self._answers = Reassembler(_PassiveResponses(), provenance=True, resync=True)

    @staticmethod
    def _command_stream(*, expect_magic: bool) -> Reassembler:
        rule = _PassiveCommands()
        rule.expect_magic = expect_magic
        return Reassembler(rule, provenance=True, resync=True)

    # -- nsqd to nsqlookupd -----------------------------------------------------------

    def c2s(self, data: bytes, *, segment: int | None = None) -> list[Seen]:
        """Bytes nsqd sent (``b""``: the direction ended); returns its commands."""
        items = self._commands.feed(data, segment=segment) if data else self._commands.finish()
        return [self._command(item) for item in items]

    def _command(self, item: StreamEvent) -> Seen:
        if not isinstance(item, RawFrame):
            return _undecodable(item)
        if self.state is State.INIT:
            self.state = State.CONNECTED
            return Seen(Magic(), item)
        try:
            event: LookupEvent = command_of(item.data)
        except LookupError_ as exc:
            off = item.offset + (exc.offset or 0)
            refused = Refused(exc.code, exc.text, off)
            kept = _as_sent(item.data)
            if kept is None:
                return Seen(refused, item)
            self.pending.append(kept)
            return Seen(kept, item, refused)
        self.pending.append(event)
        return Seen(event, item, self._judge(event, item.offset))

    def _judge(self, event: LookupEvent, offset: int) -> Refused | None:
        """What nsqlookupd answers to ``event`` in the current state (``None``: it is
        accepted); moves the state on."""
        bad = grammar.identify_refusal(event.info) if isinstance(event, Identify) else None
        if bad is not None:
            return Refused(bad.code, bad.text, offset)
        if self.state is None:  # mid-connection: the state is not known
            return None
        nxt = TRANSITIONS.get((self.state, type(event)))
        if isinstance(nxt, str):
            code, _, text = nxt.partition(" ")
            return Refused(code, text, offset)
        if nxt is not None:
            self.state = nxt
        return None

    # -- nsqlookupd to nsqd -----------------------------------------------------------

    def s2c(self, data: bytes, *, segment: int | None = None) -> list[Seen]:
        """Bytes nsqlookupd sent (``b""``: the direction ended); returns its answers."""
        items = self._answers.feed(data, segment=segment) if data else self._answers.finish()
        return [self._answer(item) for item in items]

    def _answer(self, item: StreamEvent) -> Seen:
        if not isinstance(item, RawFrame):
            return _undecodable(item)
        payload = grammar.parse_response(item.data)
        asked = self.pending.popleft() if self.pending else None
        if payload.startswith(grammar.ERROR_PREFIX):
            code, _, text = payload.decode("utf-8", "replace").partition(" ")
            self.state = State.CLOSED
            return Seen(Refused(code, text, item.offset), item, asked=asked)
        return Seen(Answer(asked, payload), item, asked=asked)

    # -- capture gaps -----------------------------------------------------------------

    def gap(self, c2s: bool) -> tuple[bytes, int | None]:
        """Bytes of one direction are missing here: the unit in progress is lost (returned,
        with its full length when its framing already told it). Answers can no longer be
        paired with commands, so none waits for one any more."""
        old = self._commands if c2s else self._answers
        partial = old.take_remaining()
        if c2s:
            self._commands = self._command_stream(expect_magic=False)
            fresh = self._commands
        else:
            self._answers = fresh = Reassembler(_PassiveResponses(), provenance=True,
                                                resync=True)
        self.pending.clear()
        try:
            length = fresh.rule.measure(partial, 0) if partial else None
        except FramingError:
            length = None
        return partial, length


def _undecodable(item: Garbage | Truncated) -> Seen:
    if isinstance(item, Truncated):
        return Seen(Refused("", "the stream ended inside this unit", item.offset), item)
    # nsqlookupd answers a wrong magic with the bare code E_BAD_PROTOCOL
    bare = item.code == grammar.ErrorCode.BAD_PROTOCOL and not item.continued
    return Seen(Refused(item.code, "" if bare else item.reason, item.offset), item)


def _as_sent(line: bytes) -> LookupEvent | None:
    """A well-framed REGISTER/UNREGISTER with a name the grammar refuses, as nsqd sent it
    (so the refusal is shown on that command); ``None`` for anything else."""
    verb, *params = line.rstrip(b"\n").decode("utf-8", "replace").split(" ")
    kind = COMMAND_EVENTS.get(verb)
    if not params or kind is not Register and kind is not Unregister:
        return None
    return kind(params[0], params[1] if len(params) > 1 else None)
