"""Where a topic's or channel's messages wait: memory first, then its disk queue.

Messages beyond ``--mem-queue-size`` go to a :class:`DiskQueue` (not for
``#ephemeral`` names: nsqd drops those, and so do we). nsqd names a channel's disk
queue ``topic:channel`` (:func:`backend_name`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from nsqviz.servers.nsqd.diskqueue import DiskQueue
from nsqviz.servers.nsqd.memqueue import Entry, MemoryQueue, size_of
from nsqviz.servers.nsqd.message import (
    HEADER_SIZE,
    RECORD_START,
    Batch,
    BrokerMessage,
    decode_record,
    encode_record,
)

if TYPE_CHECKING:
    from nsqviz.servers.nsqd.options import Options

__all__ = ["Backlog", "backend_name"]


def backend_name(topic: str, channel: str | None = None) -> str:
    """nsqd names a channel's disk queue ``topic:channel``."""
    return topic if channel is None else f"{topic}:{channel}"


class Backlog:
    """Memory first, then disk: the queue behind a topic or a channel."""

    def __init__(self, name: str, opts: Options, ephemeral: bool):
        self.memory = MemoryQueue()
        self.limit: int | None = opts.mem_queue_size
        self.disk: DiskQueue | None = None
        self.dropped = 0
        self.on_write: Callable[[OSError | None], None] | None = None
        """Told how each write to the disk queue went (the broker's health, as nsqd's)."""
        if opts.data_path and not ephemeral:
            self.disk = DiskQueue(
                name, opts.data_path,
                max_bytes_per_file=opts.max_bytes_per_file,
                min_msg_size=HEADER_SIZE, max_msg_size=opts.max_msg_size + HEADER_SIZE,
                sync_every=opts.sync_every, record_start=RECORD_START,
            )
        elif not ephemeral:
            self.limit = None  # no data path: an embedded broker keeps everything in memory

    def __len__(self) -> int:
        return len(self.memory) + (self.disk.depth if self.disk else 0)

    @property
    def backend_depth(self) -> int:
        return self.disk.depth if self.disk else 0

    def _room(self, n: int) -> int:
        """How many of ``n`` more messages fit in memory."""
        if self.limit is None:
            return n
        return min(n, max(0, self.limit - len(self.memory)))

    def put_batch(self, batch: Batch) -> None:
        """A publish: memory up to the limit, the rest to disk in one write (done before
        the publish's OK is sent)."""
        n = len(batch)
        room = self._room(n)
        self.memory.append_batch(batch, 0, room)
        if room < n:
            if self.disk is not None:
                self._write(batch.records(room, n))
            else:
                self.dropped += n - room  # ephemeral: nsqd's dummy backend discards

    def put_entries(self, entries: list[Entry], *, copy: bool = False) -> None:
        """What another backlog's memory gave up (:meth:`take`): memory up to the limit,
        the rest to disk. ``copy``: the entries are kept there too."""
        count = size_of(entries)
        if self._room(count) == count:
            self.memory.extend(entries, copy=copy)
            return
        spare = MemoryQueue()
        spare.extend(entries, copy=copy)
        self.memory.extend(spare.take(self._room(count)))
        if self.disk is not None:
            self._write(spare.records())
        else:
            self.dropped += len(spare)

    def put_records(self, records: list[bytes]) -> None:
        """Disk records moved here from another backlog: decoded only as far as they fit
        in memory, the rest written to disk as they are."""
        room = self._room(len(records))
        for r in records[:room]:
            self.memory.append(decode_record(r))
        if room < len(records):
            if self.disk is not None:
                self._write(records[room:])
            else:
                self.dropped += len(records) - room

    def _write(self, records: Iterable[bytes]) -> None:
        """One write to the disk queue, its outcome told to :attr:`on_write`."""
        assert self.disk is not None
        try:
            self.disk.put_many(records)
        except OSError as exc:
            if self.on_write is not None:
                self.on_write(exc)
            raise
        if self.on_write is not None:
            self.on_write(None)

    def take(self, n: int) -> tuple[list[Entry], list[bytes]]:
        """Up to ``n`` messages off the front: those in memory as they are held, then raw
        disk records (not decoded: a move to another backlog writes them back as they
        are)."""
        entries = self.memory.take(n)
        records = self.disk.get_many(n - size_of(entries)) if self.disk is not None else []
        return entries, records

    def take_entries(self, n: int) -> tuple[list[Entry], int]:
        """Up to ``n`` messages off the front, in order (memory, then disk), as queue
        entries -- runs of batches as they are held, disk records as messages -- and
        how many messages they are."""
        taken = min(n, len(self.memory))
        entries = self.memory.take(taken)
        if self.disk is not None and taken < n:
            records = self.disk.get_many(n - taken)
            entries += map(decode_record, records)
            taken += len(records)
        return entries, taken

    def pop(self) -> BrokerMessage | None:
        msg = self.memory.popleft()
        if msg is None and self.disk is not None:
            records = self.disk.get_many(1)
            if records:
                return decode_record(records[0])
        return msg

    def spill(self, msgs: Iterable[BrokerMessage]) -> None:
        """Write messages to disk regardless of the memory limit (graceful stop)."""
        assert self.disk is not None
        self.disk.put_many(encode_record(m) for m in msgs)

    def close(self) -> None:
        if self.disk is not None:
            self.disk.put_many(self.memory.records())
            self.memory.clear()
            self.disk.close()

    def delete(self) -> None:
        self.memory.clear()
        if self.disk is not None:
            self.disk.delete()
