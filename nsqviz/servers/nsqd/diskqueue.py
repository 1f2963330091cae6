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
(file, offset) only.

Every record is checked when it is read back (:mod:`nsqviz.servers.nsqd.diskrecords`: its
size, the start of its data, the record after it). Bytes that are not a record -- a
flipped byte in a size or an id, garbage in the middle of a file -- are set aside: the
error log names the file, the offset, the length and the first bytes, the bytes are
appended to ``<file>.bad`` beside it, and reading goes on with the next intact record.
go-diskqueue renames the whole file ``.bad`` at the first bad size and skips the rest of
it; here only the bad bytes are lost. Bad data is reported and kept, never delivered.
The metadata is replaced atomically (temporary file, fsync, rename).
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import re
from collections.abc import Iterable

from nsqviz.servers.nsqd.diskrecords import RecordScanner, View
from nsqviz.stream.sizes import INT32

__all__ = ["DiskQueue"]

log = logging.getLogger(__name__)
_RELEASE_EVERY = 1 << 20


class DiskQueue:
    """Append records, read them back in order; what was written survives a kill."""

    def __init__(self, name: str, data_path: str, *, max_bytes_per_file: int,
                 min_msg_size: int, max_msg_size: int, sync_every: int = 2500,
                 record_start: re.Pattern[bytes] | None = None):
        self.name = name
        self.data_path = data_path
        self.max_bytes_per_file = max_bytes_per_file
        self.min_msg_size = min_msg_size
        self.max_msg_size = max_msg_size
        self.sync_every = sync_every
        self.scanner = RecordScanner(min_msg_size, max_msg_size, record_start)
        self.depth = 0  # for /stats; reading never consults it
        self.read_file = self.read_pos = 0
        self.write_file = self.write_pos = 0
        self._fd: int | None = None
        self._view: View = b""  # file _view_num (the read file) mapped
        self._view_num = -1
        self._view_whole = False
        self._released = 0  # the view's pages before this offset are unmapped
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
            with open(path + ".bad", "ab") as bad:
                bad.write(tail)
            f.truncate(end)

    def _walk(self, num: int, start: int) -> tuple[int, int, int]:
        """(records from ``start``, offset after the last one, file size). Bad spans in
        the middle are passed over (reading sets them aside when it gets there); bytes at
        the end that are no record end the walk."""
        try:
            with open(self._file(num), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size <= start:
                    return 0, min(start, size), size
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
                    count, pos = 0, start
                    while pos < size:
                        taken, pos, span = self.scanner.take(view, pos, size, size, None)
                        count += taken
                        if span is None:
                            break
                        if span[1] >= size:
                            return count, span[0], size
                        log.warning("diskqueue(%s): %d bytes at offset %d of %s are not a "
                                    "record; they will be set aside when reading reaches "
                                    "them", self.name, span[1] - span[0], span[0],
                                    self._file(num))
                        pos = span[1]
                    return count, pos, size
        except FileNotFoundError:
            return 0, 0, 0

    # -- writing -------------------------------------------------------------------

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

    def get_many(self, n: int) -> list[bytes]:
        """Up to ``n`` records, in order; fewer once the read position reaches the write
        position. Each is checked first (see the module's docstring): what fails is set
        aside and skipped."""
        out: list[bytes] = []
        while len(out) < n and (self.read_file, self.read_pos) < (self.write_file,
                                                                   self.write_pos):
            last = self.read_file == self.write_file
            view = self._read_view(last)
            if view is None:
                log.error("diskqueue(%s): file %d missing, skipping", self.name,
                          self.read_file)
                self._next_read_file()
                continue
            limit = len(view)
            if last:
                if limit < self.write_pos:
                    log.error("diskqueue(%s): file %d ends at %d, before the write position "
                              "%d", self.name, self.read_file, limit, self.write_pos)
                    self.write_pos = max(limit, self.read_pos)
                    continue
                limit = self.write_pos
            if self.read_pos < limit:
                taken, self.read_pos, span = self.scanner.take(
                    view, self.read_pos, limit, n - len(out), out)
                self.depth = max(0, self.depth - taken)
                self._unsynced += taken
                self._release_read(view)
                if span is not None:
                    self._set_aside(view, *span)
            if not last and self.read_pos >= limit:
                self._next_read_file()  # used up (a file may end before the roll-over size)
        if (self.read_file, self.read_pos) >= (self.write_file, self.write_pos):
            self.depth = 0
        return out

    def _read_view(self, last: bool) -> View | None:
        """The read file's bytes, all of them (the file being written: at least up to
        the write position, if it is that long); None if the file is missing."""
        if self._view_num == self.read_file and (
                self._view_whole or (last and len(self._view) >= self.write_pos)):
            return self._view
        self._close_reader()
        try:
            fd = os.open(self._file(self.read_file), os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            if os.fstat(fd).st_size:
                self._view = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)  # the mapping keeps the file
        self._view_num = self.read_file
        self._view_whole = not last  # no more writes to it: mapped to its end
        self._released = self.read_pos & -mmap.PAGESIZE  # nothing before it touched here
        return self._view

    def _release_read(self, view: View) -> None:
        """Unmap the pages read (a MiB at a time): they stay in the page cache, but a
        mapping keeps every page it touched in the process's resident set, which would
        grow with the file (100 MB by default) while only records of it are held."""
        done = self.read_pos & -mmap.PAGESIZE
        if isinstance(view, mmap.mmap) and done - self._released >= _RELEASE_EVERY:
            view.madvise(mmap.MADV_DONTNEED, self._released, done - self._released)
            self._released = done

    def _set_aside(self, view: View, start: int, end: int) -> None:
        """Bytes of the read file that are not a record: logged, appended to the file's
        ``.bad`` copy, and read past."""
        path = self._file(self.read_file)
        data = view[start:end]
        log.error("diskqueue(%s): %d bytes at offset %d of %s are not a record (%s%s); "
                  "set aside in %s.bad, reading on at offset %d", self.name, len(data),
                  start, path, data[:32].hex(" "), " ..." if len(data) > 32 else "", path,
                  end)
        with open(path + ".bad", "ab") as bad:
            bad.write(data)
        self.read_pos = end

    def _close_reader(self) -> None:
        if isinstance(self._view, mmap.mmap):
            self._view.close()
        self._view = b""
        self._view_num = -1

    def _next_read_file(self) -> None:
        self._close_reader()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._file(self.read_file))
        self.read_file += 1
        self.read_pos = 0

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
