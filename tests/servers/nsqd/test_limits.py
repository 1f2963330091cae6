"""What one connection may make the broker hold, and how many may knock at once."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess

import pytest

from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.compression import SNAPPY_MAX_CHUNK, SNAPPY_STREAM_IDENTIFIER
from nsqviz.nsq.events import Identify, Magic
from nsqviz.servers.listen import listen_backlog
from tests.servers.nsqd._processes import BrokerProcess

RSS_GROWTH_LIMIT = 60 * 1024 * 1024
"""100 connections each holding the longest legal incomplete chunk (~75 KiB) must not
grow the broker by more than this (issue 14: 20 connections took it from 49 to 387 MB)."""


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _snappy_connection(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    c = ClientConnection()
    s.sendall(c.send(Magic()) + c.send(Identify({"feature_negotiation": True,
                                                   "snappy": True})))
    got = b""
    while b"}" not in got:  # the JSON response; the compressed OK follows
        more = s.recv(4096)
        assert more, "closed during IDENTIFY"
        got += more
    assert json.loads(got[got.index(b"{"):got.rindex(b"}") + 1])["snappy"] is True
    return s


def _closed(s: socket.socket, timeout: float = 5.0) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.slow
def test_snappy_connections_hold_bounded_memory(tmp_path, capsys):
    b = BrokerProcess("ours", tmp_path / "data", tmp_path / "broker.log")
    held = []
    try:
        before = _rss(b.proc.pid)
        legal = SNAPPY_STREAM_IDENTIFIER + b"\x00" + SNAPPY_MAX_CHUNK.to_bytes(3, "little")
        for _ in range(100):
            s = _snappy_connection(b.tcp_address)
            s.sendall(legal + b"\x00" * (SNAPPY_MAX_CHUNK - 1))  # one byte short
            held.append(s)
        for s in held:  # all still open, waiting for the chunk's last byte
            assert not _closed(s, timeout=0.01)
        after = _rss(b.proc.pid)
        # a longer declared chunk is refused at its header, with nsqd's silent close
        over = _snappy_connection(b.tcp_address)
        over.sendall(SNAPPY_STREAM_IDENTIFIER + b"\x00" + ((16 << 20) - 1).to_bytes(3, "little"))
        assert _closed(over)
        # bytes that are not a snappy stream at all: closed at once, not left open
        plain = _snappy_connection(b.tcp_address)
        plain.sendall(b"NOP\n")
        assert _closed(plain)
    finally:
        for s in held:
            s.close()
        b.stop()
    with capsys.disabled():
        print(f"\n  broker RSS {before / 2**20:.0f} MiB -> {after / 2**20:.0f} MiB with 100 "
              f"connections each holding a {SNAPPY_MAX_CHUNK}-byte snappy chunk but one byte "
              f"(limit: +{RSS_GROWTH_LIMIT / 2**20:.0f} MiB)")
    assert after - before < RSS_GROWTH_LIMIT


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")
def test_listen_backlog_is_the_system_maximum(broker):
    port = broker.tcp_address.rsplit(":", 1)[1]
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True,
                         text=True, check=True).stdout.split()
    # for a listening socket, ss shows the backlog as Send-Q (the third column)
    assert int(out[2]) == listen_backlog() > 100
