"""The in-memory part of a topic's or channel's queue (nsqd's ``memoryMsgChan``).

A queue holds whole publishes as they came (:class:`~nsqviz.servers.nsqd.message.Batch`,
with the part of it not yet taken: a :class:`Run`), and single messages that came back
(requeued, timed out, due after a deferral, read from disk). A message object is made
only when a message leaves the queue, so a publish of 200 messages costs one entry
here, and a topic's batch is shared by all its channels' queues.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from nsqviz.servers.nsqd.message import Batch, BrokerMessage, encode_record

__all__ = ["Entry", "MemoryQueue", "Run", "size_of"]


class Run:
    """Messages ``start`` to ``stop`` of a batch, still waiting in one queue (each queue
    has its own: taking from it moves ``start``)."""

    __slots__ = ("batch", "start", "stop")

    def __init__(self, batch: Batch, start: int, stop: int):
        self.batch = batch
        self.start = start
        self.stop = stop

    def __len__(self) -> int:
        return self.stop - self.start

    def split(self, n: int) -> Run:
        """The first ``n`` messages as a run of their own; this run keeps the rest."""
        head = Run(self.batch, self.start, self.start + n)
        self.start += n
        return head

    def __repr__(self) -> str:
        return f"Run({self.batch!r}, {self.start}, {self.stop})"


Entry = Run | BrokerMessage
"""What a queue holds, in order."""


def size_of(entries: Iterable[Entry]) -> int:
    """How many messages ``entries`` hold."""
    return sum(len(e) if isinstance(e, Run) else 1 for e in entries)


class MemoryQueue:
    """A FIFO of messages, kept as runs of batches and single messages."""

    __slots__ = ("_entries", "_count")

    def __init__(self) -> None:
        self._entries: deque[Entry] = deque()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    # -- putting ----------------------------------------------------------------

    def append(self, msg: BrokerMessage) -> None:
        self._entries.append(msg)
        self._count += 1

    def append_batch(self, batch: Batch, start: int, stop: int) -> None:
        if stop > start:
            self._entries.append(Run(batch, start, stop))
            self._count += stop - start

    def extend(self, entries: Iterable[Entry], *, copy: bool = False) -> None:
        """Entries another queue gave up (:meth:`take`); ``copy``: they stay there too
        (a topic's messages handed to a second channel)."""
        for entry in entries:
            if isinstance(entry, Run):
                self.append_batch(entry.batch, entry.start, entry.stop)
            else:
                self.append(entry.copy() if copy else entry)

    def take_all_from(self, other: MemoryQueue) -> int:
        """Move every message of ``other`` behind ours; returns how many."""
        moved = other._count
        self._entries.extend(other._entries)
        self._count += moved
        other.clear()
        return moved

    # -- taking -----------------------------------------------------------------

    def popleft(self) -> BrokerMessage | None:
        entries = self._entries
        if not entries:
            return None
        self._count -= 1
        head = entries[0]
        if not isinstance(head, Run):
            entries.popleft()
            return head
        (msg,) = head.batch.messages(head.start, head.start + 1)
        head.start += 1
        if head.start == head.stop:
            entries.popleft()
        return msg

    def take(self, n: int) -> list[Entry]:
        """Up to ``n`` messages off the front, in order, as they are held (runs not
        unpacked): to deliver, or for another queue's :meth:`extend`."""
        out: list[Entry] = []
        entries = self._entries
        taken = 0
        while taken < n and entries:
            head = entries[0]
            size = len(head) if isinstance(head, Run) else 1
            if size > n - taken and isinstance(head, Run):
                head = head.split(n - taken)
                size = len(head)
            else:
                entries.popleft()
            out.append(head)
            taken += size
        self._count -= taken
        return out

    def records(self) -> Iterator[bytes]:
        """Every message as a disk record, in order (the queue is left as it is)."""
        for entry in self._entries:
            if isinstance(entry, Run):
                yield from entry.batch.records(entry.start, entry.stop)
            else:
                yield encode_record(entry)

    def clear(self) -> None:
        self._entries.clear()
        self._count = 0
