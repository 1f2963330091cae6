"""A message inside the broker, its id, and its on-disk record.

nsqd stores a message on disk in the same layout it sends in a ``FrameTypeMessage``
(``[timestamp:int64][attempts:uint16][id:16][body]``), so a disk record *is* the data
of a message frame. :func:`encode_record`/:func:`decode_record` are the struct fast
path for that layout; ``tests/servers/nsqd/test_units.py`` checks them byte for byte
against :data:`nsqviz.nsq.grammar_frames.Message`, the one definition of the layout.
"""

from __future__ import annotations

import array
import itertools
import sys
import time
from struct import Struct

__all__ = ["BrokerMessage", "IDGenerator", "decode_record", "encode_record"]

_HEADER = Struct(">qH16s")
HEADER_SIZE = _HEADER.size  # 26


class BrokerMessage:
    """One message of one channel (nsqd copies a topic's message for each channel).

    ``deliver_at`` (monotonic seconds) is set while the message is deferred;
    ``client``/``deadline`` while it is in flight.
    """

    __slots__ = ("id", "body", "timestamp", "attempts", "client", "deadline", "deliver_at")

    def __init__(self, id: bytes, body: bytes, timestamp: int | None = None, attempts: int = 0):
        self.id = id
        self.body = body
        self.timestamp = time.time_ns() if timestamp is None else timestamp
        self.attempts = attempts
        self.client: object | None = None  # the connection it is in flight on
        self.deadline = 0.0
        self.deliver_at = 0.0

    def copy(self) -> BrokerMessage:
        return BrokerMessage(self.id, self.body, self.timestamp, self.attempts)

    def __repr__(self) -> str:
        return f"BrokerMessage({self.id!r}, attempts={self.attempts}, {len(self.body)} bytes)"


class IDGenerator:
    """16-hex-digit message ids, unique within a process and across restarts.

    nsqd derives ids from a 64-bit value (time, worker id, sequence). Here the 64-bit
    value starts at the current time in nanoseconds and counts up, so ids made after a
    restart do not collide with ids of messages reloaded from disk (it stays below 2**64
    for centuries).
    """

    def __init__(self) -> None:
        self._counter = itertools.count(time.time_ns())

    def __call__(self) -> bytes:
        return b"%016x" % next(self._counter)

    def many(self, n: int) -> list[bytes]:
        """``n`` consecutive ids (an MPUB's worth) in one go: the 64-bit values packed
        big-endian and hex-encoded at once, then cut into ids."""
        start = next(self._counter)
        self._counter = itertools.count(start + n)
        values = array.array("Q", range(start, start + n))
        if sys.byteorder == "little":
            values.byteswap()
        digits = values.tobytes().hex().encode()
        return [digits[k : k + 16] for k in range(0, 16 * n, 16)]


def encode_record(msg: BrokerMessage) -> bytes:
    """The bytes nsqd writes for a message (and sends as a message frame's data)."""
    return _HEADER.pack(msg.timestamp, msg.attempts, msg.id) + msg.body


def decode_record(data: bytes) -> BrokerMessage:
    """Inverse of :func:`encode_record`; raises ``ValueError`` for a short record."""
    if len(data) < HEADER_SIZE:
        raise ValueError(f"message record of {len(data)} bytes is shorter than {HEADER_SIZE}")
    timestamp, attempts, id_ = _HEADER.unpack_from(data)
    return BrokerMessage(id_, data[HEADER_SIZE:], timestamp, attempts)
