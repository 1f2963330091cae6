"""What stage 1 hands stage 2: the connections that cross a file boundary, not their bytes.

A capture set's files are decoded in parallel, one task per file (stage 1,
:func:`nsqviz.pipeline.decode.decode_file`). A connection that is still open at the end
of its file, or that began in an earlier one, cannot be finished there. For each file,
stage 1 leaves a :class:`FileHandoff` that says, per 4-tuple, what stage 2 needs to
finish them -- and nothing else:

* a connection open at the file's end is handed on as its decoder's **state**
  (:meth:`nsqviz.capture.decode.CaptureDecoder.snapshot`, pickled: TCP reassembly,
  framing buffer, protocol state, the rows numbered so far) with the one packet that
  started it; stage 2 goes on from there and never decodes those bytes again. Where the
  state does not pickle (a snappy or DEFLATE compressor, TubeMQ's generated protobuf
  classes) the connection's packets from its first on are handed on instead, and stage 2
  decodes them again, writing only what stage 1 could not;
* a connection that began in an earlier file (no SYN here, after the first file) is not
  decoded by stage 1 at all: its **packet numbers** are handed on;
* the first SYN on a 4-tuple in a later file is handed on as **context**: if an earlier
  file left a connection open on that 4-tuple, this SYN ends it (``reused``), as in
  ``nsqviz decode``;
* a 4-tuple whose last connection ended in this file gets a **closed** time: its late
  packets in the next file (the last ACK, a retransmitted FIN) belong to that
  connection and start nothing, unless a SYN or a silence longer than ``idle_split``
  begins a new one.

Packets go as numbers and file offsets: stage 2 reads them from the capture files
itself (:func:`~nsqviz.capture.files.read_records`: a classic pcap only where they are),
so no payload byte moves through Spark's shuffle. The handoffs are small files beside
the run (written whole and renamed into place, so a retried task leaves the same file);
the driver reads them and :func:`plan` groups the 4-tuples into stage 2's partitions,
balanced by bytes.
"""

from __future__ import annotations

import heapq
import os
import pickle
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.layers import Segment, packet_id
from nsqviz.capture.tcp import four_tuple

__all__ = ["FileHandoff", "FilePart", "HandoffCollector", "Key", "KeyPart", "Part", "key_of",
           "load", "plan", "save"]

Key = tuple[tuple[str, int], tuple[str, int]]
"""A connection's unordered 4-tuple, as the flow tracker keys it (:func:`~nsqviz.capture.
tcp.four_tuple`)."""


def key_of(seg: Segment) -> Key:
    return four_tuple((seg.src, seg.sport), (seg.dst, seg.dport))


@dataclass
class KeyPart:
    """What one file hands on for one 4-tuple."""

    numbers: array[int] = field(default_factory=lambda: array("q"))  # packets stage 2 reads
    offsets: array[int] = field(default_factory=lambda: array("q"))  # where each is in the file
    context: list[int] = field(default_factory=list)  # of those, SYNs read for what they end
    states: dict[int, bytes] = field(default_factory=dict)  # first packet -> pickled snapshot
    closed: float | None = None  # its last connection ended here; its last packet's time
    payload: int = 0  # payload bytes of ``numbers`` (what stage 2 will decode)

    def needed(self) -> bool:
        """Does stage 2 have anything to do for this 4-tuple because of this file? Context
        SYNs and closed times only matter beside a connection handed on."""
        return bool(self.states) or len(self.numbers) > len(self.context)


@dataclass
class FileHandoff:
    file_index: int
    keys: dict[Key, KeyPart]


class HandoffCollector:
    """Watches stage 1's packets of one file (:meth:`see`), then says what crosses
    (:meth:`finish`)."""

    def __init__(self, file_index: int, n_files: int):
        self.file_index = file_index
        self.n_files = n_files
        self.shift = packet_id(file_index, 0)
        # Per direction (src, sport, dst, dport): (packet id, record offset, payload size)
        # triples in capture order, and the last packet's (id, time). The two directions
        # of a 4-tuple are merged only for what is handed on.
        self.packets: dict[tuple[Any, ...], array[int]] = {}
        self.last: dict[tuple[Any, ...], tuple[int, float]] = {}

    def see(self, seg: Segment, offset: int) -> None:
        """Packet ``seg``, whose record starts at ``offset`` in the file."""
        way = seg[2:6]
        packets = self.packets.get(way)
        if packets is None:
            packets = self.packets[way] = array("q")
        packets.extend((seg.number, offset, len(seg.payload)))
        self.last[way] = (seg.number, seg.ts)

    def _merged(self, key: Key) -> tuple[list[int], list[int], list[int]]:
        """The 4-tuple's packets in capture order: (ids, offsets, payload sizes)."""
        (a, b) = key
        triples: list[tuple[int, int, int]] = []
        for way in ((*a, *b), (*b, *a)):
            packets = self.packets.get(way)
            if packets:
                triples.extend(zip(packets[0::3], packets[1::3], packets[2::3], strict=True))
        triples.sort()
        if not triples:
            return [], [], []
        ids, offsets, sizes = map(list, zip(*triples, strict=True))
        return ids, offsets, sizes

    def finish(self, decoder: CaptureDecoder, conns: dict[int, list[Any]]) -> FileHandoff:
        """The handoff of this file, once ``decoder`` has read all of it (without its
        ``finish``); ``conns`` is the stage's row numbering per flow id
        (:class:`~nsqviz.records.ConnectionRows`), handed on with each state."""
        from bisect import bisect_left, bisect_right

        tracker = decoder.driver.tracker
        later = self.file_index > 0
        not_last = self.file_index < self.n_files - 1
        open_now = {id(f) for f in tracker.open_flows()} if not_last else set()
        parts: dict[Key, KeyPart] = {}
        heads: set[Key] = set()
        merged: dict[Key, tuple[list[int], list[int], list[int]]] = {}

        def take(key: Key, lo: int, hi: float) -> KeyPart:
            if key not in merged:
                merged[key] = self._merged(key)
            numbers, offsets, sizes = merged[key]
            i, j = bisect_left(numbers, lo), bisect_right(numbers, hi)
            part = parts.setdefault(key, KeyPart())
            part.numbers.extend(n - self.shift for n in numbers[i:j])
            part.offsets.extend(offsets[i:j])
            part.payload += sum(sizes[i:j])
            return part

        for flow in tracker.flows:
            key = four_tuple(flow.client, flow.server)
            head = key not in heads
            heads.add(key)
            is_open = id(flow) in open_now
            if later and not flow.syn_seen:  # began in an earlier file: not decoded here
                take(key, flow.first_packet, float("inf") if is_open else flow.last_packet)
            elif is_open:
                state = _pickled(decoder, flow, conns.get(flow.id))
                if state is None:
                    take(key, flow.first_packet, float("inf"))
                else:
                    part = take(key, flow.first_packet, flow.first_packet)
                    part.states[flow.first_packet - self.shift] = state
            elif later and head:
                take(key, flow.first_packet, flow.first_packet).context.append(
                    flow.first_packet - self.shift)
        if not_last:  # each 4-tuple whose last connection is not open: its last packet
            still_open = {four_tuple(f.client, f.server) for f in tracker.open_flows()}
            last: dict[Key, tuple[int, float]] = {}
            for (src, sport, dst, dport), seen in self.last.items():
                key = four_tuple((src, sport), (dst, dport))
                if key not in still_open and seen > last.get(key, (-1, 0.0)):
                    last[key] = seen
            for key, (_, ts) in last.items():
                parts.setdefault(key, KeyPart()).closed = ts
        return FileHandoff(self.file_index, parts)


def _pickled(decoder: CaptureDecoder, flow: Any, conn: list[Any] | None) -> bytes | None:
    try:
        return pickle.dumps((decoder.snapshot(flow), conn), protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None  # stage 2 decodes this connection's packets again instead


def save(handoff: FileHandoff, directory: str) -> None:
    """Write ``handoff`` as ``directory/<file index>``, whole or not at all."""
    path = os.path.join(directory, str(handoff.file_index))
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump(handoff, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)


def load(directory: str, n_files: int) -> list[FileHandoff]:
    """Every file's handoff; a missing one is an error (its task did not finish)."""
    out = []
    for i in range(n_files):
        with open(os.path.join(directory, str(i)), "rb") as f:
            out.append(pickle.load(f))
    return out


@dataclass
class FilePart:
    """Stage 2's share of one file in one partition. ``numbers`` and ``offsets`` are kept
    as 8 bytes a packet: a partition may hand on millions."""

    numbers: array[int] = field(default_factory=lambda: array("q"))
    offsets: array[int] = field(default_factory=lambda: array("q"))
    context: set[int] = field(default_factory=set)
    states: dict[int, bytes] = field(default_factory=dict)
    closed: dict[Key, float] = field(default_factory=dict)

    def wanted(self) -> zip[tuple[int, int]]:
        """(packet number, file offset) of each packet to read."""
        return zip(self.numbers, self.offsets, strict=True)


@dataclass
class Part:
    """One stage 2 partition: some 4-tuples, what each file holds of them, the payload
    bytes it will decode."""

    files: dict[int, FilePart] = field(default_factory=dict)
    keys: int = 0
    payload: int = 0


def plan(handoffs: Iterable[FileHandoff], n_parts: int) -> list[Part]:
    """Stage 2's partitions: the 4-tuples that need it, spread so that each partition has
    about as many bytes to decode (largest first, each to the lightest partition). A
    4-tuple stays in one partition: its packets are decoded in capture order."""
    by_key: dict[Key, list[tuple[int, KeyPart]]] = {}
    for h in handoffs:
        for key, key_part in h.keys.items():
            by_key.setdefault(key, []).append((h.file_index, key_part))
    wanted = [(sum(p.payload for _, p in parts) + 1, key, parts)
              for key, parts in by_key.items() if any(p.needed() for _, p in parts)]
    wanted.sort(key=lambda w: (-w[0], w[1]))
    out = [Part() for _ in range(max(1, min(n_parts, len(wanted))))]
    heap = [(0, i) for i in range(len(out))]
    for weight, key, parts in wanted:
        load_, i = heapq.heappop(heap)
        part = out[i]
        part.keys += 1
        part.payload += weight - 1
        for file_index, kp in parts:
            fp = part.files.setdefault(file_index, FilePart())
            fp.numbers.extend(kp.numbers)
            fp.offsets.extend(kp.offsets)
            fp.context.update(kp.context)
            fp.states.update(kp.states)
            if kp.closed is not None:
                fp.closed[key] = kp.closed
        heapq.heappush(heap, (load_ + weight, i))
    return [p for p in out if p.keys]
