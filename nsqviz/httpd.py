"""A small HTTP/1.1 server on asyncio streams, shared by the broker and the lookupd.

Both speak NSQ's "v1" HTTP API: ``OK`` as text, JSON documents, and errors as
``{"message": "CODE"}`` with a status code. Requests are few and small, so no framework:
a service hands :func:`serve` a ``route(method, path, query, body)`` that returns
``(status, data, content_type)`` or raises :class:`HTTPError`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from nsqviz.listen import listen_backlog

__all__ = [
    "GET", "POST", "HTTPError", "Route", "arg", "empty", "error_body", "json_reply",
    "route_table", "serve", "text",
]

log = logging.getLogger(__name__)
_MAX_HEADER = 64 * 1024
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            413: "Request Entity Too Large", 500: "Internal Server Error"}

Reply = tuple[int, bytes, str | None]
Query = dict[str, list[str]]
"""A request's query string, as ``urllib.parse.parse_qs`` reads it."""
Route = Callable[[str, str, Query, bytes], Reply]


class HTTPError(Exception):
    """An error answer: ``status`` and nsqd's message code (``MISSING_ARG_TOPIC`` ...)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


JSON = "application/json; charset=utf-8"


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()  # as Go's encoding/json


def error_body(code: str) -> bytes:
    return _dumps({"message": code})


def json_reply(obj: object) -> Reply:
    return 200, _dumps(obj), JSON


def text(data: bytes) -> Reply:
    return 200, data, "text/plain; charset=utf-8"


def empty() -> Reply:
    """nsqd's answer to a successful admin call: 200, no body and no Content-Type."""
    return 200, b"", None


async def serve(route: Route, host: str, port: int, *, max_body_size: int,
                timeout: float) -> asyncio.base_events.Server:
    """Listen on ``host:port``; a client silent for ``timeout`` seconds is dropped and a
    body above ``max_body_size`` is refused (413) without being read."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                keep = await asyncio.wait_for(
                    _one_request(route, max_body_size, reader, writer), timeout)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                TimeoutError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port, reuse_address=True, limit=_MAX_HEADER,
                                      backlog=listen_backlog())


async def _one_request(route: Route, limit: int, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> bool:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        _respond(writer, 400, error_body("INVALID_REQUEST"), JSON, False)
        return False
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    raw_length = headers.get("content-length", "0") or "0"
    if not raw_length.isdigit():
        _respond(writer, 400, error_body("INVALID_REQUEST"), JSON, False)
        return False
    length = int(raw_length)
    keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    if length > limit:
        # refuse without reading the body (a hostile size is not allocated)
        _respond(writer, 413, error_body("BODY_TOO_BIG"), JSON, False)
        return False
    body = await reader.readexactly(length) if length else b""
    url = urllib.parse.urlsplit(target)
    query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
    try:
        status, data, ctype = route(method, url.path, query, body)
    except HTTPError as exc:
        status, data, ctype = exc.status, error_body(exc.message), JSON
    except Exception:  # a bug must not kill the server; say so like nsqd's 500
        log.exception("HTTP %s %s failed", method, target)
        status, data, ctype = 500, error_body("INTERNAL_ERROR"), JSON
    _respond(writer, status, data, ctype, keep)
    await writer.drain()
    return keep


def _respond(writer: asyncio.StreamWriter, status: int, data: bytes, ctype: str | None,
             keep: bool) -> None:
    content_type = f"Content-Type: {ctype}\r\n" if ctype else ""
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
        f"{content_type}Content-Length: {len(data)}\r\n"
        f"X-Nsq-Content-Type: nsq; version=1.0\r\n"
        f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
    )
    writer.write(head.encode("latin-1") + data)


def arg(query: Query, name: str) -> str | None:
    """The first value of a query parameter (``None`` if absent)."""
    values = query.get(name)
    return values[0] if values else None


def route_table(routes: Mapping[str, tuple[tuple[str, ...], Callable[..., Reply]]],
                *context: Any) -> Route:
    """A :data:`Route` from ``{path: (methods, handler)}``; each handler is called as
    ``handler(*context, query, body)``."""

    def route(method: str, path: str, query: Query, body: bytes) -> Reply:
        entry = routes.get(path)
        if entry is None:
            raise HTTPError(404, "NOT_FOUND")
        methods, fn = entry
        if method not in methods:
            raise HTTPError(405, "METHOD_NOT_ALLOWED")
        reply: Reply = fn(*context, query, body)
        return reply

    return route


GET = ("GET",)  # nsqd's router answers HEAD and PUT with 405
POST = ("POST",)
