"""The broker's registration with nsqlookupd (``--lookupd-tcp-address``), as nsqd does it.

For each lookupd address one task keeps a connection: the magic ``"  V1"``, IDENTIFY
with the broker's addresses, then a REGISTER for every topic (``REGISTER topic`` for a
topic without channels, ``REGISTER topic channel`` for each channel); afterwards a
REGISTER/UNREGISTER whenever a topic or channel is created or deleted, and a PING
every 15 s (nsqd's fixed heartbeat) that keeps the broker in /lookup answers. Commands
wait for their answer one at a time, as nsqd's ``lookupPeer.Command`` does. A lost
connection is re-opened at the next command or heartbeat and registers everything
again. All bytes go through :class:`~nsqviz.lookupd.codec.LookupClientConnection`.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from nsqviz.goflags import VERSION
from nsqviz.lookupd.codec import (
    Answer,
    Closed,
    Identify,
    LookupClientConnection,
    Magic,
    Ping,
    Refused,
    Register,
    Unregister,
)

__all__ = ["HEARTBEAT_INTERVAL", "LookupPeers"]

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL = 15.0
"""Seconds between PINGs (nsqd's ``lookupLoop`` ticker)."""


class LookupPeers:
    """One :class:`_LookupPeer` per ``--lookupd-tcp-address`` of a broker."""

    def __init__(self, broker, addresses: list[str], *, heartbeat_interval: float | None = None):
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
    def __init__(self, broker, address: str, heartbeat_interval: float):
        self.broker = broker
        self.address = address
        self.heartbeat_interval = heartbeat_interval
        self.queue: asyncio.Queue = asyncio.Queue()
        self.info: dict | None = None  # the lookupd's IDENTIFY answer
        self._task: asyncio.Task | None = None
        self._conn: LookupClientConnection | None = None
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
            try:
                cmd = await asyncio.wait_for(self.queue.get(), self.heartbeat_interval)
            except TimeoutError:
                cmd = Ping()
            await self._command(cmd)

    async def _command(self, cmd) -> None:
        """Connect (and register everything) if needed, then send ``cmd`` and read its
        answer; failures are logged and the connection dropped, as nsqd does."""
        try:
            if self._conn is None:
                await self._connect()
            if cmd is not None and self._conn is not None:
                await self._exchange(cmd)
        except (OSError, ConnectionError, asyncio.IncompleteReadError, RuntimeError) as exc:
            log.warning("LOOKUPD(%s): %s - %s", self.address, cmd, exc)
            self._close()

    async def _connect(self) -> None:
        host, _, port = self.address.rpartition(":")
        self._streams = await asyncio.open_connection(host.strip("[]"), int(port))
        self._conn = LookupClientConnection()
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

    async def _exchange(self, cmd) -> Answer:
        reader, writer = self._streams
        writer.write(self._conn.send(cmd))
        while True:
            data = await reader.read(65536)
            for ev in self._conn.receive(data):
                if isinstance(ev, Answer):
                    return ev
                if isinstance(ev, Refused | Closed):
                    raise RuntimeError(f"lookupd answered {ev}")

    def _close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
        self._streams = None
        self._conn = None
