"""Sticky packets (粘包): how frames written to TCP arrive as segments and recv() chunks.

TCP carries a byte stream. What the sender wrote as five frames may arrive as one
segment (the sender coalesced them: Nagle's algorithm), as ten (each write split at the
MSS), or -- for the reader -- as whatever ``recv()`` happened to return. The receiver
gets its frames back only because each NSQ frame starts with its 4-byte size.

This module produces the data the playground draws, using the project's real parts:
frames are built by the grammar, cut by the real :class:`~nsqviz.stream.Reassembler`
with NSQ's :class:`~nsqviz.nsq.framing.FrameFraming` (or, for TubeMQ frames from
:func:`tubemq_frames`, TubeMQ's rule, which must walk a frame's 8192-byte blocks to find
its end), and :func:`loopback` sends them through a real TCP connection on 127.0.0.1.
:func:`simulate_segments` is a deliberately simple model of a sender (no congestion
window, no delayed ACKs, writes that come faster than one round trip). Coalescing on
is Nagle's rule: a full-MSS segment may always leave, a smaller one only when nothing
sent is still unacknowledged -- so the first write leaves alone, later small writes wait
for the ACK, glued, and full segments of them leave as soon as there are enough bytes.
Off (``TCP_NODELAY``) means each write leaves at once, cut at the MSS if it is larger.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from nsqviz.nsq.framing import FrameFraming
from nsqviz.nsq.grammar import Frame as FrameGrammar
from nsqviz.servers.listen import LOOPBACK
from nsqviz.stream.reassembly import FramingRule, RawFrame, Reassembler, StreamEvent
from nsqviz.tubemq import MESSAGES as TUBEMQ_MESSAGES
from nsqviz.tubemq import TubeFraming, encode, make_request, parse_frame

__all__ = [
    "ReassemblyStep",
    "StickyRun",
    "framing_for",
    "loopback",
    "message_frames",
    "reassemble",
    "simulate_segments",
    "tubemq_block_marks",
    "tubemq_frames",
]


@dataclass(frozen=True)
class ReassemblyStep:
    """What the reassembler did with one segment: frames completed, bytes still waiting."""

    segment: int
    data: bytes
    events: tuple[StreamEvent, ...]
    buffered: bytes


@dataclass(frozen=True)
class StickyRun:
    """Frames written, how the bytes arrived, and the reassembler's step-by-step answer."""

    label: str
    frames: tuple[bytes, ...]
    segments: tuple[bytes, ...]
    steps: tuple[ReassemblyStep, ...]
    unit: str = "segment"  # what one element of ``segments`` is: a TCP segment, a recv() chunk
    marks: tuple[tuple[int, ...], ...] = ()
    """Per frame, offsets inside it worth marking (TubeMQ: where each block length starts)."""
    name: str = "FrameTypeMessage"
    """What every frame is (its colour is this name's, :func:`nsqviz.palette.name_colour`)."""
    protocol: str = "nsq"
    """Whose frames these are (:func:`nsqviz.protocols.by_name`) ..."""
    kind: str = "frame"
    """... and which kind of unit of it: ``frame`` (NSQ, nsqd's) or ``command`` (TubeMQ's
    requests), what :meth:`nsqviz.protocols.protocol.Protocol.layout` lays them out by."""

    def count(self, n: int) -> str:
        return f"{n} {self.unit}{'' if n == 1 else 's'}"

    @property
    def reassembled(self) -> list[RawFrame]:
        return [e for s in self.steps for e in s.events if isinstance(e, RawFrame)]

    @property
    def intact(self) -> bool:
        """Did the receiver get back exactly the frames that were written?"""
        return [f.data for f in self.reassembled] == list(self.frames)


def message_frames(sizes: list[int], *, first_id: int = 0) -> list[bytes]:
    """FrameTypeMessage frames with bodies of the given sizes (deterministic content)."""
    out = []
    for i, size in enumerate(sizes):
        body = bytes((ord("a") + (i + first_id) % 26,)) * size
        out.append(
            FrameGrammar.build(
                {
                    "frame_type": "FrameTypeMessage",
                    "data": {
                        "timestamp": 1_700_000_000_000_000_000 + i,
                        "attempts": 1,
                        "id": f"{i + first_id:016x}".encode(),
                        "body": body,
                    },
                }
            )
        )
    return out


TUBEMQ_FRAME_NAME = "SendMessageRequestP2B"
"""The message :func:`tubemq_frames` carries."""


def tubemq_frames(sizes: list[int], *, first_serial: int = 1) -> list[bytes]:
    """TubeMQ SendMessageRequestP2B frames carrying messages of the given sizes: a size
    past 8192 gives a frame whose content spans several blocks."""
    out = []
    for i, size in enumerate(sizes):
        msg = TUBEMQ_MESSAGES[TUBEMQ_FRAME_NAME](
            clientId="sticky", topicName="demo", partitionId=0,
            data=bytes((ord("a") + i % 26,)) * size, flag=0, checkSum=-1, sentAddr=2130706433)
        out.append(encode(make_request(first_serial + i, 13, msg)))
    return out


def tubemq_block_marks(frame: bytes) -> tuple[int, ...]:
    """Where each block's length field starts in a TubeMQ frame."""
    at, marks = 12, []
    for block in parse_frame(frame).blocks:
        marks.append(at)
        at += 4 + len(block)
    return tuple(marks)


def simulate_segments(frames: list[bytes], *, mss: int, coalesce: bool) -> list[bytes]:
    """Cut the sender's writes into segments (see the module docstring for the model)."""
    if mss < 1:
        raise ValueError(f"mss must be positive, got {mss}")
    if not coalesce:
        return [f[i : i + mss] for f in frames for i in range(0, len(f), mss)]
    segments: list[bytes] = []
    waiting = b""
    unacknowledged = False
    for f in frames:
        waiting += f
        while len(waiting) >= mss:  # a full segment may always leave
            segments.append(waiting[:mss])
            waiting, unacknowledged = waiting[mss:], True
        if waiting and not unacknowledged:  # a small one only with nothing in flight
            segments.append(waiting)
            waiting, unacknowledged = b"", True
    # the ACK comes back: what waited leaves, cut at the MSS
    segments += [waiting[i : i + mss] for i in range(0, len(waiting), mss)]
    return segments


def reassemble(
    label: str, frames: list[bytes], segments: list[bytes], *, unit: str = "segment",
    rule: FramingRule | None = None, marks: tuple[tuple[int, ...], ...] = (),
    name: str = "FrameTypeMessage", protocol: str = "nsq", kind: str = "frame",
) -> StickyRun:
    """Feed ``segments`` one by one to a reassembler with ``rule`` (NSQ's frame rule
    when none is given); ``name``, ``protocol`` and ``kind`` say what the frames are."""
    reasm = Reassembler(rule if rule is not None else FrameFraming())
    steps = []
    for i, seg in enumerate(segments):
        events = tuple(reasm.feed(seg, segment=i))
        steps.append(ReassemblyStep(i, seg, events, reasm.buffered))
    tail = tuple(reasm.finish())
    if tail:  # the stream ended inside a frame: say so on the last step
        last = steps[-1]
        steps[-1] = ReassemblyStep(last.segment, last.data, last.events + tail, b"")
    return StickyRun(label, tuple(frames), tuple(segments), tuple(steps), unit, marks, name,
                     protocol, kind)


def loopback(
    frames: list[bytes],
    *,
    recv_size: int = 4096,
    nodelay: bool = True,
    pause: float = 0.0,
    timeout: float = 5.0,
    tubemq: bool = False,
) -> StickyRun:
    """Send ``frames`` over a real TCP connection on 127.0.0.1 and record recv() chunks.

    With ``pause == 0`` the sender writes everything and closes before the receiver
    reads, so every ``recv(recv_size)`` returns a full ``recv_size`` bytes: the frames
    are glued together and cut wherever the reader's buffer ends. With ``pause > 0`` the
    sender waits between writes while the receiver is already reading, so each write
    tends to arrive on its own -- "tends to": that is the point, TCP promises nothing.
    ``tubemq``: the frames are TubeMQ's (reassembled with TubeMQ's rule).
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((LOOPBACK, 0))
    listener.listen(1)
    sender = socket.create_connection(listener.getsockname(), timeout=timeout)
    receiver, _ = listener.accept()
    listener.close()
    receiver.settimeout(timeout)
    sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if nodelay else 0)

    def write() -> None:
        try:
            for f in frames:
                sender.sendall(f)
                if pause:
                    time.sleep(pause)
        finally:
            sender.shutdown(socket.SHUT_WR)

    chunks: list[bytes] = []
    try:
        writer = threading.Thread(target=write, name="nsqviz-loopback-writer", daemon=True)
        writer.start()
        if not pause:
            writer.join(timeout)
        while True:
            chunk = receiver.recv(recv_size)
            if not chunk:
                break
            chunks.append(chunk)
        writer.join(timeout)
    finally:
        receiver.close()
        sender.close()
    how = f"paused {pause * 1000:g} ms between writes" if pause else "read after the last write"
    label = f"real loopback TCP, recv({recv_size}), {how}"
    return reassemble(label, frames, chunks, unit="recv() chunk", **framing_for(frames, tubemq))


def framing_for(frames: list[bytes], tubemq: bool) -> dict[str, Any]:
    """:func:`reassemble`'s framing arguments for NSQ (none: the defaults) or TubeMQ
    requests (its rule, block marks, frame name, and what a click on a frame lays out)."""
    if not tubemq:
        return {}
    return {"rule": TubeFraming(), "marks": tuple(tubemq_block_marks(f) for f in frames),
            "name": TUBEMQ_FRAME_NAME, "protocol": "tubemq", "kind": "command"}
