"""A FIFO of byte records on disk, in go-diskqueue's file layout (what nsqd uses).

Files under the data path: ``NAME.diskqueue.000000.dat`` ... holding records
``[4-byte big-endian size][data]``, rolled over once ``max_bytes_per_file`` is reached,
and ``NAME.diskqueue.meta.dat`` holding ``depth\\nreadFile,readPos\\nwriteFile,writePos\\n``.
Keeping nsqd's layout means a learner can look at a real nsqd data directory and this
one with the same eyes.

What an acknowledged record survives, and how:

* **the broker process being killed** (SIGKILL, OOM): :meth:`put_many` hands every
  record of the call to the operating system with ``os.write`` before it returns, so
  a publish's ``OK``, which is sent after it, never precedes its bytes. One write per
  call, not per record: ``benchmarks/diskqueue_write.py`` measures both.
* **a power cut**: only what was fsynced -- every ``sync_every`` records, on every file
  roll, and every ``--sync-timeout`` through the broker's :meth:`sync` calls (nsqd's
  ``--sync-every``/``--sync-timeout``, same defaults).

On opening, the metadata says where reading resumes; where writing resumes is what the
files hold: every file from the read position on is walked to its last complete
record, so records written after the last metadata save are found, and the depth is
counted, not trusted. A torn record at the end (a write cut short) is cut off with a
warning naming the file and offset. Reading follows the read and write positions
(file, offset) only. A file with a corrupt record in the middle is renamed ``.bad``
and skipped, as go-diskqueue does: bad data is reported and kept, never reused. The
metadata is replaced atomically (temporary file, fsync, rename).
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import re
from collections.abc import Iterable
from typing import BinaryIO

from nsqviz.stream.sizes import INT32

__all__ = ["DiskQueue"]

log = logging.getLogger(__name__)


class DiskQueue:
    """Append records, read them back in order; what was written survives a kill."""

    def __init__(self, name: str, data_path: str, *, max_bytes_per_file: int,
                 min_msg_size: int, max_msg_size: int, sync_every: int = 2500):
        self.name = name
        self.data_path = data_path
        self.max_bytes_per_file = max_bytes_per_file
        self.min_msg_size = min_msg_size
        self.max_msg_size = max_msg_size
        self.sync_every = sync_every
        self.depth = 0  # for /stats; reading never consults it
        self.read_file = self.read_pos = 0
        self.write_file = self.write_pos = 0
        self._fd: int | None = None
        self._reader: BinaryIO | None = None
        self._reader_num = -1
        self._unsynced = 0
        self._recover()

    # -- paths ---------------------------------------------------------------------

    def _file(self, num: int) -> str:
        return os.path.join(self.data_path, f"{self.name}.diskqueue.{num:06d}.dat")

    @property
    def _meta(self) -> str:
        return os.path.join(self.data_path, f"{self.name}.diskqueue.meta.dat")

    def _file_numbers(self) -> list[int]:
        pattern = re.compile(re.escape(self.name) + r"\.diskqueue\.(\d{6})\.dat")
        try:
            names = os.listdir(self.data_path)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for n in names if (m := pattern.fullmatch(n)))

    # -- opening -------------------------------------------------------------------

    def _read_meta(self) -> tuple[int, int, int] | None:
        """(depth, read file, read position) from the metadata, if it can be read."""
        try:
            with open(self._meta) as f:
                depth = int(f.readline())
                rf, rp = (int(x) for x in f.readline().split(","))
        except FileNotFoundError:
            return None
        except ValueError as exc:
            log.error("diskqueue(%s): unreadable metadata %s (%s); reading from the "
                      "oldest file", self.name, self._meta, exc)
            return None
        return depth, rf, rp

    def _recover(self) -> None:
        meta = self._read_meta()
        nums = self._file_numbers()
        if meta is not None:
            _, self.read_file, self.read_pos = meta
        elif nums:
            self.read_file = nums[0]
        later = [n for n in nums if n >= self.read_file]
        if not later or later[0] != self.read_file:
            # the read file was used up and removed before the metadata said so
            self.read_file, self.read_pos = (later[0] if later else self.read_file), 0
        self.write_file, self.write_pos = self.read_file, self.read_pos
        depth = 0
        for num in later:
            start = self.read_pos if num == self.read_file else 0
            count, end, size = self._walk(num, start)
            if end < start:
                log.error("diskqueue(%s): read position %d is past the end of %s (%d "
                          "bytes); reading on from its end", self.name, start,
                          self._file(num), size)
                self.read_pos = end
            depth += count
            self.write_file, self.write_pos = num, end
            if num == later[-1] and end < size:
                self._cut_tail(num, end, size)
        self.depth = depth
        if meta is not None and meta[0] != depth:
            log.info("diskqueue(%s): %d records on disk (metadata said %d)", self.name,
                     depth, meta[0])
        if self.write_pos >= self.max_bytes_per_file:
            self.write_file, self.write_pos = self.write_file + 1, 0

    def _cut_tail(self, num: int, end: int, size: int) -> None:
        """Cut off what follows the last complete record of the last file (a write that
        was cut short), keeping a copy of those bytes beside it as ``.bad``."""
        path = self._file(num)
        log.warning("diskqueue(%s): %s ends with %d bytes of a torn record at offset %d; "
                    "cutting them off (copy in %s.bad)", self.name, path, size - end, end,
                    path)
        with open(path, "r+b") as f:
            f.seek(end)
            tail = f.read()
            with open(path + ".bad", "wb") as bad:
                bad.write(tail)
            f.truncate(end)

    def _walk(self, num: int, start: int) -> tuple[int, int, int]:
        """(complete records from ``start``, offset after the last one, file size)."""
        try:
            with open(self._file(num), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size <= start:
                    return 0, min(start, size), size
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
                    return (*self._records_in(view, start, size), size)
        except FileNotFoundError:
            return 0, 0, 0

    def _records_in(self, view: mmap.mmap, pos: int, size: int) -> tuple[int, int]:
        count = 0
        unpack, lo, hi = INT32.unpack_from, self.min_msg_size, self.max_msg_size
        while pos + 4 <= size:
            (n,) = unpack(view, pos)
            if n < lo or n > hi or pos + 4 + n > size:
                break
            pos += 4 + n
            count += 1
        return count, pos

    # -- writing -------------------------------------------------------------------

    def put(self, data: bytes) -> None:
        """Append one record; its bytes are with the OS when this returns."""
        self.put_many((data,))

    def put_many(self, records: Iterable[bytes]) -> None:
        """Append records (all checked first); their bytes are with the OS on return.

        Raises ``ValueError`` for a record of a size the queue may not hold (nothing is
        written then) and ``OSError`` when the file cannot be written (what was written
        of this call is cut off again)."""
        records = list(records)
        for data in records:
            n = len(data)
            if n < self.min_msg_size or n > self.max_msg_size:
                raise ValueError(f"invalid record size {n} (allowed {self.min_msg_size}.."
                                 f"{self.max_msg_size})")
        buf = bytearray()
        count = 0
        for data in records:
            buf += INT32.pack(len(data))
            buf += data
            count += 1
            if self.write_pos + len(buf) >= self.max_bytes_per_file:
                self._write(buf, count)  # this file is full: roll over after it
                buf, count = bytearray(), 0
        if buf:
            self._write(buf, count)

    def _write(self, buf: bytearray, count: int) -> None:
        if self._fd is None:
            os.makedirs(self.data_path, exist_ok=True)
            self._fd = os.open(self._file(self.write_file),
                               os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        view = memoryview(buf)
        done = 0
        try:
            while done < len(view):
                done += os.write(self._fd, view[done:])
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self.write_pos)
            raise
        self.write_pos += len(buf)
        self.depth += count
        self._unsynced += count
        if self.write_pos >= self.max_bytes_per_file:
            self.sync()
            os.close(self._fd)
            self._fd = None
            self.write_file += 1
            self.write_pos = 0
            self._save_meta()
        elif self._unsynced >= self.sync_every:
            self.sync()

    # -- reading -------------------------------------------------------------------

    def get(self) -> bytes | None:
        """The next record, or ``None`` when the read position has reached the write
        position."""
        while (self.read_file, self.read_pos) < (self.write_file, self.write_pos):
            if self._reader_num != self.read_file:
                self._close_reader()
                try:
                    self._reader = open(self._file(self.read_file), "rb")  # noqa: SIM115
                except FileNotFoundError:
                    log.error("diskqueue(%s): file %d missing, skipping", self.name,
                              self.read_file)
                    self._next_read_file()
                    continue
                self._reader_num = self.read_file
            reader = self._reader
            assert reader is not None  # opened above for this file
            reader.seek(self.read_pos)
            head = reader.read(4)
            if len(head) < 4:
                if self.read_file < self.write_file:
                    self._next_read_file()  # a file that ended before the roll-over size
                    continue
                log.error("diskqueue(%s): file %d ends at %d, before the write position "
                          "%d", self.name, self.read_file, self.read_pos, self.write_pos)
                self.write_pos = self.read_pos
                break
            (n,) = INT32.unpack(head)
            data = reader.read(n) if self.min_msg_size <= n <= self.max_msg_size else b""
            if len(data) != n or not data:
                self._bad_file(f"invalid record size {n} at offset {self.read_pos}")
                continue
            self.read_pos += 4 + n
            self.depth = max(0, self.depth - 1)
            self._unsynced += 1
            if self.read_file < self.write_file and self.read_pos >= self.max_bytes_per_file:
                self._next_read_file()
            return data
        return None

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self._reader = None
        self._reader_num = -1

    def _next_read_file(self) -> None:
        self._close_reader()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._file(self.read_file))
        self.read_file += 1
        self.read_pos = 0

    def _bad_file(self, reason: str) -> None:
        path = self._file(self.read_file)
        log.error("diskqueue(%s): %s in %s; renaming it to .bad and skipping it",
                  self.name, reason, path)
        self._close_reader()
        if self.read_file == self.write_file:
            self._close_writer()
            self.write_file += 1
            self.write_pos = 0
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, path + ".bad")
        self.read_file += 1
        self.read_pos = 0
        self.depth = sum(self._walk(num, 0)[0]
                         for num in range(self.read_file, self.write_file + 1))

    # -- lifecycle -----------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Records were written or read since the last sync."""
        return self._unsynced > 0

    def sync(self) -> None:
        """fsync the file being written and save the metadata (nsqd's sync)."""
        if self._fd is not None:
            os.fsync(self._fd)
        self._unsynced = 0
        self._save_meta()

    def _save_meta(self) -> None:
        os.makedirs(self.data_path, exist_ok=True)
        tmp = f"{self._meta}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{self.depth}\n{self.read_file},{self.read_pos}\n"
                    f"{self.write_file},{self.write_pos}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._meta)

    def _close_writer(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None

    def close(self) -> None:
        self.sync()
        self._close_writer()
        self._close_reader()

    def delete(self) -> None:
        """Remove the queue's files (topic/channel deleted)."""
        self._close_writer()
        self._close_reader()
        for num in range(self.read_file, self.write_file + 1):
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._file(num))
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._meta)
        self.depth = 0
