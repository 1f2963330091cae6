"""A recording TCP proxy: put it between NSQ clients and an nsqd, and read what each
client connection said and heard, decoded by the codec's :class:`~nsqviz.nsq.observer.Observer`.

``with WireTap(broker.tcp_address) as tap:`` -- point clients at ``tap.address``; each
accepted connection becomes a :class:`TappedConnection` whose ``events`` are
:class:`WireEvent`\\ s (monotonic time, direction, codec event).
This is how the client tests watch rules on the wire, and the live mode of the
conformance checker (``nsqviz conformance --live``). :meth:`WireTap.drop` cuts every
connection (an nsqd going away); :meth:`WireTap.pause` refuses new ones for a while;
:meth:`WireTap.freeze` stops relaying.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nsqviz.nsq.events import Event
from nsqviz.nsq.observer import Observer
from nsqviz.servers.listen import LOOPBACK
from nsqviz.stream.direction import Direction

__all__ = ["TappedConnection", "WireEvent", "WireTap"]


@dataclass(frozen=True, slots=True)
class WireEvent:
    """One decoded event on a tapped connection: ``t`` the ``time.monotonic()`` when its
    bytes passed (one clock for every tap of the process), ``direction`` C2S
    (client to nsqd) or S2C, and ``packet`` -- the number of the chunk of bytes
    (read from the socket) it completed in, counted per tap."""

    t: float
    direction: Direction
    event: Event
    packet: int


@dataclass
class TappedConnection:
    """One client connection through the tap."""

    number: int
    client: str  # the client's address, host:port
    events: list[WireEvent] = field(default_factory=list)
    closed: bool = False
    ended_by: str | None = None  # "client", "server" or "tap" (dropped): who closed first

    def commands(self) -> list[WireEvent]:
        return [e for e in self.events if e.direction == Direction.C2S]

    def frames(self) -> list[WireEvent]:
        return [e for e in self.events if e.direction == Direction.S2C]


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _tap_loop() -> asyncio.AbstractEventLoop:
    """The one event loop every tap of the process runs on, so that events on different
    taps (a consumer's connections to several nsqd) are timed and ordered by one reader."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="nsqviz-wiretap",
                             daemon=True).start()
        return _LOOP


class WireTap:
    """A proxy on a free loopback port in front of ``upstream`` (``host:port``)."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.connections: list[TappedConnection] = []
        self.address = ""
        self.started = time.monotonic()
        self._packets = 0
        self._lock = threading.Lock()
        self._paused_until = 0.0
        self._refuse_next = 0
        self.refused: list[float] = []
        """When each connection the tap refused came (``time.monotonic``)."""
        self._writers: list[asyncio.StreamWriter] = []
        self.loop = _tap_loop()
        self._server: asyncio.base_events.Server | None = None
        self._flowing: asyncio.Event | None = None

    @property
    def _flow(self) -> asyncio.Event:
        """Set while relaying: made by :meth:`start`, before any connection or freeze."""
        assert self._flowing is not None
        return self._flowing

    # -- life cycle -------------------------------------------------------------------

    def start(self) -> WireTap:
        async def listen() -> None:
            self._flowing = asyncio.Event()
            self._flowing.set()
            self._server = await asyncio.start_server(self._accept, LOOPBACK, 0)
            self.address = f"{LOOPBACK}:{self._server.sockets[0].getsockname()[1]}"

        asyncio.run_coroutine_threadsafe(listen(), self.loop).result(10)
        return self

    def stop(self) -> None:
        if self._server is None:
            return

        server = self._server

        async def close() -> None:
            self._cut()
            server.close()
            await asyncio.sleep(0)

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self._server = None

    def __enter__(self) -> WireTap:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def drop(self) -> None:
        """Cut every open connection (both sides), as if the nsqd went away."""
        self.loop.call_soon_threadsafe(self._cut)

    def _cut(self) -> None:
        for c in self.connections:
            if not c.closed and c.ended_by is None:
                c.ended_by = "tap"
        for w in self._writers:
            w.transport.abort()
        self._writers.clear()

    def freeze(self) -> None:
        """Stop relaying in both directions, connections left open (a hung nsqd or a
        dead network path: only liveness detection notices)."""
        self.loop.call_soon_threadsafe(self._flow.clear)

    def pause(self, seconds: float) -> None:
        """Refuse new connections for ``seconds`` (an nsqd that is down)."""
        self._paused_until = time.monotonic() + seconds

    def refuse(self, count: int) -> None:
        """Refuse the next ``count`` connections, however late they come (an nsqd that is
        down for that many tries of a client's: its retry delays, free of the clock)."""
        self._refuse_next = count

    # -- relaying -----------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refuse_next > 0 or time.monotonic() < self._paused_until:
            self._refuse_next = max(0, self._refuse_next - 1)
            self.refused.append(time.monotonic())
            writer.transport.abort()
            return
        host, _, port = self.upstream.rpartition(":")
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.transport.abort()
            return
        peer = writer.get_extra_info("peername")
        with self._lock:
            conn = TappedConnection(len(self.connections), f"{peer[0]}:{peer[1]}")
            self.connections.append(conn)
        self._writers += [writer, up_writer]
        observer = Observer()
        await asyncio.gather(
            self._pipe(reader, up_writer, conn, Direction.C2S, observer.c2s),
            self._pipe(up_reader, writer, conn, Direction.S2C, observer.s2c),
        )
        conn.closed = True

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    conn: TappedConnection, direction: Direction,
                    decode: Callable[[bytes], list[Any]]) -> None:
        try:
            while True:
                try:
                    data = await reader.read(65536)
                except (ConnectionError, OSError):
                    data = b""  # reset by that side: it ended the connection
                if not data:
                    if conn.ended_by is None:
                        conn.ended_by = "client" if direction == Direction.C2S else "server"
                    break
                await self._flow.wait()
                t = time.monotonic()
                with self._lock:
                    self._packets += 1
                    packet = self._packets
                conn.events.extend(WireEvent(t, direction, ev, packet) for ev in decode(data))
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
