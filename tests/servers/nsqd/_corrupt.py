"""A channel's disk queue with one record damaged, and what a broker delivers from it.

The queue is written by a broker (the real nsqd or ours: the file layout is the same,
go-diskqueue's ``[4-byte size][timestamp][attempts][id][body]``), stopped gracefully
with every message on disk (``--mem-queue-size 0``); one record in the middle is
damaged as a bad disk or a stray write would damage it; a broker is started on a copy
and a plain consumer takes everything it delivers. The consumer reads frames with
``struct`` and treats ids as opaque bytes, as go-nsq does, so it can count what a
server sends even when that is not a valid message -- and it notices a server that
closes its connection.

``tests/servers/nsqd/test_corrupt_queue.py`` asserts on it for both servers;
``benchmarks/diskqueue_corrupt`` measures the same damage with the real ``nsq_tail`` as
the consumer.
"""

from __future__ import annotations

import shutil
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.servers.nsqd._client import channel_stats, subscriber, wait_for
from tests.servers.nsqd._processes import BrokerProcess, publish

TOPIC, CHANNEL = "t", "c"
QUEUE_FILE = f"{TOPIC}:{CHANNEL}.diskqueue.000000.dat"
RECORD_HEADER = 4 + 8 + 2 + 16  # size, timestamp, attempts, id


def _id(record: bytearray) -> None:
    record[4 + 10 + 3 : 4 + 10 + 6] = b"Zg-"  # three id digits that are no hex digits


def _size(record: bytearray) -> None:
    record[0:4] = struct.pack(">i", len(record) - 4 + 5)  # 5 bytes too long: in bounds


def _huge_size(record: bytearray) -> None:
    record[0:4] = b"\x7f\xff\xff\xff"


def _attempts(record: bytearray) -> None:
    record[12:14] = b"\xff\xff"  # the most a uint16 holds: the next delivery wraps


def _body(record: bytearray) -> None:
    record[RECORD_HEADER + 2 : RECORD_HEADER + 5] = b"???"  # no check can see this one


DAMAGE: dict[str, Callable[[bytearray], None]] = {
    "id": _id, "size": _size, "huge size": _huge_size, "attempts": _attempts, "body": _body,
}
"""Ways to damage one record, by name."""

INTACT: dict[str, bool] = {"attempts": True}
"""Whether the damaged record is still a whole message a consumer may get (its
attempts count aside): a record with a bad id, size or body is not."""


def write_queue(kind: str, root: Path, n: int) -> Path:
    """``n`` messages (``_processes.body`` 0 to n-1) in the channel's disk queue, written by a
    ``kind`` broker stopped gracefully; returns its data directory."""
    data = root / f"written-by-{kind}"
    b = BrokerProcess(kind, data, root / f"write-{kind}.log", "--mem-queue-size", "0")
    try:
        subscriber(b.tcp_address, TOPIC, CHANNEL).close()  # the channel, before publishing
        wait_for(lambda: channel_stats(b.http_address, TOPIC, CHANNEL) is not None)
        publish(b.tcp_address, TOPIC, 0, n)
        wait_for(lambda: channel_stats(b.http_address, TOPIC, CHANNEL)["depth"] == n,
                 timeout=30)
    finally:
        b.stop()
    return data


def records(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each record of a queue file."""
    spans, pos = [], 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        spans.append((pos, pos + 4 + size))
        pos += 4 + size
    return spans


@dataclass(frozen=True)
class Damaged:
    """A copy of a queue with one record damaged."""

    data: Path
    offset: int  # where the damaged record starts in the queue file
    before: bytes  # the record as it was
    after: bytes  # the record as it is now
    messages: dict[bytes, bytes]  # id -> body of every record left intact


def damage(written: Path, to: Path, case: str, index: int) -> Damaged:
    """A copy of the data directory ``written`` with record ``index`` of the channel's
    queue damaged the ``case`` way."""
    shutil.copytree(written, to)
    path = to / QUEUE_FILE
    data = bytearray(path.read_bytes())
    spans = records(bytes(data))
    intact = {bytes(data[s + 14 : s + 30]): bytes(data[s + 30 : e])
              for i, (s, e) in enumerate(spans) if i != index or INTACT.get(case)}
    start, end = spans[index]
    before = bytes(data[start:end])
    record = bytearray(before)
    DAMAGE[case](record)
    data[start:end] = record
    path.write_bytes(bytes(data))
    return Damaged(to, start, before, bytes(record), intact)


@dataclass
class Consumed:
    """What one consumer got from a broker."""

    messages: list[tuple[bytes, bytes, int]]  # (id, body, attempts) in delivery order
    errors: list[bytes]  # error frames' data
    closed: bool  # the broker closed the connection

    def intact(self, expected: dict[bytes, bytes]) -> int:
        """Distinct intact records delivered: id and body as written."""
        return len({mid for mid, b, _ in self.messages if expected.get(mid) == b})


def consume(address: str, *, quiet: float = 2.0, timeout: float = 120.0,
            expect: int | None = None) -> Consumed:
    """SUB with RDY 100 and FIN every message (its id as sent) until ``quiet`` seconds
    pass without one (half a second once ``expect`` messages came)."""
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=quiet)
    sock.sendall(b"  V2SUB %s %s\nRDY 100\n" % (TOPIC.encode(), CHANNEL.encode()))
    out = Consumed([], [], False)
    buf = b""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if expect is not None and len(out.messages) >= expect:
            sock.settimeout(0.5)  # only a message too many is still to be seen
        try:
            data = sock.recv(1 << 16)
        except TimeoutError:
            break
        if not data:
            out.closed = True
            break
        buf += data
        fins = []
        while len(buf) >= 8:
            size, ftype = struct.unpack_from(">ii", buf)
            if len(buf) < 4 + size:
                break
            frame, buf = buf[8 : 4 + size], buf[4 + size :]
            if ftype == 2:
                _, attempts, mid = struct.unpack_from(">qH16s", frame)
                out.messages.append((mid, frame[26:], attempts))
                fins.append(b"FIN " + mid + b"\n")
            elif ftype == 1:
                out.errors.append(frame)
            elif frame == b"_heartbeat_":
                fins.append(b"NOP\n")
        if fins:
            sock.sendall(b"".join(fins))
    sock.close()
    return out


def run(kind: str, damaged: Damaged, log: Path, *, expect: int | None = None) -> Consumed:
    """Start a ``kind`` broker on the damaged data and consume all it delivers."""
    b = BrokerProcess(kind, damaged.data, log)
    try:
        return consume(b.tcp_address, expect=expect)
    finally:
        b.stop()

