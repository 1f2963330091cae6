"""Re-makes the HTTP API sample captures in data/http/: real tcpdump captures on loopback of
the real nsqd and nsqlookupd v1.3.0 (found as ``nsqviz.servers.peers`` finds them), on
their default ports -- nsqd 4150 (TCP) and 4151 (HTTP), nsqlookupd 4160 and 4161 -- so
each flow is recognised by its port as well as by its first bytes. Needs root (tcpdump),
curl, the real nsq_tail, and those four ports free on 127.0.0.1.

    sudo .venv/bin/python data/make_http_captures.py [NAME ...]

* ``lookups-real.pcap`` -- nsqd registering with nsqlookupd (TCP, ``"  V1"``) as topics
  and channels are made over nsqd's HTTP API, and ``curl`` asking nsqlookupd where they
  are (``/lookup``, a topic it does not know, ``/topics``, ``/channels``, ``/nodes``,
  ``/ping``, ``/info``) and nsqd who it is (``/info``);
* ``curl-pub-real.pcap`` -- nsq_tail (go-nsq) finding nsqd through nsqlookupd's
  ``/lookup`` and subscribing over TCP; ``curl`` publishing to nsqd's HTTP port:
  ``/pub``, ``/mpub`` (lines), ``/mpub?binary=true``, ``/pub?defer=`` (nsqd's HTTP
  DPUB; nsqd has no ``/dpub``: that 404 is in it too), a chunked ``/pub``; nsq_tail
  gets every message over TCP;
* ``edge-cases-real.pcap`` -- what nsqd's HTTP server does with what curl would not
  send, written on a socket: two requests pipelined in one write, a chunked body,
  ``Connection: close``, HEAD, an empty ``/pub`` (400 ``MSG_EMPTY``), a binary MPUB body
  nsqd's grammar refuses (413 ``BAD_MESSAGE``), a request line Go cannot read (400, and
  it closes).

Each is described in data/README.md. Captures are real, so timings and ephemeral ports
differ from run to run; what each file holds does not.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from make_captures import Tcpdump
from make_lookupd_captures import LookupdProcess

from nsqviz.servers.peers import RealNsqd, require

DATA = Path(__file__).resolve().parent / "http"
HOST = "127.0.0.1"
NSQD_TCP, NSQD_HTTP, LOOKUPD_TCP, LOOKUPD_HTTP = 4150, 4151, 4160, 4161
PORTS = [NSQD_TCP, NSQD_HTTP, LOOKUPD_TCP, LOOKUPD_HTTP]


def _curl(*args: str) -> str:
    """One curl run (its own connection), its answer's status and body."""
    out = subprocess.run(["curl", "-sS", "-w", " [%{http_code}]", *args], capture_output=True,
                         text=True, timeout=10, check=False)
    time.sleep(0.1)
    return out.stdout.strip()


def _nsqd(url: str, *args: str) -> str:
    return _curl(*args, f"http://{HOST}:{NSQD_HTTP}{url}")


def _lookupd(url: str, *args: str) -> str:
    return _curl(*args, f"http://{HOST}:{LOOKUPD_HTTP}{url}")


def _servers() -> tuple[LookupdProcess, RealNsqd]:
    lookupd = LookupdProcess([str(require("nsqlookupd"))], f"{HOST}:{LOOKUPD_TCP}",
                             f"{HOST}:{LOOKUPD_HTTP}")
    nsqd = RealNsqd(tcp_address=f"{HOST}:{NSQD_TCP}", http_address=f"{HOST}:{NSQD_HTTP}",
                    lookupd_tcp_address=f"{HOST}:{LOOKUPD_TCP}", https_address=None)
    nsqd.start()
    time.sleep(0.5)  # the magic, IDENTIFY and its answer
    return lookupd, nsqd


def lookups() -> list[str]:
    lookupd, nsqd = _servers()
    try:
        said = [
            _nsqd("/topic/create?topic=orders", "-X", "POST"),
            _nsqd("/channel/create?topic=orders&channel=audit", "-X", "POST"),
            _nsqd("/topic/create?topic=clicks", "-X", "POST"),
        ]
        time.sleep(0.5)  # the REGISTERs reach nsqlookupd
        said += [
            _lookupd("/lookup?topic=orders"),
            _lookupd("/lookup?topic=missing"),
            _lookupd("/topics"),
            _lookupd("/channels?topic=orders"),
            _lookupd("/nodes"),
            _lookupd("/ping"),
            _lookupd("/info"),
            _nsqd("/info"),
            _nsqd("/topic/delete?topic=clicks", "-X", "POST"),
        ]
        time.sleep(0.5)
    finally:
        nsqd.stop()
        lookupd.stop()
    return said


def _mpub_binary(*bodies: bytes, sizes: list[int] | None = None) -> bytes:
    """nsqd's binary /mpub body: [num messages] then each [message size][message]."""
    sizes = sizes or [len(b) for b in bodies]
    return struct.pack(">i", len(bodies)) + b"".join(
        struct.pack(">i", n) + b for n, b in zip(sizes, bodies, strict=True))


def curl_pub(tmp: Path) -> list[str]:
    lookupd, nsqd = _servers()
    tail = None
    try:
        said = [_nsqd("/topic/create?topic=orders", "-X", "POST")]
        time.sleep(0.5)  # registered: /lookup finds it
        tail = subprocess.Popen(
            [str(require("nsq_tail")), f"--lookupd-http-address={HOST}:{LOOKUPD_HTTP}",
             "--topic=orders", "--channel=tail", "-n", "8"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1.5)  # its /lookup, then its TCP connection to nsqd and SUB
        said.append(_lookupd("/lookup?topic=orders"))
        said.append(_nsqd("/pub?topic=orders", "--data-binary", "hello over http"))
        said.append(_nsqd("/mpub?topic=orders", "--data-binary", "one\ntwo\nthree"))
        binary = tmp / "mpub.bin"
        binary.write_bytes(_mpub_binary(b"bin-1", b"bin\n2"))
        said.append(_nsqd("/mpub?topic=orders&binary=true", "--data-binary", f"@{binary}"))
        said.append(_nsqd("/pub?topic=orders&defer=300", "--data-binary", "deferred 300 ms"))
        said.append(_nsqd("/dpub?topic=orders&defer=300", "--data-binary", "no /dpub"))
        said.append(_nsqd("/pub?topic=orders", "-H", "Transfer-Encoding: chunked",
                          "--data-binary", "sent in chunks"))
        out, _ = tail.communicate(timeout=15)
        said.append(out)
    finally:
        if tail is not None and tail.poll() is None:
            tail.kill()
            tail.wait()
        nsqd.stop()
        lookupd.stop()
    return said


def _raw(data: bytes, *, wait: float = 0.3) -> bytes:
    """One connection to nsqd's HTTP port writing ``data`` in one write; what nsqd said."""
    got = b""
    with socket.create_connection((HOST, NSQD_HTTP)) as sock:
        sock.sendall(data)
        sock.settimeout(wait)
        try:
            while chunk := sock.recv(65536):
                got += chunk
        except TimeoutError:
            pass
    time.sleep(0.1)
    return got


def _req(method: str, target: str, body: bytes = b"", *headers: str) -> bytes:
    head = [f"{method} {target} HTTP/1.1", f"Host: {HOST}:{NSQD_HTTP}", *headers]
    if body or method == "POST":
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def edge_cases() -> list[bytes]:
    lookupd, nsqd = _servers()
    try:
        said = [
            # two requests in one write: answered in order
            _raw(_req("POST", "/pub?topic=edges", b"first") +
                 _req("POST", "/pub?topic=edges", b"second")),
            # a chunked body, in three chunks
            _raw(b"POST /mpub?topic=edges HTTP/1.1\r\nHost: 127.0.0.1:4151\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n4\r\nc-1\n\r\n3\r\nc-2\r\n0\r\n\r\n"),
            # the client asks to close: nsqd answers and closes
            _raw(_req("GET", "/ping", b"", "Connection: close")),
            # HEAD: an answer without its body
            _raw(_req("HEAD", "/ping")),
            # an empty /pub: 400 MSG_EMPTY
            _raw(_req("POST", "/pub?topic=edges", b"")),
            # a binary MPUB body whose second message has size 0: 413 BAD_MESSAGE
            _raw(_req("POST", "/mpub?topic=edges&binary=true",
                      _mpub_binary(b"ok", b"", sizes=[2, 0]))),
            # a request line Go cannot read: 400, and it closes
            _raw(b"GET /ping HTTP/1.1 extra\r\nHost: x\r\n\r\n"),
        ]
    finally:
        nsqd.stop()
        lookupd.stop()
    return said


def _record(name: str, make: Callable[[], Sequence[str | bytes]]) -> None:
    DATA.mkdir(exist_ok=True)
    path = DATA / name
    dump = Tcpdump(path, PORTS)
    try:
        said = make()
    finally:
        print(dump.stop())
    print(f"{path}:")
    for line in said:
        print("  ", line)


def main(names: list[str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        makers: dict[str, Callable[[], Sequence[str | bytes]]] = {
            "lookups-real.pcap": lookups,
            "curl-pub-real.pcap": lambda: curl_pub(Path(tmp)),
            "edge-cases-real.pcap": edge_cases,
        }
        for name in names or makers:
            _record(name, makers[name])


if __name__ == "__main__":
    main(sys.argv[1:])
