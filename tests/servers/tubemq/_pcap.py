"""Reading TubeMQ conversations out of a capture: the project's pcap reader and TCP flow
tracker, then one codec :class:`~nsqviz.tubemq.codec.Observer` per flow, fed each
direction with ``segment=`` the packet number."""

from __future__ import annotations

from dataclasses import dataclass, field

from nsqviz.capture.files import read_capture
from nsqviz.capture.layers import decode_record
from nsqviz.capture.tcp import Data, FlowEnd, FlowTracker, Gap
from nsqviz.tubemq.codec import Observer
from nsqviz.tubemq.events import ExceptionResponse, Request, Response, Violation


@dataclass
class Conversation:
    label: str
    events: list = field(default_factory=list)
    gaps: list = field(default_factory=list)

    @property
    def requests(self) -> list[Request]:
        return [e for e in self.events if isinstance(e, Request)]

    @property
    def answers(self) -> list:
        return [e for e in self.events if isinstance(e, Response | ExceptionResponse)]

    @property
    def violations(self) -> list[Violation]:
        return [e for e in self.events if isinstance(e, Violation)]


def conversations(path, ports) -> list[Conversation]:
    tracker = FlowTracker(server_ports=set(ports))
    observers: dict[int, tuple[Observer, Conversation]] = {}
    for rec in read_capture(path):
        seg = decode_record(rec) if not hasattr(rec, "reason") else None
        if seg is None or hasattr(seg, "reason"):
            continue
        for ev in tracker.feed(seg):
            if isinstance(ev, Data | Gap) and ev.flow.id not in observers:
                observers[ev.flow.id] = (Observer(), Conversation(ev.flow.label))
            if isinstance(ev, Data):
                obs, conv = observers[ev.flow.id]
                feed = obs.c2s if ev.direction == "c2s" else obs.s2c
                conv.events += feed(ev.data, segment=ev.number, now=ev.ts)
            elif isinstance(ev, Gap):
                observers[ev.flow.id][1].gaps.append(ev)
            elif isinstance(ev, FlowEnd) and ev.flow.id in observers:
                obs, conv = observers[ev.flow.id]  # the end: what is left is judged
                conv.events += (obs.c2s if ev.direction == "c2s" else obs.s2c)(b"")
    return [conv for _, conv in observers.values()]
