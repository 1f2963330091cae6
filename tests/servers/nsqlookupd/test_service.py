"""The lookupd service against the real nsqlookupd: same answers to the same bytes, the
real nsqd registering with both, our broker registering like nsqd, inactive producers."""

from __future__ import annotations

import json
import socket
import struct
import time
import urllib.error
import urllib.request

import pytest

from nsqviz.servers.nsqd import EmbeddedBroker
from nsqviz.servers.nsqlookupd import EmbeddedLookupd

INFO = {"broadcast_address": "127.0.0.1", "tcp_port": 4150, "http_port": 4151,
        "version": "1.3.0", "hostname": "h"}


def _identify(info=INFO) -> bytes:
    body = json.dumps(info).encode()
    return b"IDENTIFY\n" + struct.pack(">i", len(body)) + body


def _raw_identify(body: bytes) -> bytes:
    return b"IDENTIFY\n" + struct.pack(">i", len(body)) + body


def _talk(address: str, data: bytes) -> list[bytes]:
    """Send ``data``, return the answers until the server closes or goes quiet (0.3 s
    after an answer; the first may take up to 5 s on a loaded machine)."""
    host, _, port = address.rpartition(":")
    answers, buf = [], b""
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(data)
        while True:
            try:
                chunk = s.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            buf += chunk
            s.settimeout(0.3)
    while len(buf) >= 4:
        (n,) = struct.unpack_from(">i", buf)
        answers.append(buf[4:4 + n])
        buf = buf[4 + n:]
    return answers


def _shape(answer: bytes):
    """IDENTIFY answers carry each server's own ports: compare their keys."""
    return sorted(json.loads(answer)) if answer.startswith(b"{") else answer


SCRIPTS = {
    "flow": b"  V1PING\n" + _identify() + b"REGISTER t c\nREGISTER t\nUNREGISTER t c\nPING\n",
    "bad magic": b"  V2",
    "unknown verb": b"  V1HELLO\nPING\n",
    "register first": b"  V1REGISTER t c\nPING\n",
    "no params": b"  V1" + _identify() + b"REGISTER\nPING\n",
    "bad topic": b"  V1" + _identify() + b"REGISTER t! c\nPING\n",
    "bad channel": b"  V1" + _identify() + b"UNREGISTER t c!\nPING\n",
    "twice": b"  V1" + _identify() + _identify(),
    "missing fields": b"  V1" + _identify({"tcp_port": 1}),
    "not json": b"  V1IDENTIFY\n\x00\x00\x00\x02{x",
    # issue 24 item 2: nesting Go's decoder refuses (past 10000 levels), and just within
    "too deep": b"  V1" + _raw_identify(b"[" * 10001 + b"]" * 10001),
    "deep but within": b"  V1" + _raw_identify(json.dumps(INFO).encode()[:-1] + b', "deep": '
                                               + b"[" * 9998 + b"]" * 9998 + b"}") + b"PING\n",
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_same_bytes_same_answers_as_real_nsqlookupd(real_lookupd, lookupd, name):
    theirs = _talk(real_lookupd.tcp_address, SCRIPTS[name])
    ours = _talk(lookupd.tcp_address, SCRIPTS[name])
    assert [_shape(a) for a in ours] == [_shape(a) for a in theirs]


def _get(http: str, path: str):
    try:
        with urllib.request.urlopen(f"http://{http}{path}", timeout=5) as r:
            body = r.read()
            return r.status, json.loads(body) if body.startswith(b"{") else body
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _post(http: str, path: str):
    req = urllib.request.Request(f"http://{http}{path}", method="POST", data=b"")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _normal(doc):
    """Drop what differs by nature (each connection's source port) and sort lists (Go
    lists registrations in map order)."""
    if isinstance(doc, dict):
        return {k: _normal(v) for k, v in doc.items() if k != "remote_address"}
    if isinstance(doc, tuple):
        return tuple(_normal(v) for v in doc)
    if isinstance(doc, list):
        return sorted((_normal(v) for v in doc), key=json.dumps)
    return doc


def _wait(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


QUERIES = ["/lookup?topic=orders", "/lookup?topic=nope", "/lookup", "/topics",
           "/channels?topic=orders", "/channels", "/nodes", "/ping", "/info"]


def _same_answers(a: str, b: str) -> None:
    for q in QUERIES:
        assert _normal(_get(a, q)) == _normal(_get(b, q)), q


def test_real_nsqd_registers_with_both_alike(real_lookupd, lookupd):
    from nsqviz.servers.peers import RealNsqd
    from tests.conftest import peer

    with RealNsqd(peer("nsqd"), lookupd_tcp_address=[lookupd.tcp_address,
                                                    real_lookupd.tcp_address]) as nsqd:
        _post(nsqd.http_address, "/topic/create?topic=orders")
        _post(nsqd.http_address, "/channel/create?topic=orders&channel=billing")
        _post(nsqd.http_address, "/topic/create?topic=other")
        for lk in (lookupd, real_lookupd):
            assert _wait(lambda lk=lk: len(_get(lk.http_address, "/topics")[1]["topics"]) == 2)
        _same_answers(lookupd.http_address, real_lookupd.http_address)
        status, doc = _get(lookupd.http_address, "/lookup?topic=orders")
        assert status == 200 and doc["channels"] == ["billing"]
        assert doc["producers"][0]["tcp_port"] == nsqd.tcp_port
        # admin endpoints: answers and effects alike
        node = f"127.0.0.1:{nsqd.http_port}"
        for path in ["/topic/tombstone?topic=orders&node=" + node, "/topic/tombstone?topic=x",
                     "/channel/create?topic=orders&channel=audit", "/channel/create?topic=o",
                     "/channel/delete?topic=orders&channel=billing",
                     "/channel/delete?topic=orders&channel=none", "/topic/create?topic=b!d",
                     "/topic/create?topic=new", "/topic/delete?topic=other"]:
            assert _post(lookupd.http_address, path) == _post(real_lookupd.http_address, path)
        _same_answers(lookupd.http_address, real_lookupd.http_address)
        # nsqd unregisters a channel it deletes, and leaves both when it stops
        _post(nsqd.http_address, "/channel/delete?topic=orders&channel=audit")
    for lk in (lookupd, real_lookupd):
        assert _wait(lambda lk=lk: _get(lk.http_address, "/nodes")[1]["producers"] == [])
    _same_answers(lookupd.http_address, real_lookupd.http_address)


def test_our_broker_registers_like_nsqd(real_lookupd, lookupd, monkeypatch):
    monkeypatch.setattr("nsqviz.servers.nsqd.lookup.HEARTBEAT_INTERVAL", 0.2)
    with EmbeddedBroker(broadcast_address="127.0.0.1",
                        lookupd_tcp_address=[lookupd.tcp_address,
                                             real_lookupd.tcp_address]) as b:
        _post(b.http_address, "/topic/create?topic=orders")  # as nsqd: topic first
        _post(b.http_address, "/channel/create?topic=orders&channel=billing")
        _post(b.http_address, "/topic/create?topic=other")
        _post(b.http_address, "/channel/create?topic=other&channel=gone%23ephemeral")
        _post(b.http_address, "/channel/delete?topic=other&channel=gone%23ephemeral")
        for lk in (lookupd, real_lookupd):
            assert _wait(lambda lk=lk: _get(lk.http_address, "/channels?topic=other")[1]
                         == {"channels": []})
            status, doc = _get(lk.http_address, "/lookup?topic=orders")
            assert doc["channels"] == ["billing"]
            (producer,) = doc["producers"]
            assert (producer["tcp_port"], producer["http_port"]) == (b.tcp_port, b.http_port)
            assert producer["broadcast_address"] == "127.0.0.1"
            assert producer["version"] == "1.3.0"
        _same_answers(lookupd.http_address, real_lookupd.http_address)
        peer = b.broker.lookup.peers[0]
        assert peer.info["tcp_port"] == lookupd.lookupd.tcp_port


def test_inactive_producers_leave_lookup_answers(monkeypatch):
    monkeypatch.setattr("nsqviz.servers.nsqd.lookup.HEARTBEAT_INTERVAL", 0.2)
    with EmbeddedLookupd(inactive_producer_timeout=1.0) as lk, \
            EmbeddedBroker(broadcast_address="127.0.0.1",
                           lookupd_tcp_address=[lk.tcp_address]) as b:
        _post(b.http_address, "/topic/create?topic=t")
        host, _, port = lk.tcp_address.rpartition(":")
        silent = socket.create_connection((host, int(port)))
        silent.sendall(b"  V1" + _identify() + b"REGISTER t\n")
        assert _wait(lambda: len(_get(lk.http_address, "/lookup?topic=t")[1]["producers"]) == 2)
        time.sleep(1.5)  # the broker PINGs every 0.2 s, the silent peer never
        (only,) = _get(lk.http_address, "/lookup?topic=t")[1]["producers"]
        assert only["tcp_port"] == b.tcp_port
        assert len(_get(lk.http_address, "/nodes")[1]["producers"]) == 1
        silent.close()


def test_command_lines_lookupd_and_broker_register():
    """``nsqviz lookupd`` and ``nsqviz broker --lookupd-tcp-address`` as processes."""
    import subprocess
    import sys

    from tests.servers.nsqd._interop import CLIBroker

    proc = subprocess.Popen([sys.executable, "-m", "nsqviz.cli", "lookupd", "--tcp-address",
                             "127.0.0.1:0", "--http-address", "127.0.0.1:0",
                             "--log-level", "warn"], stdout=subprocess.PIPE, text=True)
    try:
        tcp = proc.stdout.readline().split()[-1]
        http = proc.stdout.readline().split()[-1]
        with CLIBroker("--lookupd-tcp-address", tcp, "--broadcast-address", "127.0.0.1") as b:
            _post(b.http_address, "/topic/create?topic=cli")
            assert _wait(lambda: _get(http, "/lookup?topic=cli")[0] == 200)
            (producer,) = _get(http, "/lookup?topic=cli")[1]["producers"]
            assert f"127.0.0.1:{producer['tcp_port']}" == b.tcp_address
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def test_broker_logs_and_retries_after_an_unreadable_identify_answer(monkeypatch, caplog):
    """Issue 24 item 1: a lookupd answering IDENTIFY with malformed JSON ended the peer
    task silently, for good. nsqd logs ``parsing response``, closes, and reconnects at
    its next command or heartbeat."""
    import threading

    monkeypatch.setattr("nsqviz.servers.nsqd.lookup.HEARTBEAT_INTERVAL", 0.2)
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)
            conn.recv(65536)  # the magic and IDENTIFY
            conn.sendall(struct.pack(">i", 9) + b"{not json")

    threading.Thread(target=serve, daemon=True).start()
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        with caplog.at_level("WARNING", logger="nsqviz.servers.nsqd.lookup"), \
                EmbeddedBroker(broadcast_address="127.0.0.1", lookupd_tcp_address=[address]):
            assert _wait(lambda: len(accepted) >= 3)
        assert "parsing response" in caplog.text
    finally:
        listener.close()
        for conn in accepted:
            conn.close()


@pytest.mark.parametrize("sent", [b"  V2", b"GET / HTTP/1.0\r\n\r\n"])
def test_bad_magic_closes_as_nsqlookupd_does(real_lookupd, lookupd, sent):
    """Issue 24 item 7c: nsqlookupd reads the 4-byte magic alone, so bytes after a bad
    one are unread at its close: an RST after E_BAD_PROTOCOL, not a FIN."""

    def close_kind(address: str) -> tuple[bytes, str]:
        host, _, port = address.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(sent)
            time.sleep(0.3)
            got = b""
            try:
                while chunk := s.recv(65536):
                    got += chunk
            except ConnectionResetError:
                return got, "RST"
        return got, "FIN"

    theirs = close_kind(real_lookupd.tcp_address)
    assert close_kind(lookupd.tcp_address) == theirs
    assert theirs[1] == ("RST" if len(sent) > 4 else "FIN")
