"""What the TCP layer knows beyond the bytes: Wireshark's sequence analysis, as events.

The flow tracker (:class:`~nsqviz.capture.tcp.FlowTracker`) runs this analysis on every
segment, beside reassembly, so a pcap read in-process, a Spark task and a live ``-i``
decode all see the same facts. It follows Wireshark's ``tcp_analyze_sequence_number``
(the ``tcp.analysis.*`` fields), per direction:

* **retransmissions** -- a segment with payload (or a SYN or FIN) that does not advance
  its direction's highest sequence number seen so far. Wireshark names it, in this
  order: *spurious retransmission* (every byte of it was already acknowledged), *fast
  retransmission* (it starts where the other side has acknowledged at least twice more,
  within 20 ms of the last of those duplicate ACKs), *out-of-order* (it came within the
  handshake's round-trip time -- 3 ms when the handshake was not captured -- of the
  highest segment, and does not end where that one did), else *retransmission*. A
  keep-alive (0 or 1 byte one below the next sequence number) and a zero-window probe
  (1 byte at it while the other side's window is 0) are none of these;
* **zero windows** -- a packet whose window field is 0 (and that is no SYN, FIN or RST):
  its sender has stopped taking the other side's bytes. The packet that next announces
  a window again (no SYN or RST: a reset ends the connection, not the stall) ends the
  period (:class:`WindowOpen`); the other side's window probes in between are counted;
* **resets** -- who sent the RST, what each side had sent that the other had not
  acknowledged, and whether a FIN came first;
* **snaplen cuts** -- the packets of a direction whose payload the capture cut short.

Offsets are stream offsets, as the tracker's :class:`~nsqviz.capture.tcp.Data` has them
(0: the first byte after the SYN). :class:`SeqState` is the analysis state each
direction of a flow carries; the events are the tracker's (:data:`~nsqviz.capture.tcp.
TcpEvent`), each about packets of one direction of one flow.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any, ClassVar

from nsqviz.capture.flow import Flow
from nsqviz.capture.layers import FIN, RST, SYN
from nsqviz.stream.direction import Direction

__all__ = [
    "FAST_RETRANSMISSION_WINDOW",
    "Finding",
    "OUT_OF_ORDER_DEFAULT",
    "RETRANSMISSION_KINDS",
    "UNKNOWN",
    "Reset",
    "Retransmission",
    "SeqState",
    "Truncated",
    "WindowOpen",
    "ZeroWindow",
    "classify",
]

FAST_RETRANSMISSION_WINDOW = 0.020
"""Seconds after the other side's last duplicate ACK within which a retransmission is a
*fast* one (Wireshark's 20 ms)."""
OUT_OF_ORDER_DEFAULT = 0.003
"""Seconds within which a segment below the highest one is *out-of-order* rather than
retransmitted, when the handshake's round-trip time is not known (Wireshark's 3 ms)."""
RETRANSMISSION_KINDS = ("retransmission", "fast retransmission", "spurious retransmission")
"""The kinds Wireshark flags ``tcp.analysis.retransmission`` (its fourth,
``out-of-order``, is flagged ``tcp.analysis.out_of_order`` only)."""

UNKNOWN = -(1 << 62)
"""``SeqState.next`` before its direction has sent anything."""


class SeqState:
    """The sequence analysis of one direction of a flow (its sender's segments)."""

    __slots__ = ("next", "next_ts", "window", "dupacks", "keepalive", "lost_at",
                 "zero_since", "zero_count", "probes", "cuts", "cut_size", "cut_bytes")

    def __init__(self) -> None:
        self.next = UNKNOWN  # offset after the highest segment (a SYN or FIN counts one)
        self.next_ts = 0.0  # when that segment came
        self.window = -1  # the window field this direction sent last (-1: none yet)
        self.dupacks = 0  # duplicate ACKs this direction sent in a row
        self.keepalive = False  # its last segment was a keep-alive
        self.lost_at: int | None = None  # the first packet past bytes not captured
        self.zero_since: float | None = None  # its window has been 0 since then
        self.zero_count = 0  # zero-window packets in that period
        self.probes = 0  # the other side's window probes in it
        self.cuts: array[int] | None = None  # packets the snaplen cut
        self.cut_size = 0  # payload bytes they carried on the wire
        self.cut_bytes = 0  # of which the capture kept none

    def in_flight(self, acked: int, fin_at: int | None) -> int:
        """Bytes this direction sent beyond stream offset ``acked`` (a FIN's sequence
        number is no byte)."""
        end = self.next if fin_at is None else min(self.next, fin_at)
        return max(0, end - acked) if self.next != UNKNOWN else 0


def classify(fwd: SeqState, rev: SeqState, start: int, size: int, flags: int, ts: float,
             acked: int, rev_ts: float, first_rtt: float) -> str | None:
    """Wireshark's name for a segment of ``fwd``'s direction at stream offset ``start``
    with ``size`` payload bytes (a SYN sits at -1), or ``None`` when it is none of the
    retransmission kinds; moves ``fwd`` past it and counts a probe in ``rev``'s zero
    window. ``acked``: the offset of ``fwd``'s bytes the other side acknowledged last;
    ``rev_ts``: the time of the other side's last packet; ``first_rtt``: the
    handshake's round-trip time (0: not known)."""
    nxt = fwd.next
    end = start + size + (1 if flags & (SYN | FIN) else 0)
    probe = keepalive = False
    if nxt != UNKNOWN:
        if size == 1 and start == nxt and rev.window == 0:
            probe = True  # a zero-window probe: it does not move ``next``
        elif size <= 1 and start == nxt - 1 and not flags & (SYN | FIN | RST):
            keepalive = True
    fwd.keepalive = keepalive
    if (probe or keepalive) and rev.zero_since is not None:
        rev.probes += 1
    kind = None
    if (size or flags & (SYN | FIN)) and not keepalive:
        behind = nxt != UNKNOWN and start < nxt
        if size > 1 and start == nxt - 1:
            behind = False  # new data after a zero-window probe's byte
        if size and acked > 0 and start + size <= acked:
            kind = "spurious retransmission"
        elif behind:
            if (rev.dupacks >= 2 and acked == start
                    and ts - rev_ts < FAST_RETRANSMISSION_WINDOW):
                kind = "fast retransmission"
            elif ts - fwd.next_ts < (first_rtt or OUT_OF_ORDER_DEFAULT) and nxt != end:
                kind = "out-of-order"
            else:
                kind = "retransmission"
    if (nxt == UNKNOWN or end > nxt) and not probe:
        fwd.next, fwd.next_ts = end, ts
    return kind


# ----------------------------------------------------------------------------- events


class Finding:
    """What the analysis found in packet ``number`` (or, for :class:`Truncated`, in a
    direction's packets) of ``direction`` of ``flow``: the base of its events. A finding is
    shown as a ``tcp`` record named :attr:`record` with its :meth:`fields`, over its
    :meth:`packets` and the stream :meth:`span` it is about."""

    __slots__ = ()
    record: ClassVar[str]
    flow: Flow
    direction: Direction
    number: int
    ts: float

    def fields(self) -> dict[str, Any]:
        """What the record says, beside whose packet it is."""
        raise NotImplementedError

    def packets(self) -> tuple[int, ...]:
        return (self.number,)

    def span(self) -> tuple[int | None, int | None]:
        """Where its bytes are in its direction's stream: offset and size, if it has any."""
        return None, None


@dataclass(frozen=True, slots=True)
class Retransmission(Finding):
    """Packet ``number`` carried sequence numbers its direction had already sent (or
    came out of order): ``kind`` is Wireshark's name for it (:func:`classify`);
    ``offset``/``size`` its payload's place in the stream and length; ``repeated`` how
    many of those bytes the capture had already shown (reassembly keeps the first
    copy)."""

    flow: Flow
    direction: Direction
    offset: int
    size: int
    number: int
    ts: float
    kind: str
    repeated: int = 0
    record: ClassVar[str] = "Retransmission"

    def fields(self) -> dict[str, Any]:
        return {"kind": self.kind, "offset": self.offset, "size": self.size,
                "repeated": self.repeated}

    def span(self) -> tuple[int | None, int | None]:
        return self.offset, self.size


@dataclass(frozen=True, slots=True)
class ZeroWindow(Finding):
    """Packet ``number`` of ``direction`` announced a window of 0: its sender stops
    taking the other side's bytes. ``acked``: the other direction's stream offset it had
    acknowledged; ``in_flight``: the other side's bytes sent beyond that, which wait;
    ``probes``: the other side's window probes since the window closed."""

    flow: Flow
    direction: Direction
    number: int
    ts: float
    acked: int
    in_flight: int
    probes: int
    record: ClassVar[str] = "ZeroWindow"

    def fields(self) -> dict[str, Any]:
        return {"acked": self.acked, "in_flight": self.in_flight, "probes": self.probes}


@dataclass(frozen=True, slots=True)
class WindowOpen(Finding):
    """Packet ``number`` of ``direction`` announced a window again (``window``, as
    sent) after ``zero_windows`` zero-window packets since ``since`` (the first one's
    time), during which the other side sent ``probes`` window probes."""

    flow: Flow
    direction: Direction
    number: int
    ts: float
    since: float
    window: int
    zero_windows: int
    probes: int
    record: ClassVar[str] = "WindowOpen"

    def fields(self) -> dict[str, Any]:
        return {"window": self.window, "since": self.since,
                "zero_windows": self.zero_windows, "probes": self.probes}


@dataclass(frozen=True, slots=True)
class Reset(Finding):
    """Packet ``number``, a RST of ``direction``: it ends the connection. ``acked``: the
    other direction's stream offset its sender had acknowledged; ``in_flight``: the
    other side's bytes sent beyond that (never taken); ``unacked``: the RST sender's own
    bytes the other side had not acknowledged; ``after_fin``: a FIN (either side's) came
    first -- a reset at close, not in the middle of the session; ``stopped_reading``:
    since when the RST sender's window had been 0 (it reset with its receive buffer full
    of bytes it never read), else ``None``."""

    flow: Flow
    direction: Direction
    number: int
    ts: float
    acked: int
    in_flight: int
    unacked: int
    after_fin: bool
    stopped_reading: float | None = None
    record: ClassVar[str] = "RST"

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"in_flight": self.in_flight, "unacked": self.unacked,
                               "when": "at close" if self.after_fin else "mid-session"}
        if self.stopped_reading is not None:
            out["since"] = self.stopped_reading  # its window had been 0 since
        return out


@dataclass(frozen=True, slots=True)
class Truncated(Finding):
    """At the end of ``direction`` (packet ``number``): the ``cut_packets`` whose payload
    the capture cut short (snaplen), ``size`` payload bytes they carried on the wire, of
    which ``cut`` were not kept."""

    flow: Flow
    direction: Direction
    number: int
    ts: float
    cut_packets: tuple[int, ...]
    size: int
    cut: int
    record: ClassVar[str] = "Truncated"

    def fields(self) -> dict[str, Any]:
        return {"packets_cut": len(self.cut_packets), "size": self.size,
                "cut_bytes": self.cut}

    def packets(self) -> tuple[int, ...]:
        return self.cut_packets

    def span(self) -> tuple[int | None, int | None]:
        return None, self.size
