"""Decoding the conversations in a capture, through the same codecs as live traffic.

Pipeline: the :class:`~nsqviz.capture.driver.CaptureDriver` (files -> packets -> TCP
flow events) -> per flow, the protocol that claims it (:mod:`nsqviz.protocols`) and its
connection observer, fed both directions in capture order with the packet of every
chunk, so every decoded unit knows its packets.

What this module adds is the capture's honesty layer around the protocols' observers:

* **detection** -- a flow seen from its handshake belongs to the protocol in whose
  framing its server answers (a server refuses a hello it does not speak in its own
  protocol), else to the one whose client hello it starts with or whose server port it
  uses, so its records wait for the server's first bytes (:data:`HOLD_LIMIT`); a flow
  whose capture started mid-connection belongs to the protocol whose server port it
  uses or whose bytes it looks like; other flows are counted, not decoded as garbage;
* **gaps** -- bytes missing from the capture are a ``gap`` record with offset and size.
  The unit they cut is reported lost, and decoding resumes at the next unit boundary:
  *proven* when the cut unit's size prefix arrived before the gap and the gap ends
  inside that unit (the boundary is then exact), *heuristic* otherwise (the framing
  rule's resynchronisation), and the record says which;
* **TLS and compression** -- after a TLS switch a flow is shown as encrypted (a ``tls``
  record and a byte count); a gap that a protocol cannot decode past (a compressed
  stream) ends decoding of that direction, said so.

Output is a stream of :class:`~nsqviz.records.DecodedRecord`, the rows ``nsqviz
decode`` prints, each as soon as the packet that completes it has been read (so a
capture read from a pipe while tcpdump writes it is decoded as it is made) -- but the
first records of a connection seen from its start, which wait for its server's first
bytes: they come out with that packet, after the records other connections completed
meanwhile. With
``tcp_records``, as ``nsqviz decode`` shows them, also a ``tcp`` record -- with the
``side`` whose packet it is -- where a decoded connection's peer closes it (``FIN``)
or resets it (``RST``), announces a zero window (``ZeroWindow``) or a window again
after one (``WindowOpen``), or sends what Wireshark calls a retransmission or an
out-of-order segment (``Retransmission``): the TCP analysis of
:mod:`~nsqviz.capture.tcp_analysis`. With ``flow_records`` (the pipeline) a ``flow``
record where each flow starts (``how``: ``syn``, or ``midstream`` when its start was not
captured) and where each direction ends, and the ``tcp`` records of every flow but its
FINs (which the flow records hold), with a ``Truncated`` one per direction the snaplen
cut: what the connections table and the TCP views are built from.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NamedTuple

from nsqviz import protocols
from nsqviz.capture.driver import IDLE_SPLIT, CaptureDriver, Step, split_packet_id
from nsqviz.capture.files import CaptureWarning
from nsqviz.capture.flow import Flow
from nsqviz.capture.tcp import Data, FlowEnd, FlowStart, Gap, TcpEvent
from nsqviz.capture.tcp_analysis import Finding, Retransmission, Truncated
from nsqviz.protocols import ConnectionObserver, Item, ItemKind, Protocol
from nsqviz.records import DecodedRecord
from nsqviz.stream.direction import Direction

__all__ = ["CaptureDecoder", "FlowSnapshot", "FlowStats", "decode_capture"]

_FILE0 = 1 << 40  # packet ids below this are in the first file
_SIDES = {Direction.C2S: "client", Direction.S2C: "server"}  # who sent a direction's bytes

# A namedtuple's own __new__ is a Python-level function; tuple.__new__ builds the same
# object in C, which counts once per record (the capture readers' hot loop).
_new_tuple = tuple.__new__

SWEEP_EVERY = 5.0
"""Seconds of capture time between two sweeps of a live decoder's flows."""

HOLD_LIMIT = 256 * 1024
"""Client bytes a flow seen from its start holds while its server has not answered yet
(:func:`~nsqviz.protocols.detect` weighs the answer), and a 64th of it TCP events: past
them, its client's bytes alone decide."""

_FIRST_BYTES = 64
"""Bytes of each side enough for any protocol to say whether they are its client's hello
or its server's answer."""


# ---------------------------------------------------------------------------- stats


@dataclass(slots=True)
class FlowStats:
    """Per-flow counts, as ``nsqviz decode --stats`` prints them. ``protocol`` is the
    name of the protocol that claimed the flow, ``None`` before any payload, ``""``
    when none did (``why`` says why)."""

    flow: Flow
    protocol: str | None = None
    why: str = ""
    packets: int = 0
    payload_bytes: dict[str, int] = field(
        default_factory=lambda: {Direction.C2S: 0, Direction.S2C: 0})
    records: dict[str, int] = field(default_factory=dict)  # kind -> count
    # Histograms (value -> how often), so memory stays flat however long the capture:
    frames_per_packet: Counter[int] = field(default_factory=Counter)
    packets_per_frame: Counter[int] = field(default_factory=Counter)
    retransmitted_bytes: int = 0
    gap_bytes: int = 0
    encrypted_bytes: int = 0
    undecoded_bytes: int = 0


# -------------------------------------------------------------------------- decoding


class _Side:
    """Decoding state of one direction of one flow."""

    __slots__ = ("epoch", "skip", "resyncing", "dead", "packet", "frames")

    def __init__(self) -> None:
        self.epoch = 0  # stream offset where the observer's current stream starts
        self.skip = 0  # bytes of a lost unit still to discard after a proven resync
        self.resyncing = False  # after a gap with no provable boundary, until a good unit
        self.dead = ""  # why this direction can no longer be decoded
        self.packet = -1  # the packet whose units are being counted, and how many so far
        self.frames = 0


class _FlowState:
    __slots__ = ("flow", "stats", "protocol", "observer", "sides", "held", "hello", "answer",
                 "held_bytes")

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        # Before the protocol is chosen, the TCP events of a flow seen from its start
        # wait (``held``) for the server's first bytes (``answer``); ``hello``: the
        # client's first bytes (a hello may come in several segments).
        self.held: list[TcpEvent] | None = None
        self.hello = self.answer = b""
        self.held_bytes = 0
        self.stats = FlowStats(flow)
        self.protocol: Protocol | None = None
        self.observer: ConnectionObserver | None = None
        self.sides = {Direction.C2S: _Side(), Direction.S2C: _Side()}


class FlowSnapshot(NamedTuple):
    """One open flow as a decoder holds it (:meth:`CaptureDecoder.snapshot`)."""

    flow: Flow
    halves: object  # the tracker's reassembly state of both directions
    state: _FlowState


class CaptureDecoder:
    """Decodes captures into :class:`~nsqviz.records.DecodedRecord` rows; keeps per-flow
    statistics.

    ``protocols`` are offered every flow (default: all registered); ``ports`` adds
    server ports per protocol name to each protocol's own. ``continuation`` and
    ``idle_split`` are the :class:`~nsqviz.capture.driver.CaptureDriver`'s options.
    Records come out in capture order (a unit when its last packet arrives, as
    Wireshark shows a reassembled PDU).

    ``live``: the capture is being made while it is read and may run for hours, so
    memory must not grow with it: every :data:`SWEEP_EVERY` seconds of capture time the
    flows silent for longer than ``idle_split`` are ended (their records come out then)
    and the flows ended :data:`~nsqviz.capture.tcp.LINGER` seconds ago are forgotten,
    their statistics with them (:attr:`stats` lists the flows still held; the counts
    :attr:`flow_count` and :attr:`claimed` cover all), and capture warnings are counted,
    not kept.

    Without ``fields`` the records of commands and frames carry only what marks them (a
    violation, what they answer), for readers of the typed columns alone
    (:meth:`~nsqviz.protocols.Protocol.observer`).
    """

    def __init__(self, *, protocols: Iterable[Protocol] | None = None,
                 ports: Mapping[str, Iterable[int]] | None = None,
                 continuation: bool = True, idle_split: float | None = IDLE_SPLIT,
                 flow_records: bool = False, live: bool = False,
                 tcp_records: bool = False, fields: bool = True):
        self.protocols = tuple(protocols) if protocols is not None else _registered()
        extra = ports or {}
        self.ports = {p.name: p.server_ports | frozenset(extra.get(p.name, ()))
                      for p in self.protocols}
        self.server_ports = frozenset().union(*self.ports.values())
        self.flow_records = flow_records
        self.fields = fields
        self.tcp_records = tcp_records
        hellos = [p.client_hello for p in self.protocols]
        self.driver = CaptureDriver(
            server_ports=self.server_ports,
            client_hello=lambda data: any(h(data) for h in hellos),
            continuation=continuation, idle_split=idle_split,
        )
        self.flows: dict[int, _FlowState] = {}
        self.warnings: list[CaptureWarning] = []
        self.warning_count = 0  # also where warnings are not kept (live)
        self.flow_count = 0  # TCP flows seen
        self.claimed = 0  # flows a protocol claimed
        self.live = live
        self._next_sweep = -math.inf
        self.packets = 0
        self.not_tcp = 0
        self.first_ts: float | None = None  # of the first packet: text output's time zero

    @property
    def stats(self) -> list[FlowStats]:
        return [s.stats for s in self.flows.values()]

    def decode(self, paths: Iterable[str | os.PathLike[str] | BinaryIO]) -> Iterator[DecodedRecord]:
        """All records of the given capture files (one capture set unless the decoder
        was made with ``continuation=False``); flow ids continue across files."""
        for step in self.driver.run(paths):
            yield from self.step(step)

    def step(self, step: Step) -> list[DecodedRecord]:
        """The records one :class:`~nsqviz.capture.driver.Step` of the driver completes."""
        if step.warning is not None:
            return [self._warning(step.warning, step.file_index)]
        out: list[DecodedRecord] = []
        if step.record is not None:
            self.packets += 1
            ts = step.record.ts
            if self.first_ts is None:
                self.first_ts = ts
            if self.live and ts >= self._next_sweep:
                self._next_sweep = ts + SWEEP_EVERY
                self._sweep(ts, out)
            if step.segment is None:
                self.not_tcp += 1
                return out
        self._events(step.events, out)
        return out

    def _events(self, events: list[TcpEvent], out: list[DecodedRecord]) -> None:
        for tcp_event in events:
            if type(tcp_event) is Data:  # the hot path
                records = self._on_data(self.flows[tcp_event.flow.id], tcp_event)
                if records:
                    out.extend(records)
            else:
                out.extend(self._on_tcp(tcp_event))

    def _sweep(self, now: float, out: list[DecodedRecord]) -> None:
        """End the idle flows and forget the long-ended ones (``live``)."""
        events, gone = self.driver.tracker.sweep(now)
        self._events(events, out)
        for flow in gone:
            del self.flows[flow.id]

    def feed(self, tcp_event: Any) -> list[DecodedRecord]:
        """The records one TCP event completes -- for callers that drive the
        :class:`~nsqviz.capture.driver.CaptureDriver` themselves."""
        if type(tcp_event) is Data:
            return self._on_data(self.flows[tcp_event.flow.id], tcp_event)
        return list(self._on_tcp(tcp_event))

    def snapshot(self, flow: Flow) -> FlowSnapshot:
        """Everything this decoder and its tracker hold of one open ``flow``: continued
        by :meth:`adopt` in another decoder, it decodes the rest of the connection as if
        this one had gone on (plain data, so it pickles -- unless the protocol's
        observer holds something that does not, like a compressor's state)."""
        return FlowSnapshot(flow, self.driver.tracker.halves(flow), self.flows[flow.id])

    def adopt(self, snap: FlowSnapshot, *, replacing: Flow) -> None:
        """Go on decoding ``snap``'s flow in place of ``replacing``, a flow this decoder
        has just started at the snapshot flow's first packet (see
        :meth:`~nsqviz.capture.tcp.FlowTracker.adopt`)."""
        self.driver.tracker.adopt(snap.flow, snap.halves, replacing=replacing)
        del self.flows[replacing.id]
        self.flows[snap.flow.id] = snap.state

    def flow_stats(self, flow_id: int) -> FlowStats:
        """What has been seen of one flow so far."""
        return self.flows[flow_id].stats

    def _warning(self, w: CaptureWarning, file_index: int) -> DecodedRecord:
        self.warning_count += 1
        if not self.live:
            self.warnings.append(w)
        fields: dict[str, Any] = {"reason": w.reason, "file_offset": w.offset}
        # a damaged file's CaptureWarning, or a PacketWarning (one unreadable packet)
        return DecodedRecord(float("nan"), None, None, "error", type(w).__name__, fields,
                             (w.number,), files=(file_index,))

    # -- TCP events -> records ---------------------------------------------------------

    def _on_tcp(self, tcp_event: Any) -> Iterator[DecodedRecord]:
        """The records one TCP event completes."""
        kind = type(tcp_event)
        flow = tcp_event.flow
        if kind is FlowStart:
            self.flows[flow.id] = _FlowState(flow)
            self.flow_count += 1
            if self.flow_records:
                yield self._record(flow, None, "flow", "FlowStart",
                                   {"how": "midstream" if flow.midstream else "syn"},
                                   tcp_event.ts, (tcp_event.number,), None)
            return
        state = self.flows[flow.id]
        if state.held is not None:
            yield from self._hold(state, tcp_event)
        elif kind is Data:
            yield from self._on_data(state, tcp_event)
        elif kind is Gap:
            yield from self._on_gap(state, tcp_event)
        elif kind is FlowEnd:
            yield from self._on_end(state, tcp_event)
        else:
            if kind is Retransmission:
                state.stats.retransmitted_bytes += tcp_event.repeated
            if self.flow_records or (self.tcp_records and state.protocol is not None
                                     and kind is not Truncated):
                yield self._tcp_record(state, tcp_event)

    def _tcp_record(self, state: _FlowState, event: Finding) -> DecodedRecord:
        """The ``tcp`` record of one finding of the TCP analysis: whose packet it is
        (``side``), then what the analysis found."""
        fields = {"side": _SIDES[event.direction], **event.fields()}
        proto = state.protocol.name if state.protocol is not None else None
        return self._record(state.flow, event.direction, "tcp", event.record, fields,
                            event.ts, event.packets(), None, proto, *event.span())

    def _record(self, flow: Flow, direction: Direction | None, kind: str, name: str,
                fields: dict[str, Any], ts: float, ids: tuple[int, ...], event: Any,
                protocol: str | None = None, offset: int | None = None,
                size: int | None = None) -> DecodedRecord:
        if ids and ids[-1] >= _FILE0:
            pairs = [split_packet_id(i) for i in ids]
            files, packets = tuple(f for f, _ in pairs), tuple(n for _, n in pairs)
        else:
            files, packets = (0,) * len(ids), ids
        return _new_tuple(DecodedRecord, (ts, flow.label, direction, kind, name, fields,
                                          packets, flow.id, event, protocol, files, offset,
                                          size))

    def _hold(self, state: _FlowState, tcp_event: TcpEvent) -> list[DecodedRecord]:
        """Keep a TCP event of a flow whose protocol waits for its server's first bytes;
        once they (or the end of the flow, or :data:`HOLD_LIMIT`) decide, the records of
        every event held, in order."""
        held = state.held
        assert held is not None
        held.append(tcp_event)
        if not self._decides(state, tcp_event) and len(held) <= HOLD_LIMIT // 64:
            return []
        state.held = None
        first = held[0]
        assert type(first) is Data
        self._detect(state, first, state.hello, state.answer)
        state.hello = state.answer = b""
        out: list[DecodedRecord] = []
        for event in held:
            out.extend(self._on_data(state, event) if type(event) is Data
                       else self._on_tcp(event))
        return out

    def _decides(self, state: _FlowState, tcp_event: TcpEvent) -> bool:
        """Is the protocol of a held flow known once this event is held?"""
        if isinstance(tcp_event, Data):
            data = tcp_event.data
            if tcp_event.direction == Direction.C2S:
                state.hello += data[:_FIRST_BYTES - len(state.hello)]
                state.held_bytes += len(data)
                return state.held_bytes > HOLD_LIMIT
            state.answer += data[:_FIRST_BYTES - len(state.answer)]
            return len(state.answer) >= _FIRST_BYTES or not protocols.answer_undecided(
                self.protocols, state.answer)
        if isinstance(tcp_event, FlowEnd):  # a client's FIN leaves its server free to answer
            return tcp_event.how != "fin" or tcp_event.direction != Direction.C2S
        # a gap decides; what the TCP analysis flags (a retransmission, a zero window ...) not
        return isinstance(tcp_event, Gap)

    def _detect(self, state: _FlowState, data: Data, hello: bytes = b"",
                answer: bytes = b"") -> None:
        """Choose the flow's protocol from its first payload ``data`` (of a flow seen from
        its start: ``hello``, the client's first bytes, and ``answer``, the server's)."""
        flow, stats = state.flow, state.stats
        from_start = data.direction == Direction.C2S and data.offset == 0 and flow.syn_seen
        proto, why = protocols.detect(self.protocols, data.direction, hello or data.data,
                                      from_start=from_start, ports=self.ports,
                                      server_port=flow.server[1], answer=answer)
        stats.why = why
        if proto is None:
            stats.protocol = ""
            return
        stats.protocol = proto.name
        state.protocol = proto
        self.claimed += 1
        # With the handshake captured both streams are seen from their first byte.
        midstream = not flow.syn_seen
        state.observer = proto.observer(midstream=midstream, fields=self.fields)
        for side in state.sides.values():
            side.resyncing = midstream

    def _on_data(self, state: _FlowState, data: Data) -> list[DecodedRecord]:
        stats = state.stats
        if stats.protocol is None:
            if state.held is not None or (data.direction == Direction.C2S and data.offset == 0
                                          and state.flow.syn_seen):
                if state.held is None:
                    state.held = []
                return self._hold(state, data)
            self._detect(state, data)
        direction = data.direction
        stats.packets += 1
        stats.payload_bytes[direction] += len(data.data)
        observer = state.observer
        if observer is None:
            stats.undecoded_bytes += len(data.data)
            return []
        side = state.sides[direction]
        chunk = data.data
        if side.dead:
            stats.undecoded_bytes += len(chunk)
            return []
        if observer.encrypted:
            stats.encrypted_bytes += len(chunk)
            return []
        if side.skip:
            n = min(side.skip, len(chunk))
            side.skip -= n
            side.epoch += n
            chunk = chunk[n:]
            if not chunk:
                return []
        items = observer.feed(direction, chunk, data.number)
        return self._records(state, side, direction, items, data.number, data.ts) if items else []

    def _records(self, state: _FlowState, side: _Side, direction: Direction, items: list[Item],
                 number: int, ts: float) -> list[DecodedRecord]:
        """The records of one direction's items: a command or frame here (the hot path),
        every other kind of item by its handler in :data:`_ON_ITEM`."""
        flow = state.flow
        proto = state.protocol.name if state.protocol is not None else None
        counts = state.stats.records
        fpp = state.stats.frames_per_packet
        ppf = state.stats.packets_per_frame
        out: list[DecodedRecord] = []
        epoch = side.epoch
        for item in items:
            kind = item.kind
            offset = None if item.offset is None else epoch + item.offset
            if epoch:
                _shift_violations(item.fields, epoch)
            if kind is not ItemKind.COMMAND and kind is not ItemKind.FRAME:
                record = _ON_ITEM[kind](self, flow, side, direction, item, offset, number, ts,
                                        proto, counts, out)
                if record is not None:
                    out.append(record)
                continue
            raw = item.raw
            size = None if raw is None else len(raw.data)
            packets = _packets(raw, number)
            if side.resyncing:
                side.resyncing = False
                counts["gap"] = counts.get("gap", 0) + 1
                out.append(self._record(
                    flow, direction, "gap", "Resync",
                    {"method": "heuristic", "offset": epoch if offset is None else offset,
                     "reason": "the first frame the framing rule accepts after the gap"},
                    ts, packets[:1], None, proto))
            # Units come out in stream order, so a packet's count is complete once a
            # unit starts in a later packet.
            for p in packets:
                if p == side.packet:
                    side.frames += 1
                else:
                    if side.frames:
                        fpp[side.frames] += 1
                    side.packet, side.frames = p, 1
            ppf[len(packets)] += 1
            counts[kind] = counts.get(kind, 0) + 1
            out.append(self._record(flow, direction, kind, item.name, item.fields, ts,
                                    packets, item.event, proto, offset, size))
        return out

    # The other kinds of item, one handler each (:data:`_ON_ITEM`): each returns the record
    # to add, or ``None``.

    def _annotation(self, flow: Flow, side: _Side, direction: Direction, item: Item,
                    offset: int | None, number: int, ts: float, proto: str | None,
                    counts: dict[str, int], out: list[DecodedRecord]) -> DecodedRecord | None:
        """Not a unit of its own: it says something about the one just before it."""
        if out and out[-1].dir == direction:
            fields = item.fields
            asked = fields.get("response_to")
            if asked is not None and asked >= _FILE0:  # a packet of a later file
                fields = {**fields, "response_to": split_packet_id(asked)[1]}
            out[-1].fields.update(fields)
        return None

    def _tls(self, flow: Flow, side: _Side, direction: Direction, item: Item,
             offset: int | None, number: int, ts: float, proto: str | None,
             counts: dict[str, int], out: list[DecodedRecord]) -> DecodedRecord | None:
        counts["tls"] = counts.get("tls", 0) + 1
        return self._record(flow, direction, "tls", item.name, item.fields, ts, (number,),
                            item.event, proto)

    def _error(self, flow: Flow, side: _Side, direction: Direction, item: Item,
               offset: int | None, number: int, ts: float, proto: str | None,
               counts: dict[str, int], out: list[DecodedRecord]) -> DecodedRecord | None:
        """Bytes the observer could not decode: an error record, or -- while resynchronising
        after a gap -- bytes skipped, a gap record."""
        raw = item.raw
        size = None if raw is None else len(raw.data)
        packets = _packets(raw, number)
        fields = item.fields
        if "offset" in fields:
            fields["offset"] = offset
        if side.resyncing:
            fields["note"] = "undecodable bytes after a gap, skipped while resynchronising"
            counts["gap"] = counts.get("gap", 0) + 1
            return self._record(flow, direction, "gap", "Skipped", fields, ts, packets,
                                item.event, proto, offset, size)
        counts["error"] = counts.get("error", 0) + 1
        return self._record(flow, direction, "error", item.name, fields, ts, packets,
                            item.event, proto, offset, size)

    def _skipped(self, flow: Flow, side: _Side, direction: Direction, item: Item,
                 offset: int | None, number: int, ts: float, proto: str | None,
                 counts: dict[str, int], out: list[DecodedRecord]) -> DecodedRecord | None:
        """The rest of bytes an error record already reported."""
        raw = item.raw
        size = None if raw is None else len(raw.data)
        counts["gap"] = counts.get("gap", 0) + 1
        fields = {**item.fields, "offset": offset, "size": size, "continued": True}
        return self._record(flow, direction, "gap", item.name, fields, ts,
                            _packets(raw, number), item.event, proto, offset, size)

    def _truncated(self, flow: Flow, side: _Side, direction: Direction, item: Item,
                   offset: int | None, number: int, ts: float, proto: str | None,
                   counts: dict[str, int], out: list[DecodedRecord]) -> DecodedRecord | None:
        """The stream ended inside a unit."""
        counts["error"] = counts.get("error", 0) + 1
        fields = item.fields
        fields["offset"] = offset
        return self._record(flow, direction, "error", item.name, fields, ts, (number,),
                            item.event, proto, offset)

    def _on_gap(self, state: _FlowState, gap: Gap) -> Iterator[DecodedRecord]:
        stats = state.stats
        stats.gap_bytes += gap.size
        counts = stats.records
        counts["gap"] = counts.get("gap", 0) + 1
        flow, direction = state.flow, gap.direction
        fields: dict[str, Any] = {"offset": gap.offset, "size": gap.size, "reason": gap.reason}
        observer = state.observer
        side = state.sides[direction]
        resync = None
        proto = state.protocol.name if state.protocol is not None else None
        if observer is not None and not side.dead and not observer.encrypted:
            lost = observer.gap(direction)
            if lost.dead:
                side.dead = lost.dead
                fields["consequence"] = side.dead
            else:
                partial = lost.partial
                unit = lost.unit
                if unit is not None:  # decoded as far as it was captured: a unit, not a gap
                    counts[unit.kind] = counts.get(unit.kind, 0) + 1
                    asked = unit.fields.get("response_to")
                    if asked is not None and asked >= _FILE0:
                        unit.fields["response_to"] = split_packet_id(asked)[1]
                    yield self._record(flow, direction, unit.kind, unit.name, unit.fields,
                                       gap.ts, _packets(unit.raw, gap.number), None, proto,
                                       gap.offset - len(partial), lost.length)
                elif partial:
                    fields["lost_partial_frame"] = partial.hex()
                side.epoch = gap.offset + gap.size
                length = lost.length
                remainder = None if length is None else length - len(partial)
                if remainder is not None and remainder >= gap.size:
                    side.skip = remainder - gap.size
                    side.epoch += side.skip
                    side.resyncing = False
                    resync = {
                        "method": "proven", "offset": side.epoch, "skipped": side.skip,
                        "reason": f"the lost frame's size prefix says it is {length} bytes long",
                    }
                else:
                    side.resyncing = True
                    side.skip = 0
                    if unit is not None:
                        observer.gap(direction)  # more than that unit is missing
        # the packet after the hole (where Wireshark sees the previous segment missing),
        # then the one that made it certain
        packets = ((gap.after, gap.number) if gap.after is not None and gap.after != gap.number
                   else (gap.number,))
        yield self._record(flow, direction, "gap", "Gap", fields, gap.ts, packets, gap,
                           proto, gap.offset, gap.size)
        if resync is not None:
            yield self._record(flow, direction, "gap", "Resync", resync, gap.ts,
                               (gap.number,), gap, proto)

    def _on_end(self, state: _FlowState, end: FlowEnd) -> Iterator[DecodedRecord]:
        yield from self._end_side(state, end)
        if self.tcp_records and end.how == "fin" and state.protocol is not None:
            yield self._record(state.flow, end.direction, "tcp", "FIN",
                               {"side": _SIDES[end.direction]}, end.ts, (end.number,), None,
                               state.protocol.name)
        side = state.sides[end.direction]
        if side.frames:
            state.stats.frames_per_packet[side.frames] += 1
            side.frames = 0
        side.dead = side.dead or "ended"
        if self.flow_records:
            stats = state.stats
            fields = {
                "how": end.how, "payload_bytes": stats.payload_bytes[end.direction],
                "protocol": stats.protocol, "why": stats.why,
                "retransmitted_bytes": stats.retransmitted_bytes,
                "gap_bytes": stats.gap_bytes,
            }
            yield self._record(state.flow, end.direction, "flow", "FlowEnd", fields, end.ts,
                               (end.number,), None, stats.protocol or None, None,
                               stats.payload_bytes[end.direction])
        if all(s.dead for s in state.sides.values()):
            state.observer = None  # a finished flow keeps its statistics, not its buffers

    def _end_side(self, state: _FlowState, end: FlowEnd) -> Iterator[DecodedRecord]:
        observer = state.observer
        direction = end.direction
        side = state.sides[direction]
        if observer is None or side.dead:
            return
        if observer.encrypted:
            if state.stats.encrypted_bytes and direction == Direction.S2C:
                state.stats.records["tls"] = state.stats.records.get("tls", 0) + 1
                proto = state.protocol.name if state.protocol is not None else None
                yield self._record(
                    state.flow, None, "tls", "Encrypted",
                    {"bytes": state.stats.encrypted_bytes,
                     "note": "TLS records are not decoded"},
                    end.ts, (end.number,), None, proto)
            return
        items = observer.end(direction, end.number)
        yield from self._records(state, side, direction, items, end.number, end.ts)


_OnItem = Callable[[CaptureDecoder, Flow, _Side, Direction, Item, "int | None", int, float,
                    "str | None", dict[str, int], list[DecodedRecord]], "DecodedRecord | None"]

_ON_ITEM: dict[ItemKind, _OnItem] = {
    ItemKind.ANNOTATION: CaptureDecoder._annotation,
    ItemKind.TLS: CaptureDecoder._tls,
    ItemKind.ERROR: CaptureDecoder._error,
    ItemKind.SKIPPED: CaptureDecoder._skipped,
    ItemKind.TRUNCATED: CaptureDecoder._truncated,
}
"""How each kind of item other than a command or frame becomes a record."""


def _shift_violations(fields: dict[str, Any], epoch: int) -> None:
    """An observer's offsets count from where its current stream starts; after a gap the
    capture layer adds what came before (``epoch``) to the offsets a violation carries,
    as it does to the record's own."""
    for problem in (fields, fields.get("violation"), *fields.get("violations", ())):
        if isinstance(problem, dict):
            at = problem.get("field_offset")
            if at is not None:
                problem["field_offset"] = at + epoch
            if problem is not fields and problem.get("offset") is not None:
                problem["offset"] += epoch


def _registered() -> tuple[Protocol, ...]:
    return protocols.registered()


def _packets(raw: Any, current: int) -> tuple[int, ...]:
    """The packets a unit's bytes came from (its provenance), in order."""
    if raw is None or not raw.sources:
        return (current,)
    sources = raw.sources
    if len(sources) == 1:
        return (sources[0].segment,)
    return tuple(sorted({s.segment for s in sources}))


def decode_capture(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    **options: Any,
) -> Iterator[DecodedRecord]:
    """Every record of the given captures (a convenience around :class:`CaptureDecoder`,
    which takes the ``options``)."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    return CaptureDecoder(**options).decode(paths)
