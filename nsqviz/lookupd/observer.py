"""The passive observer of someone else's lookup connection (nsqd to nsqlookupd), for
captures: the shared :class:`nsqviz.sansio.Observer` over both roles of
:mod:`nsqviz.lookupd.codec`, run passively.

It decodes both directions without taking part: commands through the grammar (a
command nsqlookupd would refuse -- a bad name, a REGISTER before IDENTIFY, an IDENTIFY
without its required fields -- is kept as that command with the refusal beside it, a
:class:`~nsqviz.lookupd.events.Violation`, as the state table and the error table judge
it), each answer paired with the oldest command still waiting for one (nsqlookupd
answers in order) and followed by the :class:`~nsqviz.lookupd.events.Answered` that
numbers that command among the client's commands (what the analyses pair by).
Unlike the active roles, it reads on after what it cannot decode,
starts mid-connection (state unknown: nothing is judged by state) and survives gaps in
the capture.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from nsqviz.lookupd.codec import ClientConnection, ServerConnection
from nsqviz.lookupd.events import (
    Answer,
    Answered,
    BadAnswer,
    Command,
    Error,
    Magic,
    Violation,
)
from nsqviz.sansio import Observer as SansIOObserver
from nsqviz.stream.direction import Direction

__all__ = ["Observer"]


class Observer(SansIOObserver):
    """Watches both directions of a lookup connection; feed them in capture order.

    nsqd's commands go through a passive :class:`ServerConnection`, nsqlookupd's answers
    through a passive :class:`ClientConnection`; each command seen is handed to the
    client side, so that its answer pairs with it, and an error answer to the server
    side (nsqlookupd closes after it).
    """

    server: ServerConnection
    client: ClientConnection

    def __init__(self, *, provenance: bool = True, midstream: bool = False) -> None:
        self.server = ServerConnection(provenance=provenance, passive=True,
                                       midstream=midstream)
        self.client = ClientConnection(provenance=provenance, passive=True,
                                       midstream=midstream)
        self.commands = 0
        """The client's commands so far (its magic and refused ones included)."""
        self.waiting: deque[int] = deque()
        """The numbers of the commands the client role waits an answer for, in the
        order of its ``pending`` (the magic gets none)."""

    def _saw_c2s(self, events: list[Any], now: float | None) -> list[Any]:
        for ev in events:
            if isinstance(ev, Command):
                self._sent(ev)
            elif type(ev) is Violation and ev.command is not None:
                self._sent(ev.command)  # sent all the same: its answer comes back
        return events

    def _sent(self, cmd: Command) -> None:
        self.commands += 1
        self.client.sent(cmd)
        if type(cmd) is not Magic:
            self.waiting.append(self.commands)

    def _saw_s2c(self, events: list[Any], now: float | None) -> list[Any]:
        out: list[Any] = []
        for ev in events:
            out.append(ev)
            kind = type(ev)
            if kind is Error:
                self.server.answered_error()
            # the client role paired it with its oldest pending command
            if (kind is Answer or kind is Error or kind is BadAnswer) and self.waiting:
                out.append(Answered(self.waiting.popleft()))
        return out

    def gap(self, direction: Direction | str) -> tuple[bytes, int | None]:
        """Bytes of ``direction`` are missing here (see :meth:`nsqviz.sansio.Observer.
        gap`); answers can no longer be paired with commands, so none waits any more."""
        lost = super().gap(direction)
        self.client.forget_pending()
        self.waiting.clear()
        return lost
