"""Records data/nsqd/debugging/debugging.pcap: the real nsqd v1.3.0 (``--msg-timeout=1s``) and
four consumers in trouble, for notebook 07 ("debugging a capture"), captured with
tcpdump on lo while they run side by side:

* ``orders/billing``: a consumer (msg_timeout 1 s) gets a message and never answers it;
  nsqd times it out and delivers it again (attempts 2), which the consumer FINs;
* ``jobs/slow``: a consumer with RDY 1 for 20 published messages, each FINed 0.1 s after
  it came -- always as many in flight as it allows: starved;
* ``audit/c``: a consumer that FINs 25 ids nsqd never gave it -- an error storm of
  ``E_FIN_FAILED`` (not fatal: the connection stays open);
* ``pings/c``: a consumer (heartbeat_interval 1 s) that never answers a heartbeat --
  nsqd closes the connection.

Run as root: ``python data/make_debugging_capture.py data/nsqd/debugging/debugging.pcap``
(the real nsqd: ``$NSQD`` or ``$NSQVIZ_PEERS/nsqd``). Real captures: timings, ports
and message ids differ from run to run; what the file contains does not.
"""

import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from nsqviz.nsq.events import Fin, Identify, Mpub, Nop, Pub, Rdy, Sub
from nsqviz.nsq.fastpath import encode_command

HERE = os.path.dirname(os.path.abspath(__file__))
NSQD = os.environ.get("NSQD") or os.path.join(HERE, "..", "..", "shared", "peers", "nsqd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Conn:
    """One V2 connection with a frame reader: (type, data) per frame; None at EOF.
    ``rcvbuf``: a receive buffer of that many bytes, set before connecting."""

    def __init__(self, port: int, identify: dict | None = None, rcvbuf: int = 0,
                 host: str = "127.0.0.1"):
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect((host, port))
        self.buf = b""
        self.sock.sendall(b"  V2")
        if identify is not None:
            self.send(Identify({"feature_negotiation": True, **identify}))
            self.frame()

    def send(self, *commands) -> None:
        self.sock.sendall(b"".join(encode_command(c) for c in commands))

    def frame(self) -> tuple[int, bytes] | None:
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">I", self.buf[:4])[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        size = struct.unpack(">I", self.buf[:4])[0]
        frame, self.buf = self.buf[4:4 + size], self.buf[4 + size:]
        return struct.unpack(">I", frame[:4])[0], frame[4:]

    def message(self) -> bytes:
        """The next message's id, answering heartbeats on the way."""
        while True:
            kind, data = self.frame()
            if kind == 2:
                return data[10:26]
            if data == b"_heartbeat_":
                self.send(Nop())


def forgotten(port: int, producer: Conn) -> None:
    c = Conn(port, {"msg_timeout": 1000})
    c.send(Sub("orders", "billing"))
    c.frame()
    c.send(Rdy(1))
    producer.send(Pub("orders", b'{"order": 1}'))
    first = c.message()  # ... and no answer: nsqd times it out
    again = c.message()
    assert again == first
    c.send(Fin(again))
    time.sleep(0.3)
    c.sock.close()


def starved(port: int, producer: Conn) -> None:
    c = Conn(port, {})
    c.send(Sub("jobs", "slow"))
    c.frame()
    c.send(Rdy(1))
    producer.send(Mpub("jobs", tuple(b"job %d" % i for i in range(20))))
    for _ in range(20):
        mid = c.message()
        time.sleep(0.1)
        c.send(Fin(mid))
    time.sleep(0.2)
    c.sock.close()


def storm(port: int) -> None:
    c = Conn(port, {})
    c.send(Sub("audit", "c"))
    c.frame()
    for i in range(25):
        c.send(Fin(b"%016x" % (0xdead0000 + i)))
        time.sleep(0.02)
    time.sleep(0.3)
    c.sock.close()


def silent(port: int) -> None:
    c = Conn(port, {"heartbeat_interval": 1000})
    c.send(Sub("pings", "c"))
    while c.frame() is not None:  # heartbeats, unanswered, until nsqd closes
        pass
    c.sock.close()


def main(out: str) -> None:
    port, http = free_port(), free_port()
    nsqd = subprocess.Popen(
        [NSQD, f"--tcp-address=127.0.0.1:{port}", f"--http-address=127.0.0.1:{http}",
         f"--data-path={tempfile.mkdtemp()}", "--msg-timeout=1s"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "-s", "0", "-B", "65536",
                             "--immediate-mode", "-U",
                             "-w", out, f"tcp port {port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dump.stderr.readline()  # "listening on lo ...": capturing from here on
    try:
        producer = Conn(port)
        jobs = [threading.Thread(target=forgotten, args=(port, producer)),
                threading.Thread(target=starved, args=(port, producer)),
                threading.Thread(target=storm, args=(port,)),
                threading.Thread(target=silent, args=(port,))]
        for j in jobs:
            j.start()
            time.sleep(0.1)
        for j in jobs:
            j.join(30)
        producer.sock.close()
        time.sleep(0.5)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(5)
        nsqd.terminate()
        nsqd.wait(5)


if __name__ == "__main__":
    main(sys.argv[1])
