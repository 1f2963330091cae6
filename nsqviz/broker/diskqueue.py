"""A FIFO of byte records on disk, in go-diskqueue's file layout (what nsqd uses).

Files under the data path: ``NAME.diskqueue.000000.dat`` ... holding records
``[4-byte big-endian size][data]``, rolled over after ``max_bytes_per_file``, and
``NAME.diskqueue.meta.dat`` holding ``depth\\nreadFile,readPos\\nwriteFile,writePos\\n``.
Keeping nsqd's layout means a learner can look at a real nsqd data directory and this
one with the same eyes. A file with a corrupt record is renamed ``.bad`` and skipped,
as go-diskqueue does: bad data is reported and kept, never silently reused.
"""

from __future__ import annotations

import contextlib
import logging
import os
from struct import Struct

__all__ = ["DiskQueue"]

log = logging.getLogger(__name__)
_SIZE = Struct(">i")


class DiskQueue:
    """Append records, read them back in order; state survives :meth:`close`/reopen."""

    def __init__(self, name: str, data_path: str, *, max_bytes_per_file: int,
                 min_msg_size: int, max_msg_size: int, sync_every: int = 2500):
        self.name = name
        self.data_path = data_path
        self.max_bytes_per_file = max_bytes_per_file
        self.min_msg_size = min_msg_size
        self.max_msg_size = max_msg_size
        self.sync_every = sync_every
        self.depth = 0
        self.read_file = self.read_pos = 0
        self.write_file = self.write_pos = 0
        self._writer = None
        self._reader = None
        self._reader_num = -1
        self._unsynced = 0
        self._load_meta()

    # -- paths ---------------------------------------------------------------------

    def _file(self, num: int) -> str:
        return os.path.join(self.data_path, f"{self.name}.diskqueue.{num:06d}.dat")

    @property
    def _meta(self) -> str:
        return os.path.join(self.data_path, f"{self.name}.diskqueue.meta.dat")

    def _load_meta(self) -> None:
        try:
            with open(self._meta) as f:
                depth = int(f.readline())
                rf, rp = (int(x) for x in f.readline().split(","))
                wf, wp = (int(x) for x in f.readline().split(","))
        except FileNotFoundError:
            return
        except ValueError as exc:
            log.error("diskqueue(%s): unreadable metadata %s (%s), starting empty",
                      self.name, self._meta, exc)
            return
        self.depth, self.read_file, self.read_pos = depth, rf, rp
        self.write_file, self.write_pos = wf, wp
        # go-diskqueue trusts the file size over a stale write position
        try:
            size = os.path.getsize(self._file(wf))
        except OSError:
            size = wp
        if size > wp:
            log.warning("diskqueue(%s): file %d is longer than its metadata says (%d > %d); "
                        "starting a new file", self.name, wf, size, wp)
            self.write_file, self.write_pos = wf + 1, 0

    # -- writing -------------------------------------------------------------------

    def put(self, data: bytes) -> None:
        n = len(data)
        if n < self.min_msg_size or n > self.max_msg_size:
            raise ValueError(f"invalid record size {n} (allowed {self.min_msg_size}.."
                             f"{self.max_msg_size})")
        if self._writer is None:
            os.makedirs(self.data_path, exist_ok=True)
            self._writer = open(self._file(self.write_file), "ab")  # noqa: SIM115
        self._writer.write(_SIZE.pack(n) + data)
        self.write_pos += 4 + n
        self.depth += 1
        self._unsynced += 1
        if self.write_pos >= self.max_bytes_per_file:
            self._writer.close()
            self._writer = None
            self.write_file += 1
            self.write_pos = 0
            self._save_meta()
        elif self._unsynced >= self.sync_every:
            self.sync()

    # -- reading -------------------------------------------------------------------

    def get(self) -> bytes | None:
        """The next record, or ``None`` when the queue is empty."""
        while self.depth > 0:
            if (self.read_file, self.read_pos) >= (self.write_file, self.write_pos):
                # metadata said there was more; there is not
                self.depth = 0
                break
            if self._writer is not None and self.read_file == self.write_file:
                self._writer.flush()
            if self._reader_num != self.read_file:
                if self._reader is not None:
                    self._reader.close()
                try:
                    self._reader = open(self._file(self.read_file), "rb")  # noqa: SIM115
                except FileNotFoundError:
                    log.error("diskqueue(%s): file %d missing, skipping", self.name,
                              self.read_file)
                    self._next_read_file()
                    continue
                self._reader_num = self.read_file
            self._reader.seek(self.read_pos)
            head = self._reader.read(4)
            if len(head) < 4:
                if self.read_file < self.write_file:
                    self._next_read_file()
                    continue
                log.error("diskqueue(%s): short read at file %d pos %d", self.name,
                          self.read_file, self.read_pos)
                self.depth = 0
                break
            (n,) = _SIZE.unpack(head)
            data = self._reader.read(n) if self.min_msg_size <= n <= self.max_msg_size else b""
            if len(data) != n or not data:
                self._bad_file(f"invalid record size {n} at offset {self.read_pos}")
                continue
            self.read_pos += 4 + n
            self.depth -= 1
            if self.read_file < self.write_file and self.read_pos >= self.max_bytes_per_file:
                self._next_read_file()
            return data
        return None

    def _next_read_file(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
            self._reader_num = -1
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._file(self.read_file))
        self.read_file += 1
        self.read_pos = 0

    def _bad_file(self, reason: str) -> None:
        path = self._file(self.read_file)
        log.error("diskqueue(%s): %s in %s; renaming it to .bad and skipping it",
                  self.name, reason, path)
        if self._reader is not None:
            self._reader.close()
            self._reader = None
            self._reader_num = -1
        if self.read_file == self.write_file:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            self.write_file += 1
            self.write_pos = 0
            self.depth = 0
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, path + ".bad")
        self.read_file += 1
        self.read_pos = 0

    # -- lifecycle -----------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Records were written since the last fsync."""
        return self._unsynced > 0

    def sync(self) -> None:
        if self._writer is not None:
            self._writer.flush()
            os.fsync(self._writer.fileno())
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

    def close(self) -> None:
        self.sync()
        for fh in (self._writer, self._reader):
            if fh is not None:
                fh.close()
        self._writer = self._reader = None
        self._reader_num = -1

    def delete(self) -> None:
        """Remove the queue's files (topic/channel deleted)."""
        for fh in (self._writer, self._reader):
            if fh is not None:
                fh.close()
        self._writer = self._reader = None
        for num in range(self.read_file, self.write_file + 1):
            for path in (self._file(num),):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._meta)
        self.depth = 0
