"""Decoding the conversations in a capture, through the same codecs as live traffic.

Pipeline: the :class:`~nsqviz.capture.driver.CaptureDriver` (files -> packets -> TCP
flow events) -> per flow, the protocol that claims it (:mod:`nsqviz.protocols`) and its
connection observer, fed both directions in capture order with the packet of every
chunk, so every decoded unit knows its packets.

What this module adds is the capture's honesty layer around the protocols' observers
(the records of units, gaps and ends are made in :mod:`nsqviz.capture.units`; what the
decoder holds of each flow is :mod:`nsqviz.capture.flowstate`):

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
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, BinaryIO

from nsqviz import protocols
from nsqviz.capture.driver import IDLE_SPLIT, CaptureDriver, Step
from nsqviz.capture.files import CaptureWarning
from nsqviz.capture.flow import Flow
from nsqviz.capture.flowstate import FlowSnapshot, FlowState, FlowStats
from nsqviz.capture.tcp import Data, FlowEnd, FlowStart, Gap, TcpEvent
from nsqviz.capture.tcp_analysis import Finding, Retransmission, Truncated
from nsqviz.capture.units import end_records, gap_records, record, unit_records
from nsqviz.protocols import detection
from nsqviz.protocols.protocol import Protocol
from nsqviz.records import DecodedRecord
from nsqviz.stream.direction import Direction

__all__ = ["CaptureDecoder", "decode_capture"]

_SIDES = {Direction.C2S: "client", Direction.S2C: "server"}  # who sent a direction's bytes

SWEEP_EVERY = 5.0
"""Seconds of capture time between two sweeps of a live decoder's flows."""

HOLD_LIMIT = 256 * 1024
"""Client bytes a flow seen from its start holds while its server has not answered yet
(:func:`~nsqviz.protocols.detection.detect` weighs the answer), and a 64th of it TCP events: past
them, its client's bytes alone decide."""

_FIRST_BYTES = 64
"""Bytes of each side enough for any protocol to say whether they are its client's hello
or its server's answer."""


# -------------------------------------------------------------------------- decoding


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
    (:meth:`~nsqviz.protocols.protocol.Protocol.observer`).
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
            sent_by_client=self._sent_by_client,
            continuation=continuation, idle_split=idle_split,
        )
        self.flows: dict[int, FlowState] = {}
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
            self.flows[flow.id] = FlowState(flow)
            self.flow_count += 1
            if self.flow_records:
                yield record(flow, None, "flow", "FlowStart",
                                   {"how": "midstream" if flow.midstream else "syn"},
                             tcp_event.ts, (tcp_event.number,), None)
            return
        state = self.flows[flow.id]
        if state.held is not None:
            yield from self._hold(state, tcp_event)
        elif kind is Data:
            yield from self._on_data(state, tcp_event)
        elif kind is Gap:
            yield from gap_records(state, tcp_event)
        elif kind is FlowEnd:
            yield from self._on_end(state, tcp_event)
        else:
            if kind is Retransmission:
                state.stats.retransmitted_bytes += tcp_event.repeated
            if self.flow_records or (self.tcp_records and state.protocol is not None
                                     and kind is not Truncated):
                yield self._tcp_record(state, tcp_event)

    def _tcp_record(self, state: FlowState, event: Finding) -> DecodedRecord:
        """The ``tcp`` record of one finding of the TCP analysis: whose packet it is
        (``side``), then what the analysis found."""
        fields = {"side": _SIDES[event.direction], **event.fields()}
        proto = state.protocol.name if state.protocol is not None else None
        return record(state.flow, event.direction, "tcp", event.record, fields,
                      event.ts, event.packets(), None, proto, *event.span())

    def _sent_by_client(self, data: bytes) -> bool | None:
        """Whose first bytes of a flow seen without its handshake these are, by their
        look: a client's when a protocol takes them for its client's units and not its
        server's, a server's the other way round; ``None``: no protocol can tell."""
        for proto in self.protocols:
            client = proto.looks_like(Direction.C2S, data)
            if client != proto.looks_like(Direction.S2C, data):
                return client
        return None

    def _hold(self, state: FlowState, tcp_event: TcpEvent) -> list[DecodedRecord]:
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

    def _decides(self, state: FlowState, tcp_event: TcpEvent) -> bool:
        """Is the protocol of a held flow known once this event is held?"""
        if isinstance(tcp_event, Data):
            data = tcp_event.data
            if tcp_event.direction == Direction.C2S:
                state.hello += data[:_FIRST_BYTES - len(state.hello)]
                state.held_bytes += len(data)
                return state.held_bytes > HOLD_LIMIT
            state.answer += data[:_FIRST_BYTES - len(state.answer)]
            return len(state.answer) >= _FIRST_BYTES or not detection.answer_undecided(
                self.protocols, state.answer)
        if isinstance(tcp_event, FlowEnd):  # a client's FIN leaves its server free to answer
            return tcp_event.how != "fin" or tcp_event.direction != Direction.C2S
        # a gap decides; what the TCP analysis flags (a retransmission, a zero window ...) not
        return isinstance(tcp_event, Gap)

    def _detect(self, state: FlowState, data: Data, hello: bytes = b"",
                answer: bytes = b"") -> None:
        """Choose the flow's protocol from its first payload ``data`` (of a flow seen from
        its start: ``hello``, the client's first bytes, and ``answer``, the server's)."""
        flow, stats = state.flow, state.stats
        from_start = data.direction == Direction.C2S and data.offset == 0 and flow.syn_seen
        proto, why = detection.detect(self.protocols, data.direction, hello or data.data,
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

    def _on_data(self, state: FlowState, data: Data) -> list[DecodedRecord]:
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
        return unit_records(state, side, direction, items, data.number, data.ts) if items else []

    def _on_end(self, state: FlowState, end: FlowEnd) -> Iterator[DecodedRecord]:
        yield from end_records(state, end)
        if self.tcp_records and end.how == "fin" and state.protocol is not None:
            yield record(state.flow, end.direction, "tcp", "FIN",
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
            yield record(state.flow, end.direction, "flow", "FlowEnd", fields, end.ts,
                               (end.number,), None, stats.protocol or None, None,
                         stats.payload_bytes[end.direction])
        if all(s.dead for s in state.sides.values()):
            state.observer = None  # a finished flow keeps its statistics, not its buffers



def _registered() -> tuple[Protocol, ...]:
    return protocols.registered()


def decode_capture(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    **options: Any,
) -> Iterator[DecodedRecord]:
    """Every record of the given captures (a convenience around :class:`CaptureDecoder`,
    which takes the ``options``)."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    return CaptureDecoder(**options).decode(paths)
