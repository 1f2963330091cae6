"""Brokers as processes that a test can kill: ``nsqviz broker`` and the real nsqd.

The real nsqd is found as every test finds the real programs
(:func:`nsqviz.servers.peers.find`: ``$NSQD``, then ``PATH``, then ``$NSQVIZ_PEERS``, which
tests/conftest.py points at the machine's peers folder unless it is set).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from nsqviz.nsq.events import Error, Fin, Message, Mpub, Rdy
from nsqviz.servers import peers
from tests.servers.nsqd._client import RawClient, subscriber

ROOT = Path(__file__).resolve().parents[3]


def find_nsqd() -> str | None:
    """The real nsqd binary, or None."""
    try:
        found = peers.find("nsqd")
    except peers.PeerNotFound:
        return None
    return None if found is None else str(found)


NSQD_MISSING = "no real nsqd: set NSQD, put nsqd on PATH or in $NSQVIZ_PEERS"

_LISTEN = re.compile(r"(TCP|HTTP): listening on (\S+)")


class BrokerProcess:
    """One broker process on free loopback ports with a data path; its output goes to
    ``log`` so a chatty server never blocks on a full pipe."""

    def __init__(self, kind: str, data_path: Path, log: Path, *flags: str):
        if kind == "nsqd":
            exe = find_nsqd()
            assert exe is not None, NSQD_MISSING
            argv = [exe]
        else:
            argv = [sys.executable, "-m", "nsqviz.cli", "broker", "--log-level", "warn"]
        argv += ["--tcp-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0",
                 "--data-path", str(data_path), *flags]
        data_path.mkdir(parents=True, exist_ok=True)
        self.kind = kind
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         cwd=ROOT)
        self.tcp_address = self.http_address = ""
        self._wait_listening()

    def _wait_listening(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        start = 0
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")[start:]
            found = dict((m.group(1), m.group(2)) for m in _LISTEN.finditer(text))
            if "TCP" in found and "HTTP" in found:
                self.tcp_address, self.http_address = found["TCP"], found["HTTP"]
                self.log.write_text("")  # the next start reads only its own lines
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.proc.kill()
        raise AssertionError(f"{self.kind} did not start:\n{self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL: no chance to write anything."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM: the graceful stop that writes memory queues out."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0, self.log.read_text()


def body(i: int) -> bytes:
    return b"%08d" % i


def publish(address: str, topic: str, first: int, count: int, batch: int = 200) -> None:
    """MPUB bodies ``first..first+count-1`` in batches, each batch's OK awaited."""
    pub = RawClient(address)
    for start in range(first, first + count, batch):
        pub.send(Mpub(topic, tuple(body(i) for i in range(start, min(start + batch,
                                                                        first + count)))))
        pub.expect_ok(timeout=30)
    pub.close()


def drain(address: str, topic: str, channel: str, *, limit: int | None = None,
          quiet: float = 1.5) -> list[bytes]:
    """Consume and FIN until ``limit`` messages or ``quiet`` seconds without one; the
    bodies in delivery order (a body twice means it was delivered twice)."""
    c = subscriber(address, topic, channel, rdy=min(limit or 2500, 2500))
    got: list[bytes] = []
    while limit is None or len(got) < limit:
        try:
            first = c.next(quiet)
        except AssertionError:
            break
        if isinstance(first, Error) and first.code == "E_FIN_FAILED":
            continue  # a message delivered twice in one go, FINed twice (seen with nsqd)
        assert isinstance(first, Message), first
        msgs = [first]
        while c.events and isinstance(c.events[0], Message):
            msgs.append(c.events.pop(0))
        got.extend(m.body for m in msgs)
        if limit is not None:
            # RDY counts what is in flight: with RDY = what is still wanted, set before
            # the FINs, the server never sends past the limit, however it batches
            c.send(Rdy(min(max(limit - len(got), 0), 2500)))
        c.send(*(Fin(m.id) for m in msgs))
    c.quiet(0.3)  # read what is left, so the close is a FIN and not a reset
    c.close()
    return got
