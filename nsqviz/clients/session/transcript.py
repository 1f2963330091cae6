"""Saving a session: a JSON transcript, and a pcap Wireshark and the replay views read.

The JSON keeps, per entry, the bytes both ways (hex), the decoded events (as
:func:`nsqviz.records.event_json` writes them: fields as ``nsqviz decode`` shows them,
plus the frame's bytes and segments), the codec's state before and after, and times in
seconds since the session started. The pcap
writes each connection as a synthetic TCP conversation (handshake, data segments with
correct sequence numbers, FIN) with the captures engineer's
:class:`~nsqviz.capture.writer.TcpConversation`, timestamped at the moment each chunk
was written or received. What it holds is what the session's socket carried in
cleartext: for a compressed connection the compressed bytes, for a TLS connection the
bytes *inside* TLS (the session never sees the ciphertext) -- said in each entry's
``note`` in the JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.clients.session.entries import Entry, Step
from nsqviz.records import event_json
from nsqviz.stream import Direction

__all__ = ["Recorded", "save_json", "save_pcap", "transcript_json"]


class _Codec(Protocol):
    @property
    def compression(self) -> str | None: ...
    @property
    def tls(self) -> bool: ...


class _Connection(Protocol):
    @property
    def local(self) -> tuple[Any, ...]: ...
    @property
    def peer(self) -> tuple[Any, ...]: ...
    @property
    def state(self) -> str: ...
    @property
    def codec(self) -> _Codec: ...


class Recorded(Protocol):
    """What the writers read of a session (a :class:`~nsqviz.clients.session.nsq.Session`):
    named here so that this module does not import the session that calls it."""

    @property
    def address(self) -> tuple[str, int]: ...
    @property
    def wall_started(self) -> float: ...
    @property
    def connections(self) -> Mapping[str, _Connection]: ...
    @property
    def entries(self) -> Sequence[Entry]: ...


def transcript_json(session: Recorded) -> dict[str, Any]:
    conns = {
        name: {"local": list(c.local), "peer": list(c.peer), "state": c.state,
               "compression": c.codec.compression, "tls": c.codec.tls}
        for name, c in session.connections.items()
    }
    entries = []
    for e in list(session.entries):
        if isinstance(e, Step):
            entries.append({
                "kind": "step", "index": e.index, "connection": e.connection, "t": e.t,
                "elapsed": e.elapsed, "command": event_json(e.command), "sent": e.sent.hex(),
                "wire_out": e.wire_out.hex(),
                "received": [{"t": t, "hex": d.hex()} for t, d in e.received],
                "events": [event_json(x) for x in e.events],
                "before": e.before, "after": e.after, "refused": e.refused,
            })
        else:
            entries.append({
                "kind": "arrival", "index": e.index, "connection": e.connection, "t": e.t,
                "received": e.received.hex(), "events": [event_json(x) for x in e.events],
                "after": e.after,
            })
    return {
        "format": "nsqviz-session/2",
        "server": f"{session.address[0]}:{session.address[1]}",
        "wall_started": session.wall_started,
        "connections": conns,
        "entries": entries,
    }


def save_json(session: Recorded, path: str | os.PathLike[str]) -> None:
    with open(path, "w") as f:
        json.dump(transcript_json(session), f, indent=1)


def save_pcap(session: Recorded, path: str | os.PathLike[str]) -> int:
    """Write every connection's bytes as a TCP conversation; returns the packet count."""
    chunks: list[tuple[float, str, Direction, bytes]] = []  # (t, connection, direction, data)
    for e in list(session.entries):
        if isinstance(e, Step):
            if e.wire_out:
                chunks.append((e.t, e.connection, Direction.C2S, e.wire_out))
            chunks.extend((t, e.connection, Direction.S2C, d) for t, d in e.received if d)
        elif e.received:
            chunks.append((e.t, e.connection, Direction.S2C, e.received))
    chunks.sort(key=lambda c: c[0])
    base = session.wall_started
    with PcapWriter(path) as writer:
        convs: dict[str, TcpConversation] = {}
        for name, conn in session.connections.items():
            first = min((c[0] for c in chunks if c[1] == name), default=0.0)
            convs[name] = TcpConversation(writer, tuple(conn.local), tuple(conn.peer))
            convs[name].open(base + max(first - 0.0001, 0.0))
        for t, name, direction, data in chunks:
            convs[name].send(direction, data, base + t)
        last = chunks[-1][0] if chunks else 0.0
        for conv in convs.values():
            conv.close(base + last + 0.0001)
        return writer.count
