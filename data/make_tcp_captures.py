"""Records data/nsqd/tcp/: what the TCP layer shows when an NSQ connection goes wrong,
against the real nsqd v1.3.0, captured with tcpdump on lo (the TCP analysis's own
samples: :mod:`nsqviz.capture.tcp_analysis`, ``nsqviz.capture.tcp_views``).

* ``zero-window.pcap`` -- a consumer whose receive buffer is 4 KiB (``SO_RCVBUF`` set
  before it connects) subscribes with RDY 50, and stops reading for 3 s while a producer
  MPUBs 60 messages of 300 bytes: its kernel announces a zero window, nsqd's kernel
  probes it; then it reads the 50 messages it was sent, FINs each and closes with CLS.
* ``reset-too-big.pcap`` -- a PUB whose size says 2,000,000 bytes (nsqd's
  ``--max-msg-size`` is 1,048,576), its body sent in one write: nsqd answers
  ``E_BAD_MESSAGE`` after reading the size and closes with most of the body unread, so
  its kernel resets the connection (RST from the server).

Run as root: ``.venv/bin/python data/make_tcp_captures.py [NAME ...]`` (the real nsqd:
``$NSQD``, else ``../shared/peers/nsqd`` beside the repository).
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from make_captures import Tcpdump
from make_nsqd_refusals import NSQD, free_port

from nsqviz.nsq.events import Cls, Fin, Mpub, Rdy, Sub
from nsqviz.nsq.fastpath import encode_command

OUT = Path(__file__).resolve().parent / "nsqd" / "tcp"
MAGIC = b"  V2"


def read_frame(sock: socket.socket) -> tuple[int, bytes]:
    """One NSQ frame from the server: (frame type, data)."""
    size = struct.unpack(">i", _exactly(sock, 4))[0]
    data = _exactly(sock, size)
    return struct.unpack(">i", data[:4])[0], data[4:]


def _exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("nsqd closed the connection")
        buf += chunk
    return buf


def zero_window(port: int) -> None:
    consumer = socket.socket()
    consumer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect
    consumer.connect(("127.0.0.1", port))
    consumer.sendall(MAGIC + encode_command(Sub("slow", "c")))
    assert read_frame(consumer) == (0, b"OK")
    consumer.sendall(encode_command(Rdy(50)))
    with socket.create_connection(("127.0.0.1", port)) as producer:
        producer.sendall(MAGIC + encode_command(Mpub("slow", tuple(
            f"message {i:03d} ".encode().ljust(300, b".") for i in range(60)))))
        assert read_frame(producer) == (0, b"OK")
    time.sleep(3.0)  # the consumer reads nothing: its window closes
    ids = []
    while len(ids) < 50:
        kind, data = read_frame(consumer)
        if kind == 2:  # FrameTypeMessage: timestamp, attempts, id, body
            ids.append(data[10:26])
    for msg_id in ids:
        consumer.sendall(encode_command(Fin(msg_id)))
    consumer.sendall(encode_command(Cls()))
    while read_frame(consumer) != (0, b"CLOSE_WAIT"):
        pass
    consumer.close()


def reset_too_big(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(MAGIC)
        pub = b"PUB big\n" + struct.pack(">i", 2_000_000) + b"x" * 2_000_000
        writer = threading.Thread(target=_send_until_reset, args=(c, pub))
        writer.start()
        print("answer:", read_frame(c))
        writer.join(5)


def _send_until_reset(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError as exc:  # nsqd reset the connection: what this capture shows
        print("the PUB's body was cut off:", exc)


SCENARIOS = {"zero-window": zero_window, "reset-too-big": reset_too_big}


def main(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names or list(SCENARIOS):
        port, http = free_port(), free_port()
        nsqd = subprocess.Popen(
            [NSQD, f"--tcp-address=127.0.0.1:{port}", f"--http-address=127.0.0.1:{http}",
             f"--data-path={tempfile.mkdtemp()}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        dump = Tcpdump(OUT / f"{name}.pcap", port)
        try:
            SCENARIOS[name](port)
            time.sleep(0.3)
        finally:
            print(name, dump.stop())
            nsqd.terminate()
            nsqd.wait(5)


if __name__ == "__main__":
    main(sys.argv[1:])
