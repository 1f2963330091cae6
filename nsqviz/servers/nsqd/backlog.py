"""Where a topic's or channel's messages wait: memory first, then its disk queue.

Messages beyond ``--mem-queue-size`` go to a :class:`DiskQueue` (not for
``#ephemeral`` names: nsqd drops those, and so do we). nsqd names a channel's disk
queue ``topic:channel`` (:func:`backend_name`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from nsqviz.servers.nsqd.diskqueue import DiskQueue
from nsqviz.servers.nsqd.message import BrokerMessage, decode_record, encode_record

if TYPE_CHECKING:
    from nsqviz.servers.nsqd.options import Options

__all__ = ["Backlog", "backend_name"]


def backend_name(topic: str, channel: str | None = None) -> str:
    """nsqd names a channel's disk queue ``topic:channel``."""
    return topic if channel is None else f"{topic}:{channel}"


class Backlog:
    """Memory first, then disk: the queue behind a topic or a channel."""

    def __init__(self, name: str, opts: Options, ephemeral: bool):
        self.memory: deque[BrokerMessage] = deque()
        self.limit: int | None = opts.mem_queue_size
        self.disk: DiskQueue | None = None
        self.dropped = 0
        self.on_write: Callable[[OSError | None], None] | None = None
        """Told how each write to the disk queue went (the broker's health, as nsqd's)."""
        if opts.data_path and not ephemeral:
            self.disk = DiskQueue(
                name, opts.data_path,
                max_bytes_per_file=opts.max_bytes_per_file,
                min_msg_size=26, max_msg_size=opts.max_msg_size + 26,
                sync_every=opts.sync_every,
            )
        elif not ephemeral:
            self.limit = None  # no data path: an embedded broker keeps everything in memory

    def __len__(self) -> int:
        return len(self.memory) + (self.disk.depth if self.disk else 0)

    @property
    def backend_depth(self) -> int:
        return self.disk.depth if self.disk else 0

    def put(self, msg: BrokerMessage) -> None:
        if self.limit is None or len(self.memory) < self.limit:
            self.memory.append(msg)
        elif self.disk is not None:
            self._write(self.disk.put, encode_record(msg))
        else:
            self.dropped += 1  # ephemeral: nsqd's dummy backend discards

    def put_many(self, msgs: list[BrokerMessage]) -> None:
        """Memory up to the limit, the rest to disk in one write (done before the
        publish's OK is sent)."""
        if self.limit is None or len(self.memory) + len(msgs) <= self.limit:
            self.memory.extend(msgs)
            return
        room = max(0, self.limit - len(self.memory))
        self.memory.extend(msgs[:room])
        if self.disk is not None:
            self._write(self.disk.put_many, [encode_record(m) for m in msgs[room:]])
        else:
            self.dropped += len(msgs) - room  # ephemeral: nsqd's dummy backend discards

    def put_records(self, records: list[bytes]) -> None:
        """Disk records moved here from another backlog: decoded only as far as they fit
        in memory, the rest written to disk as they are."""
        room = len(records) if self.limit is None else max(0, self.limit - len(self.memory))
        self.memory.extend(decode_record(r) for r in records[:room])
        if room >= len(records):
            return
        if self.disk is not None:
            self._write(self.disk.put_many, records[room:])
        else:
            self.dropped += len(records) - room

    def _write(self, put: Callable[[Any], None], data: Any) -> None:
        """One write to the disk queue, its outcome told to :attr:`on_write`."""
        try:
            put(data)
        except OSError as exc:
            if self.on_write is not None:
                self.on_write(exc)
            raise
        if self.on_write is not None:
            self.on_write(None)

    def take(self, n: int) -> tuple[list[BrokerMessage], list[bytes]]:
        """Up to ``n`` messages off the front: those in memory, then raw disk records
        (not decoded: a move to another backlog writes them back as they are)."""
        memory = self.memory
        msgs = [memory.popleft() for _ in range(min(n, len(memory)))]
        records: list[bytes] = []
        if self.disk is not None:
            get = self.disk.get
            while len(msgs) + len(records) < n:
                data = get()
                if data is None:
                    break
                records.append(data)
        return msgs, records

    def pop_many(self, n: int) -> list[BrokerMessage]:
        """Up to ``n`` messages off the front, in order (memory, then disk)."""
        memory = self.memory
        popleft = memory.popleft
        msgs = [popleft() for _ in range(min(n, len(memory)))]
        if self.disk is not None:
            get = self.disk.get
            while len(msgs) < n and (data := get()) is not None:
                msgs.append(decode_record(data))
        return msgs

    def pop(self) -> BrokerMessage | None:
        if self.memory:
            return self.memory.popleft()
        if self.disk is not None:
            data = self.disk.get()
            if data is not None:
                return decode_record(data)
        return None

    def spill(self, msgs: Iterable[BrokerMessage]) -> None:
        """Write messages to disk regardless of the memory limit (graceful stop)."""
        assert self.disk is not None
        self.disk.put_many(encode_record(m) for m in msgs)

    def close(self) -> None:
        if self.disk is not None:
            self.spill(self.memory)
            self.memory.clear()
            self.disk.close()

    def delete(self) -> None:
        self.memory.clear()
        if self.disk is not None:
            self.disk.delete()
