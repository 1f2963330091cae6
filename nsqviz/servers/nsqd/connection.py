"""One client connection: protocol V2 on the shared sans-IO codec, driven by asyncio.

The codec (:class:`nsqviz.nsq.server_connection.ServerConnection`) owns the bytes: it cuts and
parses commands, checks syntax and per-connection state, and builds every frame we
send. This module owns what needs the broker: topics and channels, RDY flow control,
in-flight timeouts, heartbeats, output buffering, TLS/compression switch points, AUTH
over HTTP, and nsqd's limits. The order of things follows nsqd's ``protocolV2``:

* IDENTIFY with ``feature_negotiation``: the JSON response, then (``tls_v1``) the TLS
  handshake and an ``OK`` inside TLS, then (snappy/deflate) the switch and an ``OK``
  that is already compressed;
* errors: every ``E_*`` is sent as a FrameTypeError; after a fatal one the connection
  closes, after ``E_FIN_FAILED``/``E_REQ_FAILED``/``E_TOUCH_FAILED`` it stays open;
* heartbeats every ``heartbeat_interval``; a client silent for two intervals is cut;
* messages are buffered up to ``output_buffer_size`` or ``output_buffer_timeout``, and
  flushed at once when the client's RDY is used up; responses and errors flush.

This module holds the connection's state, the dispatch of the codec's events to one
handler per verb, and delivery; the steps that wait outside the command loop (TLS, AUTH)
are in :mod:`nsqviz.servers.nsqd.access`, output, fatal close and the timers in
:mod:`nsqviz.servers.nsqd.output`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from itertools import compress, count, repeat, starmap
from operator import attrgetter, is_not
from typing import Any, ClassVar, cast

from nsqviz import compactjson
from nsqviz.nsq import events
from nsqviz.nsq.commands import COMMANDS, name_of
from nsqviz.nsq.errors import ErrorCode
from nsqviz.nsq.server_connection import ServerConfig, ServerConnection
from nsqviz.nsq.states import State
from nsqviz.nsq.wire import MAGIC_V2
from nsqviz.servers.listen import release
from nsqviz.servers.nsqd.access import AccessSteps
from nsqviz.servers.nsqd.auth import AuthState
from nsqviz.servers.nsqd.channel import NOT_IN_FLIGHT, Channel
from nsqviz.servers.nsqd.identify import IdentifyRefused, Negotiated, negotiate
from nsqviz.servers.nsqd.message import BrokerMessage, InFlight
from nsqviz.servers.nsqd.options import Options
from nsqviz.servers.nsqd.output import CLOSE_WAIT, OK, FatalClientError

__all__ = ["BrokerConnection", "handler_name"]

log = logging.getLogger(__name__)

_FIN_ID = attrgetter("id")

NSQD_READ_BUFFER = 16 * 1024
"""nsqd's buffered reader of a client's commands (``defaultBufferSize``)."""

# nsqd's client states as /stats reports them (stateInit 0, stateDisconnected 1,
# stateConnected 2, stateSubscribed 3, stateClosing 4)
_STATS_STATE = {State.INIT: 0, State.CONNECTED: 0, State.SUBSCRIBED: 3, State.CLOSING: 4,
                State.CLOSED: 1}


def server_config(opts: Options) -> ServerConfig:
    """The part of the options the codec enforces itself."""
    return ServerConfig(
        max_rdy_count=opts.max_rdy_count,
        max_msg_size=opts.max_msg_size,
        max_body_size=opts.max_body_size,
        max_req_timeout=int(opts.max_req_timeout * 1000),
        auth_enabled=bool(opts.auth_http_address),
        tls_required=opts.tls_required,
    )


class BrokerConnection(AccessSteps, asyncio.Protocol):
    """nsqd's clientV2 + protocolV2 for one TCP connection: its state, the codec's
    events dispatched to one handler per verb, delivery; TLS and AUTH are in
    :class:`~nsqviz.servers.nsqd.access.AccessSteps`, output and timers in
    :class:`~nsqviz.servers.nsqd.output.Output`."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.opts = opts = broker.opts
        self.codec = ServerConnection(server_config(opts))
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_event_loop()
        self.closed = False
        # negotiated settings, nsqd's defaults until IDENTIFY
        self.settings = Negotiated(
            client_id="", hostname="", user_agent="",
            heartbeat_interval=opts.client_timeout / 2,
            output_buffer_size=16 * 1024,
            output_buffer_timeout=opts.output_buffer_timeout,
            sample_rate=0, msg_timeout=opts.msg_timeout, feature_negotiation=False,
        )
        self.channel: Channel | None = None
        self.in_flight: dict[bytes, InFlight] = {}  # the codec counts them against RDY
        self.auth_state: AuthState | None = None
        self._secret = ""  # kept to ask the auth service again when the answer expires
        self.compression = ""
        self.tls_version = ""
        self.tls_cipher_suite = ""
        self.tls_common_name = ""
        self.remote_address = ""
        self.connect_ts = int(time.time())
        self.message_count = self.finish_count = self.requeue_count = 0
        self.pub_counts: dict[str, int] = {}
        self._events: deque[events.Event] = deque()
        self._busy = False  # an async step (AUTH query, TLS handshake) is running
        self._out: list[bytes] = []
        self._out_size = 0
        self._flush_handle: asyncio.TimerHandle | None = None
        self._heartbeat_handle: asyncio.TimerHandle | None = None
        self._deadline_handle: asyncio.TimerHandle | None = None
        self._last_read = self._ticker_start = time.monotonic()
        self._write_paused = False
        self._pump_pending = False  # FIN/REQ/RDY freed room: pump once the batch is read
        self._dispatching = False  # handling a batch of commands: deliveries wait for its end
        self._torn_down = False
        self._received = 0  # bytes read from the socket, for nsqd's close (_unread)

    # -- attributes read by channels and /stats -------------------------------------

    @property
    def client_id(self) -> str:
        return self.settings.client_id or self.remote_address.rsplit(":", 1)[0]

    @property
    def hostname(self) -> str:
        return self.settings.hostname or self.remote_address.rsplit(":", 1)[0]

    @property
    def user_agent(self) -> str:
        return self.settings.user_agent

    @property
    def sample_rate(self) -> int:
        return self.settings.sample_rate

    @property
    def msg_timeout(self) -> float:
        return self.settings.msg_timeout

    @property
    def stats_state(self) -> int:
        return _STATS_STATE.get(self.codec.state, 0)

    @property
    def rdy(self) -> int:
        """The client's RDY count, as the codec tracks it."""
        return self.codec.rdy

    def ready(self) -> bool:
        return not self.closed and self.codec.room > 0

    def room(self) -> int:
        """How many messages may go out now: the codec's flow control, unless the
        connection is closed or its writes are paused."""
        if self.closed or self._write_paused:
            return 0
        if self._dispatching:
            self._pump_pending = True  # asked mid-batch: pump again once it is handled
            return 0
        return self.codec.room

    @property
    def _subscribed(self) -> Channel:
        """The channel: FIN, REQ and TOUCH reach a handler only for a message in flight,
        so after SUB (the codec refuses them before)."""
        assert self.channel is not None
        return self.channel

    # -- asyncio.Protocol -----------------------------------------------------------

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # a stream server's protocol is given a stream transport
        self.transport = transport = cast(asyncio.Transport, base)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        if peer:
            self.remote_address = f"{peer[0]}:{peer[1]}"
        transport.set_write_buffer_limits(high=4 * 1024 * 1024)
        self.broker.clients.add(self)
        self._arm_deadline()  # the magic must come within --client-timeout, too

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._received += len(data)
        try:
            received = self.codec.receive(data)
        except Exception as exc:  # the codec must not crash us; a bug is a fatal error
            log.exception("codec failed on %d bytes from %s", len(data), self.remote_address)
            self._fatal(ErrorCode.INVALID, f"internal error {type(exc).__name__}")
            return
        if received:
            # like nsqd's read deadline, only a *complete* command counts as a sign of
            # life: a client dribbling bytes of a command that never ends is cut off
            self._last_read = time.monotonic()
        self._events.extend(received)
        self._run()

    def eof_received(self) -> bool:
        return False  # close our side too, as nsqd does when its read fails

    def connection_lost(self, exc: Exception | None) -> None:
        self._teardown()
        if self.transport is not None:
            release(self.transport)

    def pause_writing(self) -> None:
        # the client does not read: stop reading its commands until it does
        self._write_paused = True
        if self.transport is not None and not self._busy:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self.transport is not None and not self._busy and not self.closed:
            self.transport.resume_reading()
        if self.channel is not None:
            self.channel.wake()

    # -- command dispatch -----------------------------------------------------------

    def _run(self) -> None:
        """Handle queued events until none are left or one needs to wait (AUTH, TLS)."""
        queue = self._events
        handlers = self._handlers
        # The codec has already read the whole batch (its RDY and in-flight are those
        # after the last command): no message goes out until every command before it
        # has been handled, as nsqd handles them one after the other.
        self._dispatching = True
        try:
            while queue and not self._busy and not self.closed:
                ev = queue.popleft()
                handler = handlers.get(type(ev))
                if handler is None:
                    continue
                try:
                    handler(self, ev)
                except FatalClientError as exc:
                    self._fatal(exc.code, exc.text)
                    return
        finally:
            self._dispatching = False
        if self._pump_pending and self.channel is not None and not self.closed:
            # one pump for a whole batch of FINs (and for what other consumers freed in
            # this loop turn): the freed slots are refilled with one write, not one a FIN
            self._pump_pending = False
            self.channel.wake()
        self._flush_if_idle()

    def _on_violation(self, ev: events.Violation) -> None:
        if ev.accepted:
            return  # nsqd runs it all the same: the command's own event follows
        if not ev.code:
            # not a command nsqd could answer (a broken compressed stream): nsqd's read
            # fails and it closes without a word
            log.info("closing %s: %s", self.remote_address, ev.text)
            self._close_quietly()
        elif ev.fatal:
            self._fatal(ev.code, ev.text, unread=self._unread(ev))
        else:
            error = self._not_owned(ev) or ev.error
            assert error is not None  # a violation with a code has nsqd's answer
            self._send_now(events.Error(error))

    def _unread(self, ev: events.Violation) -> bool:
        """Whether nsqd would close after ``ev`` with input still unread -- its kernel
        then answers the close with an RST. nsqd reads the magic alone, unbuffered, so
        any byte after a bad one is unread; then it reads through a buffer of
        :data:`NSQD_READ_BUFFER` bytes, so what arrived more than that past where it
        stopped (the field at fault, else the command's start: an MPUB's message too
        big) is unread too."""
        if ev.code == ErrorCode.BAD_PROTOCOL:
            return ev.raw is not None and len(ev.raw.data) > len(MAGIC_V2)
        stop = ev.field_offset if ev.field_offset is not None else ev.offset
        if stop is None or self.compression:  # offsets are in the decompressed stream
            return False
        return self._received - stop > NSQD_READ_BUFFER

    def _not_owned(self, ev: events.Violation) -> bytes | None:
        """The codec only knows this connection's in-flight ids; nsqd's channel knows all,
        and says ``client does not own message`` for an id in flight on another client."""
        cmd = ev.command
        if (self.channel is None or not isinstance(cmd, events.Fin | events.Req | events.Touch)
                or ev.code != ErrorCode.failed(name_of(type(cmd)))):
            return None
        if any(cmd.id in other.in_flight for other in self.channel.holders if other is not self):
            return _failed(cmd, "client does not own message")
        return None

    def _on_magic(self, ev: events.Magic) -> None:
        self._arm_heartbeat()  # nsqd's message pump (and its heartbeats) start here

    def _on_nop(self, ev: events.Nop) -> None:
        pass

    def _on_identify(self, ev: events.Identify) -> None:
        try:
            settings, response = negotiate(
                ev.data, self.opts, current=self.settings,
                tls_available=self.broker.tls_context is not None,
                auth_required=bool(self.opts.auth_http_address),
            )
        except IdentifyRefused as exc:
            raise FatalClientError(exc.code, exc.text) from None
        self.settings = settings
        self._arm_heartbeat()
        self._arm_deadline()
        if response is None:
            self._send_now(OK)
            return
        self._send_now(events.Response(compactjson.encode(response)))
        if settings.tls_v1:
            self._busy = True
            self._live.pause_reading()
            self.loop.create_task(self._upgrade_tls(settings))
            return
        self._start_compression(settings)

    def _start_compression(self, settings: Negotiated) -> None:
        if settings.snappy:
            self.codec.start_compression("snappy", None)
            self.compression = "snappy"
            self._send_now(OK)
        elif settings.deflate:
            self.codec.start_compression("deflate", settings.deflate_level)
            self.compression = "deflate"
            self._send_now(OK)

    def _on_auth(self, ev: events.Auth) -> None:
        # the codec has refused a second AUTH and AUTH without an auth service
        self._busy = True
        self._live.pause_reading()
        self.loop.create_task(self._authenticate(ev.secret.decode("utf-8", "replace")))

    def _on_sub(self, ev: events.Sub) -> None:
        self._when_authorized("SUB", ev.topic, ev.channel, lambda: self._subscribe(ev))

    def _subscribe(self, ev: events.Sub) -> None:
        topic = self.broker.get_topic(ev.topic)
        channel = topic.get_channel(ev.channel)
        limit = self.opts.max_channel_consumers
        if limit and len(channel.clients) >= limit:
            # nsqd >= 1.2.1 (so 1.3.0): the channel's error wrapped in E_SUB_FAILED
            raise FatalClientError(ErrorCode.SUB_FAILED,
                                   f"SUB failed consumers for {ev.topic}:{ev.channel} "
                                   f"exceeds limit of {limit}")
        channel.add_client(self)
        self.channel = channel
        self._send_now(OK)

    def _on_pub(self, ev: events.Pub) -> None:
        self._when_authorized("PUB", ev.topic, "",
                              lambda: self._publish("PUB", ev.topic, [ev.body]))

    def _on_mpub(self, ev: events.Mpub) -> None:
        self._when_authorized("MPUB", ev.topic, "",
                              lambda: self._publish("MPUB", ev.topic, ev.bodies))

    def _on_dpub(self, ev: events.Dpub) -> None:
        delay = ev.defer_time / 1000
        self._when_authorized("DPUB", ev.topic, "",
                              lambda: self._publish("DPUB", ev.topic, [ev.body], delay))

    def _publish(self, verb: str, topic_name: str, bodies: Sequence[bytes],
                 delay: float = 0.0) -> None:
        broker = self.broker
        topic = broker.get_topic(topic_name)
        # the deliveries the put wakes follow on the next loop turn, after the OK
        # (Channel.wake): a client that publishes on its own subscribed connection sees
        # the OK first, as with nsqd
        try:
            topic.publish(broker.ids.batch(bodies), delay)
        except (OSError, ValueError) as exc:
            # nsqd: E_PUB_FAILED / E_MPUB_FAILED / E_DPUB_FAILED when the put fails (a
            # disk queue that cannot be written)
            log.error("%s to %s failed: %s", verb, topic_name, exc)
            raise FatalClientError(ErrorCode.failed(verb), f"{verb} failed {exc}") from None
        self.pub_counts[topic_name] = self.pub_counts.get(topic_name, 0) + len(bodies)
        self._send_now(OK)

    def _on_rdy(self, ev: events.Rdy) -> None:
        self._pump_pending = True  # the codec holds the count (and ignores it after CLS)

    def _on_fin(self, ev: events.Fin) -> None:
        """FIN, and the FINs queued right behind it: a consumer's commands are mostly
        FINs, and a run of them is one call to the channel."""
        queue = self._events
        # how many FINs follow, counted and taken off without a loop in Python (a
        # consumer's batch is hundreds of them)
        n = next(compress(count(), map(is_not, map(type, queue), repeat(events.Fin))),
                 len(queue))
        ids = [ev.id]
        ids += map(_FIN_ID, starmap(queue.popleft, repeat((), n)))
        missing = self._subscribed.finish(self, ids)
        for mid in missing:
            self._send_now(events.Error(_failed(events.Fin(mid), NOT_IN_FLIGHT)))
        self.finish_count += len(ids) - len(missing)
        self._pump_pending = True

    def _on_req(self, ev: events.Req) -> None:
        delay = min(ev.timeout / 1000, self.opts.max_req_timeout)
        try:
            self._subscribed.requeue(self, ev.id, delay)
        except KeyError as exc:
            self._send_now(events.Error(_failed(ev, exc.args[0])))
            return
        self.requeue_count += 1
        self._pump_pending = True

    def _on_touch(self, ev: events.Touch) -> None:
        try:
            self._subscribed.touch(self, ev.id)
        except KeyError as exc:
            self._send_now(events.Error(_failed(ev, exc.args[0])))

    def _on_cls(self, ev: events.Cls) -> None:
        self._send_now(CLOSE_WAIT)  # the codec is CLOSING now, with RDY 0

    _handlers: ClassVar[dict[type[events.Event], Callable[[BrokerConnection, Any], None]]]
    """Built from the command table below the class: see :func:`handler_name`."""

    # -- delivery (called by the channel) --------------------------------------------

    def deliver(self, batch: list[InFlight]) -> None:
        """Messages the channel just put in flight for us, as one buffered write: each
        :class:`Delivery` (part of a publish) encoded from its columns, the messages of
        their own together."""
        codec = self.codec
        out = self._out
        size = len(out)
        singles: list[BrokerMessage] = []
        for item in batch:  # in order: a run of messages of their own is one call
            if isinstance(item, BrokerMessage):
                singles.append(item)
                continue
            if singles:
                out.append(codec.send_messages(singles))
                self.message_count += len(singles)
                singles = []
            out.append(codec.send_message_run(item.timestamp, item.attempts, item.ids,
                                              item.bodies))
            self.message_count += len(item.ids)
        if singles:
            out.append(codec.send_messages(singles))
            self.message_count += len(singles)
        self._out_size += sum(map(len, out[size:]))
        if self._out_size >= self.settings.output_buffer_size or not self.ready():
            self._flush()
        elif self._flush_handle is None:
            timeout = self.settings.output_buffer_timeout
            if timeout <= 0:
                self._flush()
            else:
                # nsqd flushes on a ticker of output_buffer_timeout that runs from the
                # connection's start: the next tick, not a full timeout from now
                phase = (time.monotonic() - self._ticker_start) % timeout
                self._flush_handle = self.loop.call_later(timeout - phase, self._tick)

    def timed_out(self, msg_id: bytes) -> None:
        if not self.closed:
            self.codec.forget(msg_id)

    def _teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        self.closed = True
        for handle in (self._flush_handle, self._heartbeat_handle, self._deadline_handle):
            if handle is not None:
                handle.cancel()
        self.broker.clients.discard(self)
        if self.channel is not None:
            self.channel.remove_client(self)
            self.channel.wake()


def handler_name(verb: str) -> str:
    """The :class:`BrokerConnection` method that carries out ``verb`` (``_on_sub``)."""
    return f"_on_{verb.lower()}"


# The dispatch is the command table's: one handler per verb, looked up by its name (a
# verb added to the table without a handler fails here, at import), plus the two events
# that are not commands.
BrokerConnection._handlers = {
    events.Violation: BrokerConnection._on_violation,
    events.Magic: BrokerConnection._on_magic,
    **{spec.event: getattr(BrokerConnection, handler_name(spec.verb))
       for spec in COMMANDS.values()},
}


def _failed(cmd: events.Fin | events.Req | events.Touch, reason: str) -> bytes:
    """nsqd's non-fatal ``E_<VERB>_FAILED <VERB> <id> failed <reason>``."""
    verb = name_of(type(cmd))
    mid = cmd.id.decode("ascii", "replace")
    return ErrorCode.failed(verb).frame(f"{verb} {mid} failed {reason}")
