"""Fixtures for the client tests: brokers behind wire taps, lookupd announcements, and a
recording stand-in for nsqlookupd's HTTP API (the wire for the discovery rules)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nsqviz.conformance.tap import WireTap
from nsqviz.lookupd.codec import ClientConnection
from nsqviz.lookupd.events import Identify, Magic, Register
from nsqviz.nsq.events import Fin, Message, Rdy, Req
from nsqviz.servers.nsqd import EmbeddedBroker


def run(coro, timeout: float = 60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.fixture
def tapped():
    """``tapped(n, **broker_options)``: n brokers each behind a WireTap."""
    started: list = []

    def make(n: int = 1, **options):
        out = []
        for _ in range(n):
            b = EmbeddedBroker(**options).start()
            t = WireTap(b.tcp_address).start()
            started.extend([t, b])
            out.append((b, t))
        return out

    yield make
    for thing in reversed(started):
        thing.stop()


def announce(lookupd_tcp: str, nsqd_address: str, topic: str, http_port: int = 1) -> socket.socket:
    """Register ``nsqd_address`` (e.g. a tap) for ``topic`` with a lookupd, as nsqd would."""
    host, _, port = lookupd_tcp.rpartition(":")
    s = socket.create_connection((host, int(port)))
    conn = ClientConnection()
    nhost, _, nport = nsqd_address.rpartition(":")
    info = {"broadcast_address": nhost, "tcp_port": int(nport), "http_port": http_port,
            "version": "1.3.0", "hostname": "tap"}
    s.sendall(conn.send(Magic()) + conn.send(Identify(info)) + conn.send(Register(topic)))
    got = []
    while len(got) < 2:
        got += conn.receive(s.recv(4096))
    return s


class FakeLookupd:
    """Answers /lookup with a fixed producer list and records when each poll came."""

    def __init__(self, producers: list[str]):
        self.producers = producers
        self.polls: list[float] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                fake.polls.append(time.monotonic())
                body = json.dumps({"channels": [], "producers": [
                    {"broadcast_address": a.rpartition(":")[0],
                     "tcp_port": int(a.rpartition(":")[2]), "http_port": 1,
                     "hostname": "x", "remote_address": "x", "version": "1.3.0"}
                    for a in fake.producers]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def fake_lookupd():
    made = []

    def make(producers):
        f = FakeLookupd(producers)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


def rdy_timeline(taps) -> list[tuple[float, int, int]]:
    """(t, connection key, RDY count) of every RDY the client sent, over all taps."""
    out = []
    for ti, tap in enumerate(taps):
        for c in tap.connections:
            out += [(e.t, (ti, c.number), e.event.count) for e in c.commands()
                    if type(e.event) is Rdy]
    return sorted(out, key=lambda x: x[0])


def relayed(conn, timeout: float = 5) -> None:
    """Wait until a tap has relayed a connection to its end: a client that closed has
    sent its last bytes, but the tap may not have passed (and recorded) them yet."""
    end = time.monotonic() + timeout
    while not conn.closed and time.monotonic() < end:
        time.sleep(0.01)


def in_flight_ok(conn) -> bool:
    """Every FIN/REQ/TOUCH on the connection names a message in flight there."""
    flying: set[bytes] = set()
    for e in conn.events:
        kind = type(e.event)
        if kind is Message:
            flying.add(e.event.id)
        elif kind in (Fin, Req):
            if e.event.id not in flying:
                return False
            flying.discard(e.event.id)
    return True


def rdy_sums(timeline, window: float = 0.02) -> list[int]:
    """The sum of the connections' RDY counts after each burst of RDYs sent together.

    Connections are tapped separately, so RDYs the client wrote in one go (lower one,
    raise another) may be seen a little apart and in either order: RDYs less than
    ``window`` apart count as one burst, and the sum is taken after the burst."""
    current: dict = {}
    sums = []
    start = None
    for t, key, count in timeline:
        if start is not None and t - start >= window:
            sums.append(sum(current.values()))
            start = t
        start = t if start is None else start
        current[key] = count
    if current:
        sums.append(sum(current.values()))
    return sums
