"""Issue 33 items 4 and 6: what HTTP clients do to the real nsqd and ``nsqviz broker``.

* Clients that close before reading their answer, connect and send nothing, half-close,
  reset, or stop half-way through a head: nsqd serves them with no word in its log;
  the broker logged a traceback for each (25,826 in 8 s), then ran out of descriptors.
  Now: a quiet close, the socket released at once, nothing in the log.
* A 100 MB ``/pub``: nsqd answers ``413 MSG_TOO_BIG`` from --max-msg-size and stops
  reading; the broker read it all, then said ``BODY_TOO_BIG``.
* ``/ping`` on a full disk: nsqd answers 500 ``NOK - <error>`` once a write to a disk
  queue failed (and a failed ``/pub`` 503 ``EXITING``), OK again after one succeeds;
  the broker said OK throughout.
* A read-only data directory: nsqd refuses to start, in one line; the broker started,
  then logged a traceback at its first topic.

Both servers are processes started with the same flags; each case runs on both.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from nsqviz.servers.peers import NsqdProcess, RealNsqd
from tests.conftest import peer

PING = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
PUB = b"POST /pub?topic=hostile HTTP/1.1\r\nHost: x\r\n"
REPEAT = 100  # connections of each shape


def _connect(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _early_close(address: str) -> None:
    with _connect(address) as s:
        s.sendall(PING)


def _no_request(address: str) -> None:
    _connect(address).close()


def _half_open(address: str) -> None:
    with _connect(address) as s:
        s.sendall(PING)
        s.shutdown(socket.SHUT_WR)
        while s.recv(65536):
            pass


def _reset(address: str, data: bytes = PING) -> None:
    s = _connect(address)
    if data:
        s.sendall(data)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def _half_a_head(address: str) -> None:
    with _connect(address) as s:
        s.sendall(b"GET /ping HTTP/1.1\r\nHo")


def _body_then_reset(address: str) -> None:
    _reset(address, PUB + b"Content-Length: 1000\r\n\r\n" + b"x" * 100)


SHAPES = {
    "close before the answer": _early_close,
    "no request": _no_request,
    "half-open (half-close, then read)": _half_open,
    "reset after the request": _reset,
    "reset before the request": lambda a: _reset(a, b""),
    "half a head, then close": _half_a_head,
    "part of a body, then reset": _body_then_reset,
}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    servers = (RealNsqd(peer("nsqd"), data_path=str(tmp / "nsqd")),
               NsqdProcess.nsqviz(data_path=str(tmp / "ours")))
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda s: s.start(), servers))
        yield servers
    finally:
        for server in servers:
            server.stop()


def _fds(server: NsqdProcess) -> int:
    return len(os.listdir(f"/proc/{server.pid}/fd"))


def _get(address: str, path: str, data: bytes | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(f"http://{address}{path}",
                                                           data=data), timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


_ALARMS = ("Traceback", "ERROR", "WARN", "Exception", "Error")
"""What a log line that reports a problem holds (nsqd logs each request at INFO)."""


@pytest.mark.parametrize("shape", list(SHAPES))
def test_what_http_clients_do_is_never_an_error(pair, shape):
    """Each shape ``REPEAT`` times, 8 at a time: no error or traceback in either
    server's log, every socket released at once, and the server still answers."""
    for server in pair:
        logged, fds = len(server.log), _fds(server)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(SHAPES[shape], [server.http_address] * REPEAT))
        end = time.monotonic() + 5
        while time.monotonic() < end and _fds(server) > fds:
            time.sleep(0.05)
        name = "nsqd" if isinstance(server, RealNsqd) else "ours"
        alarms = [line for line in server.log[logged:] if any(a in line for a in _ALARMS)]
        assert alarms == [], (name, alarms[:12])
        assert _fds(server) <= fds, (name, "descriptors left open")
        assert _get(server.http_address, "/ping") == (200, b"OK"), name


def _big_pub(address: str, chunked: bool, total: int = 100 * 2**20) -> tuple[int, bytes]:
    """Send a ``total``-byte /pub body as fast as the server takes it: (bytes the client
    got to send before the server stopped reading and closed, its answer)."""
    s = _connect(address)
    framing = b"Transfer-Encoding: chunked\r\n" if chunked else b"Content-Length: %d\r\n" % total
    s.sendall(PUB + framing + b"\r\n")
    answer: list[bytes] = []

    def read() -> None:
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except OSError:
            pass
        answer.append(got)

    reader = threading.Thread(target=read)
    reader.start()
    block = b"x" * 65536
    if chunked:
        block = b"10000\r\n" + block + b"\r\n"
    sent = 0
    try:
        while sent < total:
            sent += s.send(block)
    except OSError:
        pass
    reader.join(10)
    s.close()
    return sent, answer[0] if answer else b""


@pytest.mark.parametrize("chunked", [False, True], ids=["Content-Length", "chunked"])
def test_a_100_mb_pub_is_stopped_early_with_msg_too_big(pair, chunked):
    for server in pair:
        sent, answer = _big_pub(server.http_address, chunked)
        assert answer.startswith(b"HTTP/1.1 413 ") and answer.endswith(
            b'{"message":"MSG_TOO_BIG"}'), (server, answer[:200])
        assert sent < 40 * 2**20, (server, f"{sent:,} bytes read before the answer")


@contextmanager
def _started(server: NsqdProcess):
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_ping_says_a_full_disk(tmp_path):
    """A disk queue file that is /dev/full (every write: ENOSPC), every message to disk."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    answers = {}
    for name, make in (("nsqd", lambda d: RealNsqd(peer("nsqd"), data_path=d,
                                                   mem_queue_size=0)),
                       ("ours", lambda d: NsqdProcess.nsqviz(data_path=d, mem_queue_size=0))):
        data = tmp_path / name
        data.mkdir()
        os.symlink("/dev/full", data / "full.diskqueue.000000.dat")
        with _started(make(str(data))) as server:
            http = server.http_address
            answers[name] = [_get(http, "/ping"), _get(http, "/pub?topic=full", b"m"),
                             _get(http, "/ping"), _get(http, "/pub?topic=fine", b"m"),
                             _get(http, "/ping")]
            assert not any("Traceback" in line for line in server.log), name
    for name, (ping, pub, sick, good, well) in answers.items():
        assert ping == (200, b"OK") and well == (200, b"OK") and good[0] == 200, name
        assert pub == (503, b'{"message":"EXITING"}'), name
        assert sick[0] == 500 and sick[1].startswith(b"NOK - "), (name, sick)
        assert b"no space left on device" in sick[1].lower(), (name, sick)


@contextmanager
def _read_only(path: Path):
    """A directory no one may write to: mode 0555, or for root (whom modes do not stop)
    a read-only tmpfs mounted there (skips where that is not allowed)."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


def test_a_read_only_data_path_is_refused_at_start(tmp_path):
    with _read_only(tmp_path / "ro") as ro:
        ours = subprocess.run([sys.executable, "-m", "nsqviz.cli", "broker",
                               f"--data-path={ro}", "--tcp-address=127.0.0.1:0",
                               "--http-address=127.0.0.1:0"],
                              capture_output=True, text=True, timeout=30)
        theirs = subprocess.run([str(peer("nsqd")), f"--data-path={ro}",
                                 "--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0"],
                                capture_output=True, text=True, timeout=30)
    assert theirs.returncode == 1 and "FATAL: failed to persist metadata" in theirs.stderr
    assert ours.returncode == theirs.returncode
    (line,) = ours.stderr.splitlines()  # one line, no traceback
    assert line.startswith("nsqviz broker: failed to start - ") and "nsqd.dat" in line
    assert "TCP: listening" not in ours.stdout
