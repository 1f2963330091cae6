"""A blocking test client: a socket driven by the project's own ClientConnection codec.

Tests see exactly the events a learner sees in a notebook; malformed commands are sent
with ``send(..., check=False)`` or as raw bytes (the bad input *is* the test data).
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import time
import urllib.request

from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.events import (
    CompressionStarted,
    ConnectionClosed,
    Error,
    Identify,
    Magic,
    Message,
    Nop,
    Response,
    TLSUpgrade,
)


class RawClient:
    def __init__(self, address: str, *, magic: bool = True, timeout: float = 5.0):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.codec = ClientConnection()
        self.events: list = []
        self.closed = False
        if magic:
            self.send(Magic())

    # -- sending ---------------------------------------------------------------------

    def send(self, *cmds, check: bool = True) -> None:
        self.sock.sendall(b"".join(self.codec.send(c, check=check) for c in cmds))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def identify(self, **data) -> Response:
        self.send(Identify(data))
        return self.expect(Response)

    # -- receiving -------------------------------------------------------------------

    def _read(self, timeout: float) -> bool:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 20)
        except TimeoutError:
            return False
        except (ConnectionResetError, ssl.SSLError):
            data = b""
        evs = self.codec.receive(data)
        if not data:
            self.closed = True
        self.events.extend(evs)
        return True

    def next(self, timeout: float = 5.0):
        """The next event that is not a heartbeat (heartbeats are answered with NOP)."""
        deadline = time.monotonic() + timeout
        while True:
            while self.events:
                ev = self.events.pop(0)
                if isinstance(ev, Response) and ev.is_heartbeat:
                    if not self.closed:
                        # the broker may have closed the connection meanwhile
                        with contextlib.suppress(OSError):
                            self.send(Nop())
                    continue
                if isinstance(ev, TLSUpgrade | CompressionStarted):
                    continue
                return ev
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                raise AssertionError(f"no event within {timeout}s (closed={self.closed})")
            self._read(left)

    def expect(self, kind, timeout: float = 5.0):
        ev = self.next(timeout)
        assert isinstance(ev, kind), f"expected {kind.__name__}, got {ev!r}"
        return ev

    def expect_ok(self, timeout: float = 5.0) -> None:
        ev = self.expect(Response, timeout)
        assert ev.data == b"OK", ev

    def expect_error(self, code: str, text: str | None = None, *, fatal: bool) -> Error:
        ev = self.expect(Error)
        assert ev.code == code, ev
        if text is not None:
            assert ev.text == text, ev
        if fatal:
            self.expect_closed()
        return ev

    def expect_closed(self, timeout: float = 5.0) -> None:
        ev = self.next(timeout)
        assert isinstance(ev, ConnectionClosed), f"expected the close, got {ev!r}"

    def messages(self, n: int, timeout: float = 10.0) -> list[Message]:
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            ev = self.next(max(0.01, deadline - time.monotonic()))
            assert isinstance(ev, Message), f"expected a message, got {ev!r}"
            out.append(ev)
        return out

    def quiet(self, seconds: float) -> list:
        """Everything but heartbeats that arrives within ``seconds``."""
        got = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                got.append(self.next(max(0.01, deadline - time.monotonic())))
            except AssertionError:
                break
        return got

    def close(self) -> None:
        self.sock.close()


def subscriber(address: str, topic: str, channel: str, rdy: int = 0, **identify) -> RawClient:
    c = RawClient(address)
    if identify:
        c.identify(**identify)
    from nsqviz.nsq.events import Rdy, Sub

    c.send(Sub(topic, channel))
    c.expect_ok()
    if rdy:
        c.send(Rdy(rdy))
    return c


def http(address: str, path: str, body: bytes | None = None, method: str | None = None):
    """(status, body bytes) of an HTTP request to the broker."""
    req = urllib.request.Request(f"http://{address}{path}", data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def stats(address: str) -> dict:
    status, body = http(address, "/stats?format=json")
    assert status == 200
    return json.loads(body)


def channel_stats(address: str, topic: str, channel: str) -> dict | None:
    for t in stats(address)["topics"]:
        if t["topic_name"] == topic:
            for c in t["channels"]:
                if c["channel_name"] == channel:
                    return c
    return None


def wait_for(predicate, timeout: float = 5.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(interval)
