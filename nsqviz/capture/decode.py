"""Decoding the NSQ conversations in a capture, through the same codec as live traffic.

Pipeline: :func:`~nsqviz.capture.files.read_capture` -> :func:`~nsqviz.capture.layers.
decode_record` -> :class:`~nsqviz.capture.tcp.FlowTracker` -> one
:class:`~nsqviz.nsq.codec.Observer` per NSQ flow, fed both directions in capture order
with ``segment=`` the packet number, so every decoded event knows its packets.

What this module adds is the capture's honesty layer around the codec:

* **detection** -- a flow is NSQ when the client's first bytes are the magic ``"  V2"``,
  or (a capture that started mid-connection) when the server port is a known NSQ port
  or the first bytes look like an NSQ command or frame; other flows are counted, not
  decoded as garbage;
* **gaps** -- bytes missing from the capture are a ``gap`` record with offset and size.
  The frame they cut is reported lost, and decoding resumes at the next frame boundary:
  *proven* when the cut frame's size prefix arrived before the gap and the gap ends
  inside that frame (the boundary is then exact), *heuristic* otherwise (the framing
  rule's resynchronisation), and the record says which;
* **TLS and compression** -- after the TLS switch a flow is shown as encrypted (a
  ``tls`` record and a byte count), after a snappy/deflate switch it is decompressed by
  the codec; a gap in a compressed stream ends decoding of that direction, said so.

Output is a stream of :class:`DecodedRecord`, the rows ``nsqviz decode`` prints.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NamedTuple

from nsqviz.capture.files import CaptureWarning, read_capture
from nsqviz.capture.layers import decode_record
from nsqviz.capture.tcp import (
    DEFAULT_SERVER_PORTS,
    Data,
    Flow,
    FlowEnd,
    FlowStart,
    FlowTracker,
    Gap,
    Retransmission,
)
from nsqviz.nsq import events as ev
from nsqviz.nsq.codec import Observer
from nsqviz.nsq.framing import FrameFraming
from nsqviz.nsq.grammar import COMMANDS, MAGIC_V2
from nsqviz.stream.reassembly import FramingError

__all__ = ["CaptureDecoder", "DecodedRecord", "FlowStats", "decode_capture", "event_fields"]


class DecodedRecord(NamedTuple):
    """One row of ``nsqviz decode``: a command, a frame, an error, a gap or a TLS note.

    ``flow`` is the connection's ``client->server`` label; ``packets`` the 1-based packet
    numbers that carried the bytes; ``event`` the codec event (or the TCP gap) it shows,
    for views that want the raw bytes and their provenance.
    """

    ts: float
    flow: str | None
    dir: str | None
    kind: str  # "command" | "frame" | "error" | "gap" | "tls"
    name: str
    fields: dict[str, Any]
    packets: tuple[int, ...]
    flow_id: int | None = None
    event: Any = None

    def as_json(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "flow": self.flow,
            "dir": self.dir,
            "kind": self.kind,
            "name": self.name,
            "fields": self.fields,
            "packets": list(self.packets),
        }


# ----------------------------------------------------------------------- event fields

_COMMAND_NAMES = {
    ev.Magic: "MAGIC", ev.Identify: "IDENTIFY", ev.Auth: "AUTH", ev.Sub: "SUB",
    ev.Pub: "PUB", ev.Mpub: "MPUB", ev.Dpub: "DPUB", ev.Rdy: "RDY", ev.Fin: "FIN",
    ev.Req: "REQ", ev.Touch: "TOUCH", ev.Cls: "CLS", ev.Nop: "NOP",
}
_FRAME_NAMES = {
    ev.Response: "FrameTypeResponse", ev.Error: "FrameTypeError",
    ev.Message: "FrameTypeMessage",
}

# A message id is shown as the 16 hex digits it is on the wire (the grammar admits
# nothing else), so that it reads as nsqd, nsqadmin and client logs print it; binary
# bodies and data are hex.
_FIELD_MAKERS = {
    ev.Pub: lambda e: {"topic": e.topic, "body": e.body.hex()},
    ev.Message: lambda e: {"timestamp": e.timestamp, "attempts": e.attempts,
                           "id": e.id.decode("ascii"), "body": e.body.hex()},
    ev.Fin: lambda e: {"id": e.id.decode("ascii")},
    ev.Rdy: lambda e: {"count": e.count},
    ev.Response: lambda e: {"data": e.data.hex()},
    ev.Error: lambda e: {"data": e.data.hex(), "code": e.code, "text": e.text},
    ev.Mpub: lambda e: {"topic": e.topic, "bodies": [b.hex() for b in e.bodies]},
    ev.Req: lambda e: {"id": e.id.decode("ascii"), "timeout": e.timeout},
    ev.Touch: lambda e: {"id": e.id.decode("ascii")},
}


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def event_fields(event: Any) -> dict[str, Any]:
    """The parsed fields of a codec event as JSON-ready data: bytes become hex (message
    ids excepted: they are ASCII hex already)."""
    maker = _FIELD_MAKERS.get(type(event))
    if maker is not None:
        return maker(event)
    return {
        f.name: _plain(getattr(event, f.name))
        for f in dataclasses.fields(event)
        if f.name != "raw"
    }


# ---------------------------------------------------------------------------- stats


@dataclass(slots=True)
class FlowStats:
    """Per-flow counts, as ``nsqviz decode --stats`` prints them."""

    flow: Flow
    nsq: bool | None = None  # None: no payload seen, so no verdict
    why: str = ""
    packets: int = 0
    payload_bytes: dict[str, int] = field(default_factory=lambda: {"c2s": 0, "s2c": 0})
    records: dict[str, int] = field(default_factory=dict)  # kind -> count
    # Histograms (value -> how often), so memory stays flat however long the capture:
    frames_per_packet: Counter = field(default_factory=Counter)
    packets_per_frame: Counter = field(default_factory=Counter)
    retransmitted_bytes: int = 0
    gap_bytes: int = 0
    encrypted_bytes: int = 0
    undecoded_bytes: int = 0


# -------------------------------------------------------------------------- decoding


def _looks_like_nsq(direction: str, data: bytes) -> bool:
    """Mid-stream detection: does this chunk start like an NSQ command or frame?"""
    if direction == "c2s":
        head = data[:16].split(b"\n", 1)[0].split(b" ", 1)[0]
        return data.startswith(MAGIC_V2) or head.decode("ascii", "replace") in COMMANDS
    try:
        return len(data) >= 8 and FrameFraming().measure(data, 0) is not None
    except FramingError:
        return False


class _Side:
    """Decoding state of one direction of one flow."""

    __slots__ = ("epoch", "skip", "resyncing", "dead", "packet", "frames")

    def __init__(self) -> None:
        self.epoch = 0  # stream offset where the codec's current reassembler starts
        self.skip = 0  # bytes of a lost frame still to discard after a proven resync
        self.resyncing = False  # after a gap with no provable boundary, until a good frame
        self.dead = ""  # why this direction can no longer be decoded
        self.packet = -1  # the packet whose frames are being counted, and how many so far
        self.frames = 0


class _FlowState:
    __slots__ = ("flow", "stats", "observer", "sides")

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.stats = FlowStats(flow)
        self.observer: Observer | None = None
        self.sides = {"c2s": _Side(), "s2c": _Side()}


class CaptureDecoder:
    """Decodes captures into :class:`DecodedRecord` rows; keeps per-flow statistics.

    ``server_ports`` are the ports taken as NSQ servers when a flow has no handshake or
    magic to go by. Records come out in capture order (a frame when its last packet
    arrives, as Wireshark shows a reassembled PDU).
    """

    def __init__(self, *, server_ports: Iterable[int] = DEFAULT_SERVER_PORTS):
        self.server_ports = frozenset(server_ports)
        self.flows: dict[int, _FlowState] = {}
        self.warnings: list[CaptureWarning] = []
        self.packets = 0
        self.not_tcp = 0
        self.first_ts: float | None = None  # of the first packet: text output's time zero

    @property
    def stats(self) -> list[FlowStats]:
        return [s.stats for s in self.flows.values()]

    def decode(
        self, paths: Iterable[str | os.PathLike[str] | BinaryIO]
    ) -> Iterator[DecodedRecord]:
        """All records of the given capture files. Each file gets its own flow tracker
        (a connection is not followed across files); flow ids continue across files."""
        for path in paths:
            tracker = FlowTracker(server_ports=self.server_ports, first_id=len(self.flows))
            for item in read_capture(path):
                if type(item) is CaptureWarning:
                    yield self._warning(item)
                    continue
                self.packets += 1
                if self.first_ts is None:
                    self.first_ts = item.ts
                seg = decode_record(item)
                if seg is None:
                    self.not_tcp += 1
                    continue
                if type(seg) is CaptureWarning:
                    yield self._warning(seg)
                    continue
                for tcp_event in tracker.feed(seg):
                    if type(tcp_event) is Data:  # the hot path, without generator layers
                        records = self._on_data(self.flows[tcp_event.flow.id], tcp_event)
                        if records:
                            yield from records
                    else:
                        yield from self._on_tcp(tcp_event)
            for tcp_event in tracker.finish():
                yield from self._on_tcp(tcp_event)

    def feed(self, tcp_event: Any) -> list[DecodedRecord]:
        """The records one TCP event of a :class:`FlowTracker` completes.

        :meth:`decode` reads files itself; this is the seam for callers that order the
        packets themselves -- the Spark pipeline merges a connection's packets from
        many rotated files before they reach a tracker."""
        if type(tcp_event) is Data:
            return self._on_data(self.flows[tcp_event.flow.id], tcp_event)
        return list(self._on_tcp(tcp_event))

    def flow_stats(self, flow_id: int) -> FlowStats:
        """What has been seen of one flow so far."""
        return self.flows[flow_id].stats

    def _warning(self, w: CaptureWarning) -> DecodedRecord:
        self.warnings.append(w)
        fields = {"reason": w.reason}
        if w.offset >= 0:
            fields["file_offset"] = w.offset
        return DecodedRecord(float("nan"), None, None, "error", "CaptureWarning", fields,
                             (w.number,))

    # -- TCP events -> records ---------------------------------------------------------

    def _on_tcp(self, tcp_event: Any) -> Iterator[DecodedRecord]:
        """The records one TCP event completes."""
        kind = type(tcp_event)
        flow = tcp_event.flow
        state = self.flows.get(flow.id)
        if kind is FlowStart:
            self.flows[flow.id] = _FlowState(flow)
            return
        if kind is Data:
            yield from self._on_data(state, tcp_event)
        elif kind is Gap:
            yield from self._on_gap(state, tcp_event)
        elif kind is Retransmission:
            state.stats.retransmitted_bytes += tcp_event.size
        elif kind is FlowEnd:
            yield from self._on_end(state, tcp_event)

    def _detect(self, state: _FlowState, data: Data) -> None:
        flow, stats = state.flow, state.stats
        server_port = flow.server[1] in self.server_ports
        if data.direction == "c2s" and data.offset == 0 and flow.syn_seen:
            if MAGIC_V2.startswith(data.data[:4]):  # also when the magic came split
                stats.nsq, stats.why = True, "magic"
            elif server_port:
                stats.nsq, stats.why = True, "server port (no magic: nsqd will refuse it)"
            else:
                stats.nsq, stats.why = False, "client did not send the NSQ magic"
        elif server_port:
            stats.nsq, stats.why = True, "server port"
        elif _looks_like_nsq(data.direction, data.data):
            stats.nsq, stats.why = True, "looks like NSQ"
        else:
            stats.nsq, stats.why = False, "no magic, port not an NSQ port, not NSQ-like"
        if stats.nsq:
            # With the handshake captured both streams are seen from their first byte.
            midstream = not flow.syn_seen
            state.observer = Observer(provenance=True, midstream=midstream)
            for side in state.sides.values():
                side.resyncing = midstream

    def _on_data(self, state: _FlowState, data: Data) -> list[DecodedRecord]:
        stats = state.stats
        direction = data.direction
        stats.packets += 1
        stats.payload_bytes[direction] += len(data.data)
        if stats.nsq is None:
            self._detect(state, data)
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
        feed = observer.c2s if direction == "c2s" else observer.s2c
        events = feed(chunk, segment=data.number)
        return self._records(state, side, direction, events, data) if events else []

    def _records(self, state: _FlowState, side: _Side, direction: str, events: list,
                 data: Data) -> list[DecodedRecord]:
        flow = state.flow
        counts = state.stats.records
        fpp = state.stats.frames_per_packet
        ppf = state.stats.packets_per_frame
        label, fid, ts = flow.label, flow.id, data.ts
        out: list[DecodedRecord] = []
        for e in events:
            t = type(e)
            name = _COMMAND_NAMES.get(t)
            kind = "command"
            if name is None:
                name = _FRAME_NAMES.get(t)
                kind = "frame"
            if name is not None:
                packets = _packets(e.raw, data.number)
                if side.resyncing:
                    side.resyncing = False
                    counts["gap"] = counts.get("gap", 0) + 1
                    offset = side.epoch + (e.raw.offset if e.raw is not None else 0)
                    out.append(DecodedRecord(
                        ts, label, direction, "gap", "Resync",
                        {"method": "heuristic", "offset": offset,
                         "reason": "the first frame the framing rule accepts after the gap"},
                        packets[:1], fid,
                    ))
                # Frames come out in stream order, so a packet's count is complete once a
                # frame starts in a later packet.
                for p in packets:
                    if p == side.packet:
                        side.frames += 1
                    else:
                        if side.frames:
                            fpp[side.frames] += 1
                        side.packet, side.frames = p, 1
                ppf[len(packets)] += 1
                counts[kind] = counts.get(kind, 0) + 1
                out.append(DecodedRecord(ts, label, direction, kind, name, event_fields(e),
                                         packets, fid, e))
            elif t is ev.CompressionStarted:
                # Not a frame of its own: the stream switches right after the frame that
                # negotiated it (the IDENTIFY response), so that record says so.
                if out and out[-1].dir == direction:
                    out[-1].fields["compression_starts"] = {"kind": e.kind, "level": e.level}
            elif t is ev.TLSUpgrade:
                counts["tls"] = counts.get("tls", 0) + 1
                out.append(DecodedRecord(
                    ts, label, direction, "tls", "TLSUpgrade",
                    {"pending": e.pending.hex(),
                     "note": "the connection switches to TLS here; what follows is encrypted"},
                    (data.number,), fid, e,
                ))
            elif t is ev.Violation:
                packets = _packets(e.raw, data.number)
                fields = {"code": e.code, "text": e.text, "fatal": e.fatal,
                          "offset": None if e.offset is None else side.epoch + e.offset}
                if e.raw is not None:
                    fields["data"] = e.raw.data.hex()
                if side.resyncing:
                    fields["note"] = "undecodable bytes after a gap, skipped while resynchronising"
                    counts["gap"] = counts.get("gap", 0) + 1
                    out.append(DecodedRecord(ts, label, direction, "gap", "Skipped", fields,
                                             packets, fid, e))
                else:
                    counts["error"] = counts.get("error", 0) + 1
                    out.append(DecodedRecord(ts, label, direction, "error",
                                             e.code or "Undecodable", fields, packets, fid, e))
            elif t is ev.Truncated:
                counts["error"] = counts.get("error", 0) + 1
                out.append(DecodedRecord(
                    ts, label, direction, "error", "Truncated",
                    {"offset": side.epoch + e.offset, "expected": e.expected,
                     "data": e.data.hex(), "reason": "the stream ended inside this frame"},
                    (data.number,), fid, e,
                ))
            # ConnectionClosed is a TCP matter: the flow's end is in the statistics.
        return out

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
        if observer is not None and not side.dead and not observer.encrypted:
            conn = observer.server if direction == "c2s" else observer.client
            if conn.compression:
                side.dead = (f"a gap in a {conn.compression}-compressed stream: the rest of"
                             " this direction cannot be decompressed")
                fields["consequence"] = side.dead
            else:
                partial, length = observer.gap(direction)
                if partial:
                    fields["lost_partial_frame"] = partial.hex()
                side.epoch = gap.offset + gap.size
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
        yield DecodedRecord(gap.ts, flow.label, direction, "gap", "Gap", fields, (gap.number,),
                            flow.id, gap)
        if resync is not None:
            yield DecodedRecord(gap.ts, flow.label, direction, "gap", "Resync", resync,
                                (gap.number,), flow.id, gap)

    def _on_end(self, state: _FlowState, end: FlowEnd) -> Iterator[DecodedRecord]:
        yield from self._end_side(state, end)
        side = state.sides[end.direction]
        if side.frames:
            state.stats.frames_per_packet[side.frames] += 1
            side.frames = 0
        side.dead = side.dead or "ended"
        if all(s.dead for s in state.sides.values()):
            state.observer = None  # a finished flow keeps its statistics, not its buffers

    def _end_side(self, state: _FlowState, end: FlowEnd) -> Iterator[DecodedRecord]:
        observer = state.observer
        direction = end.direction
        side = state.sides[direction]
        if observer is None or side.dead:
            return
        if observer.encrypted:
            if state.stats.encrypted_bytes and direction == "s2c":
                state.stats.records["tls"] = state.stats.records.get("tls", 0) + 1
                yield DecodedRecord(
                    end.ts, state.flow.label, None, "tls", "Encrypted",
                    {"bytes": state.stats.encrypted_bytes,
                     "note": "TLS records are not decoded"},
                    (end.number,), state.flow.id,
                )
            return
        feed = observer.c2s if direction == "c2s" else observer.s2c
        events = feed(b"", segment=end.number)
        fake = Data(state.flow, direction, 0, b"", end.number, end.ts)
        yield from self._records(state, side, direction, events, fake)


def _packets(raw: Any, current: int) -> tuple[int, ...]:
    """The packet numbers a frame's bytes came from (its provenance), in order."""
    if raw is None or not raw.sources:
        return (current,)
    sources = raw.sources
    if len(sources) == 1:
        return (sources[0].segment,)
    return tuple(sorted({s.segment for s in sources}))


def decode_capture(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    server_ports: Iterable[int] = DEFAULT_SERVER_PORTS,
) -> Iterator[DecodedRecord]:
    """Every record of the given captures (a convenience around :class:`CaptureDecoder`)."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    return CaptureDecoder(server_ports=server_ports).decode(paths)
