"""A message inside the broker, a publish's messages packed as one batch, ids, and the
on-disk record.

A publish (PUB, MPUB, HTTP ``/pub``, ``/mpub``) becomes one :class:`Batch`: the bodies
as the command carried them, the first of their consecutive ids (whose hex digits are
formatted once, for the whole batch, when the first of them leaves a queue) and their
timestamp. Queues hold the batch, not a message object
per message. Part of a batch handed to a client is one :class:`Delivery`, which stands
for each of its messages in the client's in-flight table; a :class:`BrokerMessage` is
made only for a message with a life of its own -- requeued, timed out, touched,
deferred, read back from disk.

nsqd stores a message on disk in the same layout it sends in a ``FrameTypeMessage``
(``[timestamp:int64][attempts:uint16][id:16][body]``), so a disk record *is* the data
of a message frame. :func:`encode_record`/:func:`decode_record` are the struct fast
path for that layout; ``tests/servers/nsqd/test_units.py`` checks them byte for byte
against :data:`nsqviz.nsq.grammar_frames.Message`, the one definition of the layout.
:data:`RECORD_START` is what every record must start with: a disk record is checked
against it when it is read back (:mod:`nsqviz.servers.nsqd.diskqueue`), so that every message
the broker holds has an id a message frame can carry -- ours are generated, a disk
record's is checked.
"""

from __future__ import annotations

import binascii
import functools
import re
import time
from collections.abc import Sequence
from itertools import repeat
from struct import Struct

__all__ = [
    "HEADER_SIZE",
    "RECORD_START",
    "Batch",
    "BrokerMessage",
    "Delivery",
    "IDGenerator",
    "InFlight",
    "decode_record",
    "encode_record",
    "flying",
    "id_digits",
]

_HEADER = Struct(">qH16s")
HEADER_SIZE = _HEADER.size  # 26

RECORD_START = re.compile(rb"[\x00-\xff]{10}[0-9a-fA-F]{16}")
"""A disk record's first 26 bytes: timestamp and attempts (any value), then the message
id -- 16 hex digits, as a message frame's id must be (``fastpath.encode_messages``)."""


_IDS_AT_ONCE = 256


@functools.cache
def _ids_struct(n: int) -> Struct:
    """``n`` ids, end to end (n <= _IDS_AT_ONCE)."""
    return Struct("16s" * n)


@functools.cache
def _id_steps(n: int) -> tuple[int, int]:
    """For ``n`` consecutive 64-bit ids as one big-endian integer of ``n`` 64-bit limbs,
    the first id in the top limb: the number with a 1 in every limb, and the one with
    each limb's distance from the first (0 at the top, ``n - 1`` at the bottom). ``first
    * ones + steps`` is then every id at once (no limb carries: ids stay below 2**64)."""
    ones = sum(1 << (64 * k) for k in range(n))
    steps = sum((n - 1 - k) << (64 * k) for k in range(n))
    return ones, steps


def id_digits(first: int, n: int) -> bytes:
    """The hex digits of the ``n`` ids counting up from ``first``, end to end: one big
    integer multiply and one ``to_bytes`` per :data:`_IDS_AT_ONCE` ids, not a Python int
    per id (an MPUB of 200 paid ~35 us for building 200 of them)."""
    parts = []
    while n > 0:
        k = min(n, _IDS_AT_ONCE)
        ones, steps = _id_steps(k)
        parts.append((first * ones + steps).to_bytes(8 * k, "big"))
        first += k
        n -= k
    return binascii.hexlify(b"".join(parts))


class BrokerMessage:
    """One message of one channel, once it has left the queue (nsqd copies a topic's
    message for each channel).

    ``deadline`` (monotonic seconds) is set while it is in flight.
    """

    __slots__ = ("id", "body", "timestamp", "attempts", "deadline")

    def __init__(self, id: bytes, body: bytes, timestamp: int, attempts: int = 0):
        self.id = id
        self.body = body
        self.timestamp = timestamp
        self.attempts = attempts
        self.deadline = 0.0

    def copy(self) -> BrokerMessage:
        return BrokerMessage(self.id, self.body, self.timestamp, self.attempts)

    def __repr__(self) -> str:
        return f"BrokerMessage({self.id!r}, attempts={self.attempts}, {len(self.body)} bytes)"


class Batch:
    """The messages of one publish, as one object while they wait in queues.

    Immutable, so every channel of a topic shares it (each queue keeps its own place in
    it); nothing is made per message until a message leaves a queue
    (:meth:`messages`, :meth:`records`).
    """

    __slots__ = ("bodies", "first", "_digits", "timestamp", "size")

    def __init__(self, bodies: Sequence[bytes], first: int, timestamp: int):
        """``first``: the first id's 64-bit value; the others count up from it."""
        self.bodies = bodies
        self.first = first
        self._digits: bytes | None = None  # formatted when an id is first asked for
        self.timestamp = timestamp
        self.size = sum(map(len, bodies))  # body bytes, for /stats

    def __len__(self) -> int:
        return len(self.bodies)

    @property
    def digits(self) -> bytes:
        """The ids' hex digits, end to end: formatted once, when the first of them is
        delivered or written to disk (a backlog that is never read costs none)."""
        if self._digits is None:
            self._digits = id_digits(self.first, len(self.bodies))
        return self._digits

    def ids(self, start: int, stop: int) -> tuple[bytes, ...]:
        """The ids of messages ``start`` to ``stop``, cut from the digits by ``struct``
        (no loop in Python: a delivery makes one per message)."""
        digits = self.digits
        ids: tuple[bytes, ...] = ()
        while stop - start > _IDS_AT_ONCE:
            ids += _ids_struct(_IDS_AT_ONCE).unpack_from(digits, 16 * start)
            start += _IDS_AT_ONCE
        return ids + _ids_struct(stop - start).unpack_from(digits, 16 * start)

    def messages(self, start: int, stop: int) -> list[BrokerMessage]:
        """Messages ``start`` to ``stop`` (never delivered: attempts 0)."""
        return list(map(BrokerMessage, self.ids(start, stop), self.bodies[start:stop],
                        repeat(self.timestamp)))

    def records(self, start: int, stop: int) -> list[bytes]:
        """Messages ``start`` to ``stop`` as disk records."""
        pack = _HEADER.pack
        ts = self.timestamp
        return [pack(ts, 0, mid) + body
                for mid, body in zip(self.ids(start, stop), self.bodies[start:stop], strict=True)]

    def __repr__(self) -> str:
        return f"Batch({len(self)} messages from {self.first:016x})"


class IDGenerator:
    """16-hex-digit message ids, unique within a process and across restarts.

    nsqd derives ids from a 64-bit value (time, worker id, sequence). Here the 64-bit
    value starts at the current time in nanoseconds and counts up, so ids made after a
    restart do not collide with ids of messages reloaded from disk (it stays below 2**64
    for centuries).
    """

    def __init__(self) -> None:
        self._next = time.time_ns()

    def batch(self, bodies: Sequence[bytes]) -> Batch:
        """A publish's messages: the next ``len(bodies)`` ids, and the time of now."""
        first = self._next
        self._next = first + len(bodies)
        return Batch(bodies, first, time.time_ns())


class Delivery:
    """Messages of one batch handed to a client together for the first time: until each
    is finished, this stands for it in the client's in-flight table (no message object
    is made for a message that is simply FINed). It keeps only its own messages' bodies,
    not the whole batch's, so what a client leaves in flight holds no more than the
    deliveries it came in.
    """

    __slots__ = ("bodies", "ids", "timestamp", "deadline")
    attempts = 1

    def __init__(self, batch: Batch, start: int, stop: int, deadline: float):
        self.bodies = batch.bodies[start:stop]
        self.ids = batch.ids(start, stop)
        self.timestamp = batch.timestamp
        self.deadline = deadline

    def message(self, msg_id: bytes) -> BrokerMessage:
        """The message with this id, as an object of its own (it is requeued, timed out
        or touched). A batch's ids count up, so its place is the difference."""
        index = int(msg_id, 16) - int(self.ids[0], 16)
        msg = BrokerMessage(msg_id, self.bodies[index], self.timestamp, self.attempts)
        msg.deadline = self.deadline
        return msg


InFlight = BrokerMessage | Delivery
"""What stands for a message in a client's in-flight table."""


def flying(entry: InFlight, msg_id: bytes) -> BrokerMessage:
    """The in-flight message ``msg_id``, as an object of its own."""
    return entry if isinstance(entry, BrokerMessage) else entry.message(msg_id)


def encode_record(msg: BrokerMessage) -> bytes:
    """The bytes nsqd writes for a message (and sends as a message frame's data)."""
    return _HEADER.pack(msg.timestamp, msg.attempts, msg.id) + msg.body


def decode_record(data: bytes) -> BrokerMessage:
    """Inverse of :func:`encode_record`; raises ``ValueError`` for a short record."""
    if len(data) < HEADER_SIZE:
        raise ValueError(f"message record of {len(data)} bytes is shorter than {HEADER_SIZE}")
    timestamp, attempts, id_ = _HEADER.unpack_from(data)
    return BrokerMessage(id_, data[HEADER_SIZE:], timestamp, attempts)
