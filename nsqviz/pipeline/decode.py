"""The Python side of the frames stage: sorted packet batches in, frame rows out.

Runs inside Spark's Python workers (``mapInArrow``), but is plain Python over Arrow
batches, so the tests and the benchmark can call it directly too. Per unordered 4-tuple
it runs exactly what ``nsqviz decode`` runs on a file: the capture package's
:class:`~nsqviz.capture.tcp.FlowTracker` (TCP reassembly with gaps and provenance) and
its :class:`~nsqviz.capture.decode.CaptureDecoder` (NSQ detection, the codec's
:class:`~nsqviz.nsq.codec.Observer` both ways, gap resynchronisation, TLS). No NSQ byte
is parsed here; this module only turns their records into rows.

Packet numbers are per file, and a connection's packets may come from several rotated
files, so the tracker is fed a *surrogate* packet number (the packet's index within its
4-tuple); each row's surrogates are mapped back to ``(file, packet)`` pairs on output.

Besides the kinds ``nsqviz decode --json`` prints (command, frame, error, gap, tls) the
table has ``kind = "flow"`` rows -- ``FlowStart``, and ``FlowEnd`` per direction with
how it ended and the decoder's byte counts -- which the connections analysis needs and
which cost three rows per connection.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator

import pyarrow as pa

from nsqviz.capture.cli import fields_json
from nsqviz.capture.decode import CaptureDecoder, DecodedRecord
from nsqviz.capture.layers import Segment
from nsqviz.capture.tcp import Data, FlowEnd, FlowStart, FlowTracker, Gap
from nsqviz.nsq.events import Dpub, Error, Identify, Message, Mpub, Pub, Rdy, Req, Response

__all__ = ["FRAME_SCHEMA", "ARROW_FRAME_SCHEMA", "ConnectionsDecoder", "decode_sorted_batches"]

ARROW_FRAME_SCHEMA = pa.schema(
    [
        # what `nsqviz decode --json` prints
        ("ts", pa.float64()),
        ("flow", pa.string()),
        ("dir", pa.string()),
        ("kind", pa.string()),
        ("name", pa.string()),
        ("fields", pa.string()),  # JSON object, bytes as hex
        ("packets", pa.list_(pa.int64())),
        # where it came from
        ("conn_id", pa.string()),
        ("file", pa.string()),  # file of the frame's first packet
        ("packet_files", pa.list_(pa.string())),  # file of each entry of `packets`
        ("seq", pa.int64()),  # order within the connection
        ("offset", pa.int64()),  # stream offset in its direction
        ("size", pa.int64()),  # bytes of the frame (of the gap, for gaps)
        # typed copies of the fields the analyses join and aggregate on
        ("msg_id", pa.string()),
        ("topic", pa.string()),
        ("channel", pa.string()),
        ("count", pa.int64()),  # RDY count
        ("delay_ms", pa.int64()),  # REQ timeout, DPUB defer time
        ("attempts", pa.int32()),
        ("msg_ts", pa.float64()),  # nsqd's message timestamp, seconds
        ("bodies", pa.list_(pa.string())),  # sha1 of each published/delivered body
        ("data", pa.string()),  # response/error text; IDENTIFY's JSON
        ("reason", pa.string()),  # errors, gaps, flow end ("fin", "rst", "capture")
    ]
)


def _spark_schema():
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(ARROW_FRAME_SCHEMA)


FRAME_SCHEMA = _spark_schema()

_COLUMNS = [f.name for f in ARROW_FRAME_SCHEMA]
_INDEX = {name: i for i, name in enumerate(_COLUMNS)}
_NO_EXTRAS = (None,) * (len(_COLUMNS) - _INDEX["seq"] - 1)  # the columns after `seq`


def _sha1(body: bytes) -> str:
    return hashlib.sha1(body).hexdigest()


def _typed(event) -> dict:
    """The typed columns of a codec event (what the analyses join and aggregate on)."""
    kind = type(event)
    out: dict = {}
    if kind is Message:
        return {"msg_id": event.id.decode("ascii", "replace"), "attempts": event.attempts,
                "msg_ts": event.timestamp / 1e9, "bodies": [_sha1(event.body)]}
    if kind is Response or kind is Error:
        return {"data": event.data.decode("utf-8", "replace")}
    if kind is Identify:
        return {"data": json.dumps(event.data, separators=(",", ":"))}
    mid = getattr(event, "id", None)
    if isinstance(mid, bytes):
        out["msg_id"] = mid.decode("ascii", "replace")
    topic = getattr(event, "topic", None)
    if topic is not None:
        out["topic"] = topic
        channel = getattr(event, "channel", None)
        if channel is not None:
            out["channel"] = channel
    if kind is Rdy:
        out["count"] = event.count
    elif kind is Req:
        out["delay_ms"] = event.timeout
    elif kind is Pub:
        out["bodies"] = [_sha1(event.body)]
    elif kind is Dpub:
        out["delay_ms"] = event.defer_time
        out["bodies"] = [_sha1(event.body)]
    elif kind is Mpub:
        out["bodies"] = [_sha1(b) for b in event.bodies]
    return out


class _Conn:
    __slots__ = ("flow", "conn_id", "seq")

    def __init__(self, flow, ts: float, scope: str):
        self.flow = flow
        self.conn_id = f"{flow.label}@{ts:.6f}{scope}"
        self.seq = 0


class ConnectionsDecoder:
    """Decodes the packets of one unordered 4-tuple, fed in capture order.

    ``feed(...)`` takes one packet row's columns and returns the rows it completed (lists
    in :data:`ARROW_FRAME_SCHEMA` column order); ``finish()`` ends every connection and
    returns the rest. ``idle_split`` seconds of silence end the current connections: what
    follows is decoded as a new (mid-stream) connection.
    """

    def __init__(self, *, idle_split: float = 600.0, server_ports: Iterable[int] = (4150,),
                 scope: str = ""):
        self.idle_split = idle_split
        self.scope = scope  # appended to connection ids: the file, when files are separate
        self.server_ports = frozenset(server_ports)
        self._reset()

    def _reset(self) -> None:
        self.tracker = FlowTracker(server_ports=self.server_ports)
        self.decoder = CaptureDecoder(server_ports=self.server_ports)
        self.origin: list[tuple[str, int]] = []  # surrogate packet number - 1 -> (file, packet)
        self.conns: dict[int, _Conn] = {}
        self.last_ts: float | None = None

    def feed(self, file, packet, ts, src, sport, dst, dport, seq, ack, flags, payload,
             missing) -> list[list]:
        out: list[list] = []
        if self.last_ts is not None and ts - self.last_ts > self.idle_split:
            out.extend(self.finish())
        self.last_ts = ts
        self.origin.append((file, packet))
        seg = Segment(len(self.origin), ts, src, sport, dst, dport, seq, ack, flags,
                      payload, missing or 0)
        decoder = self.decoder
        for ev in self.tracker.feed(seg):
            if type(ev) is Data:  # the hot path
                for rec in decoder.feed(ev):
                    self._record(rec, out)
            else:
                self._on_tcp(ev, out)
        return out

    def finish(self) -> list[list]:
        out: list[list] = []
        for ev in self.tracker.finish():
            self._on_tcp(ev, out)
        self._reset()
        return out

    def _on_tcp(self, ev, out: list[list]) -> None:
        kind = type(ev)
        if kind is FlowStart:
            c = self.conns[ev.flow.id] = _Conn(ev.flow, ev.ts, self.scope)
            self._row(c, ev.ts, None, "flow", "FlowStart",
                      {"midstream": ev.flow.midstream}, (ev.number,), out)
        # The capture decoder's own handling of this TCP event: the rows `nsqviz decode`
        # prints. (Its per-file loop is the only part not reused: here a 4-tuple's
        # packets arrive from many files, already merged in time order by Spark.)
        for rec in self.decoder.feed(ev):
            self._record(rec, out)
        if kind is FlowEnd:
            c = self.conns[ev.flow.id]
            stats = self.decoder.flow_stats(ev.flow.id)
            fields = {
                "how": ev.how, "payload_bytes": stats.payload_bytes[ev.direction],
                "nsq": stats.nsq, "why": stats.why,
                "retransmitted_bytes": stats.retransmitted_bytes,
                "gap_bytes": stats.gap_bytes,
            }
            self._row(c, ev.ts, ev.direction, "flow", "FlowEnd", fields, (ev.number,), out,
                      size=stats.payload_bytes[ev.direction], reason=ev.how)

    def _record(self, rec: DecodedRecord, out: list[list]) -> None:
        c = self.conns[rec.flow_id]
        event = rec.event
        extra: dict = {}
        raw = getattr(event, "raw", None)
        if type(event) is Gap:
            extra.update(offset=event.offset, size=event.size)
        elif raw is not None:
            extra.update(offset=raw.offset, size=len(raw.data))
        if rec.kind in ("command", "frame"):
            extra.update(_typed(event))
        else:
            reason = rec.fields.get("reason") or rec.fields.get("text") or rec.fields.get("note")
            extra["reason"] = f"{rec.name}: {reason}" if reason else rec.name
        self._row(c, rec.ts, rec.dir, rec.kind, rec.name, rec.fields, rec.packets, out,
                  **extra)

    def _row(self, c: _Conn, ts, direction, kind, name, fields, packets, out, **extra) -> None:
        origin = self.origin
        where = [origin[p - 1] for p in packets]
        c.seq += 1
        row = [
            ts, c.flow.label, direction, kind, name, fields_json(fields, compact=True),
            [p for _f, p in where], c.conn_id, where[0][0] if where else None,
            [f for f, _p in where], c.seq,
        ]
        row.extend(_NO_EXTRAS)
        for key, value in extra.items():
            row[_INDEX[key]] = value
        out.append(row)


_IN_COLUMNS = ("file", "packet", "ts", "src", "sport", "dst", "dport", "seq", "ack", "flags",
               "payload", "missing")


def _to_batch(rows: list[list]) -> pa.RecordBatch:
    arrays = [
        pa.array(column, type=field.type)
        for column, field in zip(zip(*rows, strict=True), ARROW_FRAME_SCHEMA, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_FRAME_SCHEMA)


def decode_sorted_batches(
    batches: Iterable[pa.RecordBatch],
    *,
    idle_split: float = 600.0,
    server_ports: Iterable[int] = (4150,),
    out_rows: int = 8192,
    per_file: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Frame rows for packet batches sorted by (``_ka``, ``_kb``, ts, file, packet).

    With ``per_file`` the keys include the file, and connection ids end in ``" in FILE"``.
    """
    decoder: ConnectionsDecoder | None = None
    key = None
    pending: list[list] = []
    for batch in batches:
        cols = [batch.column(name).to_pylist() for name in ("_ka", "_kb", *_IN_COLUMNS)]
        for ka, kb, *row in zip(*cols, strict=True):
            if (ka, kb) != key:
                if decoder is not None:
                    pending.extend(decoder.finish())
                scope = f" in {os.path.basename(row[0])}" if per_file else ""
                decoder = ConnectionsDecoder(idle_split=idle_split, server_ports=server_ports,
                                             scope=scope)
                key = (ka, kb)
            pending.extend(decoder.feed(*row))
            if len(pending) >= out_rows:
                yield _to_batch(pending)
                pending = []
    if decoder is not None:
        pending.extend(decoder.finish())
    if pending:
        yield _to_batch(pending)
