"""The passive observer of someone else's NSQ connection, for captures.

It runs both roles of :mod:`nsqviz.nsq.connection` passively -- decoding without judging,
reading on after undecodable bytes -- and carries between them what each side cannot
see for itself: the commands awaiting an answer, the messages in flight, where the
stream switched to compression or TLS, nsqd's ``max_rdy_count`` from its IDENTIFY
response (a RDY above it is kept with nsqd's answer attached, as nsqd's side judges it).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.events import (
    Command,
    CompressionStarted,
    Message,
    Response,
    TLSUpgrade,
    Violation,
)
from nsqviz.nsq.server_connection import ServerConfig, ServerConnection
from nsqviz.sansio import Observer as SansIOObserver

__all__ = ["Observer"]


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

    def _saw_c2s(self, events: list[Any], now: float | None) -> list[Any]:
        client = self.client
        for ev in events:
            if isinstance(ev, Command):
                client.sent(ev)
            elif type(ev) is Violation and ev.command is not None:
                client.sent(ev.command)  # sent all the same: its answer comes back
        return events

    def _saw_s2c(self, events: list[Any], now: float | None) -> list[Any]:
        server = self.server
        for ev in events:
            if isinstance(ev, Message):
                server.in_flight.add(ev.id)
            elif isinstance(ev, CompressionStarted):
                server.start_compression(ev.kind, ev.level)
            elif isinstance(ev, TLSUpgrade):
                self.encrypted = True
            elif isinstance(ev, Response) and self.client.features is not None:
                self._announced(self.client.features)
        return events

    def _announced(self, features: dict[str, Any]) -> None:
        """nsqd's IDENTIFY response: its ``max_rdy_count`` bounds the client's RDY."""
        limit = features.get("max_rdy_count")
        config = self.server.config
        if type(limit) is int and limit >= 0 and limit != config.max_rdy_count:
            self.server.config = replace(config, max_rdy_count=limit)
