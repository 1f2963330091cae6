"""Incremental reassembly of frames from an ordered byte stream, with provenance.

TCP delivers a byte stream, not messages: one ``recv()`` (or one captured segment) may
hold half a frame, or three frames and the start of a fourth -- the sticky-packet
(粘包) problem. A :class:`Reassembler` takes chunks in arrival order, cuts complete
frames out with a protocol's :class:`FramingRule`, and says for every frame which
chunks (and which byte range of each) it came from.

It is protocol-independent: NSQ's rules live in :mod:`nsqviz.stream.framing`; TubeMQ
brings its own. It never silently drops bytes: undecodable input becomes a
:class:`Garbage` event with its offset and reason, and bytes left at the end of the
stream become a :class:`Truncated` event.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeAlias

STALL_LIMIT = 1 << 20
"""Garbage waiting for a resync point is handed on once it exceeds this many bytes
(rules with ``resync_lookahead``), so a stream that never frames holds bounded memory."""

__all__ = [
    "Buffer",
    "RawFrame",
    "FramingError",
    "FramingRule",
    "Garbage",
    "Reassembler",
    "Source",
    "StreamEvent",
    "Truncated",
]


Buffer: TypeAlias = bytes | bytearray
"""What a rule's ``resync`` searches: ``bytes``, or a ``bytearray`` while garbage grows in
place waiting for a resync point. Frames are only ever measured and cut from ``bytes``."""


class FramingError(Exception):
    """Raised by a framing rule when the bytes at a frame boundary cannot start a frame."""

    def __init__(self, reason: str, *, code: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.code = code  # the protocol's own name for this error, where it has one


class FramingRule(Protocol):
    """How a protocol cuts a byte stream into frames.

    ``measure(buf, pos)`` looks at ``buf[pos:]`` and returns the length of the frame
    starting at ``pos``, ``None`` if more bytes are needed to tell, or raises
    :class:`FramingError`. ``resync(buf, pos)`` returns the offset of the next position
    at or after ``pos`` where a frame plausibly starts, ``None`` if it cannot find one
    yet, or -1 if the stream can never be framed again.
    A rule may keep state (e.g. "the magic comes first"); ``measure`` is called exactly
    once per frame that is then emitted, in stream order.

    A rule may also say ``resync_lookahead = k``: once ``resync(buf, pos)`` has found
    nothing, ``resync(longer, len(buf) - k + 1)`` on the buffer grown by more bytes finds
    what ``resync(longer, pos)`` would. The reassembler then resumes the search there,
    instead of scanning the whole stalled stretch again for every chunk (quadratic), and
    hands garbage on as it grows past :data:`STALL_LIMIT`.

    A rule that can only find a frame's end by walking it (TubeMQ's blocks) may also
    have ``follow(chunk) -> int``: once ``measure`` has said ``None``, each further chunk
    is kept unjoined and passed to ``follow``, which continues the walk and returns 0
    when ``measure`` can answer, so a long frame is joined once, not once per chunk.
    """

    name: str

    def measure(self, buf: bytes, pos: int) -> int | None: ...

    def resync(self, buf: Buffer, pos: int) -> int | None: ...


@dataclass(frozen=True, slots=True)
class Source:
    """Bytes ``[start, end)`` of chunk number ``segment`` belong to a frame."""

    segment: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class RawFrame:
    """One complete frame: its bytes, where it starts in the stream, where it came from."""

    data: bytes
    offset: int
    sources: tuple[Source, ...] = ()

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


# A frozen dataclass's __init__ sets each field through object.__setattr__, three times the
# cost of setting its slots directly; a frame and its source are made once per frame of
# every capture, so the reassembler makes them here (same objects: equal, hashable, frozen).
_new = object.__new__


def _setters(cls: type, *names: str) -> tuple[Callable[[object, object], None], ...]:
    """The setters of the slots ``names`` of ``cls`` (its fields' member descriptors)."""
    return tuple(vars(cls)[name].__set__ for name in names)


_frame_data, _frame_offset, _frame_sources = _setters(RawFrame, "data", "offset", "sources")
_source_segment, _source_start, _source_end = _setters(Source, "segment", "start", "end")


def _raw_frame(data: bytes, offset: int, sources: tuple[Source, ...]) -> RawFrame:
    """``RawFrame(data, offset, sources)``, made by setting its slots."""
    frame: RawFrame = _new(RawFrame)
    _frame_data(frame, data)
    _frame_offset(frame, offset)
    _frame_sources(frame, sources)
    return frame


def _source(segment: int, start: int, end: int) -> Source:
    """``Source(segment, start, end)``, made by setting its slots."""
    source: Source = _new(Source)
    _source_segment(source, segment)
    _source_start(source, start)
    _source_end(source, end)
    return source


@dataclass(frozen=True, slots=True)
class Garbage:
    """Bytes that cannot be framed. ``resynced`` says whether framing resumes after them;
    ``code`` is the protocol's name for the error (e.g. nsqd's ``E_BAD_MESSAGE``), if any."""

    offset: int
    data: bytes
    reason: str
    resynced: bool
    sources: tuple[Source, ...] = ()
    code: str = ""
    continued: bool = False
    """The rest of undecodable bytes whose start an earlier :class:`Garbage` reported."""


@dataclass(frozen=True, slots=True)
class Truncated:
    """The stream ended inside a frame: ``data`` is what arrived of it."""

    offset: int
    data: bytes
    expected: int | None
    sources: tuple[Source, ...] = ()


StreamEvent = RawFrame | Garbage | Truncated


class Reassembler:
    """Cuts frames out of a stream fed in chunks.

    ``feed(chunk, segment=...)`` returns the events completed by that chunk; ``finish()``
    reports what is left. Stream offsets count from the first byte ever fed. With
    ``provenance=False`` the per-frame :class:`Source` tuples are not computed, which is
    what hot loops that only need the frames (the codec under load) ask for. With
    ``report_at_start`` (and a rule with a ``resync_lookahead``) a stretch of garbage is
    handed on as soon as the rule refuses it -- where the refused bytes start, as the
    server answers them -- and the rest of it later, as ``continued`` garbage.
    """

    def __init__(self, rule: FramingRule, *, provenance: bool = True, resync: bool = True,
                 report_at_start: bool = False):
        self.rule = rule
        self.provenance = provenance
        self.resync = resync
        self.dead = False  # unframeable for good: everything from here on is garbage
        self._buf: Buffer = b""
        self._base = 0  # stream offset of self._buf[0]
        # Chunks of a large frame still short of its end wait here unjoined: joining
        # them into _buf one by one would copy the frame once per chunk.
        self._parts: list[bytes] = []
        self._short = 0  # bytes still missing from the frame at the head of the buffer
        self._follow: Callable[[bytes], int] | None = getattr(rule, "follow", None)
        self._following = False  # the rule is walking the head frame chunk by chunk
        self._segments: list[int] = []  # segment ids of chunks still (partly) buffered
        self._starts: list[int] = []  # stream offset where each of those chunks starts
        self._fed = 0  # total bytes fed
        self._next_segment = 0
        self._stalled = False  # garbage seen, waiting for a resync point
        self._lookahead: int | None = getattr(rule, "resync_lookahead", None)
        self._resync_from = 0  # while stalled: stream offset where the search resumes
        self._stall_reason = ""
        self._stall_code = ""
        self._reported = False  # the current stall's start was handed on already
        self._at_start = report_at_start

    @property
    def offset(self) -> int:
        """Stream offset of the first byte not yet emitted."""
        return self._base

    @property
    def buffered(self) -> bytes:
        """Bytes received but not yet part of an emitted event (what a widget shows)."""
        self._join()
        return bytes(self._buf)

    def feed(self, chunk: bytes, *, segment: int | None = None) -> list[StreamEvent]:
        """Add a chunk; return the frames (and garbage) it completed."""
        buf, base, items = self.cut(chunk, segment=segment)
        events: list[StreamEvent] = []
        pos = 0
        for item in items:
            if isinstance(item, int):
                events.append(self.frame(buf, base, pos, item))
                pos = item
            else:
                events.append(item)
                pos = item.offset - base + len(item.data)
        return events

    def cut(
        self, chunk: bytes, *, segment: int | None = None
    ) -> tuple[bytes, int, list[int | Garbage]]:
        """Add a chunk and find the frames it completed, without building RawFrame objects.

        Returns ``(buf, base, items)``: ``buf`` holds the bytes scanned, starting at
        stream offset ``base``; each item is either the end (in ``buf``) of a frame that
        starts where the previous item ended, or a :class:`Garbage` event. This is the
        codec's hot path; :meth:`frame` turns an item into a :class:`RawFrame` on demand.
        """
        if segment is None:
            segment = self._next_segment
        self._next_segment = segment + 1
        if self.provenance:
            self._trim()
            self._segments.append(segment)
            self._starts.append(self._fed)
        self._fed += len(chunk)
        follow = self._follow
        if self._following and follow is not None and follow(chunk):
            self._parts.append(bytes(chunk))
            return b"", self._base, []
        self._following = False
        if self._short > len(chunk):
            self._parts.append(bytes(chunk))
            self._short -= len(chunk)
            return b"", self._base, []
        if self._parts:
            self._parts.append(bytes(chunk))
            self._join()
        else:
            if self._stalled:
                # garbage grows in place while no resync point shows: copying the whole
                # stretch for every chunk would be quadratic
                if type(self._buf) is not bytearray:
                    self._buf = bytearray(self._buf)
                self._buf += chunk
            else:
                self._buf = self._buf + chunk if self._buf else bytes(chunk)
        self._short = 0
        base = self._base
        buf, items = self._scan()
        return buf, base, items

    def _join(self) -> None:
        if self._parts:
            self._buf = b"".join([self._buf, *self._parts])
            self._parts = []

    def frame(self, buf: bytes, base: int, start: int, end: int) -> RawFrame:
        """The :class:`RawFrame` for ``buf[start:end]`` of a :meth:`cut`, with provenance."""
        off = base + start
        sources = self._sources(off, base + end) if self.provenance else ()
        return _raw_frame(buf[start:end], off, sources)

    def remaining(self) -> RawFrame:
        """The unframed bytes (kept: :meth:`take_remaining` hands them back) as a frame
        with the segments they came from -- the start of a frame a gap cut short."""
        self._join()
        data = bytes(self._buf)
        sources = self._sources(self._base, self._base + len(data)) if data else ()
        return RawFrame(data, self._base, sources)

    def take_remaining(self) -> bytes:
        """Hand back the unframed bytes, e.g. when the stream switches to compression."""
        self._join()
        self._short = 0
        self._following = False
        rest, self._buf = bytes(self._buf), b""
        self._base += len(rest)
        self._trim()
        return rest

    def finish(self) -> list[Garbage | Truncated]:
        """End of stream: whatever is buffered is reported, never dropped."""
        self._join()
        self._short = 0
        self._following = False
        if not self._buf:
            return []
        events: list[Garbage | Truncated] = []
        buf, base = bytes(self._buf), self._base
        if self._stalled:
            events.append(
                self._garbage(0, len(buf), self._stall_reason, self._stall_code, resynced=False,
                              continued=self._reported)
            )
            self._reported = False
        else:
            try:
                expected = self.rule.measure(buf, 0)
            except FramingError as exc:
                events.append(self._garbage(0, len(buf), exc.reason, exc.code, resynced=False))
                expected = -1
            if expected != -1:
                events.append(Truncated(base, buf, expected, self._sources(base, base + len(buf))))
        self._buf = b""
        self._base += len(buf)
        self._trim()
        return events

    # -- internals ---------------------------------------------------------------

    def _scan(self) -> tuple[bytes, list[int | Garbage]]:
        """The buffer scanned and the items found. While a stall goes on, no frame is cut
        (the garbage handed on carries its own bytes) and the buffer returned is empty."""
        stored = self._buf
        n = len(stored)
        items: list[int | Garbage] = []
        if self.dead:
            if n:
                items.append(
                    self._garbage(0, n, self._stall_reason, self._stall_code, resynced=False,
                                  continued=True)
                )
                self._consume(n)
            return b"", items
        pos = 0
        if self._stalled and n:
            nxt = self.rule.resync(stored, max(1, self._resync_from - self._base))
            if nxt is None:
                pos = self._searched(0, n, items)
                if pos:
                    self._consume(pos)
                return b"", items
            items.append(
                self._garbage(0, nxt, self._stall_reason, self._stall_code, resynced=True,
                              continued=self._reported)
            )
            self._stalled = self._reported = False
            pos = nxt
        # frames are cut from bytes: a stall's bytearray ends here
        self._buf = buf = stored if isinstance(stored, bytes) else bytes(stored)
        measure = self.rule.measure
        scan = getattr(self.rule, "scan", None)
        append = items.append
        while pos < n:
            if scan is not None:
                pos = scan(buf, pos, items)
                if pos >= n:
                    break
            try:
                length = measure(buf, pos)
            except FramingError as exc:
                nxt = self.rule.resync(buf, pos + 1) if self.resync else -1
                if nxt == -1:
                    self.dead = True
                    self._stall_reason, self._stall_code = exc.reason, exc.code
                    append(self._garbage(pos, n, exc.reason, exc.code, resynced=False))
                    pos = n
                    break
                if nxt is None:
                    self._stalled = True
                    self._stall_reason, self._stall_code = exc.reason, exc.code
                    pos = self._searched(pos, n, items, starting=True)
                    break
                append(self._garbage(pos, nxt, exc.reason, exc.code, resynced=True))
                pos = nxt
                continue
            if length is None:
                self._following = self._follow is not None
                break
            if pos + length > n:
                self._short = pos + length - n
                break
            pos += length
            append(pos)
        if pos:
            self._consume(pos)
        return buf, items

    def _searched(self, pos: int, n: int, items: list[int | Garbage],
                  starting: bool = False) -> int:
        """``resync`` found no start in ``buf[pos:n]``: note where the next search
        resumes; hand on a long stretch of garbage (or, ``starting`` a stall of a rule
        that reports at its start, any) but the bytes the search still needs.
        Returns the new scan position."""
        k = self._lookahead
        if k is None:
            return pos
        self._resync_from = self._base + max(pos + 1, n - k + 1)
        keep_from = n - k
        if keep_from - pos > (0 if starting and self._at_start else STALL_LIMIT):
            items.append(self._garbage(pos, keep_from, self._stall_reason, self._stall_code,
                                       resynced=False, continued=self._reported))
            self._reported = True
            return keep_from
        return pos

    def _consume(self, count: int) -> None:
        # Chunk bookkeeping is trimmed lazily (next cut), so that frames of this cut can
        # still be given their sources.
        self._buf = self._buf[count:]
        self._base += count

    def _garbage(self, start: int, end: int, reason: str, code: str, *, resynced: bool,
                 continued: bool = False) -> Garbage:
        # Called while scanning, before the scanned bytes are consumed.
        off = self._base + start
        data = bytes(self._buf[start:end])
        return Garbage(off, data, reason, resynced, self._sources(off, off + len(data)), code,
                       continued)

    def _sources(self, start: int, end: int) -> tuple[Source, ...]:
        if not self.provenance:
            return ()
        starts, segs = self._starts, self._segments
        last = starts[-1]
        if start >= last:  # the common case: wholly inside the newest chunk
            return (_source(segs[-1], start - last, end - last),)
        i = bisect_right(starts, start) - 1
        out = []
        while i < len(starts) and starts[i] < end:
            c_start = starts[i]
            c_end = starts[i + 1] if i + 1 < len(starts) else self._fed
            lo, hi = max(start, c_start), min(end, c_end)
            if hi > lo:
                out.append(_source(segs[i], lo - c_start, hi - c_start))
            i += 1
        return tuple(out)

    def _trim(self) -> None:
        """Forget chunks that lie wholly before the buffered bytes."""
        starts = self._starts
        keep = bisect_right(starts, self._base) - 1
        if keep > 0:
            del starts[:keep]
            del self._segments[:keep]
