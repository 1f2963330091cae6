"""Records data/nsqd/refused/bad-values.pcap: well-framed commands with values the real
nsqd refuses (or reads leniently), one connection each, captured with tcpdump on lo.

Run as root: ``python data/make_nsqd_refusals.py data/nsqd/refused/bad-values.pcap``
(the real nsqd: ``$NSQD`` or ``../shared/peers/nsqd``).
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NSQD = os.environ.get("NSQD") or os.path.join(HERE, "..", "..", "shared", "peers", "nsqd")

CONNECTIONS = [
    b"PUB bad*topic\n\x00\x00\x00\x05hello",  # E_BAD_TOPIC
    b"SUB t c\nFIN abc\n",  # E_INVALID invalid message ID
    b"SUB t c\nRDY 99999\n",  # E_INVALID RDY count 99999 out of range 0-2500
    b"NOP extra\r\nPUB t\r\n\x00\x00\x00\x02hi",  # accepted: nsqd ignores and trims
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def talk(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.settimeout(1)
        c.sendall(b"  V2" + data)
        try:
            while c.recv(4096):
                pass
        except TimeoutError:
            pass
    time.sleep(0.1)


def main(out: str) -> None:
    port, http = free_port(), free_port()
    nsqd = subprocess.Popen(
        [NSQD, f"--tcp-address=127.0.0.1:{port}", f"--http-address=127.0.0.1:{http}",
         f"--data-path={tempfile.mkdtemp()}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "-w", out, "-U", f"tcp port {port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    try:
        for data in CONNECTIONS:
            talk(port, data)
        time.sleep(0.5)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(5)
        nsqd.terminate()
        nsqd.wait(5)


if __name__ == "__main__":
    main(sys.argv[1])
