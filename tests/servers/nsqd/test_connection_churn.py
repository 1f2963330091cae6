"""Issue 33 item 3: a connection leaves nothing behind when it ends.

TCP connect/close churn of every shape grew the broker 33 -> 371 MB over ~290k
connections (nsqd stays at ~24 MB): Python 3.11's selector transport holds a bound method
of itself, so every closed socket waited for the cyclic collector, which the broker runs
lazily (``GC_THRESHOLDS``). Here the collector is off while connections of every shape
come and go after a warm-up: what a connection leaves behind (transport, socket, its
protocol object, buffers, tasks, records) must be freed by reference counting alone, so
the live objects do not grow with the connections. The 300k-cycle RSS figures, beside
nsqd's, are ``benchmarks/connection_churn.py``'s.
"""

from __future__ import annotations

import collections
import gc
import json
import socket
import struct
import time

import pytest

from nsqviz.servers.nsqd import EmbeddedBroker
from nsqviz.servers.nsqlookupd import EmbeddedLookupd

CYCLES = 150  # per shape, after the warm-up
_IDENTIFY = json.dumps({"client_id": "c", "feature_negotiation": True}).encode()
_PING = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"


def _connect(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _send_close(data: bytes, answer: int = 0):
    def cycle(address: str) -> None:
        with _connect(address) as s:
            s.sendall(data)
            got = b""
            while len(got) < answer:
                got += s.recv(answer - len(got))
    return cycle


def _reset(address: str) -> None:
    s = _connect(address)
    s.sendall(_PING)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


SHAPES = {
    "tcp bare": ("tcp", _send_close(b"")),
    "tcp magic": ("tcp", _send_close(b"  V2")),
    "tcp IDENTIFY": ("tcp", _send_close(b"  V2IDENTIFY\n" + struct.pack(">i", len(_IDENTIFY))
                                        + _IDENTIFY, 8)),
    "tcp SUB": ("tcp", _send_close(b"  V2SUB churn c\n", 10)),
    "http /ping": ("http", _send_close(_PING, 12)),
    "http early close": ("http", _send_close(_PING)),
    "http no request": ("http", _send_close(b"")),
    "http reset": ("http", _reset),
}


def _live() -> collections.Counter[str]:
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


def _settle(server, idle) -> None:
    """Wait until the server has seen every close."""
    end = time.monotonic() + 10
    while time.monotonic() < end and not server.call(idle):
        time.sleep(0.05)


def _churn(addresses: dict[str, str], shapes, cycles: int) -> None:
    for _ in range(cycles):
        for port, cycle in shapes:
            cycle(addresses[port])


@pytest.fixture
def collector_off():
    frozen = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if frozen:
            gc.enable()


def _growth(server, addresses, shapes, idle) -> tuple[int, collections.Counter[str]]:
    _churn(addresses, shapes, 20)  # warm-up: caches, interned names, first topic
    _settle(server, idle)
    before = _live()
    _churn(addresses, shapes, CYCLES)
    _settle(server, idle)
    time.sleep(0.2)  # the last transports' connection_lost runs on the loop
    after = _live()
    grown = after - before
    return sum(grown.values()), grown


def test_broker_connections_of_every_shape_leave_nothing(collector_off):
    with EmbeddedBroker() as b:
        addresses = {"tcp": b.tcp_address, "http": b.http_address}
        total, grown = _growth(b, addresses, SHAPES.values(),
                               lambda: not b.broker.clients)
    connections = CYCLES * len(SHAPES)
    # main: 7 objects per connection at least (transport, socket, its dict, ...)
    assert total < connections * 0.05, (connections, grown.most_common(8))
    for kind in ("_SelectorSocketTransport", "socket", "BrokerConnection", "_HTTPProtocol"):
        assert grown[kind] <= 2, (kind, grown.most_common(8))


def test_lookupd_connections_leave_nothing(collector_off):
    info = json.dumps({"broadcast_address": "127.0.0.1", "tcp_port": 1, "http_port": 2,
                       "version": "1.3.0", "hostname": "h"}).encode()
    register = b"  V1IDENTIFY\n" + struct.pack(">i", len(info)) + info + b"REGISTER t c\n"
    shapes = [("tcp", _send_close(b"")), ("tcp", _send_close(b"  V1PING\n", 6)),
              ("tcp", _send_close(register)), ("http", _send_close(_PING, 12)),
              ("http", _send_close(b"GET /nodes HTTP/1.1\r\nHost: x\r\n\r\n")),
              ("http", _reset)]
    with EmbeddedLookupd() as lk:
        addresses = {"tcp": lk.tcp_address, "http": lk.http_address}
        _, grown = _growth(lk, addresses, shapes, lambda: not lk.lookupd.connections)
    # (parsing a command with construct leaves cycles of its own -- its context objects
    # -- for the collector, which the lookupd runs at Python's default pace)
    for kind in ("_SelectorSocketTransport", "socket", "_PeerConnection", "_HTTPProtocol"):
        assert grown[kind] <= 2, (kind, grown.most_common(8))
