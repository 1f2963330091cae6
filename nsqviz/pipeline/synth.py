"""Synthetic NSQ traffic with known ground truth, written as (rotated) pcap files.

The pipeline's tests, its benchmark and its notebook need captures whose every message
id, delivery, outcome, RDY change and heartbeat is known in advance -- a real broker
decides ids, timing and coalescing itself, so its captures can be decoded but not
predicted. :func:`simulate` plays nsqd and its clients in a small discrete-event
simulation (RDY limits, in-flight counts, REQ delays, message timeouts, heartbeats,
two missed heartbeats closing a connection, a non-fatal ``E_FIN_FAILED``), encodes
every command and frame with the project's encoders (:mod:`nsqviz.nsq.fastpath`,
differentially tested against the grammar), and writes TCP packets through the capture
package's :class:`~nsqviz.capture.writer.TcpConversation`. What happened is returned as
a :class:`Truth` to compare the pipeline's tables against.

Frames sent by one side at the same instant go out in one ``send`` -- several frames in
one packet, the sticky-packet case -- and frames longer than the MSS span packets.
:class:`RotatingPcapWriter` cuts the packet stream into files the way ``tcpdump -C``
does, so a connection spans several files.
"""

from __future__ import annotations

import heapq
import os
import random
from dataclasses import dataclass, field
from typing import Any

from nsqviz import compactjson
from nsqviz.capture.writer import PcapngWriter, PcapWriter, RecordWriter, TcpConversation
from nsqviz.nsq.errors import not_in_flight
from nsqviz.nsq.events import (
    Cls,
    Command,
    Dpub,
    Error,
    Event,
    Fin,
    Identify,
    Magic,
    Message,
    Mpub,
    Nop,
    Pub,
    Rdy,
    Req,
    Response,
    Sub,
    Touch,
)
from nsqviz.nsq.fastpath import encode_command, encode_frame
from nsqviz.stream.direction import Direction

__all__ = [
    "ConnTruth",
    "Delivery",
    "MessageTruth",
    "RotatingPcapWriter",
    "Truth",
    "simulate",
    "write_capture_set",
]

SERVER = ("10.0.0.9", 4150)
TWEPOCH_MS = 1288834974657
"""nsqd's GUID epoch: an id is ``(ms since it) << 22 | worker << 12 | sequence``, so
ids from one nsqd differ over time and ids from two nsqds differ by worker id."""


class RotatingPcapWriter:
    """A pcap writer that starts a new file after ``max_bytes``, like ``tcpdump -C``.

    Files are ``base``, ``base1``, ``base2`` ... (tcpdump's names); every file has its own
    header, and a packet never straddles two files.
    """

    def __init__(self, base: str | os.PathLike[str], max_bytes: int, **writer_options: Any):
        self.base = os.fspath(base)
        self.max_bytes = max_bytes
        self.options = writer_options
        self.paths: list[str] = []
        self._writer: PcapWriter | None = None
        self._size = 0
        self._open()

    @property
    def _current(self) -> PcapWriter:
        """The file being written: there is one from the start until :meth:`close`."""
        assert self._writer is not None
        return self._writer

    @property
    def linktype(self) -> int:
        return self._current.linktype

    def _open(self) -> None:
        if self._writer is not None:
            self._writer.close()
        n = len(self.paths)
        path = self.base if n == 0 else f"{self.base}{n}"
        self._writer = PcapWriter(path, **self.options)
        self.paths.append(path)
        self._size = 24

    def write(self, ts: float, frame: bytes, *, orig_len: int | None = None,
              interface: int = 0) -> None:
        if self._size > 24 and self._size + 16 + len(frame) > self.max_bytes:
            self._open()
        self._current.write(ts, frame, orig_len=orig_len)
        self._size += 16 + len(frame)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> RotatingPcapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------ ground truth


@dataclass
class Delivery:
    """One delivery of a message: when, on which connection, with which attempt number,
    and how it ended: ``FIN``, ``REQ`` (``req_delay_ms``), ``timeout`` or ``open``."""

    ts: float
    conn: str
    attempts: int
    outcome: str = "open"
    outcome_ts: float | None = None
    req_delay_ms: int | None = None
    touches: int = 0


@dataclass
class MessageTruth:
    id: str
    topic: str
    channel: str
    publish_ts: float  # the PUB/MPUB/DPUB on the wire
    publish_cmd: str
    created_ts: float = 0.0  # nsqd's message timestamp
    deliveries: list[Delivery] = field(default_factory=list)


@dataclass
class ConnTruth:
    label: str  # "client->server", as nsqviz decode prints a flow
    role: str  # "producer" or "consumer"
    identify: dict[str, Any]
    topic: str | None = None
    channel: str | None = None
    rdy: int | None = None
    frames: dict[str, int] = field(default_factory=lambda: {Direction.C2S: 0, Direction.S2C: 0})
    errors: list[str] = field(default_factory=list)
    heartbeats: int = 0
    missed_heartbeats: int = 0
    closed_for_missed_heartbeats: bool = False
    starved_deliveries: int = 0  # deliveries after which in-flight >= 85 % of RDY
    start_ts: float = 0.0
    end_ts: float = 0.0


@dataclass
class Truth:
    messages: dict[tuple[str, str], MessageTruth] = field(default_factory=dict)  # (id, channel)
    connections: dict[str, ConnTruth] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)
    # each send: (connection label, direction, lengths of the frames in it, MSS)
    sends: list[tuple[str, str, tuple[int, ...], int]] = field(default_factory=list)

    @property
    def frames(self) -> int:
        return sum(sum(c.frames.values()) for c in self.connections.values())


# -------------------------------------------------------------------------- simulation

_NEGOTIATED = {
    "max_rdy_count": 2500, "version": "1.3.0", "max_msg_timeout": 900000, "msg_timeout": 60000,
    "tls_v1": False, "deflate": False, "deflate_level": 6, "max_deflate_level": 6,
    "snappy": False, "sample_rate": 0, "auth_required": False, "output_buffer_size": 16384,
    "output_buffer_timeout": 250,
}


class _Conn:
    def __init__(self, sim: _Sim, name: str, port: int, role: str, identify: dict[str, Any],
                 start: float):
        self.sim = sim
        self.name = name
        self.client = (f"10.0.0.{1 + port % 200}", port)
        server = sim.server
        self.truth = ConnTruth(f"{self.client[0]}:{port}->{server[0]}:{server[1]}", role,
                               identify, start_ts=start)
        self.in_flight: dict[str, float] = {}  # message id -> delivery ts
        self.msg_timeout = identify.get("msg_timeout", _NEGOTIATED["msg_timeout"]) / 1000
        self.closed = False

    def say(self, ts: float, direction: Direction, *events: Event) -> None:
        self.sim.actions.append((ts, len(self.sim.actions), self, direction, events))
        self.truth.frames[direction] += len(events)


class _Sim:
    def __init__(self, seed: int, t0: float, server: tuple[str, int] = SERVER,
                 worker: int = 0):
        self.rng = random.Random(seed)
        self.t0 = t0
        self.server = server
        self.worker = worker
        # (ts, order, connection, direction, what it says at once)
        self.actions: list[tuple[float, int, _Conn, Direction, tuple[Event, ...]]] = []
        self.conns: list[_Conn] = []
        self.truth = Truth()
        self.next_id = 0
        self.heap: list[tuple[float, int, str, tuple[Any, ...]]] = []  # (ts, n, what, args)
        # channel -> heap of (ready_ts, n, (id, publish ts, body), attempts)
        self.queues: dict[str, list[tuple[float, int, tuple[str, float, bytes], int]]] = {}
        self.subscribers: dict[str, list[_Conn]] = {}
        self.plans: dict[tuple[str, str], list[str]] = {}
        self.n = 0

    def at(self, ts: float, what: str, *args: Any) -> None:
        self.n += 1
        heapq.heappush(self.heap, (ts, self.n, what, args))

    def connect(self, name: str, port: int, role: str, identify: dict[str, Any], ts: float,
                negotiate: bool) -> _Conn:
        c = _Conn(self, name, port, role, identify, ts)
        self.conns.append(c)
        self.truth.connections[c.truth.label] = c.truth
        c.say(ts, Direction.C2S, Magic(), Identify(identify))
        resp = dict(_NEGOTIATED, msg_timeout=identify.get("msg_timeout", 60000))
        c.say(ts + 0.0002, Direction.S2C, Response(_json(resp) if negotiate else b"OK"))
        return c

    def subscribe(self, c: _Conn, topic: str, channel: str, rdy: int, ts: float) -> None:
        c.truth.topic, c.truth.channel, c.truth.rdy = topic, channel, rdy
        c.say(ts, Direction.C2S, Sub(topic, channel))
        c.say(ts + 0.0002, Direction.S2C, Response(b"OK"))
        c.say(ts + 0.0004, Direction.C2S, Rdy(rdy))
        self.subscribers.setdefault(channel, []).append(c)
        self.queues.setdefault(channel, [])

    def publish(self, cmd_ts: float, ts: float, topic: str, bodies: list[bytes], cmd: str,
                defer_ms: int = 0) -> None:
        """``cmd_ts``: the PUB on the wire; ``ts``: nsqd has it (the message timestamp)."""
        for body in bodies:
            guid = (round(ts * 1000) - TWEPOCH_MS) << 22 | (self.worker & 0x3FF) << 12 \
                | (self.next_id & 0xFFF)
            mid = f"{guid:016x}"
            self.next_id += 1
            for channel in self.queues:
                truth = MessageTruth(mid, topic, channel, cmd_ts, cmd, created_ts=ts)
                self.truth.messages[(mid, channel)] = truth
                ready = ts + 0.0003 + defer_ms / 1000
                msg = (mid, ts, body)
                heapq.heappush(self.queues[channel], (ready, self.n, msg, 1))
                self.n += 1
                self.at(ready, "dispatch", channel)

    def plan(self, mid: str, channel: str) -> list[str]:
        key = (mid, channel)
        if key not in self.plans:
            if channel != "work":
                self.plans[key] = ["FIN"]
            else:
                r = self.rng.random()
                self.plans[key] = (
                    ["FIN"] if r < 0.55 else ["REQ", "FIN"] if r < 0.7
                    else ["timeout", "FIN"] if r < 0.8 else ["TOUCH", "FIN"] if r < 0.9
                    else ["REQ", "timeout", "FIN"]
                )
        return self.plans[key]

    def dispatch(self, now: float, channel: str) -> None:
        queue = self.queues[channel]
        subs = [c for c in self.subscribers[channel] if not c.closed]
        while queue and queue[0][0] <= now:
            free = [c for c in subs if len(c.in_flight) < (c.truth.rdy or 0)]
            if not free:
                return  # a FIN, REQ or timeout frees a slot and dispatches again
            # a consumer with room has RDY > 0 (the `or` only tells the type so)
            c = min(free, key=lambda c: (len(c.in_flight) / (c.truth.rdy or 1), c.name))
            _ready, _n, (mid, pub_ts, body), attempts = heapq.heappop(queue)
            truth = self.truth.messages[(mid, channel)]
            d = Delivery(now, c.truth.label, attempts)
            truth.deliveries.append(d)
            c.in_flight[mid] = now
            if len(c.in_flight) >= 0.85 * (c.truth.rdy or 0):
                c.truth.starved_deliveries += 1
            c.say(now, Direction.S2C, Message(round(pub_ts * 1e9), attempts, mid.encode(), body))
            step = self.plan(mid, channel)[attempts - 1]
            proc = 0.002 + self.rng.random() * 0.01
            if step == "FIN":
                self.at(now + proc, "fin", c, mid, channel, d)
            elif step == "REQ":
                self.at(now + proc, "req", c, mid, channel, d, (mid, pub_ts, body), attempts)
            elif step == "TOUCH":
                touches = 1 + self.rng.randrange(2)
                for k in range(touches):
                    self.at(now + proc * (k + 1) / (touches + 1), "touch", c, mid, d)
                self.at(now + proc, "fin", c, mid, channel, d)
                # TOUCH then FIN: a second attempt never happens
                self.plans[(mid, channel)] = ["FIN"]
            else:  # timeout: nsqd takes it back after the connection's msg_timeout
                self.at(now + c.msg_timeout, "timeout", c, mid, channel, d,
                        (mid, pub_ts, body), attempts)

    def run(self) -> float:
        last = self.t0
        while self.heap:
            now, _n, what, args = heapq.heappop(self.heap)
            last = max(last, now)
            if what == "dispatch":
                self.dispatch(now, args[0])
            elif what == "fin":
                c, mid, channel, d = args
                c.say(now, Direction.C2S, Fin(mid.encode()))
                c.in_flight.pop(mid)
                d.outcome, d.outcome_ts = "FIN", now
                self.at(now + 0.0001, "dispatch", channel)
            elif what == "touch":
                c, mid, d = args
                c.say(now, Direction.C2S, Touch(mid.encode()))
                d.touches += 1
            elif what == "req":
                c, mid, channel, d, msg, attempts = args
                delay = self.rng.choice((0, 50, 200))
                c.say(now, Direction.C2S, Req(mid.encode(), delay))
                c.in_flight.pop(mid)
                d.outcome, d.outcome_ts, d.req_delay_ms = "REQ", now, delay
                ready = now + 0.0005 + delay / 1000  # nsqd's requeue is never instant
                heapq.heappush(self.queues[channel], (ready, self.n, msg, attempts + 1))
                self.n += 1
                self.at(ready, "dispatch", channel)
                self.at(now + 0.0001, "dispatch", channel)
            elif what == "timeout":
                c, mid, channel, d, msg, attempts = args
                c.in_flight.pop(mid)
                d.outcome, d.outcome_ts = "timeout", now
                heapq.heappush(self.queues[channel], (now, self.n, msg, attempts + 1))
                self.n += 1
                self.at(now, "dispatch", channel)
        return last


def _json(obj: dict[str, Any]) -> bytes:
    return compactjson.encode(obj)


def simulate(
    writer: PcapngWriter | RecordWriter,
    *,
    seed: int = 0,
    n_messages: int = 60,
    t0: float = 1_700_000_000.0,
    mss: int = 1460,
    big_body: int = 6000,
    body_size: int = 40,
    port_base: int = 40000,
    server: tuple[str, int] = SERVER,
    worker: int = 0,
    topic: str = "events",
    clients: str = "",
) -> Truth:
    """Play one NSQ scenario into ``writer`` (a pcap writer); return what happened.

    A producer publishes ``n_messages`` (PUB, MPUB of three, one DPUB, every 25th body
    ``big_body`` bytes); topic ``events`` has channel ``work`` (two consumers: RDY 10 and
    RDY 1, outcomes FIN / REQ / timeout / TOUCH drawn per message), ``audit`` (one RDY 100
    consumer that FINs everything, once twice -- which earns an ``E_FIN_FAILED``) and
    ``idle`` (a RDY 0 consumer that never answers heartbeats and is closed after two).
    ``server`` is nsqd's address and ``worker`` its id; message ids are made as nsqd
    makes its GUIDs (:data:`TWEPOCH_MS`), from the publish time and ``worker``.
    ``topic`` renames the topic and ``clients`` prefixes the clients' ids and host names,
    so that several scenarios played to one nsqd are apart: other topics, other clients.
    """
    sim = _Sim(seed, t0, server, worker)
    rng = sim.rng

    def ident(cid: str, **extra: Any) -> dict[str, Any]:
        cid = clients + cid
        return {"client_id": cid, "hostname": f"{cid}.example", "user_agent": "nsqviz-synth/1",
                "feature_negotiation": True, **extra}

    hb_ms = 1000
    prod = sim.connect("producer", port_base + 1, "producer",
                       {"client_id": clients + "producer", "hostname": clients + "pub.example",
                        "user_agent": "nsqviz-synth/1", "heartbeat_interval": -1},
                       t0, negotiate=False)
    work1 = sim.connect("work1", port_base + 2, "consumer",
                        ident("work1", heartbeat_interval=hb_ms, msg_timeout=2000), t0 + 0.01,
                        True)
    work2 = sim.connect("work2", port_base + 3, "consumer",
                        ident("work2", heartbeat_interval=hb_ms, msg_timeout=2000), t0 + 0.01,
                        True)
    audit = sim.connect("audit", port_base + 4, "consumer",
                        ident("audit", heartbeat_interval=hb_ms), t0 + 0.02, True)
    idle = sim.connect("idle", port_base + 5, "consumer",
                       ident("idle", heartbeat_interval=hb_ms), t0 + 0.02, True)
    sim.subscribe(work1, topic, "work", 10, t0 + 0.05)
    sim.subscribe(work2, topic, "work", 1, t0 + 0.05)
    sim.subscribe(audit, topic, "audit", 100, t0 + 0.06)
    sim.subscribe(idle, topic, "idle", 0, t0 + 0.06)

    t = t0 + 0.2
    i = 0
    while i < n_messages:
        def body(k: int) -> bytes:
            size = big_body if k % 25 == 24 else body_size
            return (f"m{k:06d}:".encode() + rng.randbytes(size)).hex().encode()[:size]

        kind = "MPUB" if i % 10 == 5 and i + 3 <= n_messages else "DPUB" if i == 3 else "PUB"
        if kind == "MPUB":
            bodies = [body(i + k) for k in range(3)]
            prod.say(t, Direction.C2S, Mpub(topic, tuple(bodies)))
        elif kind == "DPUB":
            bodies = [body(i)]
            prod.say(t, Direction.C2S, Dpub(topic, 300, bodies[0]))
        else:
            bodies = [body(i)]
            prod.say(t, Direction.C2S, Pub(topic, bodies[0]))
        prod.say(t + 0.0002, Direction.S2C, Response(b"OK"))
        sim.publish(t, t + 0.0002, topic, bodies, kind, 300 if kind == "DPUB" else 0)
        i += len(bodies)
        t += 0.01 + rng.random() * 0.03
    # The idle channel never gets a delivery: its consumer has RDY 0.
    for key in [k for k in sim.truth.messages if k[1] == "idle"]:
        del sim.truth.messages[key]
    end = sim.run() + 0.5

    # A duplicate FIN on the audit connection: nsqd answers E_FIN_FAILED (not fatal).
    some = next(m for (mid, ch), m in sim.truth.messages.items() if ch == "audit")
    audit.say(end - 0.2, Direction.C2S, Fin(some.id.encode()))
    code, text = not_in_flight("FIN", some.id.encode())
    audit.say(end - 0.1998, Direction.S2C, Error(code.frame(text)))
    audit.truth.errors.append(code.value)

    # Heartbeats every hb_ms from IDENTIFY; the idle consumer never answers and nsqd
    # closes it once two have gone unanswered.
    for c in (work1, work2, audit, idle):
        hb = c.truth.start_ts + hb_ms / 1000
        while hb < end:
            c.say(hb, Direction.S2C, Response(b"_heartbeat_"))
            c.truth.heartbeats += 1
            if c is idle:
                c.truth.missed_heartbeats += 1
                if c.truth.missed_heartbeats == 2:
                    c.truth.closed_for_missed_heartbeats = True
                    c.truth.end_ts = hb + 0.001
                    break
            else:
                c.say(hb + 0.0007, Direction.C2S, Nop())
            hb += hb_ms / 1000

    # Clean close of the others: consumers CLS -> CLOSE_WAIT; the producer just closes.
    for c in (work1, work2, audit):
        c.say(end, Direction.C2S, Cls())
        c.say(end + 0.0002, Direction.S2C, Response(b"CLOSE_WAIT"))
        c.truth.end_ts = end + 0.001
    prod.truth.end_ts = end + 0.001

    _write(sim, writer, mss)
    return sim.truth


def _write(sim: _Sim, writer: PcapngWriter | RecordWriter, mss: int) -> None:
    """Emit the actions in time order: handshake, coalesced sends, FINs."""
    convs: dict[_Conn, TcpConversation] = {}
    actions = sorted(sim.actions, key=lambda a: (a[0], a[1]))
    closes = sorted((c.truth.end_ts, i, c) for i, c in enumerate(sim.conns))
    isn = 1000
    k = 0
    while k < len(actions):
        ts, _n, c, direction, events = actions[k]
        while closes and closes[0][0] <= ts:
            _t, _i, cc = closes.pop(0)
            convs[cc].close(cc.truth.end_ts)
        # Everything this side says at the same instant goes out in one send.
        data = [_encode(e) for e in events]
        while (k + 1 < len(actions) and actions[k + 1][0] == ts
               and actions[k + 1][2] is c and actions[k + 1][3] == direction):
            k += 1
            data.extend(_encode(e) for e in actions[k][4])
        if c not in convs:
            isn = (isn * 1103515245 + 12345) & 0xFFFFFFFF
            convs[c] = TcpConversation(writer, c.client, sim.server, isn=(isn, isn ^ 0x5A5A5A5A),
                                       mss=mss)
            convs[c].open(ts)
        convs[c].send(direction, b"".join(data), ts)
        sim.truth.sends.append((c.truth.label, direction, tuple(len(d) for d in data), mss))
        k += 1
    for _t, _i, cc in closes:
        convs[cc].close(cc.truth.end_ts)


def _encode(event: Event) -> bytes:
    if isinstance(event, Response | Error | Message):
        return encode_frame(event)
    assert isinstance(event, Command)  # the simulation says commands and those frames
    return encode_command(event)


def write_capture_set(
    directory: str | os.PathLike[str],
    *,
    name: str = "nsq.pcap",
    max_bytes: int | None = None,
    **options: Any,
) -> Truth:
    """:func:`simulate` into ``directory/name`` (rotated every ``max_bytes`` if given)."""
    path = os.path.join(os.fspath(directory), name)
    if max_bytes:
        with RotatingPcapWriter(path, max_bytes) as w:
            truth = simulate(w, **options)
            truth.paths = list(w.paths)
    else:
        with PcapWriter(path) as w:
            truth = simulate(w, **options)
            truth.paths = [path]
    return truth
