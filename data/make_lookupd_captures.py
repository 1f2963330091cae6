"""Re-makes the nsqlookupd "  V1" sample captures in data/lookupd/: real tcpdump captures on
loopback of an nsqd registering with an nsqlookupd -- the real nsqd and nsqlookupd v1.3.0
(found as ``nsqviz.servers.peers`` finds them) and, for comparison, ``nsqviz broker`` registering
with ``nsqviz lookupd``. Needs root (tcpdump) and a free port 4160 on 127.0.0.1 (the
lookup protocol's default port, so the captures are recognised by port as well as by
the magic).

    sudo .venv/bin/python data/make_lookupd_captures.py [NAME ...]

Each capture is described in data/README.md. Captures are real, so timings and ephemeral
ports differ from run to run; what each file contains does not.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from make_captures import Tcpdump

from nsqviz.lookupd.codec import ClientConnection
from nsqviz.lookupd.events import Identify, Magic, Register
from nsqviz.servers.peers import NsqdProcess, RealNsqd, require

DATA = Path(__file__).resolve().parent
LOOKUP_TCP = "127.0.0.1:4160"
PORT = 4160
PINGS_AFTER = 33.0
"""nsqd PINGs every 15 s (a fixed ticker, no flag shortens it): 33 s holds two PINGs."""


class LookupdProcess:
    """An nsqlookupd-compatible server (the real one or ``nsqviz lookupd``) on
    127.0.0.1:4160 (or the addresses given), started and waited for until it says it is
    listening."""

    def __init__(self, command: list[str], tcp_address: str = LOOKUP_TCP,
                 http_address: str = "127.0.0.1:0"):
        self.proc = subprocess.Popen(
            [*command, f"--tcp-address={tcp_address}", f"--http-address={http_address}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen: list[str] = []
        while not any("TCP: listening" in line for line in seen):
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{command[-1]} did not start: {''.join(seen)}")
            seen.append(line)
        # keep draining its log so it never blocks on a full pipe
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _post(nsqd: NsqdProcess, path: str) -> None:
    request = urllib.request.Request(f"http://{nsqd.http_address}{path}", data=b"",
                                     method="POST")
    urllib.request.urlopen(request, timeout=5).read()


def _lifecycle(nsqd: NsqdProcess, wait: float) -> str:
    """Topics and channels created and deleted over nsqd's HTTP API, ``wait`` seconds of
    PINGs in between, then nsqd stops (SIGTERM)."""
    with nsqd:
        time.sleep(0.5)  # IDENTIFY and its answer
        _post(nsqd, "/topic/create?topic=orders")
        _post(nsqd, "/channel/create?topic=orders&channel=audit")
        _post(nsqd, "/channel/create?topic=orders&channel=billing")
        _post(nsqd, "/topic/create?topic=clicks")
        time.sleep(wait)
        _post(nsqd, "/channel/delete?topic=orders&channel=billing")
        _post(nsqd, "/topic/delete?topic=clicks")
        time.sleep(0.5)
    return f"{nsqd.command[-1]} stopped"


def real_register(_: LookupdProcess) -> str:
    """The real nsqd registering with the real nsqlookupd: IDENTIFY, REGISTER of two
    topics and two channels, two PINGs, UNREGISTER of a channel and a topic, shutdown."""
    return _lifecycle(RealNsqd(lookupd_tcp_address=LOOKUP_TCP), PINGS_AFTER)


def nsqviz_register(_: LookupdProcess) -> str:
    """``nsqviz broker`` registering with ``nsqviz lookupd``: the same steps, one PING."""
    return _lifecycle(NsqdProcess.nsqviz(lookupd_tcp_address=LOOKUP_TCP), 16.0)


def _talk(data: bytes, port: int = PORT) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(data)
        sock.settimeout(1.0)
        got = b""
        try:
            while chunk := sock.recv(65536):
                got += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return got


def real_errors(_: LookupdProcess) -> str:
    """What the real nsqlookupd refuses, one connection each: a V2 magic, REGISTER before
    IDENTIFY, a bad topic name, an IDENTIFY without the required fields. The codec
    refuses to build these, so the bad bytes are written out here."""
    codec = ClientConnection()
    hello = codec.send(Magic()) + codec.send(Identify({
        "broadcast_address": "127.0.0.1", "tcp_port": 4150, "http_port": 4151,
        "version": "1.3.0"}))
    answers = [
        _talk(b"  V2"),
        _talk(b"  V1REGISTER orders\n"),
        _talk(hello + codec.send(Register("orders")) + b"REGISTER bad*topic\n"),
        _talk(b"  V1IDENTIFY\n\x00\x00\x00\x02{}"),
    ]
    return " | ".join(repr(a[4:]) for a in answers)


SCENARIOS = {
    "nsqd-register-real.pcap": (real_register, "nsqlookupd"),
    "lookupd-errors-real.pcap": (real_errors, "nsqlookupd"),
    "broker-register-nsqviz.pcap": (nsqviz_register, None),
}


def main(names: list[str]) -> None:
    (DATA / "lookupd").mkdir(exist_ok=True)
    for name in names or list(SCENARIOS):
        run, peer = SCENARIOS[name]
        command = ([str(require(peer))] if peer else
                   [sys.executable, "-m", "nsqviz.cli", "lookupd"])
        dump = Tcpdump(DATA / "lookupd" / name, PORT)
        lookupd = LookupdProcess(command)
        try:
            report = run(lookupd)
        finally:
            lookupd.stop()
            summary = dump.stop()
        print(f"{name}: {summary.splitlines()[-2] if summary else ''} {report}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
