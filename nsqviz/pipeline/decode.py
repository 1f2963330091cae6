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
   file after the first, or is still open at the end of a file before the last. An open
   connection's rows so far are final (they are exactly what a single pass gives); a
   mid-stream start is not even decoded. What crosses is handed on as a small
   :class:`~nsqviz.pipeline.handoff.FileHandoff`: the decoder state of each connection
   open at the file's end, the packet numbers of each that began earlier.
2. :func:`continue_connections` -- the crossing connections, grouped into partitions by
   4-tuple (:func:`~nsqviz.pipeline.handoff.plan`): each partition reads its packets
   straight from the capture files, in capture order, takes up each handed-on state
   where stage 1 left it and writes the rows stage 1 could not.

So no payload byte goes through Spark's shuffle, and no byte is decoded twice except
those of a connection whose state cannot be handed on (a compressed one); with one
file, ``continuation`` off, or nothing crossing a file boundary, stage 2 has nothing to
do. :func:`decode_set` runs both stages in one process. Besides the kinds ``nsqviz
decode --json`` prints, the table has ``kind = "flow"`` rows (``FlowStart``; ``FlowEnd``
per direction, with how it ended and the decoder's byte counts; ``Retransmission``, each
segment that carried bytes already captured) for the connections table and the doctor's
TCP rules.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, BinaryIO

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.driver import IDLE_SPLIT, Step
from nsqviz.capture.files import CaptureFormatError, CaptureWarning, read_records
from nsqviz.capture.layers import ACK, SYN, decode_record, packet_id, split_packet_id
from nsqviz.capture.tcp import FlowStart
from nsqviz.pipeline.handoff import FileHandoff, HandoffCollector, Key, Part, key_of, plan
from nsqviz.records import ConnectionRows, DecodedRecord

__all__ = ["ProgressFile", "continue_connections", "decode_file",
           "decode_set", "decode_stream", "read_progress"]

BATCH_ROWS = 8192
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


def _decoder(ports: Mapping[str, Iterable[int]] | None, idle_split: float | None,
             continuation: bool = True, fields: bool = True) -> CaptureDecoder:
    # without the `fields` column nothing reads a record's fields but what marks it
    return CaptureDecoder(ports=ports, idle_split=idle_split, continuation=continuation,
                          flow_records=True, fields=fields)


def decode_file(path: str, file_index: int, files: list[str], *, continuation: bool = True,
                idle_split: float | None = IDLE_SPLIT,
                ports: Mapping[str, Iterable[int]] | None = None,
                batch_rows: int = BATCH_ROWS, progress: str | None = None,
                handoff: Callable[[FileHandoff], None] | None = None,
                fields: bool = True) -> Iterator[Any]:
    """Stage 1: the final rows of one file of ``files`` (see the module docstring).
    ``progress``: a file to keep the bytes read and frames decoded in
    (:class:`ProgressFile`). ``handoff`` receives what crosses this file's boundaries
    (:class:`~nsqviz.pipeline.handoff.FileHandoff`) once the file is read; it is only
    called in a capture set of several files. Without ``fields`` the rows' ``fields``
    column is left null (:class:`~nsqviz.records.FrameColumns`)."""
    if not continuation:  # a capture of its own: numbered on its own, as nsqviz decode does
        files, file_index = [path], 0
    decoder = _decoder(ports, idle_split, continuation, fields)
    scope = "" if continuation else f" in {os.path.basename(path)}"
    rows = ConnectionRows(files, scope, fields=fields)
    last = file_index == len(files) - 1
    # After the first file of a set, a connection without its SYN here began in an
    # earlier file: stage 2 decodes it, so its events are not even decoded here.
    later = continuation and file_index > 0
    collector = (HandoffCollector(file_index, len(files))
                 if handoff and continuation and len(files) > 1 else None)

    def final(step: Step) -> Step:
        if later and step.events:
            events = [e for e in step.events if e.flow.syn_seen]
            if len(events) != len(step.events):
                return step._replace(events=events)
        return step

    report = ProgressFile(progress)
    frames = 0
    see = collector.see if collector is not None else None
    handed = FileHandoff(file_index, {})  # what a file that cannot be read hands on
    try:
        with open(path, "rb") as f:
            for step in decoder.driver.read(f, file_index):
                if see is not None and step.segment is not None and step.record is not None:
                    see(step.segment, step.record.offset)  # a segment comes with its record
                for rec in decoder.step(final(step)):
                    frames += rec.kind in _FRAME_KINDS
                    rows.add(rec)
                if len(rows.columns) >= batch_rows:
                    report.update(f.tell(), frames)
                    yield rows.columns.batch()
            end = f.tell()
        if collector is not None:  # before finish(), which starts a new tracker
            handed = collector.finish(decoder, rows.conns)
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
    if handoff is not None and collector is not None:
        handoff(handed)


def continue_connections(part: Part, files: list[str], *,
                         idle_split: float | None = IDLE_SPLIT,
                         ports: Mapping[str, Iterable[int]] | None = None,
                         batch_rows: int = BATCH_ROWS,
                         progress: str | None = None, fields: bool = True) -> Iterator[Any]:
    """Stage 2: the rows of the connections stage 1 handed on (one :class:`~nsqviz.
    pipeline.handoff.Part` of them), read from the capture files in capture order,
    leaving out the rows stage 1 wrote. ``progress`` as in :func:`decode_file`, in
    payload bytes decoded; ``fields`` as in :func:`decode_file`."""
    decoder = _decoder(ports, idle_split, fields=fields)
    rows = ConnectionRows(files, fields=fields)
    closed_at: dict[Key, float] = {}  # the 4-tuple's connection ended then
    foreign: set[int] = set()  # flows a context SYN started: their rows are stage 1's
    report = ProgressFile(progress)
    done = frames = 0

    def add(records: list[DecodedRecord], file_index: int | None) -> None:
        nonlocal frames
        for rec in records:
            if rec.flow_id in foreign:
                continue
            # flow_id is typed optional (DecodedRecord); these records are read as of a flow
            flow = decoder.flows[rec.flow_id].flow  # type: ignore[index]
            start_file = split_packet_id(flow.first_packet)[0]
            written = file_index == start_file and (flow.syn_seen or start_file == 0)
            if not written:
                frames += rec.kind in _FRAME_KINDS
            rows.add(rec, write=not written)

    for file_index in sorted(part.files):
        fp = part.files[file_index]
        try:
            items = read_records(files[file_index], fp.wanted())
            for item in items:
                if isinstance(item, CaptureWarning):
                    continue  # stage 1 reported it
                seg = decode_record(item)
                if seg is None or isinstance(seg, CaptureWarning):
                    continue
                key = key_of(seg)
                closed = closed_at.get(key)
                if closed is not None:  # a late packet of the closed connection?
                    flags = seg.flags
                    if not ((flags & SYN and not flags & ACK) or (
                            idle_split is not None and seg.ts - closed > idle_split)):
                        closed_at[key] = seg.ts
                        continue
                    del closed_at[key]
                number = seg.number
                state = fp.states.get(number)
                started = None
                for event in decoder.driver.feed(seg._replace(number=packet_id(file_index,
                                                                               number))):
                    if type(event) is FlowStart:
                        started = event.flow
                        if state is None and number in fp.context:
                            foreign.add(started.id)
                    add(decoder.feed(event), file_index)
                # (No flow started here where stage 1 started one: a SYN retransmitted
                # across the file boundary. nsqviz decode goes on with the earlier
                # connection, and so does this; stage 1's rows for it stand apart.)
                if state is not None and started is not None:
                    snap, conn = pickle.loads(state)
                    decoder.adopt(snap, replacing=started)
                    if conn is not None:
                        rows.conns[snap.flow.id] = conn
                done += len(seg.payload)
                if len(rows.columns) >= batch_rows:
                    report.update(done, frames)
                    yield rows.columns.batch()
        except (CaptureFormatError, OSError):
            pass  # stage 1 reported it
        closed_at.update(fp.closed)
    add(decoder.step(decoder.driver.finish()), None)
    report.update(done, frames, done=True)
    if len(rows.columns):
        yield rows.columns.batch()


def decode_set(files: list[str], *, idle_split: float | None = IDLE_SPLIT,
               ports: Mapping[str, Iterable[int]] | None = None, parts: int = 2,
               batch_rows: int = BATCH_ROWS, fields: bool = True) -> Iterator[Any]:
    """Both stages in this process, as Spark runs them: every frames-table batch of the
    capture set ``files`` (for tests, the benchmark's one-core figure, and the analyses
    in-process; ``fields`` as in :func:`decode_file`)."""
    handoffs: list[FileHandoff] = []
    for i, path in enumerate(files):
        yield from decode_file(path, i, files, idle_split=idle_split, ports=ports,
                               batch_rows=batch_rows, handoff=handoffs.append, fields=fields)
    for part in plan(handoffs, parts):
        yield from continue_connections(part, files, idle_split=idle_split, ports=ports,
                                        batch_rows=batch_rows, fields=fields)


def decode_stream(source: BinaryIO, *, idle_split: float | None = IDLE_SPLIT,
                  ports: Mapping[str, Iterable[int]] | None = None,
                  batch_rows: int = BATCH_ROWS, fields: bool = True) -> list[Any]:
    """The frames-table batches of a capture read from ``source`` (standard input, the
    output of a live capture tool) to its end -- or to Ctrl-C, which here means "that
    is all": the connections still open end where the capture stopped. Its packets are
    numbered as one file, named ``-``."""
    decoder = _decoder(ports, idle_split, True, fields)
    rows = ConnectionRows(["-"], fields=fields)
    batches = []
    try:
        for step in decoder.driver.read(source, 0):
            for rec in decoder.step(step):
                rows.add(rec)
            if len(rows.columns) >= batch_rows:
                batches.append(rows.columns.batch())
    except KeyboardInterrupt:
        pass
    except (CaptureFormatError, OSError) as exc:
        rows.columns.add(DecodedRecord(float("nan"), None, None, "error", "CaptureWarning",
                                       {"reason": f"-: {exc}"}, (), files=()), None, None)
    for rec in decoder.step(decoder.driver.finish(0)):
        rows.add(rec)
    if len(rows.columns):
        batches.append(rows.columns.batch())
    return batches
