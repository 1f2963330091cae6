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
  what nsqd's body-reading handlers (/pub, /mpub) answer when the read fails.

Three readings stay h11's, stricter or more RFC 9112-minded than Go 1.19's, none of them
a body read two ways: a ``Content-Length`` list of equal values is read as that value
(Go: 400), an empty ``Content-Length`` is refused (Go: no body), and chunked encoding is
decoded on an HTTP/1.0 request (Go ignores it there).
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

import h11

from nsqviz.servers.listen import listen_backlog

__all__ = [
    "GET", "GO_MAX_HEADER_BYTES", "POST", "HTTPError", "HTTPServerConnection",
    "Query", "Reply", "Route", "arg", "empty", "error_body", "json_reply", "route_table",
    "serve", "text",
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

Reply = tuple[int, bytes, str | None]
Query = dict[str, list[str]]
BodyHandler = Callable[[bytes], Reply]
Route = Callable[[str, str, Query], BodyHandler]
Handler = Callable[..., Reply]


class HTTPError(Exception):
    """An error answer: ``status`` and nsqd's message code (``MISSING_ARG_TOPIC`` ...)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


JSON = "application/json; charset=utf-8"
TEXT = "text/plain; charset=utf-8"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()  # as Go's encoding/json


def error_body(code: str) -> bytes:
    return _dumps({"message": code})


def json_reply(obj: Any) -> Reply:
    return 200, _dumps(obj), JSON


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


def _fixed(reply: Reply) -> BodyHandler:
    """The handler of a request no service handler takes: its answer ignores the body."""
    return lambda body: reply


class HTTPServerConnection:
    """One HTTP/1.1 connection, server side, sans-IO: :meth:`receive` takes the bytes
    that arrived (``b""`` for the peer's close) and returns the bytes to send; when
    :attr:`closed` is true the caller sends them and closes.

    Requests are answered in order (keep-alive and pipelining); a body above
    ``max_body_size`` is refused (413) without being read.
    """

    def __init__(self, route: Route, *, max_body_size: int):
        self._route = route
        self._max_body = max_body_size
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=GO_MAX_HEADER_BYTES)
        self._request: h11.Request | None = None
        self._handler: BodyHandler | None = None
        self._reads_body = False
        self._body: list[bytes] = []
        self._size = 0
        self._line_checked = False
        self._out = bytearray()
        self.closed = False

    def receive(self, data: bytes) -> bytes:
        self._out = bytearray()
        if not data:
            self._h11.receive_data(b"")
            self._drain(b"")
        pos = 0
        while pos < len(data) and not self.closed:
            head = self._h11.their_state is h11.IDLE
            piece = data[pos : pos + _PIECE] if head else data[pos:]
            pos += len(piece)
            self._h11.receive_data(piece)
            self._drain(piece)
        return bytes(self._out)

    def _drain(self, piece: bytes) -> None:
        while not self.closed:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                if self._handler is not None and not self._reads_body:
                    self._answer(*self._handler(b""), close=True)
                elif self._request is not None:
                    self._answer(500, error_body("INTERNAL_ERROR"), JSON, close=True)
                else:
                    self._answer(*_go_error(exc.error_status_hint), close=True)
                return
            if event is h11.NEED_DATA:
                self._need_data(piece)
                return
            if isinstance(event, h11.Request):
                self._start(event)
            elif isinstance(event, h11.Data):
                self._size += len(event.data)
                if self._size > self._max_body:
                    self._answer(413, error_body("BODY_TOO_BIG"), JSON, close=True)
                    return
                self._body.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._finish()
            else:  # ConnectionClosed, or PAUSED after an answer that ends the connection
                self.closed = True

    def _need_data(self, piece: bytes) -> None:
        if (self._h11.their_state is h11.IDLE and not self._line_checked
                and b"\n" in piece):
            pending, _ = self._h11.trailing_data  # the incomplete head: copied once a line
            end = pending.find(b"\n")
            self._line_checked = end >= 0
            if end >= 0 and _bad_request_line(pending[:end].rstrip(b"\r")):
                self._answer(*_go_error(400), close=True)
                return
        if self._h11.they_are_waiting_for_100_continue and self._handler is not None:
            if self._reads_body:
                self._out += self._h11.send(h11.InformationalResponse(status_code=100,
                                                                      headers=[]))
            else:  # no body is asked for: the answer, and the connection ends
                self._answer(*self._handler(b""), close=True)

    def _start(self, request: h11.Request) -> None:
        self._request = request
        if request.http_version[:1] != b"1":
            self._answer(505, b"505 HTTP Version Not Supported: unsupported protocol version",
                         TEXT, close=True)
            return
        fields = {k.lower(): v for k, v in request.headers.raw_items()}  # h11 allows one
        # Content-Length, checked; Expect and Transfer-Encoding are read here only
        if fields.get(b"expect", b"100-continue").lower() != b"100-continue":
            self._answer(*_go_error(417), close=True)
            return
        declared = 0 if b"transfer-encoding" in fields else int(  # chunked: counted as it
            fields.get(b"content-length", b"0"))                   # comes (see _drain)
        if declared > self._max_body:  # refused unread: a hostile size is not allocated
            self._answer(413, error_body("BODY_TOO_BIG"), JSON, close=True)
            return
        method = request.method.decode("ascii")
        target = request.target.decode("latin-1")
        if method == "OPTIONS" and target == "*":
            self._handler = _fixed((200, b"", None))
            return
        url = urllib.parse.urlsplit(target)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        try:
            self._handler = self._route(method, url.path, query)
            self._reads_body = True
        except HTTPError as exc:  # no handler (404, 405): the body is not read
            self._handler = _fixed((exc.status, error_body(exc.message), JSON))

    def _finish(self) -> None:
        request, handler = self._request, self._handler
        assert request is not None and handler is not None  # set by the Request event
        try:
            status, data, ctype = handler(b"".join(self._body))
        except HTTPError as exc:
            status, data, ctype = exc.status, error_body(exc.message), JSON
        except Exception:  # a bug must not kill the server; say so like nsqd's 500
            log.exception("HTTP %s %s failed", request.method, request.target)
            status, data, ctype = 500, error_body("INTERNAL_ERROR"), JSON
        self._answer(status, data, ctype, close=False)

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
        self._request, self._handler, self._body, self._size = None, None, [], 0
        self._line_checked = self._reads_body = False
        if h.our_state is h11.DONE and h.their_state is h11.DONE:
            h.start_next_cycle()
        else:
            self.closed = True


async def serve(route: Route, host: str, port: int, *, max_body_size: int,
                timeout: float) -> asyncio.base_events.Server:
    """Listen on ``host:port``; a client that has not completed a request within
    ``timeout`` seconds of the last answer (or its connect) is dropped, and a body above
    ``max_body_size`` is refused (413) without being read."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = HTTPServerConnection(route, max_body_size=max_body_size)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while not conn.closed:
                data = await asyncio.wait_for(reader.read(65536), deadline - loop.time())
                out = conn.receive(data)
                if out:
                    writer.write(out)
                    await writer.drain()
                    deadline = loop.time() + timeout
                if not data:
                    break
            if conn.closed:
                await _linger(reader, writer)
        except (ConnectionError, TimeoutError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port, reuse_address=True,
                                      backlog=listen_backlog())


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Go's close after an answer: half-close, then read and drop what the client still
    sends for up to :data:`_LINGER` seconds -- closing with unread input would send an
    RST, and the client's kernel would drop the answer it has not read yet."""
    writer.write_eof()
    loop = asyncio.get_running_loop()
    until = loop.time() + _LINGER
    while await asyncio.wait_for(reader.read(65536), max(until - loop.time(), 0)):
        pass


def arg(query: Query, name: str) -> str | None:
    """The first value of a query parameter (``None`` if absent)."""
    values = query.get(name)
    return values[0] if values else None


def route_table(routes: Mapping[str, tuple[tuple[str, ...], Handler]],
                *context: object) -> Route:
    """A :data:`Route` from ``{path: (methods, handler)}``; each handler is called as
    ``handler(*context, query, body)``."""

    def route(method: str, path: str, query: Query) -> BodyHandler:
        entry = routes.get(path)
        if entry is None:
            raise HTTPError(404, "NOT_FOUND")
        methods, fn = entry
        if method not in methods:
            raise HTTPError(405, "METHOD_NOT_ALLOWED")
        return lambda body: fn(*context, query, body)

    return route


GET = ("GET",)  # nsqd's router answers HEAD and PUT with 405
POST = ("POST",)
