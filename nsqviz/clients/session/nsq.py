"""A stepping NSQ client for notebooks: one command per step, everything recorded.

Each :class:`Connection` owns a TCP socket and a sans-IO
:class:`~nsqviz.nsq.client_connection.ClientConnection`. A step (``conn.sub("orders", "audit")``)
builds one command event, lets the codec turn it into bytes (so the codec's state
checks apply -- ``check=False`` sends it anyway, to see what the server answers), writes
them, and waits for what the protocol says comes back: the response for commands nsqd
answers (IDENTIFY, AUTH, SUB, PUB, MPUB, DPUB, CLS), or a short grace period for those
it answers only on failure (magic, RDY, FIN, REQ, TOUCH, NOP). The :class:`Step` keeps
the bytes both ways, the decoded events, the codec's snapshot before and after, and
timings.

A reader thread per connection receives all the time, so what arrives unasked --
messages pushed after RDY, ``_heartbeat_`` -- is recorded *as it arrives*, as an
:class:`Arrival`, with its own time. The :class:`Session` keeps one transcript for all
its connections (a consumer and a publisher, say) and saves it as JSON or as a pcap.

By default a session talks to an embedded broker started once per process on free
loopback ports and stopped at exit; ``Session("host:4150")`` talks to any nsqd, and
``Session(nsqd="real")`` (or ``NSQVIZ_NSQD=real`` in the environment) starts the real
nsqd when one is found (see :mod:`nsqviz.servers.peers`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nsqviz.clients.session.entries import Arrival, Entry, Step
from nsqviz.clients.session.outcomes import (
    SessionClosed,
    closed_message,
    made_where,
    why_not_in_flight,
)
from nsqviz.clients.session.transcript import save_json, save_pcap, transcript_json
from nsqviz.nsq import events as ev
from nsqviz.nsq import fastpath
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.commands import ABOUT_A_MESSAGE
from nsqviz.nsq.wire import MAGIC_V2
from nsqviz.sansio import LocalProtocolError

if TYPE_CHECKING:
    from nsqviz.servers.nsqd import EmbeddedBroker
    from nsqviz.servers.peers import NsqdProcess

__all__ = [
    "Arrival",
    "Connection",
    "Session",
    "Step",
    "NSQD_CHOICE",
    "default_broker",
    "nsqd_choice",
    "start_server",
    "LocalProtocolError",
]

ANSWERED = (ev.Identify, ev.Auth, ev.Sub, ev.Pub, ev.Mpub, ev.Dpub, ev.Cls)
"""Commands nsqd always answers; the others get a frame only when they fail."""
# ABOUT_A_MESSAGE (FIN, REQ, TOUCH: the protocol's table) nsqd answers only when they
# fail: with E_FIN_FAILED, E_REQ_FAILED or E_TOUCH_FAILED when the id is not in flight
# for this connection.



# ---------------------------------------------------------------------- the broker

NSQD_CHOICE = "NSQVIZ_NSQD"
"""The environment variable that picks the server a :class:`Session` talks to when none is
named: unset (or ``embedded``) for the embedded broker, ``real`` for the real nsqd (found
by :mod:`nsqviz.servers.peers`: ``$NSQD``, PATH, ``$NSQVIZ_PEERS``), or ``host:port`` of a
running nsqd. A notebook runs unchanged against each: ``NSQVIZ_NSQD=real make lab``."""

_default_brokers: dict[str, NsqdProcess | EmbeddedBroker] = {}
_default_lock = threading.Lock()


def nsqd_choice() -> str:
    """The server :envvar:`NSQVIZ_NSQD` asks for: ``"embedded"``, ``"real"`` or an address."""
    return os.environ.get(NSQD_CHOICE, "").strip() or "embedded"


def start_server(kind: str, **options: Any) -> NsqdProcess | EmbeddedBroker:
    """A new server of ``kind`` (``"embedded"`` or ``"real"``) on free loopback ports,
    with nsqd's options (underscored names); stopped at interpreter exit."""
    if kind == "real":
        from nsqviz.servers.peers import RealNsqd

        server: NsqdProcess | EmbeddedBroker = RealNsqd(**options).start()
    elif kind == "embedded":
        from nsqviz.servers.nsqd import EmbeddedBroker

        server = EmbeddedBroker(**options).start()
    else:
        raise ValueError(f"unknown server kind {kind!r}: 'embedded' or 'real'")
    atexit.register(server.stop)
    return server


def default_broker(kind: str = "embedded") -> NsqdProcess | EmbeddedBroker:
    """The process's server of ``kind``: started on first use, stopped at interpreter exit."""
    with _default_lock:
        if kind not in _default_brokers:
            _default_brokers[kind] = start_server(kind)
        return _default_brokers[kind]


def _server_msg_timeout(server: NsqdProcess | EmbeddedBroker) -> float:
    """The ``--msg-timeout`` (seconds) of a server this process started: its option, or
    nsqd's default (which the embedded broker's options share)."""
    from nsqviz.servers.goflags import parse_duration
    from nsqviz.servers.nsqd.options import Options

    opts = getattr(server, "opts", None)
    if isinstance(opts, Options):
        return opts.msg_timeout
    flag = getattr(server, "flags", {}).get("msg_timeout")
    if flag is None:
        return Options.msg_timeout
    return float(flag) if isinstance(flag, int | float) else parse_duration(str(flag))


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


# ----------------------------------------------------------------------- a connection


class Connection:
    """One TCP connection to nsqd, stepped one command at a time."""

    def __init__(self, session: Session, name: str, *, timeout: float, grace: float,
                 ssl_context: ssl.SSLContext | None):
        self.session = session
        self.name = name
        self.timeout = timeout
        self.grace = grace
        self.ssl_context = ssl_context
        self.codec = ClientConnection(provenance=True)
        self.sock = socket.create_connection(session.address, timeout=timeout)
        self.sock.settimeout(None)  # the reader blocks in recv(); close() wakes it
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.local = self.sock.getsockname()[:2]
        self.peer = self.sock.getpeername()[:2]
        self.arrived_at: dict[bytes, float] = {}  # message id -> session time it arrived
        self.touched_at: dict[bytes, float] = {}  # message id -> session time of its TOUCH
        # the msg_timeout (ms) IDENTIFY asked for: nsqd applies it even when, without
        # feature_negotiation, it answers a plain OK (and the codec learns no features)
        self.asked_msg_timeout: int | None = None
        self.messages: dict[bytes, ev.Message] = {}  # latest delivery of each id, in order
        self.closed = False
        self._lock = threading.Condition()
        self._waiting: Step | None = None
        self._taken: set[int] = set()  # ids of arrived events wait() already handed out
        self._stepping = threading.Lock()  # one step at a time (learner or heartbeat)
        self.answer_heartbeats = session.answer_heartbeats
        """Send NOP for every ``_heartbeat_`` (a learner's pause must not cost the
        connection); ``False`` to see nsqd close a silent client."""
        self._reader = threading.Thread(target=self._read, name=f"nsqviz-{name}", daemon=True)
        self._reader.start()

    # -- the commands ---------------------------------------------------------------

    def magic(self, **kw: Any) -> Step:
        """Send ``"  V2"``: the protocol version. nsqd answers nothing unless it is wrong."""
        return self.step(ev.Magic(), **kw)

    def identify(self, check: bool = True, **fields: Any) -> Step:
        return self.step(ev.Identify(dict(fields)), check=check)

    def auth(self, secret: bytes | str, **kw: Any) -> Step:
        return self.step(ev.Auth(_b(secret)), **kw)

    def sub(self, topic: str, channel: str, **kw: Any) -> Step:
        return self.step(ev.Sub(topic, channel), **kw)

    def pub(self, topic: str, body: bytes | str, **kw: Any) -> Step:
        return self.step(ev.Pub(topic, _b(body)), **kw)

    def mpub(self, topic: str, bodies: list[bytes | str], **kw: Any) -> Step:
        return self.step(ev.Mpub(topic, tuple(_b(b) for b in bodies)), **kw)

    def dpub(self, topic: str, defer_ms: int, body: bytes | str, **kw: Any) -> Step:
        return self.step(ev.Dpub(topic, defer_ms, _b(body)), **kw)

    def rdy(self, count: int, **kw: Any) -> Step:
        return self.step(ev.Rdy(count), **kw)

    def fin(self, message_id: bytes | str | None = None, **kw: Any) -> Step:
        return self.step(ev.Fin(self.message_id(message_id)), **kw)

    def req(self, message_id: bytes | str | None = None, timeout_ms: int = 0, **kw: Any) -> Step:
        return self.step(ev.Req(self.message_id(message_id), timeout_ms), **kw)

    def touch(self, message_id: bytes | str | None = None, **kw: Any) -> Step:
        return self.step(ev.Touch(self.message_id(message_id)), **kw)

    def nop(self, **kw: Any) -> Step:
        return self.step(ev.Nop(), **kw)

    def cls(self, **kw: Any) -> Step:
        return self.step(ev.Cls(), **kw)

    def message_id(self, message_id: bytes | str | None) -> bytes:
        """``message_id`` as bytes; ``None``: the oldest message in flight."""
        if message_id is None:
            flying = self.in_flight
            if not flying:
                raise LocalProtocolError("no message is in flight on this connection")
            return flying[0]
        return _b(message_id)

    # -- stepping -------------------------------------------------------------------

    def step(self, command: ev.Command, *, check: bool = True, note: str = "") -> Step:
        """Send one command and wait for its answer (or the grace period)."""
        if self.session.closed:
            raise SessionClosed(closed_message("session", self.session.made))
        with self._stepping:
            return self._step(command, check=check, note=note)

    def _step(self, command: ev.Command, *, check: bool, note: str) -> Step:
        s = self.session
        with self._lock:
            before = self.codec.snapshot()
            try:
                wire = self.codec.send(command, check=check)
            except LocalProtocolError as exc:
                step = Step(s.number(), self.name, command, b"", b"", before=before,
                            after=before, t=s.now(), refused=str(exc))
                s.record(step)
                raise
            plain = MAGIC_V2 if isinstance(command, ev.Magic) else fastpath.encode_command(command)
            step = Step(s.number(), self.name, command, plain, wire, before=before, t=s.now(),
                        note=note)
            self._waiting = step
            s.record(step)
            started = time.monotonic()
            try:
                self.sock.sendall(wire)
            except OSError as exc:  # the peer is gone: say so in the transcript, then raise
                self._waiting = None
                step.refused = f"socket error: {exc}"
                step.after = self.codec.snapshot()
                raise
            # "after" is the state the command and its own answer leave behind; messages
            # pushed meanwhile are arrivals with their own snapshot (else the same step
            # would read differently depending on when nsqd flushed)
            step.after = self.codec.snapshot()
            if isinstance(command, ev.Identify) and isinstance(
                    command.data.get("msg_timeout"), int):
                self.asked_msg_timeout = command.data["msg_timeout"]
            answered = isinstance(command, ANSWERED) or self._refusal_due(command, before)
            deadline = started + (self.timeout if answered else self.grace)
            while True:
                if self.closed or self._answered(step):  # an error ends any step at once
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._lock.wait(left)
            self._waiting = None
            if isinstance(command, ev.Touch) and not any(isinstance(e, ev.Error)
                                                         for e in step.events):
                self.touched_at[command.id] = step.t
            step.elapsed = time.monotonic() - started
            step.why = self._why(step)
        s._changed()
        return step

    def _why(self, step: Step) -> str:
        """Why nsqd answered an error about a message id, from this connection's record."""
        mid = getattr(step.command, "id", None)
        error = next((e for e in step.events if isinstance(e, ev.Error)), None)
        if error is None or mid is None:
            return ""
        return why_not_in_flight(
            error, mid, delivered_at=self.arrived_at.get(mid), now=step.t,
            features=self.codec.features, still_held=mid.decode() in step.before["in_flight"])

    def _refusal_due(self, command: ev.Command, before: dict[str, Any]) -> bool:
        """Whether nsqd is known to refuse this FIN, REQ or TOUCH: its id is not held by
        this connection (never delivered here, or already finished or requeued), or it
        was held past msg_timeout since its delivery or last TOUCH (the one IDENTIFY
        negotiated or asked for, else the server's own when this session started it). Such a
        step waits for the refusal as for an answer: nsqd finds the timed-out message in
        its next queue scan, so the refusal may come later than the grace period of a
        command that succeeds silently."""
        if not isinstance(command, ABOUT_A_MESSAGE):
            return False
        if command.id.decode() not in before["in_flight"]:
            return True
        timeout_ms = (self.codec.features or {}).get("msg_timeout") or self.asked_msg_timeout or (
            self.session.msg_timeout * 1000 if self.session.msg_timeout else None)
        held_since = max(self.arrived_at.get(command.id, 0.0),
                         self.touched_at.get(command.id, 0.0))
        if not timeout_ms:
            return False
        return (self.session.now() - held_since) * 1000 >= int(timeout_ms)

    def _answered(self, step: Step) -> bool:
        if any(isinstance(e, ev.Error | ev.Violation) for e in step.events):
            return True
        return not self.codec.pending and any(
            isinstance(e, ev.Response) and not e.is_heartbeat for e in step.events
        )

    def wait(
        self, predicate: Callable[[ev.Event], bool] | None = None, *, count: int = 1,
        timeout: float | None = None
    ) -> list[ev.Event]:
        """Block until ``count`` events matching ``predicate`` arrived unasked.

        ``predicate`` takes an event; the default waits for messages. Each arrived event
        is handed out by ``wait`` at most once, so events that came in before the call
        (several messages often come in one read) are found too. Returns them in order.
        """
        predicate = predicate or (lambda e: isinstance(e, ev.Message))
        deadline = time.monotonic() + (self.timeout * 5 if timeout is None else timeout)
        with self._lock:
            while True:
                found = [
                    e for a in self.session.arrivals(self.name) for e in a.events
                    if id(e) not in self._taken and predicate(e)
                ][:count]
                if len(found) >= count or self.closed:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.name}: waited for {count}, got {len(found)}")
                self._lock.wait(left)
            self._taken.update(id(e) for e in found)
        return found

    def close(self) -> None:
        """Drop the TCP connection (no CLS: use :meth:`cls` for the clean way)."""
        if not self.closed:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._reader.join(timeout=self.timeout)

    # -- the reader thread ----------------------------------------------------------

    def _read(self) -> None:
        s = self.session
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            with self._lock:
                t = s.now()
                events = self.codec.receive(data)
                tls = any(isinstance(e, ev.TLSUpgrade) for e in events)
                self._file(t, data, events)
                if tls:
                    self._start_tls()
                if not data:
                    self.closed = True
                self._lock.notify_all()
            s._changed()
            if not data:
                return
            if self.answer_heartbeats and any(
                isinstance(e, ev.Response) and e.is_heartbeat for e in events
            ):
                threading.Thread(target=self._answer_heartbeat, daemon=True,
                                 name=f"nsqviz-{self.name}-nop").start()

    def _answer_heartbeat(self) -> None:
        """NOP, as a client library answers nsqd's ``_heartbeat_``, recorded as a step."""
        with contextlib.suppress(OSError, LocalProtocolError):
            if not self.closed:
                self.step(ev.Nop(), note="answers _heartbeat_")

    def _file(self, t: float, data: bytes, events: list[ev.Event]) -> None:
        """Attach what arrived to the waiting step, or record it as an arrival."""
        for e in events:
            if isinstance(e, ev.Message):
                self.arrived_at[e.id] = t
                self.messages.pop(e.id, None)
                self.messages[e.id] = e
        step = self._waiting
        unasked = [e for e in events if _unasked(e)]
        asked = [e for e in events if not _unasked(e)]
        if step is not None and (asked or not unasked):
            step.received.append((t, data))
            step.events.extend(asked)
            if asked:
                step.after = self.codec.snapshot()
            if unasked:
                self.session.record(Arrival(self.session.number(), self.name, t, b"", unasked,
                                             self.codec.snapshot()))
            return
        self.session.record(
            Arrival(self.session.number(), self.name, t, data, events, self.codec.snapshot())
        )

    def _start_tls(self) -> None:
        context = self.ssl_context or _insecure_context()
        self.sock.settimeout(self.timeout)
        self.sock = context.wrap_socket(self.sock, server_hostname=self.peer[0])
        self.sock.settimeout(None)
        self.codec.tls_established()

    # -- views ------------------------------------------------------------------------

    @property
    def state(self) -> str:
        return self.codec.state.value

    @property
    def in_flight(self) -> list[bytes]:
        """Ids delivered and not yet FIN'd or REQ'd, oldest delivery first."""
        with self._lock:
            flying = self.codec.in_flight
            return [mid for mid in self.messages if mid in flying]

    def __repr__(self) -> str:
        return f"<Connection {self.name} {self.local[0]}:{self.local[1]} state={self.state}>"


def _unasked(e: ev.Event) -> bool:
    return isinstance(e, ev.Message | ev.ConnectionClosed) or (
        isinstance(e, ev.Response) and e.is_heartbeat
    )


def _insecure_context() -> ssl.SSLContext:
    """For the embedded broker's self-signed certificate: encrypt, do not verify."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _b(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


# ------------------------------------------------------------------------- a session


class Session:
    """Connections to one nsqd and the transcript of everything they did."""

    def __init__(
        self,
        address: str | None = None,
        *,
        nsqd: str | None = None,
        timeout: float = 5.0,
        grace: float = 0.15,
        ssl_context: ssl.SSLContext | None = None,
        answer_heartbeats: bool = True,
        **broker_options: Any,
    ):
        """Talk to ``address`` (``"host:port"`` of any nsqd), or to the server ``nsqd``
        names: ``"embedded"``, ``"real"`` (the real nsqd, started here) or an address.
        Neither given: :envvar:`NSQVIZ_NSQD` decides (default: the embedded broker).
        ``broker_options`` (nsqd's flags, underscored) start a server of its own for this
        session, stopped by :meth:`close`; otherwise one per process is shared.
        ``answer_heartbeats`` (default on): each connection answers nsqd's ``_heartbeat_``
        with a NOP, recorded as a step, so a connection survives a learner's pause."""
        self.broker = None
        self._own_broker = False
        choice = address or nsqd or nsqd_choice()
        if choice in ("embedded", "real"):
            if broker_options:
                self.broker = start_server(choice, **broker_options)
                self._own_broker = True
            else:
                self.broker = default_broker(choice)
            address = self.broker.tcp_address
        elif broker_options:
            raise ValueError(f"options {sorted(broker_options)} start a server, but the "
                             f"session talks to the running nsqd at {choice}")
        else:
            address = choice
        self.server = "real nsqd" if choice == "real" else (
            "embedded broker" if choice == "embedded" else f"nsqd at {choice}")
        self.address = _split(address)
        # the server's --msg-timeout (seconds) when this session started it or shares the
        # process's; None for a server at an address (only IDENTIFY's answer may say)
        self.msg_timeout = _server_msg_timeout(self.broker) if self.broker else None
        self.timeout = timeout
        self.grace = grace
        self.ssl_context = ssl_context
        self.answer_heartbeats = answer_heartbeats
        self.connections: dict[str, Connection] = {}
        self.closed = False
        self.made = made_where()  # named when a step comes after close()
        self.entries: list[Entry] = []
        self.started = time.monotonic()
        self.wall_started = time.time()
        self._count = 0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[Session], None]] = []

    def connect(self, name: str = "consumer") -> Connection:
        if self.closed:
            raise SessionClosed(closed_message("session", self.made))
        if name in self.connections and not self.connections[name].closed:
            raise ValueError(f"a connection named {name!r} is already open")
        conn = Connection(self, name, timeout=self.timeout, grace=self.grace,
                          ssl_context=self.ssl_context)
        self.connections[name] = conn
        self._changed()
        return conn

    def now(self) -> float:
        return time.monotonic() - self.started

    def number(self) -> int:
        """The number of the next transcript entry (each connection asks for its
        steps' and arrivals' numbers here, so that they are numbered in one sequence)."""
        with self._lock:
            self._count += 1
            return self._count

    def record(self, entry: Entry) -> None:
        """Add ``entry`` (a connection's step or arrival) to the transcript."""
        with self._lock:
            self.entries.append(entry)

    def _changed(self) -> None:
        for fn in list(self._listeners):
            fn(self)

    def on_change(self, fn: Callable[[Session], None]) -> None:
        """Call ``fn(session)`` after each step and each arrival (the stepper redraws)."""
        self._listeners.append(fn)

    def arrivals(self, name: str | None = None) -> list[Arrival]:
        return [e for e in self.entries if isinstance(e, Arrival)
                and (name is None or e.connection == name)]

    def steps(self, name: str | None = None) -> list[Step]:
        return [e for e in self.entries if isinstance(e, Step)
                and (name is None or e.connection == name)]

    def close(self) -> None:
        """Close every connection (and the session's own server); a later step or
        :meth:`connect` raises :class:`~nsqviz.clients.session.outcomes.SessionClosed`, naming the
        cell that made the session."""
        self.closed = True
        for conn in self.connections.values():
            conn.close()
        if self.broker is not None and self._own_broker:
            self.broker.stop()
        self._changed()  # a stepper greys its buttons

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- saving -------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return transcript_json(self)

    def save_json(self, path: str | os.PathLike[str]) -> None:
        save_json(self, path)

    def save_pcap(self, path: str | os.PathLike[str]) -> int:
        return save_pcap(self, path)
