"""One asyncio connection to an nsqd, on the sans-IO
:class:`~nsqviz.nsq.client_connection.ClientConnection`.

Every byte in and out goes through the codec: it frames and decodes what arrives, pairs
responses with the commands that asked for them, switches on TLS and compression where
IDENTIFY negotiated them, and refuses commands the protocol forbids. This module adds
only I/O and time:

* heartbeats are answered with NOP *inside* ``data_received``, before any message of the
  same read reaches a handler, so busy handlers never starve them;
* commands nsqd does not answer (FIN, REQ, TOUCH, RDY) written during one event-loop
  iteration go out in one write; a command it answers goes out at once, after them;
* ``read_timeout`` (default two heartbeat intervals) declares a silent connection dead
  (liveness detection) -- timed with ``time.monotonic``;
* a non-fatal ``E_FIN_FAILED``/``E_REQ_FAILED``/``E_TOUCH_FAILED`` is handed to
  ``on_refused`` with the message id it names, so the caller can tie it to its message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from nsqviz.clients.nsq.config import Config
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.errors import ErrorCode
from nsqviz.nsq.events import (
    Auth,
    Cls,
    Command,
    CompressionStarted,
    ConnectionClosed,
    Error,
    Identify,
    Magic,
    Message,
    Nop,
    Rdy,
    Response,
    Sub,
    TLSUpgrade,
    Violation,
)
from nsqviz.nsq.states import State
from nsqviz.sansio import LocalProtocolError

__all__ = ["ConnectionFailed", "NSQConnection", "NSQError"]

log = logging.getLogger(__name__)


class NSQError(Exception):
    """nsqd answered a command with an error frame (``code``, ``text``)."""

    def __init__(self, code: str, text: str = ""):
        super().__init__(f"{code} {text}".strip())
        self.code = code
        self.text = text


class ConnectionFailed(ConnectionError):
    """The connection is gone (closed, refused, timed out, or declared dead)."""


class NSQConnection(asyncio.Protocol):
    """A connection to one nsqd (``host:port``); see the module doc."""

    def __init__(
        self,
        address: str,
        config: Config,
        *,
        on_message: Callable[[NSQConnection, Message], None] | None = None,
        on_close: Callable[[NSQConnection, BaseException | None], None] | None = None,
        on_refused: Callable[[NSQConnection, Error, bytes | None], None] | None = None,
    ):
        self.address = address
        host, _, port = address.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        self.config = config
        self.codec = ClientConnection()
        self.on_message = on_message
        self.on_close = on_close
        self.on_refused = on_refused
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_event_loop().create_future()
        self._answers: deque[asyncio.Future[Any]] = deque()
        self._switches: deque[asyncio.Future[Any]] = deque()
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._loop = asyncio.get_event_loop()
        self._watchdog: asyncio.TimerHandle | None = None
        self.last_recv = time.monotonic()
        # what the consumer reads
        self.rdy = 0  # last RDY sent
        self.rdy_sent_at = 0.0
        self.received_since_rdy = 0
        self.in_flight = 0
        self.last_message_at = 0.0
        self.messages_received = 0
        self.max_rdy_count: int
        """nsqd's ``max_rdy_count``; 2500 when IDENTIFY negotiated nothing (the guide)."""
        self.msg_timeout: float
        """Seconds nsqd gives us per message (negotiated, else nsqd's default 60 s)."""
        self._negotiated()  # nothing yet: the defaults

    # -- properties ---------------------------------------------------------------

    @property
    def features(self) -> dict[str, Any]:
        return self.codec.features or {}

    def _negotiated(self) -> None:
        """Read what IDENTIFY negotiated into plain attributes: the consumer reads them
        for every message."""
        self.max_rdy_count = self.codec.max_rdy_count
        ms = self.features.get("msg_timeout")
        self.msg_timeout = ms / 1000 if ms else (self.config.msg_timeout or 60.0)

    @property
    def max_body_size(self) -> int | None:
        return self.features.get("max_body_size")

    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.closed.done()

    def __repr__(self) -> str:
        return f"<NSQConnection {self.address} rdy={self.rdy} in_flight={self.in_flight}>"

    # -- opening ------------------------------------------------------------------

    async def connect(self, topic: str | None = None, channel: str | None = None) -> None:
        """TCP connect, magic, IDENTIFY (+ TLS, compression, AUTH), and SUB if given."""
        cfg = self.config
        try:
            await asyncio.wait_for(
                self._loop.create_connection(lambda: self, self.host, self.port),
                cfg.dial_timeout)
        except (OSError, TimeoutError) as exc:
            raise ConnectionFailed(f"cannot connect to {self.address}: {exc}") from exc
        self.send(Magic())
        await self.command(Identify(cfg.identify()))
        self._negotiated()
        while self._switches:  # TLS and/or compression were negotiated
            await self._switches.popleft()
        if self.codec.auth_required:
            if cfg.auth_secret is None:
                error = NSQError(ErrorCode.UNAUTHORIZED, "nsqd requires AUTH; no auth_secret")
                self._fail(error)
                raise error
            secret = cfg.auth_secret
            await self.command(Auth(secret.encode() if isinstance(secret, str) else secret))
        if topic is not None:
            assert channel is not None, "a subscription names a topic and a channel"
            await self.command(Sub(topic, channel))
        self._arm_watchdog()

    async def _start_tls(self) -> None:
        ctx = self.config.tls_context or _unverified_context()
        self._flush()
        assert self.transport is not None, "TLS starts on an open connection"
        self.transport = await self._loop.start_tls(self.transport, self, ctx,
                                                    server_hostname=self.host)
        self.codec.tls_established()

    # -- sending ------------------------------------------------------------------

    def send(self, cmd: Command) -> None:
        """Queue ``cmd`` (checked by the codec); written at the end of this loop turn."""
        self._queue(cmd)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def command(self, cmd: Command) -> asyncio.Future[Any]:
        """Send a command nsqd answers; the future gets the Response (or NSQError).

        It is written at once, after whatever this loop turn queued before it: its
        caller is waiting for the answer, and a loop turn spent on the write would only
        delay it (a producer publishing one batch after another pays that per batch).
        """
        fut = self._loop.create_future()
        self._queue(cmd)
        self._answers.append(fut)
        self._flush()
        return fut

    def _queue(self, cmd: Command) -> None:
        if self.transport is None or self.closed.done():
            raise ConnectionFailed(f"{self.address} is closed")
        self._out.append(self.codec.send(cmd))
        if type(cmd) is Rdy:
            self.rdy = cmd.count
            self.rdy_sent_at = time.monotonic()
            self.received_since_rdy = 0

    def _flush(self) -> None:
        """Write what is queued (a flush still scheduled then finds nothing to write)."""
        self._flush_scheduled = False
        if self._out and self.transport is not None and not self.transport.is_closing():
            data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
            self._out.clear()
            self.transport.write(data)

    # -- receiving ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.last_recv = time.monotonic()
        try:
            events = self.codec.receive(data)
        except Exception as exc:  # a codec bug must not go unnoticed or hang us
            self._fail(exc)
            return
        on_message = self.on_message
        # heartbeats first: a handler run from this read must not delay the NOP
        for ev in events:
            if type(ev) is Response and ev.data == b"_heartbeat_":
                self.send(Nop())
                self._flush()
        for ev in events:
            kind = type(ev)
            if kind is Message:
                self.in_flight += 1
                self.received_since_rdy += 1
                self.messages_received += 1
                self.last_message_at = self.last_recv
                if on_message is not None:
                    on_message(self, ev)
            elif kind is Response:
                if ev.data != b"_heartbeat_":
                    self._answer(ev)
            elif kind is Error:
                self._error(ev)
            elif kind is TLSUpgrade:
                self._expect_switch_ok()
                task = self._loop.create_task(self._start_tls())
                task.add_done_callback(lambda t: t.exception() and self._fail(t.exception()))
            elif kind is CompressionStarted:
                self._expect_switch_ok()
            elif kind is Violation:
                if ev.fatal:
                    self._fail(ConnectionFailed(f"{self.address}: bad data from nsqd: {ev.text}"))
                    return
            elif kind is ConnectionClosed:
                self._fail(ConnectionFailed(f"{self.address} closed the connection"))
                return

    def _expect_switch_ok(self) -> None:
        """TLS or compression was switched on: nsqd's next ``OK`` confirms it (before the
        answer to anything we send later), and :meth:`connect` waits for it."""
        ok = self._loop.create_future()
        self._answers.appendleft(ok)
        self._switches.append(ok)

    def _answer(self, ev: Response) -> None:
        if not self._answers:
            return
        fut = self._answers.popleft()
        if not fut.done():
            fut.set_result(ev)

    def _error(self, ev: Error) -> None:
        if not ev.fatal:
            parts = ev.text.split()
            mid = parts[1].encode() if len(parts) > 1 else None
            if self.on_refused is not None:
                self.on_refused(self, ev, mid)
            return
        exc = NSQError(ev.code, ev.text)
        if self._answers:
            fut = self._answers.popleft()
            if not fut.done():
                fut.set_exception(exc)
        self._fail(exc)

    # -- liveness and closing -------------------------------------------------------

    def _arm_watchdog(self) -> None:
        timeout = self.config.read_timeout
        if timeout is None:
            hb = self.config.heartbeat_interval
            if hb is None or hb <= 0:
                return
            timeout = 2 * hb
        self._check_alive(timeout)

    def _check_alive(self, timeout: float) -> None:
        silent = time.monotonic() - self.last_recv
        if silent > timeout:
            self._fail(ConnectionFailed(f"{self.address}: nothing received for {silent:.1f} s"))
            return
        self._watchdog = self._loop.call_later(timeout - silent + 0.01, self._check_alive,
                                               timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionFailed(f"{self.address} connection lost: {exc}") if exc else None)

    def _fail(self, exc: BaseException | None) -> BaseException | None:
        """Close for good; every waiting command gets ``exc`` (or ConnectionFailed)."""
        if self.closed.done():
            return exc
        if self._watchdog is not None:
            self._watchdog.cancel()
        err = exc or ConnectionFailed(f"{self.address} closed")
        while self._answers:
            fut = self._answers.popleft()
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # retrieved: nobody may be waiting any more
        if self.transport is not None:
            self._flush()
            self.transport.close()
        self.closed.set_result(exc)
        if exc is not None:
            log.info("nsqviz.clients.nsq: %s: %s", self.address, exc)
        if self.on_close is not None:
            self.on_close(self, exc)
        return exc

    async def cls(self, timeout: float = 5.0) -> bool:
        """CLS (when subscribed): nsqd sends no more messages; True once ``CLOSE_WAIT``
        came back within ``timeout``."""
        if self.closed.done() or self.codec.state is not State.SUBSCRIBED:
            return False
        with contextlib.suppress(NSQError, ConnectionError, TimeoutError, LocalProtocolError):
            await asyncio.wait_for(self.command(Cls()), timeout)
            return True
        return False

    async def close(self, *, cls: bool = True, timeout: float = 5.0) -> None:
        """Close: with ``cls``, CLS and wait for ``CLOSE_WAIT`` first."""
        if cls:
            await self.cls(timeout)
        self._fail(None)


def _unverified_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx
