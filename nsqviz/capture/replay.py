"""What the replay view draws: a capture's packets, flows and decoded records, in order.

The view (:mod:`nsqviz.widgets.replay`) only renders; this module reads the capture.
Two passes over the file, both streamed: one through the TCP flow tracker for the packet
timeline (which flow and direction each packet belongs to, how many payload bytes it
carried, which were retransmissions and where bytes went missing), one through
:class:`~nsqviz.capture.decode.CaptureDecoder` for the records. Flow ids agree between
the two because both number flows in order of first appearance.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from nsqviz.capture.decode import CaptureDecoder, DecodedRecord, FlowStats
from nsqviz.capture.files import CaptureWarning, read_capture
from nsqviz.capture.layers import Segment, decode_record
from nsqviz.capture.tcp import (
    DEFAULT_SERVER_PORTS,
    Data,
    Flow,
    FlowTracker,
    Gap,
    Retransmission,
)

__all__ = ["PacketMark", "Replay"]


@dataclass(frozen=True, slots=True)
class PacketMark:
    """One packet on the timeline. ``note`` is ``""``, ``"retransmission"``, ``"gap"``
    (the packet that proved bytes missing) or ``"warning"`` (could not be read)."""

    number: int
    ts: float
    flow_id: int | None
    dir: str | None
    payload: int
    note: str = ""


@dataclass(frozen=True, slots=True)
class Replay:
    """A capture, ready to be replayed packet by packet."""

    name: str
    packets: tuple[PacketMark, ...]
    records: tuple[DecodedRecord, ...]
    flows: tuple[FlowStats, ...]

    @classmethod
    def load(cls, path: str | os.PathLike[str], *,
             server_ports: Iterable[int] = DEFAULT_SERVER_PORTS) -> Replay:
        ports = frozenset(server_ports)
        marks: dict[int, PacketMark] = {}
        tracker = FlowTracker(server_ports=ports)
        for item in read_capture(path):
            if isinstance(item, CaptureWarning):
                marks[item.number] = PacketMark(item.number, float("nan"), None, None, 0,
                                                "warning")
                continue
            seg = decode_record(item)
            if seg is None or isinstance(seg, CaptureWarning):
                note = "warning" if seg is not None else ""
                marks[item.number] = PacketMark(item.number, item.ts, None, None, 0, note)
                continue
            events = tracker.feed(seg)
            flow_id, direction, note = None, None, ""
            for e in events:
                if isinstance(e, Data | Retransmission | Gap):
                    flow_id, direction = e.flow.id, e.direction
                if isinstance(e, Retransmission) and e.number == seg.number:
                    note = "retransmission"
                elif isinstance(e, Gap):
                    note = "gap"
            if flow_id is None:  # a bare ACK, SYN or FIN: find its flow from the tracker
                flow = _flow_of(tracker, seg)
                if flow is not None:
                    flow_id = flow.id
                    direction = "c2s" if (seg.src, seg.sport) == flow.client else "s2c"
            marks[seg.number] = PacketMark(seg.number, seg.ts, flow_id, direction,
                                           len(seg.payload), note)
        decoder = CaptureDecoder(server_ports=ports)
        records = tuple(decoder.decode([path]))
        packets = tuple(marks[n] for n in sorted(marks))
        return cls(os.path.basename(os.fspath(path)), packets, records, tuple(decoder.stats))


def _flow_of(tracker: FlowTracker, seg: Segment) -> Flow | None:
    """The most recent flow between the segment's two endpoints."""
    ends = {(seg.src, seg.sport), (seg.dst, seg.dport)}
    for flow in reversed(tracker.flows):
        if {flow.client, flow.server} == ends:
            return flow
    return None
