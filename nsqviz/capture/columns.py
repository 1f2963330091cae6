"""The frames table by the columnar path: reassembled TCP bytes straight to Arrow columns.

The analyses, the doctor and ``nsqviz.open(..., fields=False)`` read the frames table
(:func:`nsqviz.records.frame_schema`); the object path builds it from one event, one
fields dict and one record per unit. This module builds the same table with no Python
object per unit for a connection whose protocol has a columnar framer
(:meth:`nsqviz.protocols.protocol.Protocol.columnar`):

* the capture is read, reassembled, and its flows detected exactly as ``nsqviz decode``
  does -- by the :class:`~nsqviz.capture.decode.CaptureDecoder`, of which
  :class:`ColumnarDecoder` is a subclass: one path for bytes;
* a flow seen from its handshake whose protocol has a framer is a *lane*: its observer's
  place is taken by the lane, which keeps each chunk of bytes (with its packet and time)
  and holds the flow's other records (its start, its TCP findings, its end) in the order
  they came;
* when both directions have ended, the framer gathers the connection's units from the
  two streams (:class:`~nsqviz.protocols.columnar.Units`); the lane's :class:`Timeline` says which
  chunk completed each unit, hence its time, its packets and its place among the
  connection's records (``seq``);
* where the framer declines (a violation, a refused command, TLS ...) or
  the capture lost bytes of the flow (a gap), the lane hands the flow back: its chunks
  and its ends are fed to the protocol's observer in the order they came, and the flow
  goes on through the object path, as if it had never left it.

A test holds the two paths to the same frames table, connection by connection, on every
sample capture and on generated traffic (``tests/capture/test_columns.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from nsqviz.arrays import from_list, from_numpy, indices
from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.driver import IDLE_SPLIT
from nsqviz.capture.files import CaptureFormatError
from nsqviz.capture.flow import Flow
from nsqviz.capture.flowstate import FlowState
from nsqviz.capture.layers import packet_id
from nsqviz.capture.tcp import Data, FlowEnd, TcpEvent
from nsqviz.capture.units import end_records, unit_records
from nsqviz.protocols.columnar import ColumnarFramer, Units
from nsqviz.protocols.items import Item, Lost
from nsqviz.protocols.protocol import Protocol
from nsqviz.records import (
    FRAME_COLUMNS,
    TCP_COLUMNS,
    ConnectionRows,
    DecodedRecord,
    frame_schema,
)
from nsqviz.stream.direction import Direction

__all__ = ["ColumnarDecoder", "frames_table"]

_FILE_SHIFT = packet_id(1, 0).bit_length() - 1
"""How far a packet id's file index is shifted (:func:`~nsqviz.capture.layers.packet_id`)."""


_new_tuple = tuple.__new__  # a namedtuple without its Python-level __new__: once a chunk


class _Fed(NamedTuple):
    direction: Direction
    data: bytes
    number: int
    ts: float


class _Ended(NamedTuple):
    end: FlowEnd


class _Lane:
    """A flow on the columnar path: in its observer's place, it keeps what the observer
    would have been fed, and the flow's other records, in order (``entries``)."""

    encrypted = False

    def __init__(self, decoder: ColumnarDecoder, state: FlowState, framer: ColumnarFramer):
        self.decoder = decoder
        self.state = state
        self.framer = framer
        self.real = state.observer
        self.entries: list[_Fed | _Ended | DecodedRecord] = []
        self.failed = False

    def take(self, data: Data) -> bool:
        """What :meth:`CaptureDecoder._on_data` does with a chunk of a lane's flow that
        makes no record (its side neither ended nor skipping bytes after a gap) -- the
        counts, then :meth:`feed` -- without a call per layer: ``False`` for any other."""
        direction = data.direction
        if self.state.sides[direction].dead or self.state.sides[direction].skip:
            return False
        stats = self.state.stats
        stats.packets += 1
        stats.payload_bytes[direction] += len(data.data)
        self.entries.append(_new_tuple(_Fed, (direction, data.data, data.number, data.ts)))
        return True

    def feed(self, direction: str, data: bytes, segment: int) -> list[Item]:
        # (the decoder feeds a Direction, whatever the interface's type says)
        self.entries.append(_Fed(direction, data, segment, self.decoder.ts))  # type: ignore[arg-type]
        return []

    def end(self, direction: str, segment: int) -> list[Item]:
        assert self.decoder.end is not None
        self.entries.append(_Ended(self.decoder.end))
        return []

    def gap(self, direction: str) -> Lost:
        if not self.failed:  # bytes missing: the observer judges what they cost
            self.decoder.hand_back(self)
        assert self.real is not None
        return self.real.gap(direction)

    def timeline(self) -> _Timeline:
        return _Timeline(self.entries)


class _Timeline:
    """:class:`~nsqviz.protocols.columnar.Timeline` of a lane: a unit was read with the chunk
    that completed it, at that chunk's place among the lane's entries."""

    def __init__(self, entries: list[Any]):
        self.chunks: dict[Direction, tuple[np.ndarray, ...]] = {}
        for direction in Direction:
            fed = [(i, len(e.data), e.number, e.ts) for i, e in enumerate(entries)
                   if type(e) is _Fed and e.direction is direction]
            at, sizes, numbers, ts = (np.array(c) for c in zip(*fed, strict=True)) if fed \
                else (np.zeros(0, np.int64),) * 4
            self.chunks[direction] = (np.cumsum(sizes, dtype=np.int64), at.astype(np.int64),
                                      numbers.astype(np.int64), ts.astype(np.float64))

    def chunk(self, direction: str, ends: np.ndarray) -> np.ndarray:
        """The chunk that completed each unit."""
        return np.searchsorted(self.chunks[Direction(direction)][0], ends, side="left")

    def order(self, direction: str, ends: Any) -> Any:
        return self.chunks[Direction(direction)][1][self.chunk(direction, ends)]

    def packet(self, direction: str, ends: Any) -> Any:
        return self.chunks[Direction(direction)][2][self.chunk(direction, ends)]

    def sizes(self, direction: str) -> np.ndarray:
        return np.diff(self.chunks[Direction(direction)][0], prepend=0)

    def read_as(self, direction: str, sizes: np.ndarray) -> None:
        _, at, numbers, ts = self.chunks[Direction(direction)]
        self.chunks[Direction(direction)] = (np.cumsum(sizes, dtype=np.int64), at, numbers, ts)


class _Done(NamedTuple):
    """A lane the framer took: its flow, protocol, entries and units."""

    flow: Flow
    protocol: Protocol
    entries: list[Any]
    timeline: _Timeline
    units: tuple[Units, Units]


class ColumnarDecoder(CaptureDecoder):
    """A :class:`~nsqviz.capture.decode.CaptureDecoder` (``flow_records``, no ``fields``)
    that leaves the units of the flows its protocols can frame in columns: :meth:`step`
    gives the records of every other flow (and of a lane handed back) as it goes, and
    :attr:`done` the lanes the framers took (see the module doc)."""

    def __init__(self, **options: Any):
        super().__init__(flow_records=True, fields=False, **options)
        self.lanes: dict[int, _Lane] = {}
        self.done: list[_Done] = []
        self.ts = 0.0  # of the chunk being handled
        self.end: FlowEnd | None = None  # the end being handled
        self._framers: dict[str, ColumnarFramer | None] = {}
        self._handed: list[DecodedRecord] = []  # records of lanes handed back in this step

    def step(self, step: Any) -> list[DecodedRecord]:
        out = super().step(step)
        if self._handed:
            out = self._handed + out
            self._handed = []
        return out

    def finish(self) -> list[DecodedRecord]:
        """Resolve the lanes still open (the capture's end ended every flow); the records
        of those handed back."""
        for lane in list(self.lanes.values()):
            self._resolve(lane)
        out, self._handed = self._handed, []
        return out

    # -- the object path's hooks ----------------------------------------------------

    def _detect(self, state: FlowState, data: Data, hello: bytes = b"",
                answer: bytes = b"") -> None:
        super()._detect(state, data, hello, answer)
        proto = state.protocol
        if proto is None or state.observer is None or not state.flow.syn_seen:
            return
        if proto.name not in self._framers:
            self._framers[proto.name] = proto.columnar()
        framer = self._framers[proto.name]
        if framer is not None:
            lane = _Lane(self, state, framer)
            self.lanes[state.flow.id] = lane
            state.observer = lane

    def _events(self, events: list[TcpEvent], out: list[DecodedRecord]) -> None:
        lanes = self.lanes
        for tcp_event in events:
            if type(tcp_event) is Data:
                lane = lanes.get(tcp_event.flow.id)
                if lane is None or not lane.take(tcp_event):
                    records = self._on_data(self.flows[tcp_event.flow.id], tcp_event)
                    if records:
                        out.extend(records)
            else:
                out.extend(self._on_tcp(tcp_event))

    def _on_data(self, state: FlowState, data: Data) -> list[DecodedRecord]:
        self.ts = data.ts
        return self._keep(state.flow.id, super()._on_data(state, data))

    def _on_tcp(self, tcp_event: Any) -> Iterator[DecodedRecord]:
        yield from self._keep(tcp_event.flow.id, list(super()._on_tcp(tcp_event)))

    def _on_end(self, state: FlowState, end: FlowEnd) -> Iterator[DecodedRecord]:
        self.end = end
        records = self._keep(state.flow.id, list(super()._on_end(state, end)))
        lane = self.lanes.get(state.flow.id)
        if lane is not None and all(s.dead for s in state.sides.values()):
            self._resolve(lane)
        yield from records

    def _keep(self, flow_id: int, records: list[DecodedRecord]) -> list[DecodedRecord]:
        """The records one TCP event made: a lane's go among its entries, in order after
        what the lane was fed by the same event (a lane's observer makes no record)."""
        if not records:  # the usual Data event: nothing to place, no lookup
            return records
        lane = self.lanes.get(flow_id)
        if lane is None:
            return records
        lane.entries.extend(records)
        return []

    # -- lanes -------------------------------------------------------------------------

    def _resolve(self, lane: _Lane) -> None:
        """Both directions ended: the framer's columns, or the flow handed back."""
        entries = lane.entries
        streams = {d: b"".join(e.data for e in entries if isinstance(e, _Fed) and e.direction is d)
                   for d in Direction}
        timeline = lane.timeline()
        units = lane.framer.connection(streams[Direction.C2S], streams[Direction.S2C],
                                       timeline)
        if units is None:
            self.hand_back(lane)
            return
        del self.lanes[lane.state.flow.id]
        assert lane.state.protocol is not None
        self.done.append(_Done(lane.state.flow, lane.state.protocol, entries, timeline, units))

    def hand_back(self, lane: _Lane) -> None:
        """The flow goes back to the object path: the observer is fed what the lane kept,
        in order, and the records come out as they would have."""
        state = lane.state
        lane.failed = True
        del self.lanes[state.flow.id]
        state.observer = real = lane.real
        assert real is not None
        out = self._handed
        dead = {d: side.dead for d, side in state.sides.items()}  # what its ends left
        for side in state.sides.values():
            side.dead = ""
        for entry in lane.entries:
            if isinstance(entry, _Fed):  # (no gap came before: _on_data's other checks hold)
                if real.encrypted:
                    state.stats.encrypted_bytes += len(entry.data)
                    continue
                items = real.feed(entry.direction, entry.data, entry.number)
                if items:
                    out.extend(unit_records(state, state.sides[entry.direction],
                                             entry.direction, items, entry.number, entry.ts))
            elif isinstance(entry, _Ended):
                out.extend(end_records(state, entry.end))
                state.sides[entry.end.direction].dead = dead[entry.end.direction]
            else:
                out.append(entry)
        if all(s.dead for s in state.sides.values()):
            state.observer = None  # as the object path leaves a finished flow


_NULLS: dict[Any, Any] = {}


def _nulls(n: int, typ: Any) -> Any:
    """``n`` nulls of ``typ``: a slice of one array per type, so that the many typed
    columns a connection leaves empty (another protocol's) share their buffers instead
    of each batch allocating its own."""
    have = _NULLS.get(typ)
    if have is None or len(have) < n:
        have = _NULLS[typ] = pa.nulls(max(n, 2 * len(have) if have is not None else n), typ)
    return have.slice(0, n)


def _list_array(offsets: np.ndarray, values: Any) -> Any:
    return pa.ListArray.from_arrays(from_numpy(offsets, pa.int32()), values)


class _Table:
    """The frames table as it is built: the object path's rows (records, numbered per
    connection by :class:`~nsqviz.records.ConnectionRows`, as the pipeline numbers them)
    and the lanes' units, batch by batch."""

    def __init__(self, files: list[str]):
        self.files = files
        self.names = from_list(files, pa.string())
        self.rows = ConnectionRows(files, fields=False)
        self.batches: list[Any] = []
        self.schema = frame_schema()

    def add(self, rec: DecodedRecord) -> None:
        self.rows.add(rec)

    def flush(self, at_least: int = 1) -> None:
        if len(self.rows.columns) >= at_least:
            self.batches.append(self.rows.columns.batch())

    def lane(self, done: _Done) -> None:
        """A lane's rows: its records and its units, numbered in the order an observer
        fed chunk by chunk would have given them."""
        c = self.rows.conns[done.flow.id]  # its FlowStart came before its lane began
        records = [(i, e) for i, e in enumerate(done.entries) if type(e) is DecodedRecord]
        c2s, s2c = done.units
        orders = [done.timeline.order(Direction.C2S, c2s.ends),
                  done.timeline.order(Direction.S2C, s2c.ends)]
        at = np.concatenate([np.array([i for i, _ in records], np.int64), *orders])
        sub = np.concatenate([np.zeros(len(records), np.int64),
                              np.arange(len(c2s.ends)), np.arange(len(s2c.ends))])
        seq = np.empty(len(at), np.int64)
        seq[np.lexsort((sub, at))] = np.arange(c[1] + 1, c[1] + 1 + len(at))
        c[1] += len(at)
        for k, (_, rec) in enumerate(records):
            self.rows.columns.add(rec, c[0], int(seq[k]))
        base = len(records)
        for direction, units in zip(Direction, done.units, strict=True):
            n = len(units.ends)
            if n:
                self.batches.append(self._units(done, direction, units,
                                                seq[base:base + n], c[0]))
            base += n

    def _units(self, done: _Done, direction: Direction, units: Units, seq: np.ndarray,
               conn_id: str) -> Any:
        n = len(units.ends)
        ends = np.asarray(units.ends, np.int64)
        starts = np.concatenate(([0], ends[:-1])).astype(np.int64)
        sizes_, _at, numbers, tss = done.timeline.chunks[direction]
        first = np.searchsorted(sizes_, starts, side="right")
        last = np.searchsorted(sizes_, ends, side="left")
        counts = last - first + 1
        offsets = np.concatenate(([0], np.cumsum(counts)))
        flat = np.repeat(first - offsets[:-1], counts) + np.arange(offsets[-1])
        brought = np.diff(sizes_, prepend=0)
        if not brought.all():  # chunks that gave the protocol no byte (read_as): no packets
            keep = brought[flat] > 0
            flat = flat[keep]
            counts = np.add.reduceat(keep, offsets[:-1])
            offsets = np.concatenate(([0], np.cumsum(counts)))
        ids = numbers[flat]
        if len(numbers) > 1 and not (np.diff(numbers) > 0).all():
            # packets that came out of order: each unit's, sorted and each once
            unit = np.repeat(np.arange(n), counts)
            k = np.lexsort((ids, unit))
            ids, unit = ids[k], unit[k]
            keep = np.concatenate(([True], (ids[1:] != ids[:-1]) | (unit[1:] != unit[:-1])))
            ids = ids[keep]
            offsets = np.concatenate(([0], np.cumsum(np.bincount(unit[keep], minlength=n))))
        file_index = ids >> _FILE_SHIFT
        packet = ids & ((1 << _FILE_SHIFT) - 1)
        file_names = self.names.take(indices(file_index))
        one = np.zeros(n, np.int32)

        def constant(value: str | None) -> Any:
            return _nulls(n, pa.string()) if value is None else \
                from_list([value], pa.string()).take(indices(one))

        def answer(values: Any) -> Any:
            if values is None:
                return _nulls(n, pa.int64())
            v = np.asarray(values, np.int64)
            return from_numpy(v, pa.int64(), v >= 0)

        response_to = units.response_to
        if response_to is not None:
            r = np.asarray(response_to, np.int64)
            response_to = np.where(r < 0, r, r & ((1 << _FILE_SHIFT) - 1))
        columns = {
            "ts": from_numpy(tss[last], pa.float64()),
            "flow": constant(done.flow.label),
            "dir": constant(direction.value),
            "kind": constant(units.kind),
            "name": from_list(units.names, pa.string()).take(indices(units.codes)),
            "packets": _list_array(offsets, from_numpy(packet, pa.int64())),
            "protocol": constant(done.protocol.name),
            "conn_id": constant(conn_id),
            "file": file_names.take(indices(offsets[:-1])),
            "packet_files": _list_array(offsets, file_names),
            "seq": from_numpy(seq, pa.int64()),
            "offset": from_numpy(np.where(starts >= units.restart, starts - units.restart,
                                          starts), pa.int64()),
            "size": from_numpy(ends - starts, pa.int64()),
            "response_to": answer(response_to),
            "answers": answer(units.answers),
        }
        typed = {name for name, _ in (*FRAME_COLUMNS, *TCP_COLUMNS)}
        arrays = []
        for field in self.schema:
            if field.name in columns:
                arrays.append(columns[field.name])
            elif field.name in typed:
                arrays.append(_nulls(n, field.type))
            else:
                arrays.append(_typed(n, units.parts, field.name, field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _typed(n: int, parts: list[tuple[Any, dict[str, Any]]], name: str, typ: Any) -> Any:
    """Typed column ``name`` from the framer's parts (rows no part fills are null)."""
    pieces = []
    where = np.full(n, -1, dtype=np.int64)
    at = 0
    for rows, cols in parts:
        values = cols.get(name)
        if values is None or not len(rows):
            continue
        arr = values if isinstance(values, pa.Array) else \
            from_numpy(values, typ) if isinstance(values, np.ndarray) else from_list(values, typ)
        if arr.type != typ:
            arr = arr.cast(typ)
        where[np.asarray(rows)] = np.arange(at, at + len(rows))
        at += len(rows)
        pieces.append(arr)
    if not pieces:
        return _nulls(n, typ)
    pieces.append(pa.nulls(1, typ))
    where[where < 0] = at
    return pa.concat_arrays(pieces).take(indices(where))


def frames_table(files: list[str], *, idle_split: float | None = IDLE_SPLIT,
                 ports: Mapping[str, Iterable[int]] | None = None,
                 batch_rows: int = 8192) -> Any:
    """The frames table (without its ``fields`` column, which stays null) of the capture
    set ``files`` by the columnar path, as a ``pyarrow.Table``: the rows
    :func:`nsqviz.analysis.capture.frames_of` gives with ``fields=False``, connection by
    connection (row order aside)."""
    decoder = ColumnarDecoder(idle_split=idle_split, ports=ports)
    table = _Table(files)

    def take(records: list[DecodedRecord]) -> None:
        if not records and not decoder.done:  # most packets
            return
        for rec in records:
            table.add(rec)
        for done in decoder.done:
            table.lane(done)
        decoder.done.clear()
        table.flush(batch_rows)

    for index, path in enumerate(files):
        try:
            with open(path, "rb") as f:
                for step in decoder.driver.read(f, index):
                    take(decoder.step(step))
        except (CaptureFormatError, OSError) as exc:
            table.add(DecodedRecord(float("nan"), None, None, "error", "CaptureWarning",
                                    {"reason": f"{path}: {exc}"}, (), files=()))
    take(decoder.step(decoder.driver.finish(len(files) - 1)))
    take(decoder.finish())
    table.flush()
    return pa.Table.from_batches(table.batches, schema=table.schema)
