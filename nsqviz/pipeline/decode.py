"""The Python side of the frames stage: packet batches in, frame rows out.

Runs inside Spark's Python workers, but is plain Python over Arrow batches, so the tests
and the benchmark can call it directly too. It runs exactly what ``nsqviz decode`` runs:
the :class:`~nsqviz.capture.driver.CaptureDriver`'s flow tracking and the
:class:`~nsqviz.capture.decode.CaptureDecoder` (protocol detection, each protocol's
observer both ways, gap resynchronisation, TLS), with ``flow_records`` on; records
become rows through :func:`nsqviz.records.frame_row`. No protocol byte is parsed here.

A packet is fed with :func:`~nsqviz.capture.driver.packet_id` of its file and number,
as the driver numbers them, so each row's packets map back to ``(file, packet)``.

Besides the kinds ``nsqviz decode --json`` prints (command, frame, error, gap, tls) the
table has ``kind = "flow"`` rows -- ``FlowStart``, and ``FlowEnd`` per direction with
how it ended and the decoder's byte counts -- which the connections analysis needs and
which cost three rows per connection.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.driver import IDLE_SPLIT, packet_id
from nsqviz.capture.layers import Segment
from nsqviz.records import DecodedRecord, frame_row, frame_schema

__all__ = ["RowWriter", "decode_sorted_batches", "to_batch"]


class RowWriter:
    """Turns one decoder's records into frames-table rows: connection ids (the flow's
    label and start time, plus ``scope``), per-connection order, files by index."""

    def __init__(self, files: list[str], scope: str = ""):
        self.files = files
        self.scope = scope
        self.conns: dict[int, list[Any]] = {}  # flow id -> [conn_id, seq]

    def rows(self, records: Iterable[DecodedRecord], out: list[list[Any]]) -> None:
        conns = self.conns
        for rec in records:
            fid = rec.flow_id
            if fid is None:  # a capture warning: not part of any connection
                out.append(frame_row(rec, None, None, self.files))
                continue
            c = conns.get(fid)
            if c is None:
                c = conns[fid] = [f"{rec.flow}@{rec.ts:.6f}{self.scope}", 0]
            c[1] += 1
            out.append(frame_row(rec, c[0], c[1], self.files))


def to_batch(rows: list[list[Any]]) -> pa.RecordBatch:
    schema = frame_schema()
    arrays = [
        pa.array(column, type=field.type)
        for column, field in zip(zip(*rows, strict=True), schema, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


_IN_COLUMNS = ("file", "file_index", "packet", "ts", "src", "sport", "dst", "dport", "seq",
               "ack", "flags", "payload", "missing")


def decode_sorted_batches(
    batches: Iterable[pa.RecordBatch],
    *,
    idle_split: float | None = IDLE_SPLIT,
    ports: Mapping[str, Iterable[int]] | None = None,
    out_rows: int = 8192,
    per_file: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Frame rows for packet batches sorted by (``_ka``, ``_kb``, file_index, packet):
    each unordered 4-tuple's packets in capture order.

    With ``per_file`` the keys include the file, and connection ids end in ``" in FILE"``.
    """
    decoder: CaptureDecoder | None = None
    writer: RowWriter | None = None
    files: dict[int, str] = {}
    file_list: list[str] = []
    key = None
    pending: list[list[Any]] = []

    def finish() -> None:
        if decoder is not None and writer is not None:
            writer.rows(decoder.step(decoder.driver.finish()), pending)

    for batch in batches:
        cols = [batch.column(name).to_pylist() for name in ("_ka", "_kb", *_IN_COLUMNS)]
        for ka, kb, file, index, packet, *seg in zip(*cols, strict=True):
            if index not in files:
                files[index] = file
                file_list.extend([""] * (index + 1 - len(file_list)))
                file_list[index] = file
            if (ka, kb) != key:
                finish()
                scope = f" in {os.path.basename(file)}" if per_file else ""
                decoder = CaptureDecoder(ports=ports, idle_split=idle_split,
                                         flow_records=True)
                writer = RowWriter(file_list, scope)
                key = (ka, kb)
            assert decoder is not None and writer is not None
            segment = Segment(packet_id(index, packet), *seg[:-1], seg[-1] or 0)
            for event_records in _feed(decoder, segment):
                writer.rows(event_records, pending)
            if len(pending) >= out_rows:
                yield to_batch(pending)
                pending = []
    finish()
    if pending:
        yield to_batch(pending)


def _feed(decoder: CaptureDecoder, segment: Segment) -> Iterator[list[DecodedRecord]]:
    for event in decoder.driver.feed(segment):
        yield decoder.feed(event)
