"""An nsqlookupd-compatible discovery service on asyncio: the ``"  V1"`` TCP protocol for
nsqd and the HTTP API for clients (see :mod:`nsqviz.servers.nsqlookupd.http`).

Each nsqd connection goes through a :class:`~nsqviz.lookupd.codec.ServerConnection`;
the server only applies the commands' effects to the :class:`Registry`, answers, and
closes after an error, as nsqlookupd does. When an nsqd disconnects it leaves every
registration (the topics and channels themselves stay until deleted over HTTP).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nsqviz import compactjson
from nsqviz.lookupd.codec import ServerConnection
from nsqviz.lookupd.events import (
    ConnectionClosed,
    Event,
    Identify,
    Ping,
    Register,
    Truncated,
    Unregister,
    Violation,
)
from nsqviz.lookupd.grammar import MAGIC_V1
from nsqviz.nsq.errors import ErrorCode
from nsqviz.servers.embedded import ListeningServer
from nsqviz.servers.goflags import VERSION, parse_duration
from nsqviz.servers.listen import LOOPBACK, close_unread, release, split_address, start_serving
from nsqviz.servers.nsqlookupd.registry import Peer, Registry

__all__ = ["EmbeddedLookupd", "Lookupd", "LookupdOptions"]

log = logging.getLogger(__name__)


@dataclass
class LookupdOptions:
    """nsqlookupd's flags (names as ``--flag-name``; durations in seconds)."""

    tcp_address: str = f"{LOOPBACK}:4160"  # nsqlookupd: 0.0.0.0 (see nsqviz.servers.listen)
    http_address: str = f"{LOOPBACK}:4161"
    broadcast_address: str = ""
    inactive_producer_timeout: float = 300.0
    tombstone_lifetime: float = 45.0

    def host_port(self, which: str) -> tuple[str, int]:
        return split_address(getattr(self, f"{which}_address"))


FLAGS: dict[str, tuple[Callable[[str], Any], str]] = {
    "tcp_address": (str, "<addr>:<port> to listen on for nsqd (port 0: a free one)"),
    "http_address": (str, "<addr>:<port> to listen on for HTTP clients (port 0: a free one)"),
    "broadcast_address": (str, "address of this lookupd given to nsqd (empty: the hostname)"),
    "inactive_producer_timeout": (parse_duration,
                                  "an nsqd silent this long is left out of /lookup"),
    "tombstone_lifetime": (parse_duration, "how long a tombstoned producer stays hidden"),
}


class Lookupd:
    """The service on the running event loop."""

    def __init__(self, opts: LookupdOptions | None = None):
        self.opts = opts or LookupdOptions()
        self.registry = Registry(self.opts.inactive_producer_timeout,
                                 self.opts.tombstone_lifetime)
        self.tcp_port = 0
        self.http_port = 0
        self.connections: set[_PeerConnection] = set()
        self._servers: list[asyncio.base_events.Server] = []

    async def start(self) -> None:
        from nsqviz.servers.nsqlookupd.http import serve_http

        host, port = self.opts.host_port("tcp")
        tcp = await start_serving(lambda: _PeerConnection(self), host, port)
        self.tcp_port = tcp.sockets[0].getsockname()[1]
        host, port = self.opts.host_port("http")
        http = await serve_http(self, host, port)
        self.http_port = http.sockets[0].getsockname()[1]
        self._servers = [tcp, http]

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.transport.abort()
        await asyncio.sleep(0)

    @property
    def tcp_address(self) -> str:
        return f"{self.opts.host_port('tcp')[0]}:{self.tcp_port}"

    @property
    def http_address(self) -> str:
        return f"{self.opts.host_port('http')[0]}:{self.http_port}"

    def identify_answer(self) -> bytes:
        """What nsqlookupd answers to IDENTIFY (Go's encoder sorts the keys)."""
        return compactjson.dumps_sorted({
            "broadcast_address": self.opts.broadcast_address or socket.gethostname(),
            "hostname": socket.gethostname(),
            "http_port": self.http_port,
            "tcp_port": self.tcp_port,
            "version": VERSION,
        }).encode()


class _PeerConnection(asyncio.Protocol):
    """One nsqd: codec events in, registry changes and answers out."""

    def __init__(self, lookupd: Lookupd):
        self.lookupd = lookupd
        self.conn = ServerConnection()
        self.peer: Peer | None = None
        self.peer_id = ""
        self.received = 0  # bytes, so far

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)  # a TCP server's
        self.transport = transport
        host, port = transport.get_extra_info("peername")[:2]
        self.peer_id = f"{host}:{port}"
        self.lookupd.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        for ev in self.conn.receive(data):
            self._on(ev)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        release(self.transport)
        self.lookupd.connections.discard(self)
        if self.peer is not None:
            self.lookupd.registry.remove_peer(self.peer_id)

    def _on(self, ev: Event) -> None:
        reg = self.lookupd.registry
        now = time.monotonic()
        if isinstance(ev, Violation):
            log.info("lookupd: refusing %s: %s %s", self.peer_id, ev.code, ev.text)
            self.transport.write(self.conn.refuse(ev))
            # nsqlookupd reads the magic alone: what came after a bad one is unread
            if ev.code == ErrorCode.BAD_PROTOCOL and self.received > len(MAGIC_V1):
                close_unread(self.transport)
            else:
                self.transport.close()
            return
        if isinstance(ev, ConnectionClosed | Truncated):
            return
        answer = b"OK"
        if isinstance(ev, Identify):
            info = {**ev.info, "remote_address": self.peer_id}
            self.peer = Peer(self.peer_id, info, now)
            reg.add_producer(("client", "", ""), self.peer)
            answer = self.lookupd.identify_answer()
        elif isinstance(ev, Register):
            peer = self.peer
            assert peer is not None  # the codec takes REGISTER only after IDENTIFY
            if ev.channel is not None:
                reg.add_producer(("channel", ev.topic, ev.channel), peer)
            reg.add_producer(("topic", ev.topic, ""), peer)
        elif isinstance(ev, Unregister):
            self._unregister(ev)
        elif isinstance(ev, Ping):
            if self.peer is not None:
                self.peer.last_update = now
        else:  # the magic: no answer
            return
        self.transport.write(self.conn.respond(answer))

    def _unregister(self, ev: Unregister) -> None:
        reg = self.lookupd.registry
        if ev.channel is not None:
            key = ("channel", ev.topic, ev.channel)
            _, left = reg.remove_producer(key, self.peer_id)
            if left == 0 and ev.channel.endswith("#ephemeral"):
                reg.remove_registration(key)
            return
        # a topic: its channels go too (nsqd normally unregisters those first)
        for key in reg.find_registrations("channel", ev.topic, "*"):
            reg.remove_producer(key, self.peer_id)
        key = ("topic", ev.topic, "")
        _, left = reg.remove_producer(key, self.peer_id)
        if left == 0 and ev.topic.endswith("#ephemeral"):
            reg.remove_registration(key)


class EmbeddedLookupd(ListeningServer[Lookupd]):
    """A running lookupd on a daemon thread, on free loopback ports by default:
    ``with EmbeddedLookupd() as lk: ... lk.http_address``."""

    thread_name = "nsqviz-lookupd"
    stop_timeout = 30.0

    def default_options(self) -> LookupdOptions:
        return LookupdOptions(tcp_address=f"{LOOPBACK}:0", http_address=f"{LOOPBACK}:0",
                              broadcast_address="127.0.0.1")

    def make_server(self) -> Lookupd:
        return Lookupd(self.opts)

    @property
    def lookupd(self) -> Lookupd | None:
        return self.server
