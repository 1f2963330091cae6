"""The real nsqlookupd and ``nsqviz lookupd`` with many topics: each HTTP endpoint's time,
and how long a PING waits while the biggest answer (``/nodes``) is built.

Both services run as processes on free loopback ports, one after the other in the same
run. One registering connection (an nsqd as nsqlookupd sees it: ``"  V1"``, IDENTIFY,
then a ``REGISTER`` per topic, each with a channel) registers ``--topics`` topics. Then,
per service:

* the wall time of ``/nodes`` (every topic of every nsqd, with its tombstone),
  ``/topics``, ``/channels?topic=`` and ``/lookup?topic=`` (the median of ``--repeat``
  requests each);
* the longest wait of a ``PING`` (on a second registered connection) and of an HTTP
  ``/ping`` sent one after the other while ``/nodes`` requests are being answered: a
  service that freezes while it builds an answer shows it here.

The baseline is the real nsqlookupd v1.3.0 measured in the same run; figures are wall
times on a machine other programs may share (the ratio is what carries over).
Run: ``.venv/bin/python -m benchmarks.lookupd_nodes [--topics 100000] [--repeat 3]``.
Needs ``nsqlookupd`` (see :mod:`nsqviz.servers.peers`) for the baseline; without it, ours alone.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from nsqviz.servers.peers import PeerNotFound, require

_LISTENING = re.compile(r"(TCP|HTTP): listening on (\S+)")


@contextmanager
def lookupd_process(argv: list[str]) -> Iterator[dict[str, str]]:
    """A lookupd as a process on free loopback ports: ``{"TCP": addr, "HTTP": addr}``."""
    proc = subprocess.Popen([*argv, "--tcp-address=127.0.0.1:0",
                             "--http-address=127.0.0.1:0", "--broadcast-address=127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None  # stdout=PIPE
    found: dict[str, str] = {}
    try:
        for line in proc.stdout:
            match = _LISTENING.search(line)
            if match:
                found[match.group(1)] = match.group(2)
            if len(found) == 2:
                break
        if len(found) < 2:
            raise RuntimeError(f"{argv[0]} did not start")
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep it drained
        yield found
    finally:
        proc.terminate()
        proc.wait(10)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _identify(tcp_port: int) -> bytes:
    body = json.dumps({"broadcast_address": "127.0.0.1", "hostname": "bench",
                       "tcp_port": tcp_port, "http_port": tcp_port + 1,
                       "version": "1.3.0"}).encode()
    return b"IDENTIFY\n" + struct.pack(">i", len(body)) + body


def _read_answers(sock: socket.socket, count: int) -> None:
    """Read ``count`` framed answers (4-byte size, then the data)."""
    buf = b""
    while count:
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the lookupd closed a registering connection")
            buf += chunk
        (size,) = struct.unpack_from(">i", buf)
        buf = buf[4 + size:]
        count -= 1


def register(tcp: str, topics: int, tcp_port: int) -> socket.socket:
    """A connection registered as an nsqd with ``topics`` topics (one channel each);
    kept open (a closed one would leave every registration)."""
    sock = socket.create_connection(_split(tcp), timeout=300)
    sock.sendall(b"  V1" + _identify(tcp_port))
    _read_answers(sock, 1)
    batch = 5000
    for start in range(0, topics, batch):
        n = min(batch, topics - start)
        sock.sendall(b"".join(b"REGISTER t%d c\n" % i for i in range(start, start + n)))
        _read_answers(sock, n)
    return sock


def get(address: str, path: str) -> tuple[float, int]:
    """(seconds, bytes of the answer) of one GET on a fresh connection."""
    conn = http.client.HTTPConnection(*_split(address), timeout=300)
    t0 = time.perf_counter()
    conn.request("GET", path)
    answer = conn.getresponse()
    size = len(answer.read())
    elapsed = time.perf_counter() - t0
    conn.close()
    if answer.status != 200:
        raise RuntimeError(f"GET {path}: {answer.status}")
    return elapsed, size


def ping_waits(tcp: str, web: str, busy: threading.Event) -> dict[str, float]:
    """The longest wait of a TCP PING and of an HTTP /ping while ``busy`` is set."""
    sock = socket.create_connection(_split(tcp), timeout=300)
    sock.sendall(b"  V1" + _identify(1))
    _read_answers(sock, 1)
    worst = {"PING": 0.0, "/ping": 0.0}
    while not busy.is_set():
        time.sleep(0.001)
    while busy.is_set():
        t0 = time.perf_counter()
        sock.sendall(b"PING\n")
        _read_answers(sock, 1)
        worst["PING"] = max(worst["PING"], time.perf_counter() - t0)
        worst["/ping"] = max(worst["/ping"], get(web, "/ping")[0])
    sock.close()
    return worst


def measure(argv: list[str], topics: int, repeat: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    with lookupd_process(argv) as addr:
        t0 = time.perf_counter()
        keep = register(addr["TCP"], topics, 4150)
        figures["register s"] = time.perf_counter() - t0
        for path in ("/topics", "/channels?topic=t7", "/lookup?topic=t7"):
            figures[f"{path} s"] = statistics.median(
                get(addr["HTTP"], path)[0] for _ in range(repeat))
        busy = threading.Event()
        waits: dict[str, float] = {}
        pinger = threading.Thread(
            target=lambda: waits.update(ping_waits(addr["TCP"], addr["HTTP"], busy)))
        pinger.start()
        busy.set()
        nodes = [get(addr["HTTP"], "/nodes") for _ in range(repeat)]
        busy.clear()
        pinger.join()
        figures["/nodes s"] = statistics.median(t for t, _ in nodes)
        figures["/nodes MB"] = nodes[0][1] / 1e6
        figures["worst PING wait s"] = waits["PING"]
        figures["worst /ping wait s"] = waits["/ping"]
        keep.close()
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--nsqlookupd", help="path of the real nsqlookupd")
    args = parser.parse_args(argv)
    servers = {"nsqviz lookupd": [sys.executable, "-m", "nsqviz.cli", "lookupd"]}
    try:
        servers = {"nsqlookupd": [str(require("nsqlookupd", args.nsqlookupd))], **servers}
    except PeerNotFound as exc:
        print(f"no baseline: {exc}")
    results = {name: measure(cmd, args.topics, args.repeat) for name, cmd in servers.items()}
    print(f"{args.topics:,} topics (one channel each) on one nsqd; wall times, median of "
          f"{args.repeat}")
    names = list(results)
    print(f"{'':24}" + "".join(f"{n:>16}" for n in names)
          + ("   ours/nsqlookupd" if len(names) == 2 else ""))
    for key in results[names[-1]]:
        values = [results[n][key] for n in names]
        ratio = (f"   {values[1] / values[0]:>8.2f}x" if len(values) == 2 and values[0]
                 else "")
        print(f"{key:24}" + "".join(f"{v:>16.4f}" for v in values) + ratio)


if __name__ == "__main__":
    main()
