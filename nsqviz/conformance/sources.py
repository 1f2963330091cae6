"""Where the checker's connections come from: capture files or a live :class:`WireTap`.

Captures go through the project's one capture path (the :class:`~nsqviz.capture.driver.
CaptureDriver` and :class:`~nsqviz.capture.decode.CaptureDecoder`), so packet numbers are
those Wireshark shows. The same pass notes who ended each connection first (TCP FIN or
RST), where the capture lost a direction's bytes, and the ``GET /lookup`` requests of
HTTP flows (discovery polling). A FIN, REQ or TOUCH nsqd answered "not in flight" is
marked ``refused`` with that answer -- the one its observer paired with it.
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
from nsqviz.nsq.commands import name_of
from nsqviz.nsq.errors import not_in_flight
from nsqviz.nsq.events import (
    Answered,
    Command,
    Error,
    Fin,
    Refused,
    Req,
    Touch,
    Violation,
)
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
    answers: dict[str, _Answers] = {}
    for step in decoder.driver.run(paths):
        for tcp_event in step.events:
            _note(traffic, tcp_event, ended)
        for rec in decoder.step(step):
            if rec.flow is None or rec.dir is None or rec.kind not in (
                    "command", "frame", "gap") or \
                    rec.protocol not in (NSQ.name, None):  # the rules are NSQ clients'
                continue
            direction = Direction(rec.dir)
            conn = traffic.connections.get(rec.flow)
            if conn is None:
                conn = traffic.connections[rec.flow] = Connection(rec.flow)
                if rec.flow_id is not None and not decoder.flows[rec.flow_id].flow.syn_seen:
                    conn.lost += [(Direction.C2S, 0), (Direction.S2C, 0)]  # before it
            pairs = answers.setdefault(rec.flow, _Answers())
            if rec.kind == "gap":
                if rec.name == _LOST:
                    conn.lost.append((direction, len(conn.seen)))
                continue
            if rec.kind == "command":
                pairs.command(conn, rec.event is not None)
            if rec.event is None:  # a unit the capture cut short: its head only
                if rec.kind == "command":
                    conn.cut.append((len(conn.seen), rec.name))
                continue
            seen = Seen.of(rec.ts, direction, rec.event, rec.packets)
            refused = rec.fields.get("refused")
            conn.seen.append(seen if refused is None else replace(seen, refused=refused))
            if rec.answers is not None:
                pairs.answer(conn, rec.answers, rec.event)
    return traffic


_LOST = "Gap"
"""The capture layer's record of bytes a capture lost (its snaplen's cuts too)."""


class _Answers:
    """Which of a connection's events each of its commands is, by the number its
    observer gives the command an answer answers (every command counts, those the
    capture cut short too); an error nsqd answers a FIN, REQ or TOUCH with because its
    id is not in flight marks that command ``refused``."""

    def __init__(self) -> None:
        self.commands = 0
        self.at: dict[int, int] = {}  # command number -> its index in Connection.seen

    def command(self, conn: Connection, seen: bool) -> None:
        self.commands += 1
        if seen:
            self.at[self.commands] = len(conn.seen)

    def answer(self, conn: Connection, number: int, frame: Any) -> None:
        for older in [n for n in self.at if n < number]:  # nsqd answered them all
            del self.at[older]
        at = self.at.pop(number, None)
        if at is None or not isinstance(frame, Error):
            return
        s = conn.seen[at]
        cmd = s.event
        if isinstance(cmd, Fin | Req | Touch) and not s.refused and s.violation is None:
            answer = frame.data.decode("utf-8", "replace")
            if answer == " ".join(not_in_flight(name_of(type(cmd)), cmd.id)):
                conn.seen[at] = replace(s, refused=answer)


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
        pairs = _Answers()
        for e in c.events:
            event = e.event
            if isinstance(event, Refused) and conn.seen:  # the verdict on the command before
                conn.seen[-1] = replace(conn.seen[-1], refused=event.answer)
            elif isinstance(event, Answered):  # the answer before answers this command
                if event.command is not None and conn.seen:
                    pairs.answer(conn, event.command, conn.seen[-1].event)
            else:
                seen = Seen.of(e.t, e.direction, e.event, (e.packet,))
                if e.direction == Direction.C2S and isinstance(seen.event, Command) and not (
                        isinstance(event, Violation) and event.continued):
                    pairs.command(conn, True)
                conn.seen.append(seen)
        conn.ended_by = c.ended_by
        traffic.connections[conn.label] = conn
    return traffic
