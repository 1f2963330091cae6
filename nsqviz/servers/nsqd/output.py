"""What a broker connection writes, and when it gives up on a client: messages buffered
up to ``output_buffer_size``/``output_buffer_timeout``, responses and errors written at
once, nsqd's fatal error then close, heartbeats and the read deadline of two heartbeat
intervals. A part of :class:`nsqviz.servers.nsqd.connection.BrokerConnection`, whose state
(set up in its ``__init__``) and ``ready()``/``_teardown()`` it uses."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from nsqviz.nsq.events import Error, Response, ServerFrame
from nsqviz.nsq.server_connection import ServerConnection
from nsqviz.servers.listen import close_unread
from nsqviz.servers.nsqd.identify import Negotiated

__all__ = ["CLOSE_WAIT", "HEARTBEAT", "OK", "FatalClientError", "Output"]

log = logging.getLogger("nsqviz.servers.nsqd.connection")

OK = Response(b"OK")
HEARTBEAT = Response(b"_heartbeat_")
CLOSE_WAIT = Response(b"CLOSE_WAIT")


class FatalClientError(Exception):
    """nsqd's FatalClientErr: a handler's refusal after which the connection closes."""

    def __init__(self, code: str, text: str):
        super().__init__(f"{code} {text}")
        self.code, self.text = code, text


class Output(asyncio.Protocol):
    """Buffered output, fatal close and the two timers of a :class:`BrokerConnection`
    (an asyncio protocol: the connection it is a part of is one)."""

    # the connection's own methods, used here
    ready: Callable[[], bool]
    _teardown: Callable[[], None]

    codec: ServerConnection
    transport: asyncio.Transport | None
    loop: asyncio.AbstractEventLoop
    closed: bool
    settings: Negotiated
    remote_address: str
    _busy: bool
    _out: list[bytes]
    _out_size: int
    _flush_handle: asyncio.TimerHandle | None
    _heartbeat_handle: asyncio.TimerHandle | None
    _deadline_handle: asyncio.TimerHandle | None
    _last_read: float

    @property
    def _live(self) -> asyncio.Transport:
        """The transport: set by ``connection_made``, before anything is read or sent."""
        assert self.transport is not None
        return self.transport

    def _send_now(self, frame: ServerFrame) -> None:
        """A response or error: written at once, after any buffered messages."""
        self._out.append(self.codec.send(frame))
        self._flush()

    def _flush(self) -> None:
        if self._out and not self.closed and not self._live.is_closing():
            self._live.write(b"".join(self._out))
        self._out.clear()
        self._out_size = 0

    def _tick(self) -> None:
        """The output buffer's ticker: what a full buffer or a response did not flush
        since it was armed goes out now. A flush in between leaves it armed (nsqd's
        ticker runs on, and a timer set again after each flush cost a heap push and a
        cancel per buffer of messages)."""
        self._flush_handle = None
        self._flush()

    def _flush_if_idle(self) -> None:
        if self._out and (not self.ready() or self.settings.output_buffer_timeout <= 0):
            self._flush()

    def _fatal(self, code: str, text: str, *, unread: bool = False) -> None:
        """Send the error, then close, as nsqd does after a FatalClientErr. ``unread``:
        the client sent bytes nsqd would not have read when it closes, so it closes with
        an RST (:func:`~nsqviz.servers.listen.close_unread`)."""
        if self.closed:
            return
        try:
            # nsqd's text as it is: "invalid command " + an empty verb keeps its space
            data = f"{code} {text}" if text else code
            self._out.append(self.codec.send(Error(data.encode())))
        except Exception:  # the codec may refuse to build after its own fatal state
            log.exception("could not build error frame %s", code)
        self._flush()
        self.closed = True
        transport = self.transport
        assert transport is not None  # a connection that sent something has one
        if unread:
            close_unread(transport)
        else:
            transport.close()
        self._teardown()

    def _close_quietly(self) -> None:
        self.closed = True
        self._flush_silently()
        self._live.close()
        self._teardown()

    def abort(self) -> None:
        """Drop the connection: the broker is stopping or the channel was deleted."""
        if self.transport is not None:
            self.transport.abort()
        self._teardown()

    # -- timers ----------------------------------------------------------------------

    def _arm_heartbeat(self) -> None:
        if self._heartbeat_handle is not None:
            self._heartbeat_handle.cancel()
            self._heartbeat_handle = None
        interval = self.settings.heartbeat_interval
        if interval > 0 and not self.closed:
            self._heartbeat_handle = self.loop.call_later(interval, self._heartbeat)

    def _heartbeat(self) -> None:
        self._heartbeat_handle = None
        if self.closed:
            return
        if not self._busy:
            self._send_now(HEARTBEAT)
        self._arm_heartbeat()

    def _arm_deadline(self) -> None:
        """nsqd reads with a deadline of two heartbeat intervals (none when disabled)."""
        if self._deadline_handle is not None:
            self._deadline_handle.cancel()
            self._deadline_handle = None
        interval = self.settings.heartbeat_interval
        if self.closed or interval <= 0:
            # heartbeats off: no read deadline; check again in case they come back on
            if not self.closed:
                self._deadline_handle = self.loop.call_later(1.0, self._arm_deadline)
            return
        due = self._last_read + 2 * interval
        delay = due - time.monotonic()
        if delay <= 0 and not self._busy:
            log.info("client %s timed out (no data for %.1fs)", self.remote_address,
                     2 * interval)
            self._close_quietly()
            return
        self._deadline_handle = self.loop.call_later(max(delay, 0.05), self._arm_deadline)

    def _flush_silently(self) -> None:
        if self._out and self.transport is not None:
            self.transport.write(b"".join(self._out))
        self._out.clear()
