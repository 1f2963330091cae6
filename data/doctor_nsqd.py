"""The real nsqd and raw V2 clients for the doctor's captures (``make_doctor_nsq.py``,
``make_doctor_tcp.py``): :func:`recorded` runs nsqd v1.3.0 with tcpdump on its TCP port,
:class:`Client` is a V2 connection that reads whole frames and deliveries, answers
heartbeats when asked to, and keeps its address for the evidence."""

from __future__ import annotations

import struct
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from doctor_expected import DATA
from make_captures import Tcpdump
from make_debugging_capture import Conn

from nsqviz.nsq.events import Cls, Nop, Rdy, Sub
from nsqviz.servers.peers import RealNsqd

HEARTBEAT = b"_heartbeat_"
FRAME_MESSAGE = 2


@dataclass(frozen=True)
class Delivery:
    id: bytes
    attempts: int
    body: bytes

    def needle(self) -> bytes:
        """The bytes of its message frame that name this delivery: attempts, then id."""
        return struct.pack(">H", self.attempts) + self.id


class Client(Conn):
    """A V2 connection (``make_debugging_capture.Conn``) that knows its address and reads
    whole deliveries."""

    def __init__(self, port: int, identify: dict[str, Any] | None = None, rcvbuf: int = 0,
                 host: str = "127.0.0.1"):
        super().__init__(port, identify, rcvbuf, host)
        host, local = self.sock.getsockname()
        self.address = f"{host}:{local}"

    def raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(self, timeout: float = 3.0) -> tuple[int, bytes] | None:
        """The next frame that is not a heartbeat (heartbeats answered on the way)."""
        self.sock.settimeout(timeout)
        try:
            while (got := self.frame()) is not None and got[1] == HEARTBEAT:
                self.send(Nop())
            return got
        except (TimeoutError, ConnectionResetError):
            return None
        finally:
            self.sock.settimeout(None)

    def idle(self, seconds: float) -> None:
        """Read whatever comes for ``seconds``, answering heartbeats."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                if (got := self.frame()) is None:
                    break
                if got[1] == HEARTBEAT:
                    self.send(Nop())
            except TimeoutError:
                break
        self.sock.settimeout(None)

    def delivery(self, timeout: float = 10.0) -> Delivery:
        got = self.reply(timeout)
        if got is None or got[0] != FRAME_MESSAGE:
            raise RuntimeError(f"expected a message, got {got!r}")
        data = got[1]
        return Delivery(data[10:26], struct.unpack(">H", data[8:10])[0], data[26:])

    def close(self, cls: bool = True) -> None:
        """CLS and its CLOSE_WAIT (a subscribed connection), then a TCP FIN."""
        if cls:
            self.send(Cls())
            self.reply()
        self.sock.close()


def publish(port: int, *commands: Any, host: str = "127.0.0.1") -> str:
    """A producer: each PUB/MPUB answered before the next; returns its address."""
    p = Client(port, host=host)
    for command in commands:
        p.send(command)
        p.reply()
    address = p.address
    p.close(cls=False)
    return address


SCAN_REFRESH = 5.3
"""nsqd's queue scan (timeouts, REQ delays) reads its list of channels every 5 s
(QueueScanRefreshInterval, no flag): a channel created since is not scanned until then."""


@contextmanager
def recorded(name: str, ports: Callable[[RealNsqd], list[int]] | None = None,
             scanned: tuple[tuple[str, str], ...] = (), **flags: Any) -> Iterator[RealNsqd]:
    """The real nsqd (``flags``) with tcpdump on its TCP port writing data/NAME.
    ``scanned``: (topic, channel) pairs created over HTTP before tcpdump starts, once
    nsqd's queue scan knows them -- so their timeouts and REQ delays run on time."""
    with RealNsqd(**flags) as nsqd:
        started = time.monotonic()
        for topic, channel in scanned:
            post(nsqd, f"/topic/create?topic={topic}")
            post(nsqd, f"/channel/create?topic={topic}&channel={channel}")
        if scanned:
            time.sleep(max(0.0, started + SCAN_REFRESH - time.monotonic()))
        dump = Tcpdump(DATA / name, ports(nsqd) if ports else nsqd.tcp_port)
        try:
            yield nsqd
        finally:
            summary = dump.stop().splitlines()
            print(f"{name}: {' / '.join(summary[-3:])}", flush=True)


def post(nsqd: RealNsqd, path: str) -> None:
    """A POST to nsqd's HTTP API (not captured: tcpdump records the TCP port)."""
    request = urllib.request.Request(f"http://{nsqd.http_address}{path}", data=b"",
                                     method="POST")
    urllib.request.urlopen(request, timeout=5).read()


def subscriber(port: int, topic: str, channel: str, rdy: int | None = None, *,
               rcvbuf: int = 0, host: str = "127.0.0.1", **identify: Any) -> Client:
    """IDENTIFY (``identify``), SUB and, unless ``rdy`` is None, RDY."""
    c = Client(port, identify, rcvbuf, host)
    c.send(Sub(topic, channel))
    c.reply()
    if rdy:  # RDY 1 first, as the client guide asks, then the count wanted
        c.send(*{Rdy(1): None, Rdy(rdy): None})
    elif rdy == 0:
        c.send(Rdy(0))
    return c
