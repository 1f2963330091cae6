"""The HTTP/1.1 server of the broker and the lookupd: h11 parses, Go's net/http answers.

Both services speak NSQ's "v1" HTTP API: ``OK`` as text, JSON documents, and errors as
``{"message": "CODE"}`` with a status code. A service hands :func:`serve` a
``route(method, path, query)`` giving the handler that takes the body and returns
``(status, data, content_type)``; either may raise :class:`HTTPError`. The route is asked
as soon as the head is read, as Go's mux is: a 404 or 405 is answered without waiting
for (or asking with 100 Continue for) a body no handler will read.

Every byte of a request is parsed by h11 (the sans-IO HTTP/1.1 library this project's
codecs take as their model): framing ambiguities -- conflicting ``Content-Length``
headers, a length that is not digits, a malformed chunk -- are refused, never guessed,
and chunked bodies are decoded. :class:`HTTPServerConnection` is the sans-IO part (bytes
in, bytes out, no socket, no clock), so the fuzz targets drive it as the server does.
Where h11 alone would answer otherwise than Go's net/http (the server of the real nsqd
and nsqlookupd v1.3.0, built with Go 1.19), Go's rule is added on top of h11's events:

* a request line whose HTTP major version is not 1: 505;
* a first line that is not ``METHOD TARGET HTTP/x.y`` (an HTTP/0.9-style request): 400
  as soon as its line end arrives, not once a blank line does;
* an ``Expect`` other than ``100-continue``: 417;
* a head above :data:`GO_MAX_HEADER_BYTES`: 431;
* ``OPTIONS *``: 200 with no body, from the server itself;
* a chunked body that breaks its framing under a found route: 500 ``INTERNAL_ERROR``,
  what nsqd's body-reading handlers (/pub, /mpub) answer when the read fails;
* a ``Content-Length`` that is a list (``3, 3``), which h11 reads as its one value: 400,
  as Go's ``parseContentLength`` refuses anything but digits;
* a body above the endpoint's limit (nsqd's ``/pub``: ``--max-msg-size`` and
  ``MSG_TOO_BIG``; the others the server's ``max_body_size`` and ``BODY_TOO_BIG``) is
  answered 413 from its declared length without being read, or, chunked, as soon as
  the limit is passed; then the connection closes as Go's does after a body it did not
  finish: half-closed, the client's further bytes dropped for at most
  :data:`_LINGER` seconds and :data:`_LINGER_READ` bytes, then closed -- so a 100 MB
  upload is stopped after about a megabyte, not read to its end.

Three readings stay h11's, stricter or more RFC 9112-minded than Go 1.19's, none of them
a body read two ways: an empty ``Content-Length`` is refused (Go: no body), chunked
encoding is decoded on an HTTP/1.0 request (Go ignores it there), and a chunk size of
17 to 20 hex digits is read as a size (Go refuses more than 16 digits, 500; here the
body is then refused by its limit, 413, as its bytes arrive).

**What a client does is never an error of the server's.** A client that closes before
its answer, connects and sends nothing, half-closes, or resets is closed quietly (a
debug line at most) and its socket released at once; only a handler's own bug is
logged with its traceback (and answered 500, as nsqd's ``INTERNAL_ERROR``). A handler
may be a coroutine function: its request waits (the connection reads nothing more)
while the event loop serves everyone else -- the lookupd's ``/nodes`` builds its answer
a slice at a time that way (:func:`json_array`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any, NamedTuple

import h11

from nsqviz import compactjson
from nsqviz.nsq.wire import is_valid_channel_name, is_valid_topic_name
from nsqviz.servers.listen import release, start_serving

__all__ = [
    "GET", "GO_MAX_HEADER_BYTES", "JSON", "POST", "SLICE", "TEXT", "BodyLimit", "Endpoint",
    "HTTPError", "HTTPServerConnection", "Query", "Reply", "Route", "Routes", "arg",
    "channel_arg", "dumps", "empty", "error_body", "json_array", "json_reply", "route_table",
    "serve", "text", "topic_arg",
]

log = logging.getLogger(__name__)

GO_MAX_HEADER_BYTES = (1 << 20) + 4096
"""Go's ``http.DefaultMaxHeaderBytes`` (1 MiB) plus the 4096 bytes of bufio slack its
server allows: a request head past this is answered 431."""

_PIECE = 4096
"""While a head is incomplete, bytes go to h11 this many at a time, so its size bound
(:data:`GO_MAX_HEADER_BYTES`) trips within this slack of Go's, however they arrive."""

_LINGER = 0.5
"""Seconds a closing connection waits for the client's own close (Go's
``rstAvoidanceDelay``)."""

_LINGER_READ = 256 * 1024
"""Bytes a closing connection reads and drops at most (Go's
``maxPostHandlerReadBytes``): past them the rest stays unread, and the close is an RST,
as Go's is after a body it gave up on."""

SLICE = 10_000
"""Items a slow answer handles between two turns of the event loop (:func:`json_array`)."""

_LIST_LENGTH = re.compile(rb"(?im)^content-length[ \t]*:[^\r\n]*,")

Reply = tuple[int, bytes, str | None]
Query = dict[str, list[str]]
BodyHandler = Callable[[bytes], Reply | Awaitable[Reply]]
Handler = Callable[..., Reply | Awaitable[Reply]]


class BodyLimit(NamedTuple):
    """The most body bytes an endpoint reads, and nsqd's code for more (413)."""

    size: int
    code: str = "BODY_TOO_BIG"


class Endpoint(NamedTuple):
    """What a request's method and path lead to: the handler of its body (which may be a
    coroutine function) and, unless the server's, the body's limit."""

    handle: BodyHandler
    limit: BodyLimit | None = None
    reads_body: bool = True


Route = Callable[[str, str, Query], Endpoint]
Routes = Mapping[str, tuple[tuple[str, ...], Handler]
                 | tuple[tuple[str, ...], Handler, Callable[..., BodyLimit]]]
"""``{path: (methods, handler[, limit])}``, what :func:`route_table` makes a route of."""


class HTTPError(Exception):
    """An error answer: ``status`` and nsqd's message code (``MISSING_ARG_TOPIC`` ...)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


JSON = "application/json; charset=utf-8"
TEXT = "text/plain; charset=utf-8"


def dumps(obj: Any) -> bytes:
    return compactjson.encode(obj)  # as Go's encoding/json


def error_body(code: str) -> bytes:
    return dumps({"message": code})


def json_reply(obj: Any) -> Reply:
    return 200, dumps(obj), JSON


def text(data: bytes) -> Reply:
    return 200, data, TEXT


def empty() -> Reply:
    """nsqd's answer to a successful admin call: 200, no body and no Content-Type."""
    return 200, b"", None


def _go_error(status: int) -> Reply:
    """What Go's server itself answers to a request it cannot read (no handler ran)."""
    if status == 417:
        return status, b"", None
    if status == 501:
        return status, b"Unsupported transfer encoding", TEXT
    return status, f"{status} {_phrase(status)}".encode(), TEXT


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _bad_request_line(line: bytes) -> bool:
    """Whether h11 refuses ``line`` as a request line (checked alone, with a Host)."""
    probe = h11.Connection(h11.SERVER)
    probe.receive_data(line + b"\r\nHost: x\r\n\r\n")
    try:
        probe.next_event()
    except h11.RemoteProtocolError:
        return True
    return False


def _fixed(reply: Reply) -> Endpoint:
    """The endpoint of a request no service handler takes: its answer ignores the body,
    which is not read."""
    return Endpoint(lambda body: reply, reads_body=False)


async def json_array(items: Sequence[Any]) -> bytes:
    """``items`` as a JSON array, encoded :data:`SLICE` items at a time with a turn of
    the event loop between slices: a handler with a big answer (the lookupd's
    ``/nodes`` of 100,000 topics) does not hold up every other connection."""
    pieces = []
    for start in range(0, len(items), SLICE):
        pieces.append(dumps(list(items[start:start + SLICE]))[1:-1])
        await asyncio.sleep(0)
    return b"[" + b",".join(pieces) + b"]"


class HTTPServerConnection:
    """One HTTP/1.1 connection, server side, sans-IO: :meth:`receive` takes the bytes
    that arrived (``b""`` for the peer's close) and returns the bytes to send; when
    :attr:`closed` is true the caller sends them and closes.

    Requests are answered in order (keep-alive and pipelining); a body above its
    endpoint's limit is refused (413) without being read. When a handler is a coroutine,
    :attr:`waiting` holds it after :meth:`receive`: the caller awaits it, reads nothing
    more meanwhile, and hands its outcome (the reply, or the exception it raised) to
    :meth:`resume`, which answers and goes on with the bytes already received.
    """

    def __init__(self, route: Route, *, max_body_size: int):
        self._route = route
        self._max_body = BodyLimit(max_body_size)
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=GO_MAX_HEADER_BYTES)
        self._request: h11.Request | None = None
        self._endpoint: Endpoint | None = None
        self._limit = self._max_body
        self._body: list[bytes] = []
        self._size = 0
        self._head = bytearray()  # the bytes of the head being received (see _start)
        self._line_checked = False
        self._out = bytearray()
        self.waiting: Awaitable[Reply] | None = None
        self.closed = False

    def receive(self, data: bytes) -> bytes:
        assert self.waiting is None, "a handler's answer is awaited: resume() first"
        self._out = bytearray()
        if not data:
            self._h11.receive_data(b"")
            self._drain(False)
        pos = 0
        while pos < len(data) and not self.closed:
            if self.waiting is not None:  # the rest waits in h11's buffer for resume()
                self._h11.receive_data(data[pos:])
                break
            head = self._h11.their_state is h11.IDLE
            piece = data[pos : pos + _PIECE] if head else data[pos:]
            pos += len(piece)
            if head:
                self._head += piece
            self._h11.receive_data(piece)
            self._drain(b"\n" in piece)
        return bytes(self._out)

    def resume(self, outcome: Reply | BaseException) -> bytes:
        """The awaited handler's reply (or what it raised): the answer, then whatever
        the bytes received meanwhile ask for."""
        assert self.waiting is not None, "no handler is awaited"
        self.waiting = None
        self._out = bytearray()
        self._reply(outcome)
        self._drain(True)
        return bytes(self._out)

    def _drain(self, line_end: bool) -> None:
        while not self.closed and self.waiting is None:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                endpoint = self._endpoint
                if endpoint is not None and not endpoint.reads_body:
                    self._answer(*_fixed_reply(endpoint), close=True)
                elif self._request is not None:
                    self._answer(500, error_body("INTERNAL_ERROR"), JSON, close=True)
                else:
                    self._answer(*_go_error(exc.error_status_hint), close=True)
                return
            if event is h11.NEED_DATA:
                self._need_data(line_end)
                return
            if isinstance(event, h11.Request):
                self._start(event)
            elif isinstance(event, h11.Data):
                self._size += len(event.data)
                if self._size > self._limit.size:
                    self._answer(413, error_body(self._limit.code), JSON, close=True)
                    return
                self._body.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._finish()
            else:  # ConnectionClosed, or PAUSED after an answer that ends the connection
                self.closed = True

    def _need_data(self, line_end: bool) -> None:
        if self._h11.their_state is h11.IDLE and not self._line_checked and line_end:
            pending, _ = self._h11.trailing_data  # the incomplete head: copied once a line
            end = pending.find(b"\n")
            self._line_checked = end >= 0
            if end >= 0 and _bad_request_line(pending[:end].rstrip(b"\r")):
                self._answer(*_go_error(400), close=True)
                return
        endpoint = self._endpoint
        if self._h11.they_are_waiting_for_100_continue and endpoint is not None:
            if endpoint.reads_body:
                self._out += self._h11.send(h11.InformationalResponse(status_code=100,
                                                                      headers=[]))
            else:  # no body is asked for: the answer, and the connection ends
                self._answer(*_fixed_reply(endpoint), close=True)

    def _start(self, request: h11.Request) -> None:
        self._request = request
        head, self._head = bytes(self._head), bytearray()
        if request.http_version[:1] != b"1":
            self._answer(505, b"505 HTTP Version Not Supported: unsupported protocol version",
                         TEXT, close=True)
            return
        fields = {k.lower(): v for k, v in request.headers.raw_items()}  # h11 allows one
        # Content-Length, checked; Expect and Transfer-Encoding are read here only
        if fields.get(b"expect", b"100-continue").lower() != b"100-continue":
            self._answer(*_go_error(417), close=True)
            return
        if b"content-length" in fields and _LIST_LENGTH.search(_head_of(head)):
            self._answer(*_go_error(400), close=True)  # h11 took "3, 3" for 3; Go does not
            return
        method = request.method.decode("ascii")
        target = request.target.decode("latin-1")
        if method == "OPTIONS" and target == "*":
            self._endpoint = _fixed((200, b"", None))
            return
        url = urllib.parse.urlsplit(target)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        try:
            self._endpoint = endpoint = self._route(method, url.path, query)
        except HTTPError as exc:  # no handler (404, 405): the body is not read
            self._endpoint = _fixed((exc.status, error_body(exc.message), JSON))
            return
        self._limit = endpoint.limit or self._max_body
        declared = 0 if b"transfer-encoding" in fields else int(  # chunked: counted as it
            fields.get(b"content-length", b"0"))                   # comes (see _drain)
        if declared > self._limit.size:  # refused unread: a hostile size is not allocated
            self._answer(413, error_body(self._limit.code), JSON, close=True)

    def _finish(self) -> None:
        request, endpoint = self._request, self._endpoint
        assert request is not None and endpoint is not None  # set by the Request event
        try:
            result = endpoint.handle(b"".join(self._body))
        except Exception as exc:
            self._reply(exc)
            return
        if inspect.isawaitable(result):
            self.waiting = result
            return
        self._reply(result)

    def _reply(self, outcome: Reply | BaseException) -> None:
        if isinstance(outcome, HTTPError):
            outcome = outcome.status, error_body(outcome.message), JSON
        elif isinstance(outcome, BaseException):
            # a bug must not kill the server; say so like nsqd's 500
            request = self._request
            assert request is not None  # an outcome answers a request
            log.error("HTTP %s %s failed", request.method.decode(), request.target.decode(),
                      exc_info=outcome)
            outcome = 500, error_body("INTERNAL_ERROR"), JSON
        self._answer(*outcome, close=False)

    def _answer(self, status: int, data: bytes, ctype: str | None, *, close: bool) -> None:
        headers = [(b"Content-Length", str(len(data)).encode())]
        if ctype:
            headers.insert(0, (b"Content-Type", ctype.encode()))
        headers.append((b"X-Nsq-Content-Type", b"nsq; version=1.0"))
        if close:
            headers.append((b"Connection", b"close"))
        head = self._request is not None and self._request.method == b"HEAD"
        h = self._h11
        self._out += h.send(h11.Response(status_code=status, headers=headers,
                                         reason=_phrase(status).encode()))
        if data and not head:
            self._out += h.send(h11.Data(data=data))
        self._out += h.send(h11.EndOfMessage())
        self._request, self._endpoint, self._body, self._size = None, None, [], 0
        self._limit = self._max_body
        self._line_checked = False
        if h.our_state is h11.DONE and h.their_state is h11.DONE:
            h.start_next_cycle()
            self._head = bytearray(h.trailing_data[0])  # the next head's first bytes
        else:
            self.closed = True


def _fixed_reply(endpoint: Endpoint) -> Reply:
    """The answer of an endpoint that reads no body (404, 405, ``OPTIONS *``)."""
    reply = endpoint.handle(b"")
    assert isinstance(reply, tuple)  # _fixed's
    return reply


def _head_of(received: bytes) -> bytes:
    """The head of the request that starts ``received`` (h11 skips blank lines before
    it, and lines may end in a bare LF)."""
    received = received.lstrip(b"\r\n")
    ends = [i for i in (received.find(b"\r\n\r\n"), received.find(b"\n\n")) if i >= 0]
    return received[:min(ends)] if ends else received


async def serve(route: Route, host: str, port: int, *, max_body_size: int,
                timeout: float) -> asyncio.base_events.Server:
    """Listen on ``host:port``; a client that has not completed a request within
    ``timeout`` seconds of the last answer (or its connect) is dropped, and a body above
    its endpoint's limit (else ``max_body_size``) is refused (413) without being read."""
    return await start_serving(
        lambda: _HTTPProtocol(HTTPServerConnection(route, max_body_size=max_body_size),
                              timeout), host, port)


class _HTTPProtocol(asyncio.Protocol):
    """The connection's I/O: bytes to :class:`HTTPServerConnection` and its answers
    back, the idle timeout, awaited handlers, and Go's close.

    Nothing a client does raises here: a reset, a close before the answer, a
    half-close, silence -- each ends in a quiet close (asyncio itself reports a failed
    socket call at debug level only) and :func:`~nsqviz.servers.listen.release` of the
    socket."""

    def __init__(self, conn: HTTPServerConnection, timeout: float):
        self.conn = conn
        self.timeout = timeout
        self.transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._lingering = False
        self._dropped = 0  # bytes read and dropped while lingering

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)  # a TCP server's
        self.transport = transport
        self._arm(self.timeout, transport.close)

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        assert transport is not None  # connection_made came first
        if self._lingering:
            self._dropped += len(data)
            if self._dropped > _LINGER_READ:
                transport.pause_reading()  # the rest stays unread: the close is an RST
            return
        self._after(self.conn.receive(data))

    def eof_received(self) -> bool:
        if not self._lingering and self.conn.waiting is None:
            self._write(self.conn.receive(b""))
        return False  # the transport closes (after what is still to be written)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
        if self.transport is not None:
            release(self.transport)
        log.debug("HTTP connection ended: %s", exc or "closed")

    def _after(self, out: bytes) -> None:
        self._write(out)
        waiting = self.conn.waiting
        if waiting is not None:
            assert self.transport is not None  # connection_made came first
            self.transport.pause_reading()
            if self._timer is not None:
                self._timer.cancel()
            self._task = asyncio.ensure_future(self._await(waiting))
        elif self.conn.closed:
            self._linger()
        elif out:
            assert self.transport is not None  # connection_made came first
            self._arm(self.timeout, self.transport.close)

    async def _await(self, waiting: Awaitable[Reply]) -> None:
        try:
            outcome: Reply | BaseException = await waiting
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the connection says it as nsqd would (500)
            outcome = exc
        self._task = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        self._after(self.conn.resume(outcome))
        if not self._lingering and self.conn.waiting is None:
            transport.resume_reading()

    def _write(self, out: bytes) -> None:
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(out)

    def _linger(self) -> None:
        """Go's close after an answer: half-close, then drop what the client still sends
        (for up to :data:`_LINGER` seconds and :data:`_LINGER_READ` bytes) -- closing at
        once with unread input would send an RST, and the client's kernel would drop the
        answer it has not read yet."""
        transport = self.transport
        assert transport is not None  # connection_made came first
        self._lingering = True
        try:
            transport.write_eof()
        except OSError:  # the client is gone already (a reset): nothing to wait for
            transport.close()
            return
        self._arm(_LINGER, transport.close)

    def _arm(self, delay: float, then: Callable[[], None]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(delay, then)


def arg(query: Query, name: str) -> str | None:
    """The first value of a query parameter (``None`` if absent)."""
    values = query.get(name)
    return values[0] if values else None


def topic_arg(query: Query, invalid: str | None = "INVALID_ARG_TOPIC") -> str:
    """The ``topic`` parameter, as nsqd's and nsqlookupd's ``http_api`` read it: 400
    ``MISSING_ARG_TOPIC`` without one; a name nsqd's rule refuses is 400 ``invalid``
    (``/pub`` and ``/mpub`` say ``INVALID_TOPIC``; ``None``: the name is not checked,
    as nsqd's ``/topic/delete`` does not)."""
    name = arg(query, "topic")
    if name is None:
        raise HTTPError(400, "MISSING_ARG_TOPIC")
    if invalid and not is_valid_topic_name(name):
        raise HTTPError(400, invalid)
    return name


def channel_arg(query: Query) -> str:
    """The ``channel`` parameter: 400 ``MISSING_ARG_CHANNEL`` without one,
    ``INVALID_ARG_CHANNEL`` for a name nsqd's rule refuses."""
    name = arg(query, "channel")
    if name is None:
        raise HTTPError(400, "MISSING_ARG_CHANNEL")
    if not is_valid_channel_name(name):
        raise HTTPError(400, "INVALID_ARG_CHANNEL")
    return name


def route_table(routes: Routes, *context: object) -> Route:
    """A :data:`Route` from ``{path: (methods, handler[, limit])}``; each handler is
    called as ``handler(*context, query, body)``, a limit as ``limit(*context)``."""

    def route(method: str, path: str, query: Query) -> Endpoint:
        entry = routes.get(path)
        if entry is None:
            raise HTTPError(404, "NOT_FOUND")
        methods, fn = entry[0], entry[1]
        if method not in methods:
            raise HTTPError(405, "METHOD_NOT_ALLOWED")
        limit = entry[2](*context) if len(entry) == 3 else None
        return Endpoint(lambda body: fn(*context, query, body), limit)

    return route


GET = ("GET",)  # nsqd's router answers HEAD and PUT with 405
POST = ("POST",)
