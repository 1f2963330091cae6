"""What the replay view draws: a capture's packets, flows and decoded records, in order.

The view (:mod:`nsqviz.widgets.replay`) only renders; this module reads the capture, in
one pass of the :class:`~nsqviz.capture.driver.CaptureDriver` through a
:class:`~nsqviz.capture.decode.CaptureDecoder`: each packet becomes a mark on the
timeline (which flow and direction it belongs to, how many payload bytes it carried,
whether it was a retransmission or proved bytes missing) and the records it completes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.flow import Flow
from nsqviz.capture.flowstate import FlowStats
from nsqviz.capture.layers import Segment
from nsqviz.capture.tcp import Data, FlowTracker, Gap
from nsqviz.capture.tcp_analysis import Retransmission
from nsqviz.records import DecodedRecord
from nsqviz.stream.direction import Direction

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
             ports: Mapping[str, Iterable[int]] | None = None) -> Replay:
        """Read one capture file (``ports``: extra server ports per protocol name)."""
        decoder = CaptureDecoder(ports=ports)
        tracker = decoder.driver.tracker
        marks: dict[int, PacketMark] = {}
        records: list[DecodedRecord] = []
        for step in decoder.driver.run([path]):
            records.extend(decoder.step(step))
            seg, item = step.segment, step.record
            if seg is None:
                if step.warning is not None:
                    w = step.warning
                    ts = item.ts if item is not None else float("nan")
                    marks[w.number] = PacketMark(w.number, ts, None, None, 0, "warning")
                elif item is not None:
                    marks[item.number] = PacketMark(item.number, item.ts, None, None, 0)
                continue
            flow_id, direction, note = None, None, ""
            for e in step.events:
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
                    from_client = (seg.src, seg.sport) == flow.client
                    direction = Direction.C2S if from_client else Direction.S2C
            marks[seg.number] = PacketMark(seg.number, seg.ts, flow_id, direction,
                                           len(seg.payload), note)
        packets = tuple(marks[n] for n in sorted(marks))
        return cls(os.path.basename(os.fspath(path)), packets, tuple(records),
                   tuple(decoder.stats))


def _flow_of(tracker: FlowTracker, seg: Segment) -> Flow | None:
    """The most recent flow between the segment's two endpoints."""
    ends = {(seg.src, seg.sport), (seg.dst, seg.dport)}
    for flow in reversed(tracker.flows):
        if {flow.client, flow.server} == ends:
            return flow
    return None
