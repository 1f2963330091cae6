"""The Python side of the pipeline: capture files in, frames-table batches out.

Runs inside Spark's Python workers, but is plain Python over files and Arrow batches, so
the tests and the benchmark can call it directly too. Every function runs what ``nsqviz
decode`` runs -- the :class:`~nsqviz.capture.driver.CaptureDriver` and the
:class:`~nsqviz.capture.decode.CaptureDecoder` with ``flow_records`` -- and writes
records column-wise through :class:`nsqviz.records.FrameColumns`. No protocol byte is
parsed here.

Decoding happens where the bytes are, in two stages:

1. :func:`decode_file` -- one task per capture file decodes it whole. In a capture set
   (rotated files, ``continuation``), a connection may have begun in an earlier file or
   go on in a later one; such a *crossing* connection is one that starts mid-stream in a
   file after the first, or is still open at the end of a file before the last. Its
   rows are not final here: a mid-stream start is not even decoded, an open
   connection's rows so far are kept (they are exactly what a single pass gives) and
   its end is left to stage 2.
2. :func:`crossing_packets` -- a light pass over each file (flow tracking only) that
   emits the packets of its crossing connections; Spark brings them together by 4-tuple
   in capture order and :func:`decode_sorted_batches` decodes them as one stream,
   dropping the rows stage 1 already wrote (those made by packets of the file where a
   kept connection began). Each file before the last also gives one *closed marker* per
   4-tuple whose latest connection ended in it (a row with packet number
   :data:`CLOSED`): late packets of that connection in the next file (the last ACK, a
   retransmitted FIN) belong to it, as in ``nsqviz decode``, and start nothing -- unless
   a SYN or a silence longer than ``idle_split`` begins a new connection there. And each
   file after the first gives the SYN of the first connection on each 4-tuple, marked
   :data:`CONTEXT` (its rows are stage 1's): if an earlier file left a connection open
   on that 4-tuple, that SYN is where it ends (``reused``), as in ``nsqviz decode``.

So only crossing connections are shuffled; with one file, ``continuation`` off, or
nothing open at file ends, stage 2 has nothing to do. Besides the kinds ``nsqviz decode
--json`` prints, the table has ``kind = "flow"`` rows (``FlowStart``; ``FlowEnd`` per
direction, with how it ended and the decoder's byte counts) for the connections table.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.driver import IDLE_SPLIT, CaptureDriver, Step
from nsqviz.capture.files import CaptureFormatError, CaptureWarning, read_capture
from nsqviz.capture.layers import ACK, SYN, Segment, decode_record, packet_id, split_packet_id
from nsqviz.capture.tcp import FlowStart
from nsqviz.records import DecodedRecord, FrameColumns, PacketColumns

__all__ = ["ConnectionRows", "ProgressFile", "crossing_packets", "decode_file",
           "decode_sorted_batches", "read_progress"]

BATCH_ROWS = 8192
CLOSED = (1 << 40) - 1
"""The packet number of a closed marker: after every real packet of its file."""
CONTEXT = "context"
"""The ``warning`` of a crossing packet stage 2 reads only for what it ends: a SYN that
starts a connection stage 1 decoded whole."""
_FRAME_KINDS = ("command", "frame")


class ProgressFile:
    """How far one task is: ``bytes frames done`` of its capture file, rewritten in place
    (atomically) at most every ``interval`` seconds -- what the driver's
    :class:`~nsqviz.pipeline.progress.Progress` reads while the task runs. ``path``
    ``None``: nothing is written."""

    def __init__(self, path: str | None, interval: float = 0.5):
        self.path = path
        self.interval = interval
        self.last = 0.0

    def update(self, n_bytes: int, frames: int, *, done: bool = False) -> None:
        now = time.monotonic()
        if self.path is None or (not done and now - self.last < self.interval):
            return
        self.last = now
        tmp = f"{self.path}.tmp"
        try:
            with open(tmp, "w") as f:
                f.write(f"{n_bytes} {frames} {int(done)}")
            os.replace(tmp, self.path)
        except OSError:
            self.path = None  # progress is a courtesy: never fail a task for it


def read_progress(directory: str) -> tuple[int, int, int]:
    """(bytes, frames, files finished) so far by the tasks writing :class:`ProgressFile` s
    in ``directory``."""
    n_bytes = frames = files = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0, 0, 0
    for name in names:
        if name.endswith(".tmp"):
            continue
        try:
            with open(os.path.join(directory, name)) as f:
                b, n, done = f.read().split()
        except (OSError, ValueError):
            continue
        n_bytes += int(b)
        frames += int(n)
        files += int(done)
    return n_bytes, frames, files


class ConnectionRows:
    """Frames-table rows of one decoder's records: each record's connection id (the flow's
    label and start time, plus ``scope``) and its order in the connection."""

    def __init__(self, files: list[str], scope: str = ""):
        self.columns = FrameColumns(files)
        self.scope = scope
        self.conns: dict[int, list[Any]] = {}  # flow id -> [conn_id, rows so far]

    def add(self, rec: DecodedRecord, *, write: bool = True) -> None:
        """Number ``rec`` in its connection; append it unless ``write`` is false (a row
        another stage wrote: it still takes its place in the order)."""
        fid = rec.flow_id
        if fid is None:  # a capture warning: part of no connection
            self.columns.add(rec, None, None)
            return
        c = self.conns.get(fid)
        if c is None:
            c = self.conns[fid] = [f"{rec.flow}@{rec.ts:.6f}{self.scope}", 0]
        c[1] += 1
        if write:
            self.columns.add(rec, c[0], c[1])


def _decoder(ports: Mapping[str, Iterable[int]] | None, idle_split: float | None,
             continuation: bool = True) -> CaptureDecoder:
    return CaptureDecoder(ports=ports, idle_split=idle_split, continuation=continuation,
                          flow_records=True)


def decode_file(path: str, file_index: int, files: list[str], *, continuation: bool = True,
                idle_split: float | None = IDLE_SPLIT,
                ports: Mapping[str, Iterable[int]] | None = None,
                batch_rows: int = BATCH_ROWS, progress: str | None = None) -> Iterator[Any]:
    """Stage 1: the final rows of one file of ``files`` (see the module docstring).
    ``progress``: a file to keep the bytes read and frames decoded in
    (:class:`ProgressFile`)."""
    if not continuation:  # a capture of its own: numbered on its own, as nsqviz decode does
        files, file_index = [path], 0
    decoder = _decoder(ports, idle_split, continuation)
    scope = "" if continuation else f" in {os.path.basename(path)}"
    rows = ConnectionRows(files, scope)
    last = file_index == len(files) - 1
    # After the first file of a set, a connection without its SYN here began in an
    # earlier file: stage 2 decodes it whole, so its events are not even decoded here.
    later = continuation and file_index > 0

    def final(step: Step) -> Step:
        if later and step.events:
            events = [e for e in step.events if e.flow.syn_seen]
            if len(events) != len(step.events):
                return step._replace(events=events)
        return step

    report = ProgressFile(progress)
    frames = 0
    try:
        with open(path, "rb") as f:
            for step in decoder.driver.read(f, file_index):
                for rec in decoder.step(final(step)):
                    frames += rec.kind in _FRAME_KINDS
                    rows.add(rec)
                if len(rows.columns) >= batch_rows:
                    report.update(f.tell(), frames)
                    yield rows.columns.batch()
            end = f.tell()
        if last or not continuation:
            for rec in decoder.step(final(decoder.driver.finish(file_index))):
                frames += rec.kind in _FRAME_KINDS
                rows.add(rec)
        report.update(end, frames, done=True)
    except (CaptureFormatError, OSError) as exc:
        rows.columns.add(DecodedRecord(float("nan"), None, None, "error", "CaptureWarning",
                                       {"reason": f"{path}: {exc}"}, (), files=()), None, None)
    if len(rows.columns):
        yield rows.columns.batch()


def crossing_packets(path: str, file_index: int, n_files: int, *,
                     idle_split: float | None = IDLE_SPLIT,
                     ports: Mapping[str, Iterable[int]] | None = None,
                     batch_rows: int = BATCH_ROWS) -> Iterator[Any]:
    """Stage 2's input from one file: the packets of its crossing connections."""
    decoder = _decoder(ports, idle_split)
    driver = CaptureDriver(server_ports=decoder.server_ports,
                           client_hello=decoder.driver.client_hello, idle_split=idle_split)
    spans: dict[tuple[Any, ...], list[tuple[int, float]]] = {}  # 4-tuple -> (first, last)
    last_ts: dict[tuple[Any, ...], float] = {}  # 4-tuple -> its last packet's time
    try:
        for step in driver.read(path, file_index):
            seg = step.segment
            if seg is not None:
                a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
                last_ts[(a, b) if a <= b else (b, a)] = seg.ts
    except (CaptureFormatError, OSError):
        pass  # stage 1 reports it
    tracker = driver.tracker
    not_last = file_index < n_files - 1
    open_flows = tracker.open_flows() if not_last else []
    open_at_end = set(map(id, open_flows))
    closed = dict(last_ts) if not_last else {}  # 4-tuple -> when its last connection ended
    for flow in open_flows:
        closed.pop(tuple(sorted((flow.client, flow.server))), None)
    shift = packet_id(file_index, 0)
    context: set[int] = set()  # packet numbers of the heads' SYNs
    heads: set[tuple[Any, ...]] = set()
    for flow in tracker.flows:
        key = tuple(sorted((flow.client, flow.server)))
        head = key not in heads
        heads.add(key)
        if id(flow) in open_at_end:
            end: float = float("inf")
        elif file_index and not flow.syn_seen:
            end = flow.last_packet
        elif file_index and head:
            context.add(flow.first_packet - shift)
            end = flow.first_packet
        else:
            continue
        spans.setdefault(key, []).append((flow.first_packet - shift, end - shift))
    cols = PacketColumns(path, file_index)
    for (a, b), ts in closed.items():
        cols.add(CLOSED, Segment(CLOSED, ts, *a, *b, 0, 0, 0, b"", 0))
    if not spans:
        if len(cols):
            yield cols.batch()
        return
    try:
        for item in read_capture(path):
            if type(item) is CaptureWarning:
                continue
            seg = decode_record(item)
            if seg is None or type(seg) is CaptureWarning:
                continue
            a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
            ranges = spans.get((a, b) if a <= b else (b, a))
            if ranges and any(lo <= seg.number <= hi for lo, hi in ranges):
                cols.add(seg.number, seg)
                if seg.number in context:
                    cols.columns[-1][-1] = CONTEXT
                if len(cols) >= batch_rows:
                    yield cols.batch()
    except (CaptureFormatError, OSError):
        pass
    if len(cols):
        yield cols.batch()


_IN_COLUMNS = ("file_index", "packet", "ts", "src", "sport", "dst", "dport", "seq", "ack",
               "flags", "payload", "missing", "warning")


def decode_sorted_batches(
    batches: Iterable[Any],
    files: list[str],
    *,
    idle_split: float | None = IDLE_SPLIT,
    ports: Mapping[str, Iterable[int]] | None = None,
    batch_rows: int = BATCH_ROWS,
    after_stage_1: bool = True,
) -> Iterator[Any]:
    """Stage 2: rows for crossing packets sorted by (``_ka``, ``_kb``, file_index,
    packet) -- each unordered 4-tuple's packets in capture order -- leaving out the rows
    stage 1 wrote. Without ``after_stage_1`` every row is written (the packets are all
    there is)."""
    decoder: CaptureDecoder | None = None
    rows = ConnectionRows(files)
    key = None
    closed_at: float | None = None  # the 4-tuple's connection ended then (a closed marker)
    foreign: set[int] = set()  # flows a CONTEXT packet started: their rows are stage 1's

    def add(records: list[DecodedRecord], file_index: int | None) -> None:
        assert decoder is not None
        for rec in records:
            if rec.flow_id in foreign:
                continue
            flow = decoder.flows[rec.flow_id].flow  # type: ignore[index]
            start_file = split_packet_id(flow.first_packet)[0]
            written = (after_stage_1 and file_index == start_file
                       and (flow.syn_seen or start_file == 0))
            rows.add(rec, write=not written)

    for batch in batches:
        cols = [batch.column(name).to_pylist() for name in ("_ka", "_kb", *_IN_COLUMNS)]
        for ka, kb, index, packet, *seg, warning in zip(*cols, strict=True):
            if (ka, kb) != key:
                if decoder is not None:
                    add(decoder.step(decoder.driver.finish()), None)
                decoder, closed_at = None, None
                foreign.clear()
                rows.conns.clear()
                key = (ka, kb)
            ts, flags = seg[0], seg[7]
            if packet == CLOSED:
                closed_at = ts
                continue
            if closed_at is not None:  # a late packet of the closed connection?
                new = (flags & SYN and not flags & ACK) or (
                    idle_split is not None and ts - closed_at > idle_split)
                if not new:
                    closed_at = ts
                    continue
                closed_at = None
            if decoder is None:
                decoder = _decoder(ports, idle_split)
            segment = Segment(packet_id(index, packet), *seg[:-1], seg[-1] or 0)
            for event in decoder.driver.feed(segment):
                if warning == CONTEXT and type(event) is FlowStart:
                    foreign.add(event.flow.id)
                add(decoder.feed(event), index)
            if len(rows.columns) >= batch_rows:
                yield rows.columns.batch()
    if decoder is not None:
        add(decoder.step(decoder.driver.finish()), None)
    if len(rows.columns):
        yield rows.columns.batch()
