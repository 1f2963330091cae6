"""The broker's registration with nsqlookupd (``--lookupd-tcp-address``), as nsqd does it.

For each lookupd address one task keeps a connection: the magic ``"  V1"``, IDENTIFY
with the broker's addresses, then a REGISTER for every topic (``REGISTER topic`` for a
topic without channels, ``REGISTER topic channel`` for each channel); afterwards a
REGISTER/UNREGISTER whenever a topic or channel is created or deleted, and a PING
every 15 s (nsqd's fixed heartbeat) that keeps the broker in /lookup answers. Commands
wait for their answer one at a time (at most :data:`READ_TIMEOUT` per read), as nsqd's
``lookupPeer.Command`` does. Any failure -- a lost connection, a refusal, an answer
that cannot be read -- is logged and the connection dropped; it is re-opened at the
next command or heartbeat and registers everything again, as nsqd's ``lookupLoop``
does. All bytes go through :class:`~nsqviz.lookupd.codec.ClientConnection`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING, Any, Protocol

from nsqviz.lookupd.codec import ClientConnection
from nsqviz.lookupd.events import (
    Answer,
    BadAnswer,
    ConnectionClosed,
    Error,
    Identify,
    Magic,
    Ping,
    Register,
    Truncated,
    Unregister,
    Violation,
)
from nsqviz.servers.goflags import VERSION

if TYPE_CHECKING:
    from nsqviz.servers.nsqd.options import Options
    from nsqviz.servers.nsqd.topic import Topic


class RegisteringBroker(Protocol):
    """What a lookup peer reads of its broker (:class:`nsqviz.servers.nsqd.server.Broker`),
    named here so that the server, which starts the peers, and this module do not import
    each other."""

    opts: Options
    tcp_port: int
    http_port: int
    topics: dict[str, Topic]

__all__ = ["HEARTBEAT_INTERVAL", "LookupPeers"]

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL = 15.0
"""Seconds between PINGs (nsqd's ``lookupLoop`` ticker)."""

READ_TIMEOUT = 1.0
"""Seconds an answer may take (nsqd's ``lookupPeer.Read`` deadline)."""


class _PeerFailed(Exception):
    """The lookupd refused a command, closed, or answered something unreadable."""


class LookupPeers:
    """One :class:`_LookupPeer` per ``--lookupd-tcp-address`` of a broker."""

    def __init__(self, broker: RegisteringBroker, addresses: list[str], *,
                 heartbeat_interval: float | None = None):
        self.broker = broker
        interval = heartbeat_interval or HEARTBEAT_INTERVAL
        self.peers = [_LookupPeer(broker, a, interval) for a in addresses]

    def start(self) -> None:
        for peer in self.peers:
            peer.start()

    async def stop(self) -> None:
        for peer in self.peers:
            await peer.stop()

    def topic_changed(self, topic: str, *, deleted: bool = False) -> None:
        self._notify((Unregister if deleted else Register)(topic))

    def channel_changed(self, topic: str, channel: str, *, deleted: bool = False) -> None:
        self._notify((Unregister if deleted else Register)(topic, channel))

    def _notify(self, cmd: Register | Unregister) -> None:
        for peer in self.peers:
            peer.queue.put_nowait(cmd)


class _LookupPeer:
    def __init__(self, broker: RegisteringBroker, address: str, heartbeat_interval: float):
        self.broker = broker
        self.address = address
        self.heartbeat_interval = heartbeat_interval
        self.queue: asyncio.Queue[Register | Unregister] = asyncio.Queue()
        self.info: dict[str, Any] | None = None  # the lookupd's IDENTIFY answer
        self._task: asyncio.Task[None] | None = None
        self._conn: ClientConnection | None = None
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._close()

    async def _run(self) -> None:
        await self._command(None)  # nsqd connects at start-up
        while True:
            cmd: Register | Unregister | Ping
            try:
                cmd = await asyncio.wait_for(self.queue.get(), self.heartbeat_interval)
            except TimeoutError:
                cmd = Ping()
            await self._command(cmd)

    async def _command(self, cmd: Register | Unregister | Ping | None) -> None:
        """Connect (and register everything) if needed, then send ``cmd`` and read its
        answer; failures are logged and the connection dropped, as nsqd does."""
        try:
            if self._conn is None:
                await self._connect()
            if cmd is not None and self._conn is not None:
                await self._exchange(cmd)
        except (OSError, _PeerFailed) as exc:  # TimeoutError and ConnectionError are OSErrors
            log.warning("LOOKUPD(%s): %s - %s", self.address, cmd, exc)
            self._close()

    async def _connect(self) -> None:
        host, _, port = self.address.rpartition(":")
        self._streams = await asyncio.open_connection(host.strip("[]"), int(port))
        self._conn = ClientConnection()
        self._streams[1].write(self._conn.send(Magic()))
        opts = self.broker.opts
        hostname = socket.gethostname()
        answer = await self._exchange(Identify({
            "version": VERSION,
            "tcp_port": self.broker.tcp_port,
            "http_port": self.broker.http_port,
            "hostname": hostname,
            "broadcast_address": opts.broadcast_address or hostname,
        }))
        self.info = self._conn.peer_info
        log.info("LOOKUPD(%s): peer info %s", self.address, answer.data)
        for topic in list(self.broker.topics.values()):
            if not topic.channels:
                await self._exchange(Register(topic.name))
            for channel in list(topic.channels):
                await self._exchange(Register(topic.name, channel))

    async def _exchange(self, cmd: Identify | Register | Unregister | Ping) -> Answer:
        assert self._streams is not None and self._conn is not None  # _connect opened them
        reader, writer = self._streams
        writer.write(self._conn.send(cmd))
        while True:
            data = await asyncio.wait_for(reader.read(65536), READ_TIMEOUT)
            for ev in self._conn.receive(data):
                if isinstance(ev, Answer):
                    return ev
                if isinstance(ev, BadAnswer):
                    raise _PeerFailed(f"parsing response - {ev.data[:200]!r}: {ev.reason}")
                if isinstance(ev, Error | Violation | Truncated | ConnectionClosed):
                    raise _PeerFailed(f"lookupd answered {ev}")

    def _close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
        self._streams = None
        self._conn = None
