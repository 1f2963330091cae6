"""Records data/nsqd/refused/: well-framed commands with values the real nsqd refuses
(or reads leniently), one connection each, captured with tcpdump on lo --
``bad-values.pcap`` against nsqd's defaults, ``max-rdy-count.pcap`` against an nsqd
started with ``--max-rdy-count=10`` that a client asks for feature negotiation,
``wrong-magic.pcap`` against an nsqd on its default port 4150 that a client sends
nsqlookupd's magic ``"  V1"`` and a PING (nsqd answers ``E_BAD_PROTOCOL`` as an NSQ
error frame and closes).

Run as root: ``python data/make_nsqd_refusals.py data/nsqd/refused [NAME ...]``
(the real nsqd: ``$NSQD`` or ``$NSQVIZ_PEERS/nsqd``).
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from nsqviz.nsq.events import Identify, Rdy, Sub
from nsqviz.nsq.fastpath import encode_command

HERE = os.path.dirname(os.path.abspath(__file__))
NSQD = os.environ.get("NSQD") or os.path.join(HERE, "..", "..", "shared", "peers", "nsqd")

CONNECTIONS = [
    b"PUB bad*topic\n\x00\x00\x00\x05hello",  # E_BAD_TOPIC
    b"SUB t c\nFIN abc\n",  # E_INVALID invalid message ID
    b"SUB t c\nRDY 99999\n",  # E_INVALID RDY count 99999 out of range 0-2500
    b"NOP extra\r\nPUB t\r\n\x00\x00\x00\x02hi",  # accepted: nsqd ignores and trims
]

MAX_RDY_COUNT = [  # nsqd --max-rdy-count=10 announces it in the IDENTIFY response
    (encode_command(Identify({"feature_negotiation": True})),  # then wait for the answer
     encode_command(Sub("t", "c")) + encode_command(Rdy(10))
     + b"RDY 11\n"),  # E_INVALID RDY count 11 out of range 0-10
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


WRONG_MAGIC = [b"PING\n"]  # after nsqlookupd's magic: nsqd refuses the magic itself

NSQD_PORT = 4150
"""nsqd's default TCP port: where a client that means nsqlookupd reaches nsqd by mistake."""


def talk(port: int, data: bytes | tuple[bytes, ...], magic: bytes = b"  V2") -> None:
    """One connection: the magic, then ``data`` (a tuple: each part once the answers to
    the one before have come back)."""
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.settimeout(0.3)
        parts = (data,) if isinstance(data, bytes) else data
        c.sendall(magic)
        for part in parts:
            c.sendall(part)
            try:
                while c.recv(4096):
                    pass
            except TimeoutError:
                pass
    time.sleep(0.1)


def record(out: str, connections: list, *options: str, port: int = 0,
           magic: bytes = b"  V2") -> None:
    port, http = port or free_port(), free_port()
    nsqd = subprocess.Popen(
        [NSQD, f"--tcp-address=127.0.0.1:{port}", f"--http-address=127.0.0.1:{http}",
         f"--data-path={tempfile.mkdtemp()}", *options],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "-B", "65536", "--immediate-mode",
                             "-w", out, "-U",
                             f"tcp port {port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dump.stderr.readline()  # "listening on lo ...": capturing from here on
    try:
        for data in connections:
            talk(port, data, magic)
        time.sleep(0.5)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(5)
        nsqd.terminate()
        nsqd.wait(5)


CAPTURES = {
    "bad-values": lambda out: record(out, CONNECTIONS),
    "max-rdy-count": lambda out: record(out, MAX_RDY_COUNT, "--max-rdy-count=10"),
    "wrong-magic": lambda out: record(out, WRONG_MAGIC, port=NSQD_PORT, magic=b"  V1"),
}


def main(folder: str, *names: str) -> None:
    for name in names or CAPTURES:
        CAPTURES[name](os.path.join(folder, f"{name}.pcap"))


if __name__ == "__main__":
    main(*sys.argv[1:])
