"""TCP flow tracking and in-order reassembly of each direction's byte stream.

A capture shows segments as the wire carried them: retransmitted, overlapping, out of
order, or not at all (the capture started late, the kernel dropped them, the snaplen cut
them). :class:`FlowTracker` turns them into what each application saw -- one ordered
byte stream per direction -- and says exactly where that view is incomplete:

* bytes arrive as :class:`Data` chunks in stream order, each naming the packet (number,
  timestamp) that carried it, so a frame cut out of the stream knows its packets;
* bytes that were sent but never captured become a :class:`Gap` with their offset and
  size. A hole is only declared lost when the capture proves it: the other side
  acknowledged past it, the snaplen cut the packet, the connection ended, or too much
  data is waiting behind it; until then later segments wait in an out-of-order buffer;
* retransmitted and overlapping bytes are delivered once -- the first copy wins, as in
  Wireshark's default;
* :class:`FlowStart`/:class:`FlowEnd` open and close a flow; ``FlowEnd.how`` says FIN,
  RST or end of capture;
* what Wireshark's TCP analysis says of the segments -- retransmissions, zero windows,
  resets, snaplen cuts -- comes as events too (:mod:`nsqviz.capture.tcp_analysis`).

Sequence numbers are 32-bit and wrap; offsets here are unwrapped 64-bit positions
counted from the first payload byte (after the SYN when it was seen, else from the first
segment captured -- a *mid-stream* start, which the :class:`~nsqviz.capture.flow.Flow`
records).

Which side is the client: the one that sent the SYN; without a SYN, the one whose first
bytes are a protocol's client hello (``client_hello``, e.g. NSQ's magic); else the one
whose port is not a known server port; else the one whose first bytes look like what
a protocol's clients send and not like what its servers do (``sent_by_client``: an NSQ
command line, not a size-prefixed frame); else the one with the higher port (ephemeral
ports are high -- but a server on a port the OS picked may be higher than its clients).

A SYN (without ACK) on a 4-tuple starts a new flow when the flow there has ended, and
also when it has not but the SYN's sequence number is not the one that flow's sender
started from (not a retransmitted SYN): the earlier connection's close was not captured,
and it ends there (``FlowEnd.how == "reused"``), as Wireshark starts a new stream on a
reused port.

``idle_split``: a flow silent for longer than this many seconds ends there
(``FlowEnd.how == "idle"``) and its next packet starts a new, mid-stream flow -- the
same 4-tuple reused much later without a captured handshake.

A capture read while it is being made (``nsqviz decode -i``) runs for hours, so the
tracker cannot keep every flow it has seen: :meth:`FlowTracker.sweep` ends the flows
silent for longer than ``idle_split`` without waiting for their next packet, and forgets
the flows that ended more than :data:`LINGER` seconds ago.
"""

from __future__ import annotations

from array import array
from bisect import insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from nsqviz.capture.flow import Endpoint, Flow
from nsqviz.capture.layers import ACK, FIN, RST, SYN, Segment, packet_name
from nsqviz.capture.tcp_analysis import (
    UNKNOWN,
    Reset,
    Retransmission,
    SeqState,
    Truncated,
    WindowOpen,
    ZeroWindow,
    classify,
)
from nsqviz.stream.direction import C2S, S2C, Direction

__all__ = [
    "Data",
    "FlowEnd",
    "FlowStart",
    "FlowTracker",
    "Gap",
    "TcpEvent",
    "four_tuple",
]

_MASK = 0xFFFFFFFF
_HALF = 1 << 31

MAX_PENDING_BYTES = 16 * 1024 * 1024
"""Out-of-order bytes held behind a hole before the hole is declared lost."""
MAX_PENDING_SEGMENTS = 1024

# A namedtuple's own __new__ is a Python-level function; tuple.__new__ builds the same
# object in C, which counts once per segment (the capture readers' hot loop).
_new_tuple = tuple.__new__

LINGER = 60.0
"""Seconds an ended flow is remembered by :meth:`FlowTracker.sweep`: late packets of a
closed connection (the last ACK, a retransmitted FIN) still belong to it, as in TCP's
TIME-WAIT (twice Linux's 30-second maximum segment lifetime)."""


class Data(NamedTuple):
    """In-order bytes of one direction, at stream ``offset``, carried by packet ``number``."""

    flow: Flow
    direction: Direction
    offset: int
    data: bytes
    number: int
    ts: float


@dataclass(frozen=True, slots=True)
class Gap:
    """``size`` bytes at ``offset`` were sent but are not in the capture; ``cut`` of them
    because the snaplen cut the packets that carried them. ``after``: the packet whose
    bytes come right after the hole, when the capture shows one and not all the hole is
    the snaplen's (Wireshark marks it "previous segment not captured")."""

    flow: Flow
    direction: Direction
    offset: int
    size: int
    number: int  # the packet whose arrival (or the end) made the hole certain
    ts: float
    reason: str
    cut: int = 0
    after: int | None = None


@dataclass(frozen=True, slots=True)
class FlowStart:
    flow: Flow
    number: int
    ts: float


@dataclass(frozen=True, slots=True)
class FlowEnd:
    """One direction ended: ``how`` is ``"fin"``, ``"rst"``, ``"idle"`` (silent longer than
    the tracker's ``idle_split``), ``"reused"`` (a new connection's SYN on its 4-tuple) or
    ``"capture"`` (the capture ended). ``sender``: the direction of the segment that
    ended it -- the FIN's own, the RST's (which ends both directions) -- else ``None``."""

    flow: Flow
    direction: Direction
    how: str
    number: int
    ts: float
    sender: Direction | None = None


TcpEvent = (Data | Gap | FlowStart | FlowEnd | Retransmission | ZeroWindow | WindowOpen | Reset
            | Truncated)


class _Pending(NamedTuple):
    offset: int
    data: bytes
    number: int
    ts: float


class _Half(SeqState):
    """One direction of a flow: what has been delivered, what waits behind a hole (and,
    from :class:`~nsqviz.capture.tcp_analysis.SeqState`, its sequence analysis)."""

    __slots__ = (
        "base", "delivered", "pending", "pending_bytes", "fin_at", "ended", "acked",
        "lost", "last_number", "last_ts",
    )

    def __init__(self) -> None:
        super().__init__()
        self.base: int | None = None  # absolute seq of offset 0
        self.delivered = 0  # offset of the next byte to deliver
        self.pending: list[_Pending] = []  # sorted by offset
        self.pending_bytes = 0
        self.fin_at: int | None = None
        self.ended = False
        self.acked = 0  # highest offset the peer acknowledged
        self.lost: list[tuple[int, int, int]] = []  # (start, end, packet): snaplen cuts
        self.last_number = 0
        self.last_ts = 0.0

    def offset_of(self, seq: int) -> int:
        """Unwrap a 32-bit sequence number to an offset near what is delivered."""
        ref = (self.base + self.delivered) & _MASK  # type: ignore[operator]
        return self.delivered + ((seq - ref + _HALF) & _MASK) - _HALF


class FlowTracker:
    """Feed it segments in capture order; it returns the flow events each one completes."""

    shortcut = True
    """Take the TCP analysis's conclusion for a segment next in sequence, with nothing
    to flag, without running it (most segments; a test turns this off to hold the two to
    the same events)."""

    def __init__(self, *, server_ports: Iterable[int] = (), first_id: int = 0,
                 client_hello: Callable[[bytes], bool] | None = None,
                 sent_by_client: Callable[[bytes], bool | None] | None = None,
                 idle_split: float | None = None):
        self.server_ports = frozenset(server_ports)
        self.first_id = first_id  # flow ids continue from here (several files, one numbering)
        self.client_hello = client_hello
        self.sent_by_client = sent_by_client
        self.idle_split = idle_split
        self._flows: dict[tuple[Endpoint, Endpoint], tuple[Flow, dict[Direction, _Half]]] = {}
        self.flows: list[Flow] = []  # every flow not forgotten by sweep(), in id order
        self.numbered = 0  # flows numbered so far (forgotten ones included)

    # -- flow lookup ---------------------------------------------------------------

    def _client_is_src(self, seg: Segment) -> bool:
        flags = seg.flags
        if flags & SYN:
            return not flags & ACK
        if self.client_hello is not None and seg.payload and self.client_hello(seg.payload):
            return True
        s_srv, d_srv = seg.sport in self.server_ports, seg.dport in self.server_ports
        if s_srv != d_srv:
            return d_srv
        if self.sent_by_client is not None and seg.payload:
            by_client = self.sent_by_client(seg.payload)
            if by_client is not None:
                return by_client
        return seg.sport > seg.dport

    def _lookup(self, seg: Segment, out: list[TcpEvent]
                ) -> tuple[Flow, dict[Direction, _Half], Direction]:
        a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
        key = four_tuple(a, b)
        entry = self._flows.get(key)
        if entry is not None:
            flow, halves = entry
            direction = C2S if a == flow.client else S2C
            idle = self.idle_split
            if idle is not None:
                last = max(halves[C2S].last_ts, halves[S2C].last_ts)
                if seg.ts - last > idle:
                    for d, h in halves.items():
                        self._end(flow, d, h, "idle", h.last_number, h.last_ts, out)
                    entry = None
            # A new SYN on a finished 4-tuple is a new connection that reuses the ports;
            # so is one with another initial sequence number on an unfinished 4-tuple.
            if entry is not None and seg.flags & SYN and not seg.flags & ACK:
                if all(h.ended for h in halves.values()):
                    entry = None
                else:
                    base = halves[direction].base
                    if base is not None and (seg.seq + 1) & _MASK != base:
                        for d, h in halves.items():
                            self._end(flow, d, h, "reused", seg.number, seg.ts, out)
                        entry = None
            if entry is not None:
                return flow, halves, direction
        client_src = self._client_is_src(seg)
        flow = Flow(
            self.first_id + self.numbered,
            a if client_src else b,
            b if client_src else a,
            bool(seg.flags & SYN),
            seg.number,
        )
        halves = {C2S: _Half(), S2C: _Half()}
        for h in halves.values():  # silence is counted from the flow's first packet
            h.last_ts = seg.ts
        self._flows[key] = (flow, halves)
        self.flows.append(flow)
        self.numbered += 1
        out.append(FlowStart(flow, seg.number, seg.ts))
        return flow, halves, C2S if client_src else S2C

    # -- segments ------------------------------------------------------------------

    def feed(self, seg: Segment) -> list[TcpEvent]:
        out: list[TcpEvent] = []
        flow, halves, direction = self._lookup(seg, out)
        half = halves[direction]
        peer = halves[S2C if direction == C2S else C2S]
        flow.last_packet = seg.number
        flags = seg.flags
        peer_ts = peer.last_ts
        half.last_number, half.last_ts = seg.number, seg.ts
        seq = seg.seq
        if flags & SYN:
            if half.base is None:
                half.base = (seq + 1) & _MASK  # any payload on a SYN starts after it
            if not flags & ACK:
                flow.syn_ts = seg.ts
        elif half.base is None:
            half.base = seq  # mid-stream start: offsets count from the first byte seen
        elif flags & ACK and not flow.first_rtt and flow.syn_ts is not None:
            flow.first_rtt = seg.ts - flow.syn_ts
        payload = seg.payload
        size = len(payload) + seg.missing
        start = half.offset_of(seg.seq)  # where the segment (a SYN: its own number) starts
        off = start + 1 if flags & SYN else start  # where its payload starts
        repeat = None  # its ACK repeats the last one (None: no ACK)
        if flags & ACK and peer.base is not None:
            acked = peer.offset_of(seg.ack)
            repeat = acked == peer.acked
            if acked > peer.acked:
                peer.acked = acked
                if peer.pending and peer.pending[0].offset <= acked:
                    self._declare_hole(flow, _other(direction), peer, seg.number, seg.ts, out,
                                       "acknowledged by the receiver but not captured")
        # Late packets of a connection both sides have closed (the last ACK, a FIN sent
        # again) belong to it but say nothing new: they are not analysed.
        live = not (half.ended and peer.ended)
        window = seg.window
        if (start == half.next and window and peer.window and half.zero_since is None
                and not flags & (SYN | FIN | RST) and self.shortcut
                and (start + size > half.acked if size else repeat is not True)):
            # the common case, next in sequence: what _analyse would conclude of it
            if size:
                half.next, half.next_ts = start + size, seg.ts
            half.keepalive = False
            if repeat is False:
                half.dupacks = 0
            half.window = window
        elif live:
            self._analyse(flow, direction, half, peer, seg, start, size, repeat, peer_ts, out)

        if size:
            if seg.missing:
                half.lost.append((off + len(payload), off + size, seg.number))
            if seg.missing and live:
                if half.cuts is None:
                    half.cuts = array("q")
                half.cuts.append(seg.number)
                half.cut_size += size
                half.cut_bytes += seg.missing
            if payload:
                self._insert(flow, direction, half, off, payload, seg, out)
            if seg.missing and not half.pending and half.delivered == off + len(payload):
                # In order and cut by the snaplen: its end will never be captured. A hole
                # now, at the packet that was cut, so what follows is read in order.
                out.append(Gap(flow, direction, half.delivered, seg.missing, seg.number, seg.ts,
                               self._cut_reason(half, half.delivered, half.delivered + 1),
                               seg.missing))
                half.delivered += seg.missing
            while half.pending and half.lost and self._cut_covers(half):
                self._declare_hole(flow, direction, half, seg.number, seg.ts, out, "")

        if flags & FIN and half.fin_at is None:
            half.fin_at = off + size
        if flags & RST:
            if live:
                out.append(Reset(flow, direction, seg.number, seg.ts, peer.acked,
                                 peer.in_flight(peer.acked, peer.fin_at),
                                 half.in_flight(half.acked, half.fin_at),
                                 half.fin_at is not None or peer.fin_at is not None,
                                 half.zero_since))
            # the sender's direction ends first: a table reading the first end reads who
            # reset the connection
            for d in (direction, _other(direction)):
                self._end(flow, d, halves[d], "rst", seg.number, seg.ts, out, sender=direction)
            return out
        if half.pending_bytes > MAX_PENDING_BYTES or len(half.pending) > MAX_PENDING_SEGMENTS:
            self._declare_hole(flow, direction, half, seg.number, seg.ts, out,
                               "too much data waiting behind it; taken as lost")
        for d, h in halves.items():
            if h.fin_at is not None and h.delivered >= h.fin_at and not h.ended:
                self._ended(flow, d, h, "fin", seg.number, seg.ts, out, d)
        return out

    def _analyse(self, flow: Flow, direction: Direction, half: _Half, peer: _Half,
                 seg: Segment, start: int, size: int, repeat: bool | None, peer_ts: float,
                 out: list[TcpEvent]) -> None:
        """Wireshark's analysis of one segment (:mod:`~nsqviz.capture.tcp_analysis`):
        duplicate ACKs, the packet past bytes not captured, retransmissions, the window."""
        flags, window = seg.flags, seg.window
        if repeat is not None:
            if not repeat:
                half.dupacks = 0
            elif (not size and window and window == half.window and start == half.next
                  and not flags & (SYN | FIN | RST) and not peer.keepalive):
                half.dupacks += 1  # a duplicate ACK: it repeats everything
        if start > half.next != UNKNOWN and half.lost_at is None and not flags & RST:
            half.lost_at = seg.number  # Wireshark: "previous segment not captured"
        kind = classify(half, peer, start, size, flags, seg.ts, half.acked, peer_ts,
                        flow.first_rtt)
        if kind is not None:
            off = start + 1 if flags & SYN else start
            out.append(Retransmission(flow, direction, start, size, seg.number, seg.ts, kind,
                                      self._seen(half, off, off + len(seg.payload))))
        if not window and not flags & (SYN | FIN | RST):
            if half.zero_since is None:
                half.zero_since, half.zero_count, half.probes = seg.ts, 0, 0
            half.zero_count += 1
            out.append(ZeroWindow(flow, direction, seg.number, seg.ts, peer.acked,
                                  peer.in_flight(peer.acked, peer.fin_at), half.probes))
        elif window and half.zero_since is not None and not flags & (SYN | RST):
            out.append(WindowOpen(flow, direction, seg.number, seg.ts, half.zero_since, window,
                                  half.zero_count, half.probes))
            half.zero_since = None
        half.window = window

    def _insert(self, flow: Flow, direction: Direction, half: _Half, off: int, payload: bytes,
                seg: Segment, out: list[TcpEvent]) -> None:
        end = off + len(payload)
        delivered = half.delivered
        if off == delivered and not half.pending:  # the common case: next in order
            half.delivered = end
            if half.lost_at is not None and end >= half.next:
                half.lost_at = None  # the bytes came after all (out of order)
            out.append(_new_tuple(Data, (flow, direction, off, payload, seg.number, seg.ts)))
            return
        if end <= delivered:
            return  # all seen: the first copy was delivered
        if off < delivered:
            payload = payload[delivered - off :]
            off = delivered
        if off > delivered:
            insort(half.pending, _Pending(off, payload, seg.number, seg.ts))
            half.pending_bytes += len(payload)
            return
        half.delivered = end
        out.append(Data(flow, direction, off, payload, seg.number, seg.ts))
        self._drain(flow, direction, half, out)
        if half.lost_at is not None and half.delivered >= half.next:
            half.lost_at = None  # the bytes came after all (out of order)

    def _drain(self, flow: Flow, direction: Direction, half: _Half, out: list[TcpEvent]) -> None:
        """Deliver pending segments that now continue the stream."""
        pending = half.pending
        while pending and pending[0].offset <= half.delivered:
            p = pending.pop(0)
            half.pending_bytes -= len(p.data)
            end = p.offset + len(p.data)
            if end <= half.delivered:
                continue
            data = p.data
            if p.offset < half.delivered:
                data = data[half.delivered - p.offset:]
            out.append(Data(flow, direction, half.delivered, data, p.number, p.ts))
            half.delivered = end

    @staticmethod
    def _seen(half: _Half, start: int, end: int) -> int:
        """How many bytes of ``[start, end)`` the capture has already shown (delivered,
        or waiting behind a hole)."""
        seen, upto = 0, start
        for lo, hi in [(start, half.delivered),
                       *((p.offset, p.offset + len(p.data)) for p in half.pending)]:
            lo, hi = max(lo, upto), min(hi, end)
            if hi > lo:
                seen += hi - lo
                upto = hi
        return seen

    def _declare_hole(self, flow: Flow, direction: Direction, half: _Half, number: int, ts: float,
                      out: list[TcpEvent], reason: str) -> None:
        """The bytes before the first pending segment are lost: report them, move on."""
        nxt = half.pending[0].offset
        size = nxt - half.delivered
        if size <= 0:
            self._drain(flow, direction, half, out)
            return
        reason = self._cut_reason(half, half.delivered, nxt) or reason
        cut = self._cut_bytes(half, half.delivered, nxt)
        out.append(Gap(flow, direction, half.delivered, size, number, ts,
                       reason or "bytes missing from the capture", cut,
                       self._after(half) if cut < size else None))
        half.delivered = nxt
        self._drain(flow, direction, half, out)

    @staticmethod
    def _after(half: _Half) -> int | None:
        """The packet that came right after the bytes being declared lost (once)."""
        after = half.lost_at if half.lost_at is not None else (
            half.pending[0].number if half.pending else None)
        half.lost_at = None
        return after

    @staticmethod
    def _cut_covers(half: _Half) -> bool:
        """Is the hole before the first pending segment bytes the snaplen cut off?"""
        hole_start, hole_end = half.delivered, half.pending[0].offset
        half.lost = [iv for iv in half.lost if iv[1] > hole_start]
        return any(start <= hole_start and end >= hole_end for start, end, _ in half.lost)

    @staticmethod
    def _cut_reason(half: _Half, start: int, end: int) -> str:
        for lo, hi, number in half.lost:
            if lo < end and hi > start:
                return f"{packet_name(number)} was cut short by the capture's snaplen"
        return ""

    @staticmethod
    def _cut_bytes(half: _Half, start: int, end: int) -> int:
        """How many bytes of ``[start, end)`` the snaplen cut from the packets."""
        cut, upto = 0, start
        for lo, hi, _ in sorted(half.lost):
            lo, hi = max(lo, upto), min(hi, end)
            if hi > lo:
                cut += hi - lo
                upto = hi
        return cut

    def _end(self, flow: Flow, direction: Direction, half: _Half, how: str, number: int, ts: float,
             out: list[TcpEvent], sender: Direction | None = None) -> None:
        if half.ended:
            return
        while half.pending:
            self._declare_hole(flow, direction, half, number, ts, out,
                               "missing from the capture before the connection ended")
        cut_end = max((end for _, end, _ in half.lost), default=0)
        # An ACK of a FIN counts the FIN's own sequence number: it is not a data byte.
        acked = half.acked if half.fin_at is None else min(half.acked, half.fin_at)
        tail_to = max(acked, cut_end, half.fin_at or 0)
        if tail_to > half.delivered and half.base is not None:
            reason = (self._cut_reason(half, half.delivered, tail_to)
                      or "acknowledged by the receiver but not captured")
            if half.fin_at is None and tail_to == half.delivered + 1:
                reason += " (or a FIN the capture missed: it also takes one sequence number)"
            cut = self._cut_bytes(half, half.delivered, tail_to)
            out.append(Gap(flow, direction, half.delivered, tail_to - half.delivered, number,
                           ts, reason, cut,
                           self._after(half) if cut < tail_to - half.delivered else None))
            half.delivered = tail_to
        self._ended(flow, direction, half, how, number, ts, out, sender)

    @staticmethod
    def _ended(flow: Flow, direction: Direction, half: _Half, how: str, number: int, ts: float,
               out: list[TcpEvent], sender: Direction | None) -> None:
        """``direction`` ends at packet ``number``: what the snaplen cut of it, then its end."""
        half.ended = True
        if half.cuts:
            out.append(Truncated(flow, direction, number, ts, tuple(half.cuts), half.cut_size,
                                 half.cut_bytes))
            half.cuts = None
        out.append(FlowEnd(flow, direction, how, number, ts, sender))

    def halves(self, flow: Flow) -> object:
        """What the tracker holds of ``flow`` besides the flow itself (both directions'
        reassembly state), for :meth:`adopt` in another tracker."""
        return self._flows[four_tuple(flow.client, flow.server)][1]

    def adopt(self, flow: Flow, halves: object, *, replacing: Flow) -> None:
        """Go on with ``flow`` (and its :meth:`halves` from another tracker) where this
        tracker has just started ``replacing`` on the same 4-tuple: ``flow`` takes its id
        and its place. The Spark pipeline continues a connection that crosses a file
        boundary this way, from the state the earlier file's task left it in."""
        key = four_tuple(replacing.client, replacing.server)
        current = self._flows.get(key, (None,))[0]
        if key != four_tuple(flow.client, flow.server) or current is not replacing:
            raise ValueError(f"{flow.label} cannot replace {replacing.label} here")
        flow.id = replacing.id
        self._flows[key] = (flow, halves)  # type: ignore[assignment]
        self.flows[self.flows.index(replacing)] = flow

    def open_flows(self) -> list[Flow]:
        """The flows with a direction not yet ended (what :meth:`finish` would close)."""
        return [flow for flow, halves in self._flows.values()
                if not (halves[C2S].ended and halves[S2C].ended)]

    def sweep(self, now: float) -> tuple[list[TcpEvent], list[Flow]]:
        """At capture time ``now``: end every flow silent for longer than ``idle_split``
        (as its next packet would), and forget the flows that ended at least
        :data:`LINGER` seconds before ``now``. Returns the events of the flows ended
        here, and the flows forgotten (their ids are never reused; a later packet on
        one's 4-tuple starts a new flow). Linear in the flows held; a reader of a live
        capture calls it every few seconds of capture time, so what it holds is the
        connections open in the last ``idle_split`` seconds and those closed in the
        last :data:`LINGER`."""
        out: list[TcpEvent] = []
        gone: list[Flow] = []
        idle = self.idle_split
        for key, (flow, halves) in list(self._flows.items()):
            last = max(halves[C2S].last_ts, halves[S2C].last_ts)
            ended = halves[C2S].ended and halves[S2C].ended
            if not ended and idle is not None and now - last > idle:
                for d, h in halves.items():
                    self._end(flow, d, h, "idle", h.last_number, h.last_ts, out)
                ended = True
            elif ended and now - last < LINGER:
                ended = False
            if ended:
                del self._flows[key]
                gone.append(flow)
        if gone:
            ids = {flow.id for flow in gone}
            self.flows = [flow for flow in self.flows if flow.id not in ids]
        return out, gone

    def finish(self) -> list[TcpEvent]:
        """End of capture: report what is still waiting, close every open direction."""
        out: list[TcpEvent] = []
        for flow, halves in self._flows.values():
            for direction, half in halves.items():
                self._end(flow, direction, half, "capture", half.last_number, half.last_ts, out)
        return out


def four_tuple(a: Endpoint, b: Endpoint) -> tuple[Endpoint, Endpoint]:
    """The unordered 4-tuple a flow is kept under: the same for both directions' packets
    (its two endpoints, the smaller first)."""
    return (a, b) if a <= b else (b, a)


def _other(direction: Direction) -> Direction:
    return S2C if direction == C2S else C2S
