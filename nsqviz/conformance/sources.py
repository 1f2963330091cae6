"""Where the checker's connections come from: capture files or a live :class:`WireTap`.

Captures go through the project's one capture path (:func:`~nsqviz.capture.files.
read_capture`, :func:`~nsqviz.capture.layers.decode_record`, :class:`~nsqviz.capture.tcp.
FlowTracker`, :meth:`~nsqviz.capture.decode.CaptureDecoder.feed`), so packet numbers are
those Wireshark shows. The same pass notes who ended each connection first (TCP FIN or
RST) and the ``GET /lookup`` requests of HTTP flows (discovery polling).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.files import CaptureWarning, read_capture
from nsqviz.capture.layers import decode_record
from nsqviz.capture.tcp import DEFAULT_SERVER_PORTS, Data, FlowEnd, FlowTracker
from nsqviz.conformance.rules import Connection, Seen
from nsqviz.conformance.tap import WireTap

__all__ = ["Traffic", "from_capture", "from_tap"]


class Traffic:
    """Client connections (by label) and lookupd polls (address -> [(time, packet)])."""

    def __init__(self) -> None:
        self.connections: dict[str, Connection] = {}
        self.polls: dict[str, list[tuple[float, int]]] = {}


def from_capture(paths: Iterable[str | os.PathLike], *,
                 server_ports: Iterable[int] = DEFAULT_SERVER_PORTS) -> Traffic:
    traffic = Traffic()
    decoder = CaptureDecoder(server_ports=server_ports)
    for path in paths:
        tracker = FlowTracker(server_ports=decoder.server_ports, first_id=len(decoder.flows))
        ended: set[int] = set()
        for item in read_capture(path):
            if type(item) is CaptureWarning:
                continue
            seg = decode_record(item)
            if seg is None or type(seg) is CaptureWarning:
                continue
            for tcp_event in tracker.feed(seg):
                _note(traffic, tcp_event, ended)
                for rec in decoder.feed(tcp_event):
                    if rec.event is None or rec.kind not in ("command", "frame"):
                        continue
                    conn = traffic.connections.setdefault(rec.flow, Connection(rec.flow))
                    conn.seen.append(Seen(rec.ts, rec.dir, rec.event, rec.packets))
        for tcp_event in tracker.finish():
            decoder.feed(tcp_event)
    return traffic


def _note(traffic: Traffic, tcp_event, ended: set[int]) -> None:
    kind = type(tcp_event)
    if kind is FlowEnd and tcp_event.how in ("fin", "rst"):
        flow = tcp_event.flow
        if flow.id not in ended:
            ended.add(flow.id)
            conn = traffic.connections.get(flow.label)
            if conn is not None:
                conn.ended_by = "client" if tcp_event.direction == "c2s" else "server"
    elif kind is Data and tcp_event.direction == "c2s" and tcp_event.data.startswith(
            b"GET /lookup?"):
        host, port = tcp_event.flow.server
        traffic.polls.setdefault(f"{host}:{port}", []).append(
            (tcp_event.ts, tcp_event.number))


def from_tap(tap: WireTap) -> Traffic:
    """The connections a live tap saw."""
    traffic = Traffic()
    for c in tap.connections:
        conn = Connection(f"{c.client}->{tap.upstream}")
        conn.seen = [Seen(e.t, e.direction, e.event, (e.packet,)) for e in c.events]
        conn.ended_by = c.ended_by
        traffic.connections[conn.label] = conn
    return traffic
