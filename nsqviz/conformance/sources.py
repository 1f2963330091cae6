"""Where the checker's connections come from: capture files or a live :class:`WireTap`.

Captures go through the project's one capture path (the :class:`~nsqviz.capture.driver.
CaptureDriver` and :class:`~nsqviz.capture.decode.CaptureDecoder`), so packet numbers are
those Wireshark shows. The same pass notes who ended each connection first (TCP FIN or
RST) and the ``GET /lookup`` requests of HTTP flows (discovery polling).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.tcp import Data, FlowEnd
from nsqviz.conformance.rules import Connection, Seen
from nsqviz.conformance.tap import WireTap
from nsqviz.nsq.events import Answered, Refused
from nsqviz.nsq.protocol import NSQ
from nsqviz.stream.direction import Direction

__all__ = ["Traffic", "from_capture", "from_tap"]


class Traffic:
    """Client connections (by label) and lookupd polls (address -> [(time, packet)])."""

    def __init__(self) -> None:
        self.connections: dict[str, Connection] = {}
        self.polls: dict[str, list[tuple[float, int]]] = {}


def from_capture(paths: Iterable[str | os.PathLike[str]], *,
                 ports: Mapping[str, Iterable[int]] | None = None) -> Traffic:
    """The NSQ client connections in capture files (one capture set, as ``nsqviz decode``
    reads them; another protocol's flows are not a client's to check); ``ports``: extra
    server ports per protocol name."""
    traffic = Traffic()
    decoder = CaptureDecoder(ports=ports)
    ended: set[int] = set()
    for step in decoder.driver.run(paths):
        for tcp_event in step.events:
            _note(traffic, tcp_event, ended)
        for rec in decoder.step(step):
            if rec.event is None or rec.kind not in ("command", "frame") or \
                    rec.protocol != NSQ.name:  # the rules are NSQ clients'
                continue
            assert rec.flow is not None and rec.dir is not None  # a unit of a connection
            conn = traffic.connections.setdefault(rec.flow, Connection(rec.flow))
            seen = Seen.of(rec.ts, Direction(rec.dir), rec.event, rec.packets)
            refused = rec.fields.get("refused")
            conn.seen.append(seen if refused is None else replace(seen, refused=refused))
    return traffic


def _note(traffic: Traffic, tcp_event: Any, ended: set[int]) -> None:
    kind = type(tcp_event)
    if kind is FlowEnd and tcp_event.how in ("fin", "rst"):
        flow = tcp_event.flow
        if flow.id not in ended:
            ended.add(flow.id)
            conn = traffic.connections.get(flow.label)
            if conn is not None:
                conn.ended_by = "client" if tcp_event.direction == Direction.C2S else "server"
    elif kind is Data and tcp_event.direction == Direction.C2S and tcp_event.data.startswith(
            b"GET /lookup?"):
        host, port = tcp_event.flow.server
        traffic.polls.setdefault(f"{host}:{port}", []).append(
            (tcp_event.ts, tcp_event.number))


def from_tap(tap: WireTap) -> Traffic:
    """The connections a live tap saw."""
    traffic = Traffic()
    for c in tap.connections:
        conn = Connection(f"{c.client}->{tap.upstream}")
        for e in c.events:
            event = e.event
            if isinstance(event, Refused) and conn.seen:  # the verdict on the command before
                conn.seen[-1] = replace(conn.seen[-1], refused=event.answer)
            elif not isinstance(event, Answered):
                conn.seen.append(Seen.of(e.t, e.direction, e.event, (e.packet,)))
        conn.ended_by = c.ended_by
        traffic.connections[conn.label] = conn
    return traffic
