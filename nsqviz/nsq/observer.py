"""The passive observer of someone else's NSQ connection, for captures.

It runs both roles of :mod:`nsqviz.nsq.connection` passively -- decoding without judging,
reading on after undecodable bytes -- and carries between them what each side cannot
see for itself: the commands awaiting an answer, the messages in flight, where the
stream switched to compression or TLS, nsqd's ``max_rdy_count`` from its IDENTIFY
response (a RDY above it is kept with nsqd's answer attached, as nsqd's side judges it).

Given packet numbers, it also pairs every response and error frame with the command it
answers (:class:`~nsqviz.nsq.events.Answered`: the command's packet, and its number
among the client's commands, which is what the analyses join on -- a packet may carry
several commands), by nsqd's own order: nsqd reads one
command at a time and writes its answer (if any) before reading the next, so a
response answers the oldest command still waiting that nsqd answers on success, and an
error the oldest waiting command that gets this error -- one nsqd answers anyway, or a
refused one whose answer is known (the grammar's or the state table's verdict, a
FIN/REQ/TOUCH whose "not in flight" text matches). What waits longer than
:data:`WAITING_KEPT` commands is forgotten, so memory stays bounded.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Any, NamedTuple

from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.commands import ABOUT_A_MESSAGE, BY_EVENT, COMMANDS, FRAME_NAMES, name_of
from nsqviz.nsq.errors import not_in_flight
from nsqviz.nsq.events import (
    Answered,
    Command,
    CompressionStarted,
    Error,
    Magic,
    Message,
    Rdy,
    Refused,
    Response,
    TLSUpgrade,
    Violation,
)
from nsqviz.nsq.server_connection import ServerConfig, ServerConnection
from nsqviz.nsq.wire import MESSAGE_ID_SIZE
from nsqviz.sansio import Observer as SansIOObserver
from nsqviz.stream.direction import Direction
from nsqviz.stream.reassembly import RawFrame

__all__ = ["WAITING_KEPT", "Observer"]

WAITING_KEPT = 4096
"""How many commands still unanswered an observer remembers (the oldest go first)."""


_SWITCHES = (CompressionStarted, TLSUpgrade)  # the frames after which the stream changes
_ANSWERS = (Response, Error)  # (tuples: isinstance builds a union anew at each call)

_RDY_BOUND = next(p.bound for p in BY_EVENT[Rdy].params if p.bound)
"""The key of nsqd's IDENTIFY response that bounds RDY (``max_rdy_count``)."""


class _Waiting(NamedTuple):
    """A command nsqd may still answer: the packet it completed in; ``answered``: nsqd
    answers it on success; ``expect``: the error nsqd answers instead, when known;
    ``number``: the command's number among the client's commands (``None``: bytes that
    are no command)."""

    packet: int
    answered: bool
    expect: tuple[str, str] | None
    command: Command | None
    number: int | None


def _answers(waiting: _Waiting, frame: Response | Error) -> bool:
    """Can ``frame`` be nsqd's answer to ``waiting``?"""
    if isinstance(frame, Response):
        return waiting.answered and waiting.expect is None
    expect = waiting.expect
    if expect is not None:
        return expect == (frame.code, frame.text)
    if waiting.answered:
        return True
    cmd = waiting.command
    if isinstance(cmd, ABOUT_A_MESSAGE):
        return not_in_flight(name_of(type(cmd)), cmd.id) == (frame.code, frame.text)
    return False


def _sure_instead(waiting: deque[_Waiting], n: int, w: _Waiting,
                  frame: Error) -> tuple[int, _Waiting]:
    """The waiting command an error answers when the oldest it may answer is a FIN, REQ
    or TOUCH of an id the observer saw in flight (it gets this error only if the message
    timed out meanwhile: nsqd is silent otherwise) and a later one is sure to get this
    very error (the same id, FIN'ed again): the later one -- were the first refused too,
    nsqd would have sent the error twice."""
    sure = (frame.code, frame.text)
    for m in range(n + 1, len(waiting)):
        if waiting[m].expect == sure:
            return m, waiting[m]
    return n, w


class Observer(SansIOObserver):
    """Watches both directions of someone else's NSQ connection (a capture).

    Commands go through a passive :class:`ServerConnection`, frames through a passive
    :class:`ClientConnection`, and each side tells the other what it could not see for
    itself: which commands await an answer, which messages are in flight, where the
    stream switched to compression, where TLS began (after which nothing is decodable),
    the ``max_rdy_count`` nsqd announced (else ``config``'s, 2500 by default).
    Feed the two directions in the order the bytes were captured.
    """

    server: ServerConnection
    client: ClientConnection

    def __init__(
        self,
        config: ServerConfig | None = None,
        *,
        provenance: bool = True,
        midstream: bool = False,
    ):
        self.server = ServerConnection(
            config, provenance=provenance, passive=True, midstream=midstream
        )
        self.client = ClientConnection(provenance=provenance, passive=True, midstream=midstream)
        self.encrypted = False
        self.waiting: deque[_Waiting] = deque(maxlen=WAITING_KEPT)
        """The commands nsqd may still answer, oldest first (see the module doc)."""
        self._extra_oks = 0  # OK frames a compression/TLS switch brings: no command's
        self.commands = 0
        """The client's commands so far (the magic, refused ones and ones the capture cut
        short included): every unit a capture shows as a command record, in order."""
        self._segment: int | None = None  # the packet the bytes being read came in

    def c2s(self, data: bytes, *, segment: int | None = None,
            now: float | None = None) -> list[Any]:
        """Bytes the client sent; returns commands (and violations, and the
        :class:`Refused` verdicts of an observer that saw the whole connection)."""
        self._segment = segment
        return super().c2s(data, segment=segment, now=now)

    def _saw_c2s(self, events: list[Any], now: float | None) -> list[Any]:
        segment = self._segment
        client = self.client
        waiting = self.waiting
        for ev in events:
            if isinstance(ev, Command):
                self.commands += 1
                client.sent(ev)
                if segment is not None and type(ev) is not Magic:
                    waiting.append(_Waiting(segment, BY_EVENT[type(ev)].answered, None, ev,
                                            self.commands))
            elif type(ev) is Violation:
                number = None
                if ev.command is not None and not ev.continued:
                    self.commands += 1  # a command all the same, with its violation
                    number = self.commands
                    client.sent(ev.command)  # sent all the same: its answer comes back
                if segment is not None and (ev.code or number is not None):
                    answered = ev.command is not None and BY_EVENT[type(ev.command)].answered
                    expect = (ev.code, ev.text) if ev.code else None
                    waiting.append(_Waiting(segment, answered, expect, ev.command, number))
            elif type(ev) is Refused and waiting and waiting[-1].command is ev.command:
                waiting[-1] = waiting[-1]._replace(expect=(ev.code, ev.text))
        return events

    def gap_unit(self, direction: Direction | str) -> tuple[RawFrame, int | None]:
        """Bytes of ``direction`` are missing here: the unit they cut (what was captured
        of it, with its packets) and its length when its size prefix was captured (see
        :meth:`ClientConnection.gap`). Then either :meth:`recovered` (that unit's head
        says what it was) or :meth:`lost` (a unit went unseen)."""
        conn = self.server if direction == Direction.C2S else self.client
        raw = conn.unframed()
        return raw, conn.gap()[1]

    def lost(self, *, cut_command: bool = False) -> None:
        """A unit went unseen: from here on the observer knows neither the whole state
        nor which command an answer is for. ``cut_command``: the unit was a command the
        capture shows cut short all the same (it takes its number among the commands)."""
        self.server.lost_bytes()
        self.waiting.clear()
        self.commands += cut_command

    def recovered(self, direction: Direction, name: str, fields: dict[str, Any],
                  packet: int) -> Answered | None:
        """A unit the capture cut short (in ``packet``), decoded as far as it was
        captured (:func:`~nsqviz.nsq.cut.cut_unit`): what it tells both sides -- a
        command awaits its answer; a message id is in flight; a response or error
        answers a command, which is returned."""
        if direction == Direction.C2S:
            spec = COMMANDS[name]
            self.server.took(spec.event)
            self.client.took(spec.event)
            if spec.answered:
                self.client.pending.append(f"{name} (cut short)")
            self.commands += 1
            self.waiting.append(_Waiting(packet, spec.answered, None, None, self.commands))
            return None
        if name == FRAME_NAMES[Message]:
            mid = fields.get("id", "").encode()
            if len(mid) == MESSAGE_ID_SIZE:  # captured whole
                self.server.in_flight.add(mid)
                self.client.in_flight.add(mid)
            return None
        data = bytes.fromhex(fields["data"])
        frame = Response(data) if name == FRAME_NAMES[Response] else Error(data)
        self.client.answered_by(frame)
        return self._answered(frame)

    def s2c(self, data: bytes, *, segment: int | None = None,
            now: float | None = None) -> list[Any]:
        """Bytes the server sent; returns frames (and what they switched on), each
        response or error followed by the :class:`Answered` that names its command."""
        return super().s2c(data, segment=segment, now=now)

    def _saw_s2c(self, events: list[Any], now: float | None) -> list[Any]:
        server = self.server
        links: list[tuple[int, Answered]] = []
        for i, ev in enumerate(events):
            if isinstance(ev, Message):
                server.in_flight.add(ev.id)
            elif isinstance(ev, _SWITCHES):
                self._extra_oks += 1
                if isinstance(ev, CompressionStarted):
                    server.start_compression(ev.kind, ev.level)
                else:
                    self.encrypted = True
            elif isinstance(ev, _ANSWERS):
                if isinstance(ev, Response) and self.client.features is not None:
                    self._announced(self.client.features)
                asked = self._answered(ev)
                if asked is not None:
                    links.append((i + 1, asked))
        for i, link in reversed(links):
            events.insert(i, link)
        return events

    def _answered(self, frame: Response | Error) -> Answered | None:
        """The command ``frame`` answers (and forget it and every command before it:
        nsqd has read them all), or ``None``."""
        if isinstance(frame, Response):
            if frame.is_heartbeat:
                return None
            if self._extra_oks:
                self._extra_oks -= 1
                return None
        waiting = self.waiting
        for n, w in enumerate(waiting):
            if _answers(w, frame):
                if isinstance(frame, Error) and w.expect is None and not w.answered:
                    # a FIN/REQ/TOUCH of an id in flight
                    n, w = _sure_instead(waiting, n, w, frame)
                for _ in range(n + 1):
                    waiting.popleft()
                return Answered(w.packet, w.number)
        return None

    def _announced(self, features: dict[str, Any]) -> None:
        """nsqd's IDENTIFY response: its ``max_rdy_count`` bounds the client's RDY."""
        limit = features.get(_RDY_BOUND)
        config = self.server.config
        if type(limit) is int and limit >= 0 and limit != config.max_rdy_count:
            self.server.config = replace(config, max_rdy_count=limit)
