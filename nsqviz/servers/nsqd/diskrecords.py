"""Where the records of a disk queue file are, and which bytes are not records.

A disk queue file is records ``[4-byte big-endian size][data]`` end to end, with
nothing to mark where one starts but the size of the one before -- the layout nsqd's
go-diskqueue writes, kept so that nsqd and this broker read each other's files. It has
no room for a checksum, so a record is checked by what can be checked: its size is
within the queue's bounds and fits in what was written, its data starts as the queue's
records must (a message record: 10 bytes of timestamp and attempts, then a 16-hex-digit
id; :data:`nsqviz.servers.nsqd.message.RECORD_START`), and the record after it is one too.

That last check is what finds a corrupted size: a size changed to another plausible
value makes the record after it start in the wrong place. When a check fails, the
scanner looks for the next point from which :data:`RESYNC_RECORDS` records in a row pass
every check (or run to the end of what was written) and calls the bytes before it a
*bad span*: the owner sets them aside and reads on from there. go-diskqueue, meeting a
bad size, gives up on the rest of the file; here only the bad bytes are lost.

What no check can see is a change inside a record's body that keeps its size and id:
such a record is delivered as it is (nsqd does the same).
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterable
from dataclasses import dataclass

from nsqviz.stream.sizes import INT32

__all__ = ["RESYNC_RECORDS", "RecordScanner", "View"]


View = bytes | mmap.mmap
"""A file's bytes, as the scanner reads them."""

RESYNC_RECORDS = 3
"""Records in a row that make a resynchronisation point (fewer if the data ends first)."""


@dataclass(frozen=True)
class RecordScanner:
    """The checks a disk queue's records must pass, and the walk that applies them.

    ``view`` arguments are a file's bytes (an mmap); ``limit`` is where the written data
    ends (the write position in the file being written, else the file's size).
    """

    min_size: int
    max_size: int
    start: re.Pattern[bytes] | None = None  # what every record's data must begin with

    def record_at(self, view: View, pos: int, limit: int) -> int:
        """Where the record at ``pos`` ends, or -1 if none starts there."""
        if pos + 4 > limit:
            return -1
        n: int = INT32.unpack_from(view, pos)[0]
        end = pos + 4 + n
        if n < self.min_size or n > self.max_size or end > limit:
            return -1
        if self.start is not None and self.start.match(view, pos + 4, end) is None:
            return -1
        return end

    def take(self, view: View, pos: int, limit: int, k: int,
             out: list[bytes] | None) -> tuple[int, int, tuple[int, int] | None]:
        """Up to ``k`` records from ``pos``, each taken only if the one after it checks
        out too (or it ends at ``limit``); their data appended to ``out`` (None: only
        counted). Returns (records taken, where the next one starts, the bad span met
        there or None)."""
        end = self.record_at(view, pos, limit)
        if end < 0:
            return 0, pos, self.bad_span(view, pos, pos, limit)
        unpack = INT32.unpack_from
        lo, hi = self.min_size, self.max_size
        match = self.start.match if self.start is not None else None
        count = 0
        while True:
            # the record pos..end checks out; so must the one after it
            if end != limit:
                after = -1
                if end + 4 <= limit:
                    (n,) = unpack(view, end)
                    after = end + 4 + n
                    if (n < lo or n > hi or after > limit
                            or (match is not None and match(view, end + 4, after) is None)):
                        after = -1
                if after < 0:
                    span = self.bad_span(view, pos, end, limit)
                    if span[0] == pos:  # its size was wrong: a record starts inside it
                        return count, pos, span
                    if out is not None:
                        out.append(view[pos + 4 : end])
                    return count + 1, end, span
            else:
                after = limit
            if out is not None:
                out.append(view[pos + 4 : end])
            count += 1
            pos = end
            if pos == limit or count == k:
                return count, pos, None
            end = after

    def bad_span(self, view: View, pos: int, end: int, limit: int) -> tuple[int, int]:
        """The bytes to set aside when the record at ``pos`` (ending at ``end``; ``end ==
        pos``: no record starts at ``pos``) is not followed by a record: up to the next
        point from which records run on, from ``pos`` if that point is inside the
        record (its size was wrong), else from ``end``. To ``limit`` if none is found."""
        resync = self._next_start(view, pos + 1, limit)
        return (pos, resync) if resync < end else (end, resync)

    def _next_start(self, view: View, pos: int, limit: int) -> int:
        candidates: Iterable[int] = range(pos, limit)
        if self.start is not None:
            # a record start needs its data's start pattern 4 bytes on: look for that
            found = _lookahead(self.start).finditer(view, pos, limit)
            candidates = (m.start() for m in found)
        for q in candidates:
            if self._runs_from(view, q, limit):
                return q
        return limit

    def _runs_from(self, view: View, pos: int, limit: int) -> bool:
        for _ in range(RESYNC_RECORDS):
            pos = self.record_at(view, pos, limit)
            if pos < 0:
                return False
            if pos == limit:
                return True
        return True


_LOOKAHEADS: dict[re.Pattern[bytes], re.Pattern[bytes]] = {}


def _lookahead(start: re.Pattern[bytes]) -> re.Pattern[bytes]:
    """Positions 4 bytes before a match of ``start``: where a record with such data could
    begin (a 4-byte size, then the data)."""
    found = _LOOKAHEADS.get(start)
    if found is None:
        found = _LOOKAHEADS[start] = re.compile(rb"(?=[\x00-\xff]{4}(?:" + start.pattern + rb"))",
                                                start.flags)
    return found
