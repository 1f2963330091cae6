"""A fresh ``tcpdump -i any`` capture of real connections to the embedded broker decodes
to exactly the commands and frames the clients' codecs sent and received."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.files import CaptureFormatError, read_capture
from nsqviz.capture.layers import LINKTYPE_LINUX_SLL2
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.events import Fin, Identify, Magic, Message, Pub, Rdy, Sub
from nsqviz.servers.nsqd.embedded import EmbeddedBroker

pytestmark = [
    pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="tcpdump needs root to capture"),
]


class Client:
    """A blocking socket client on the project's codec that remembers what it saw."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.codec = ClientConnection()
        self.sent: list = []
        self.received: list = []

    def send(self, *commands) -> None:
        self.sock.sendall(b"".join(self.codec.send(c) for c in commands))
        self.sent.extend(commands)

    def expect(self, n: int) -> None:
        """Read until ``n`` more frames arrived."""
        want = len(self.received) + n
        while len(self.received) < want:
            data = self.sock.recv(65536)
            assert data, "connection closed early"
            self.received.extend(e for e in self.codec.receive(data)
                                 if type(e).__name__ in ("Response", "Error", "Message"))

    def close(self) -> None:
        self.sock.close()


def _said(path, port: int) -> tuple[list, list[tuple[list, list]]]:
    """The capture's records so far, and each flow's (commands, frames) in order."""
    try:
        records = list(CaptureDecoder(ports={"nsq": {port}}).decode([path]))
    except CaptureFormatError:  # not even the file header written yet
        return [], []
    flows: dict = {}
    for r in records:
        flows.setdefault(r.flow_id, []).append(r)
    return records, [([r.event for r in recs if r.kind == "command"],
                      [r.event for r in recs if r.kind == "frame"]) for recs in flows.values()]


def test_fresh_any_interface_capture_decodes_to_what_was_said(tmp_path):
    path = tmp_path / "live-any.pcap"
    with EmbeddedBroker() as broker:
        dump = subprocess.Popen(
            ["tcpdump", "-i", "any", "-s", "0", "-B", "32768", "--immediate-mode", "-U",
             "-w", str(path), f"tcp port {broker.tcp_port}"],
            stderr=subprocess.PIPE, text=True,
        )
        try:
            while "listening" not in dump.stderr.readline():
                assert dump.poll() is None, "tcpdump exited"
            pub, sub = Client(broker.tcp_port), Client(broker.tcp_port)
            pub.send(Magic(), Identify({"client_id": "pub", "feature_negotiation": True}))
            pub.expect(1)
            bodies = [b"hello", b"x" * 70000, b"world"]  # the middle one spans segments
            for body in bodies:
                pub.send(Pub("live", body))
                pub.expect(1)
            sub.send(Magic(), Sub("live", "c"))
            sub.expect(1)
            sub.send(Rdy(10))
            sub.expect(3)
            sub.send(*(Fin(m.id) for m in sub.received if isinstance(m, Message)))
            time.sleep(0.2)
            pub.close()
            sub.close()
            want = [(c.sent, c.received) for c in (pub, sub)]
            deadline = time.monotonic() + 20  # tcpdump writes each packet as it comes (-U)
            while _said(path, broker.tcp_port)[1] != want and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            dump.send_signal(signal.SIGINT)
            dump.communicate(timeout=10)

    assert {r.linktype for r in read_capture(path)} == {LINKTYPE_LINUX_SLL2}
    records, said = _said(path, broker.tcp_port)
    assert not [r for r in records if r.kind in ("error", "gap")]
    assert said == want
    big = next(r for r in records if r.flow_id == 1 and r.name == "FrameTypeMessage"
               and len(r.fields["body"]) > 1000)
    assert len(big.packets) >= 2


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                out.append(int(entry))
    return out


def _descendants(pid: int) -> list[int]:
    children = _children(pid)
    return [*children, *(p for c in children for p in _descendants(c))]


def _comm(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def _gone(pid: int, timeout: float) -> bool:
    """Has ``pid`` ended (or is it a zombie nobody waits for) within ``timeout``?"""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                                 signal.SIGKILL], ids=lambda s: s.name)
def test_tcpdump_ends_with_nsqviz_decode_however_it_ends(sig):
    """``nsqviz decode -i lo`` on a quiet link (a filter nothing matches, so tcpdump never
    writes and never learns from a broken pipe): a signal to nsqviz alone -- not to its
    process group, as ``kill PID`` sends it -- ends tcpdump too, even SIGKILL."""
    cli = subprocess.Popen([sys.executable, "-m", "nsqviz.cli", "decode", "-i", "lo", "-f",
                            "tcp port 9 and host 192.0.2.1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while "listening" not in cli.stderr.readline():
            assert cli.poll() is None, "nsqviz decode -i ended"
        below = _descendants(cli.pid)
        (tcpdump,) = [p for p in below if _comm(p) == "tcpdump"]
        os.kill(cli.pid, sig)
        cli.wait(timeout=10)
        assert _gone(tcpdump, 10), f"tcpdump ({tcpdump}) outlived nsqviz ({sig.name})"
        assert all(_gone(p, 10) for p in below)  # its guard too
    finally:
        if cli.poll() is None:
            cli.kill()
        cli.communicate(timeout=10)
