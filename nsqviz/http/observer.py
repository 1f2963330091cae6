"""The passive observer of someone else's connection to nsqd's or nsqlookupd's HTTP API,
for captures: the shared :class:`nsqviz.sansio.Observer` over both roles of
:mod:`nsqviz.http.codec`, each on its own h11, kept in step.

The client's bytes go to a :class:`~nsqviz.http.codec.ServerConnection` (a server-role
h11 reads the requests), the server's to a :class:`~nsqviz.http.codec.ClientConnection`
(a client-role h11 reads the responses). Each request head the first reads is handed to
the second (:meth:`~nsqviz.http.codec.ClientConnection.sent`) -- as soon as the head is
read, since nsqd may answer before the body is in --, so each response is read as an
answer to its request (a HEAD's carries no body) and paired with it: HTTP/1.1 answers in
order. The server's final answer to a request to switch protocols goes back to the
first (:meth:`~nsqviz.http.codec.ServerConnection.answered`), which then reads on, or
not. Each final response is followed by an :class:`Answered` naming the packet its
request completed in (or the packet of the bytes the server refused as a request).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from nsqviz.http.codec import ClientConnection, ServerConnection
from nsqviz.http.events import Observation, Request, RequestHead, Response, Violation
from nsqviz.sansio import Observer as SansIOObserver
from nsqviz.stream.direction import Direction

__all__ = ["Answered", "Observer"]


@dataclass(frozen=True, slots=True)
class Answered(Observation):
    """The response just before it answers the request whose record completed in
    ``packet`` -- the client's ``command``-th request (``None``: bytes the server
    refused as one)."""

    packet: int
    command: int | None = None


class Observer(SansIOObserver):
    """Watches both directions of an HTTP connection; feed them in capture order."""

    server: ServerConnection
    client: ClientConnection

    def __init__(self, *, provenance: bool = True, midstream: bool = False) -> None:
        self.server = ServerConnection(provenance=provenance, passive=True,
                                       midstream=midstream)
        self.client = ClientConnection(provenance=provenance, passive=True,
                                       midstream=midstream)
        self.asked: deque[tuple[bool, int]] = deque()
        """What the client role waits answers to, in its order: a request (``True``, its
        number) or bytes the server refuses as one (``False``, their packet)."""
        self.packets: dict[int, int] = {}
        """The packet each request's record completed in, by the request's number."""

    def _saw_c2s(self, events: list[Any], now: float | None) -> list[Any]:
        out = []
        for ev in events:
            kind = type(ev)
            if kind is RequestHead:
                self.client.sent(ev.request)
                if ev.request is not None:
                    self.asked.append((True, ev.request.number))
                else:  # the server answers bytes it cannot read as a request (400 ...)
                    self.asked.append((False, -1 if ev.packet is None else ev.packet))
                continue
            out.append(ev)
            request = ev if kind is Request else ev.message if kind is Violation else None
            if request is None:
                continue
            raw = ev.raw
            if raw is not None and raw.sources:
                self.packets[request.number] = raw.sources[-1].segment
        return out

    def _saw_s2c(self, events: list[Any], now: float | None) -> list[Any]:
        out = []
        for ev in events:
            out.append(ev)
            if type(ev) is not Response or (ev.interim and ev.status != 101):
                continue
            if ev.request is not None:
                self.server.answered(ev)
            if not self.asked:
                continue
            is_request, key = self.asked.popleft()
            packet = self.packets.get(key) if is_request else key
            if packet is not None and packet >= 0:
                out.append(Answered(packet, key if is_request else None))
        return out

    def gap(self, direction: Direction | str) -> tuple[bytes, int | None]:
        """Bytes of ``direction`` are missing here (see :meth:`nsqviz.sansio.Observer.gap`).
        Where the message the gap cut ended is not known, neither is how many requests
        or answers it took: answers are paired with requests no more until new ones."""
        partial, length = super().gap(direction)
        if length is None:
            self.client.forget_pending()
            self.asked.clear()
        return partial, length
