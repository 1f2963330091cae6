"""What a capture decoder holds of each flow: its statistics, its state per direction, the
protocol and observer once chosen -- plain data the decoder (:mod:`nsqviz.capture.decode`)
and the making of records (:mod:`nsqviz.capture.units`) share, and a snapshot of it that
another decoder continues (the pipeline's hand-off of a connection between files).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from nsqviz.capture.flow import Flow
from nsqviz.stream.direction import Direction

if TYPE_CHECKING:
    from nsqviz.capture.tcp import TcpEvent
    from nsqviz.protocols.items import ConnectionObserver
    from nsqviz.protocols.protocol import Protocol

__all__ = ["FlowSnapshot", "FlowState", "FlowStats", "Side"]


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


class Side:
    """Decoding state of one direction of one flow."""

    __slots__ = ("epoch", "skip", "resyncing", "dead", "packet", "frames")

    def __init__(self) -> None:
        self.epoch = 0  # stream offset where the observer's current stream starts
        self.skip = 0  # bytes of a lost unit still to discard after a proven resync
        self.resyncing = False  # after a gap with no provable boundary, until a good unit
        self.dead = ""  # why this direction can no longer be decoded
        self.packet = -1  # the packet whose units are being counted, and how many so far
        self.frames = 0


class FlowState:
    """Decoding state of one flow: its protocol and observer once chosen (or the TCP
    events held until its server answers), each direction's :class:`Side`, its
    :class:`FlowStats`."""

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
        self.sides = {Direction.C2S: Side(), Direction.S2C: Side()}


class FlowSnapshot(NamedTuple):
    """One open flow as a decoder holds it
    (:meth:`~nsqviz.capture.decode.CaptureDecoder.snapshot`)."""

    flow: Flow
    halves: object  # the tracker's reassembly state of both directions
    state: FlowState
