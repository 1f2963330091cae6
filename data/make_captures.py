"""Re-makes the sample captures in data/: real tcpdump captures of real clients and the
embedded broker on loopback. Needs root (tcpdump), tcpdump, editcap, and a venv with
pynsq 0.9.1 + tornado 6.0.4 (created under .venv-pynsq/ if missing).

    sudo .venv/bin/python data/make_captures.py [NAME ...]
    sudo .venv/bin/python data/make_captures.py --nsqd [NAME ...]   # against the real nsqd
    sudo .venv/bin/python data/make_captures.py --nsqd snaplen     # tcpdump -s 96 of it

Each capture is described in data/README.md. Captures are real, so timings, ports and
message ids differ from run to run; what each file contains does not.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.events import Fin, Identify, Magic, Pub, Rdy, Req, Sub
from nsqviz.servers.nsqd.embedded import EmbeddedBroker

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
PYNSQ_VENV = ROOT / ".venv-pynsq"
NSQJS_DIR = ROOT / ".venv-nsqjs"  # node_modules with nsqjs 0.13.0 (git-ignored)


def pynsq_python() -> Path:
    py = PYNSQ_VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PYNSQ_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "pynsq==0.9.1", "tornado==6.0.4"],
                       check=True)
    return py


class Tcpdump:
    """tcpdump writing FILE (TCP traffic of one port or several); started and waited for
    until it says it is listening. ``buffer``: its kernel buffer in KiB (a small one
    drops packets when tcpdump falls behind)."""

    def __init__(self, path: Path, port: int | list[int], iface: str = "lo", snaplen: int = 0,
                 buffer: int = 32768):
        ports = [port] if isinstance(port, int) else port
        self.proc = subprocess.Popen(
            ["tcpdump", "-i", iface, "-s", str(snaplen), "-B", str(buffer), "--immediate-mode",
             "-U",
             "-w", str(path), " or ".join(f"tcp port {p}" for p in ports)],
            stderr=subprocess.PIPE, text=True,
        )
        seen = []
        while not seen or "listening" not in seen[-1]:  # -i any first names its link type
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError(f"tcpdump did not start: {''.join(seen)}")
            seen.append(line)

    def stop(self) -> str:
        time.sleep(0.3)
        self.proc.send_signal(signal.SIGINT)
        return self.proc.communicate(timeout=10)[1].strip()


def pynsq(scenario: str, address: str, topic: str, *extra: str) -> dict:
    script = DATA / "clients" / "pynsq_traffic.py"
    out = subprocess.run([str(pynsq_python()), str(script), address, topic, scenario, *extra],
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _talk(port: int, *commands, raw: bytes = b"", raw_after: bytes = b"",
          wait: float = 0.3) -> bytes:
    """One connection driven by the project's codec (check=False lets it send bad commands)."""
    codec = ClientConnection()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        data = raw + b"".join(codec.send(c, check=False) for c in commands) + raw_after
        sock.sendall(data)
        sock.settimeout(wait)
        got = b""
        try:
            while chunk := sock.recv(65536):
                got += chunk
        except (TimeoutError, ConnectionResetError):  # nsqd closes with unread bytes: RST
            pass
    return got


def errors(port: int) -> dict:
    """Commands nsqd refuses, fatal and not, and a client that speaks the wrong protocol."""
    replies = {}
    # A bad topic name: E_BAD_TOPIC, and nsqd closes the connection. The grammar refuses
    # to build a SUB with a bad name, so these deliberately malformed bytes are literal.
    replies["bad_topic"] = _talk(port, Magic(), Identify({"client_id": "errors"}),
                                 raw_after=b"SUB bad*topic c\n")
    # FIN and REQ of ids that are not in flight: non-fatal E_FIN_FAILED / E_REQ_FAILED,
    # then an unknown command: E_INVALID, fatal.
    replies["not_in_flight"] = _talk(
        port, Magic(), Pub("errors", b"x"), Sub("errors", "c"), Rdy(0),
        Fin(b"0123456789abcdef"), Req(b"0123456789abcdef", 0),
    )
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"  V2BOGUS\n")
        sock.settimeout(0.3)
        try:
            replies["bogus"] = sock.recv(65536)
        except TimeoutError:
            replies["bogus"] = b""
    # An HTTP request sent to the TCP port: the magic is wrong.
    replies["http"] = _talk(port, raw=b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")
    return {k: v.decode("ascii", "replace") for k, v in replies.items()}


SCENARIOS = {
    # name: (interface, traffic)
    "pubsub-pynsq.pcap": ("lo", lambda b: pynsq("pubsub", b.tcp_address, "orders")),
    "small-messages-pynsq.pcap": ("lo", lambda b: pynsq("small", b.tcp_address, "ticks")),
    "large-messages-pynsq.pcap": ("lo", lambda b: pynsq("large", b.tcp_address, "blobs")),
    "snappy-pynsq.pcap": ("lo", lambda b: pynsq("snappy", b.tcp_address, "snappy_t")),
    "deflate-pynsq.pcap": ("lo", lambda b: pynsq("deflate", b.tcp_address, "deflate_t")),
    "errors.pcap": ("lo", lambda b: errors(b.tcp_port)),
    "pubsub-any-sll2.pcap": ("any", lambda b: pynsq("pubsub", b.tcp_address, "any_t")),
}


def nsqjs_capture() -> None:
    """nsqjs 0.13.0 (the official Node.js client), stored as pcapng."""
    import tempfile

    if not (NSQJS_DIR / "node_modules" / "nsqjs").exists():
        subprocess.run(["npm", "install", "--silent", "--prefix", str(NSQJS_DIR),
                        "nsqjs@0.13.0"], check=True)
    env = dict(os.environ, NODE_PATH=str(NSQJS_DIR / "node_modules"))
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker() as broker:
        raw = Path(tmp) / "pubsub-nsqjs.pcap"
        dump = Tcpdump(raw, broker.tcp_port)
        try:
            out = subprocess.run(["node", str(DATA / "clients" / "nsqjs_traffic.js"),
                                  broker.tcp_address, "js_t"], capture_output=True, text=True,
                                 timeout=60, check=True, env=env)
        finally:
            summary = dump.stop()
        print(f"pubsub-nsqjs: {summary.splitlines()[-2] if summary else ''} {out.stdout.strip()}",
              flush=True)
        subprocess.run(["editcap", "-F", "pcapng", str(raw), str(DATA / "pubsub-nsqjs.pcapng")],
                       check=True)


def tls_capture() -> None:
    """pynsq with tls_v1 against a broker with a self-signed certificate (its own broker,
    because TLS is a broker option), stored as pcapng."""
    import tempfile

    from nsqviz.servers.authd import self_signed_certificate

    with tempfile.TemporaryDirectory() as tmp:
        cert, key = self_signed_certificate(tmp)
        with EmbeddedBroker(tls_cert=str(cert), tls_key=str(key)) as broker:
            raw = Path(tmp) / "tls-pynsq.pcap"
            dump = Tcpdump(raw, broker.tcp_port)
            try:
                report = pynsq("tls", broker.tcp_address, "tls_t", str(cert))
            finally:
                summary = dump.stop()
            print(f"tls-pynsq: {summary.splitlines()[-2] if summary else ''} {report}",
                  flush=True)
        # Stored as pcapng: a second real pcapng sample (and *.pcap globs over data/,
        # such as the Spark notebook's, keep seeing the same files).
        subprocess.run(["editcap", "-F", "pcapng", str(raw), str(DATA / "tls-pynsq.pcapng")],
                       check=True)


def derived() -> None:
    """Edge cases cut from the real captures with editcap (see data/README.md)."""
    src = DATA / "pubsub-pynsq.pcap"
    # A capture that starts mid-connection: the first 25 packets left out.
    subprocess.run(["editcap", "-F", "pcap", str(src), str(DATA / "midstream-pynsq.pcap"),
                    "1-25"], check=True)
    # A snaplen of 120 bytes: every larger packet is cut (what tcpdump -s 120 keeps).
    subprocess.run(["editcap", "-F", "pcap", "-s", "120", str(DATA / "small-messages-pynsq.pcap"),
                    str(DATA / "snaplen120-small-messages.pcap")], check=True)
    # The same traffic as pcapng (section, interface and enhanced packet blocks).
    subprocess.run(["editcap", "-F", "pcapng", str(src),
                    str(DATA / "pubsub-pynsq.pcapng")], check=True)


REAL_NSQD = ("pubsub-pynsq.pcap", "small-messages-pynsq.pcap", "snappy-pynsq.pcap",
             "deflate-pynsq.pcap", "errors.pcap")
"""The scenarios also recorded against the real nsqd, into data/nsqd/."""


def real_nsqd_captures(names: list[str]) -> None:
    """The same scenarios against the real nsqd (found by nsqviz.servers.peers: $NSQD, PATH,
    $NSQVIZ_PEERS), started with the same --msg-timeout, written to data/nsqd/."""
    from nsqviz.servers.peers import RealNsqd

    out = DATA / "nsqd"
    out.mkdir(exist_ok=True)
    with RealNsqd(msg_timeout="2s") as nsqd:
        for name in names or REAL_NSQD:
            iface, traffic = SCENARIOS[name]
            dump = Tcpdump(out / name, nsqd.tcp_port, iface)
            try:
                report = traffic(nsqd)
            finally:
                summary = dump.stop()
            print(f"nsqd/{name}: {summary.splitlines()[-2] if summary else ''} {report}",
                  flush=True)


SNAPLEN = 96
SNAPLEN_CAPTURE = DATA / "nsqd" / "snaplen" / f"pubsub-s{SNAPLEN}.pcap"


def snaplen_capture() -> None:
    """``tcpdump -s 96`` of the real nsqd: go-nsq's to_nsq PUBs lines, nsqviz's Producer
    MPUBs and DPUBs, go-nsq's nsq_tail consumes them all -- every packet cut to its first
    96 bytes (30 of TCP payload on loopback), as a capture that may keep headers only."""
    import asyncio

    from nsqviz.clients.nsq import Producer
    from nsqviz.servers.peers import RealNsqd, require

    lines = [f"line-{i}-" + "x" * (40 + 20 * i) for i in range(4)]
    batch = [f"batch-{i}-" + "y" * 60 for i in range(3)]

    async def publish(address: str) -> None:
        async with Producer(address) as p:
            await p.mpub("cut", batch)
            await p.dpub("cut", 0.2, "deferred-" + "z" * 50)

    SNAPLEN_CAPTURE.parent.mkdir(parents=True, exist_ok=True)
    with RealNsqd(msg_timeout="2s") as nsqd:
        address = nsqd.tcp_address
        dump = Tcpdump(SNAPLEN_CAPTURE, nsqd.tcp_port, snaplen=SNAPLEN)
        try:
            subprocess.run([str(require("to_nsq")), "--nsqd-tcp-address", address,
                            "--topic", "cut"], input="\n".join(lines) + "\n", text=True,
                           check=True, timeout=30)
            asyncio.run(publish(address))
            tail = subprocess.run([str(require("nsq_tail")), "--nsqd-tcp-address", address,
                                   "--topic", "cut", "--channel", "tail",
                                   "-n", str(len(lines) + len(batch) + 1)],
                                  capture_output=True, text=True, check=True, timeout=30)
        finally:
            summary = dump.stop()
    print(f"{SNAPLEN_CAPTURE.relative_to(DATA)}: {summary.splitlines()[-2] if summary else ''}"
          f" {len(tail.stdout.splitlines())} messages tailed", flush=True)


def main(names: list[str]) -> None:
    if names[:1] == ["--nsqd"]:
        if names[1:] == ["snaplen"]:
            snaplen_capture()
        else:
            real_nsqd_captures(names[1:])
        return
    wanted = names or list(SCENARIOS)
    with EmbeddedBroker(msg_timeout=2.0) as broker:
        for name in wanted:
            if name not in SCENARIOS:
                continue
            iface, traffic = SCENARIOS[name]
            path = DATA / name
            dump = Tcpdump(path, broker.tcp_port, iface)
            try:
                report = traffic(broker)
            finally:
                summary = dump.stop()
            print(f"{name}: {summary.splitlines()[-2] if summary else ''} {report}", flush=True)
    if not names or "pubsub-nsqjs.pcapng" in names:
        nsqjs_capture()
    if not names or "tls-pynsq.pcapng" in names:
        tls_capture()
    if not names or "derived" in names:
        derived()


if __name__ == "__main__":
    main(sys.argv[1:])
