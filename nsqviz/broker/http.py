"""The HTTP API subset of nsqd v1.3.0: ping, info, stats, pub, mpub, topic/channel admin.

Responses follow nsqd's v1 API: ``OK`` as text for /ping, /pub and /mpub, JSON for
/info and /stats, and errors as ``{"message": "CODE"}`` with nsqd's status codes
(``MISSING_ARG_TOPIC``, ``INVALID_TOPIC``, ``MSG_EMPTY``, ``MSG_TOO_BIG`` ...). A small
HTTP/1.1 server on asyncio streams: requests are few and small, so no framework.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import urllib.parse
from struct import Struct

from nsqviz.broker.message import BrokerMessage
from nsqviz.broker.options import VERSION
from nsqviz.broker.stats import stats, stats_text
from nsqviz.nsq import fastpath
from nsqviz.nsq.grammar import (
    BadSize,
    GrammarError,
    is_valid_channel_name,
    is_valid_topic_name,
)

__all__ = ["serve_http"]

log = logging.getLogger(__name__)
_I32 = Struct(">i")
_MAX_HEADER = 64 * 1024
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            413: "Request Entity Too Large", 500: "Internal Server Error"}


class HTTPError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


async def serve_http(broker, host: str, port: int) -> asyncio.base_events.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                # a silent or slow client is dropped after --client-timeout
                keep = await asyncio.wait_for(_one_request(broker, reader, writer),
                                              broker.opts.client_timeout)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                TimeoutError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port, reuse_address=True, limit=_MAX_HEADER)


async def _one_request(broker, reader, writer) -> bool:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        _respond(writer, 400, _err("INVALID_REQUEST"), "application/json", False)
        return False
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    raw_length = headers.get("content-length", "0") or "0"
    if not raw_length.isdigit():
        _respond(writer, 400, _err("INVALID_REQUEST"), "application/json", False)
        return False
    length = int(raw_length)
    keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    limit = broker.opts.max_body_size
    if length > limit:
        # refuse without reading the body (a hostile size is not allocated)
        _respond(writer, 413, _err("BODY_TOO_BIG"), "application/json", False)
        return False
    body = await reader.readexactly(length) if length else b""
    url = urllib.parse.urlsplit(target)
    query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
    try:
        status, data, ctype = _route(broker, method, url.path, query, body)
    except HTTPError as exc:
        status, data, ctype = exc.status, _err(exc.message), "application/json"
    except Exception:  # a bug must not kill the server; say so like nsqd's 500
        log.exception("HTTP %s %s failed", method, target)
        status, data, ctype = 500, _err("INTERNAL_ERROR"), "application/json"
    _respond(writer, status, data, ctype, keep)
    await writer.drain()
    return keep


def _respond(writer, status: int, data: bytes, ctype: str, keep: bool) -> None:
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
        f"Content-Type: {ctype}\r\nContent-Length: {len(data)}\r\n"
        f"X-Nsq-Content-Type: nsq; version=1.0\r\n"
        f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
    )
    writer.write(head.encode("latin-1") + data)


def _err(code: str) -> bytes:
    return json.dumps({"message": code}).encode()


def _json(obj) -> tuple[int, bytes, str]:
    return 200, json.dumps(obj).encode(), "application/json; charset=utf-8"


def _text(data: bytes) -> tuple[int, bytes, str]:
    return 200, data, "text/plain; charset=utf-8"


def _arg(query, name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _topic_arg(query) -> str:
    name = _arg(query, "topic")
    if name is None:
        raise HTTPError(400, "MISSING_ARG_TOPIC")
    if not is_valid_topic_name(name):
        raise HTTPError(400, "INVALID_TOPIC")
    return name


def _channel_arg(query) -> str:
    name = _arg(query, "channel")
    if name is None:
        raise HTTPError(400, "MISSING_ARG_CHANNEL")
    if not is_valid_channel_name(name):
        raise HTTPError(400, "INVALID_CHANNEL")
    return name


def _route(broker, method: str, path: str, query, body: bytes):
    route = _ROUTES.get(path)
    if route is None:
        raise HTTPError(404, "NOT_FOUND")
    methods, fn = route
    if method not in methods:
        raise HTTPError(405, "METHOD_NOT_ALLOWED")
    return fn(broker, query, body)


def _ping(broker, query, body):
    return _text(b"OK")


def _info(broker, query, body):
    o = broker.opts
    return _json({
        "version": VERSION,
        "broadcast_address": o.broadcast_address or socket.gethostname(),
        "hostname": socket.gethostname(),
        "http_port": broker.http_port,
        "tcp_port": broker.tcp_port,
        "start_time": broker.start_time,
    })


def _stats(broker, query, body):
    topic = _arg(query, "topic")
    channel = _arg(query, "channel")
    include_clients = _arg(query, "include_clients") not in ("false", "0")
    data = stats(broker, topic=topic, channel=channel, include_clients=include_clients)
    if _arg(query, "format") == "json":
        return _json(data)
    return _text(stats_text(data).encode())


def _pub(broker, query, body):
    if len(body) > broker.opts.max_msg_size:
        raise HTTPError(413, "MSG_TOO_BIG")
    if not body:
        raise HTTPError(400, "MSG_EMPTY")
    name = _topic_arg(query)
    defer = 0.0
    raw = _arg(query, "defer")
    if raw is not None:
        try:
            ms = int(raw)
        except ValueError:
            raise HTTPError(400, "INVALID_DEFER") from None
        if ms < 0 or ms > broker.opts.max_req_timeout * 1000:
            raise HTTPError(400, "INVALID_DEFER")
        defer = ms / 1000
    topic = broker.get_topic(name)
    topic.put(BrokerMessage(broker.new_id(), body), defer)
    return _text(b"OK")


def _mpub(broker, query, body):
    name = _topic_arg(query)
    opts = broker.opts
    bodies: list[bytes] = []
    if _arg(query, "binary") in ("true", "1"):
        # the binary body is an MPUB command's body: decode it with the shared fast path
        command = b"MPUB " + name.encode() + b"\n" + _I32.pack(len(body)) + body
        try:
            event = fastpath.decode_command(command)
        except BadSize:
            raise HTTPError(400, "BAD_MESSAGE") from None
        except GrammarError:
            raise HTTPError(400, "BAD_BODY") from None
        if not event.bodies or len(event.bodies) > (opts.max_body_size - 4) // 5:
            raise HTTPError(400, "BAD_BODY")
        if any(len(b) > opts.max_msg_size for b in event.bodies):
            raise HTTPError(413, "MSG_TOO_BIG")
        bodies = list(event.bodies)
    else:
        for line in body.split(b"\n"):
            if not line:
                continue
            if len(line) > opts.max_msg_size:
                raise HTTPError(413, "MSG_TOO_BIG")
            bodies.append(line)
    if not bodies:
        raise HTTPError(400, "MSG_EMPTY")
    topic = broker.get_topic(name)
    topic.put_many([BrokerMessage(broker.new_id(), b) for b in bodies])
    return _text(b"OK")


def _topic_create(broker, query, body):
    broker.get_topic(_topic_arg(query))
    return 200, b"", "text/plain; charset=utf-8"


def _topic_delete(broker, query, body):
    name = _topic_arg(query)
    if not broker.delete_topic(name):
        raise HTTPError(404, "TOPIC_NOT_FOUND")
    return 200, b"", "text/plain; charset=utf-8"


def _channel_create(broker, query, body):
    topic = broker.get_topic(_topic_arg(query))
    topic.get_channel(_channel_arg(query))
    return 200, b"", "text/plain; charset=utf-8"


def _channel_delete(broker, query, body):
    name = _topic_arg(query)
    channel = _channel_arg(query)
    topic = broker.topics.get(name)
    if topic is None:
        raise HTTPError(404, "TOPIC_NOT_FOUND")
    if channel not in topic.channels:
        raise HTTPError(404, "CHANNEL_NOT_FOUND")
    topic.delete_channel(channel)
    return 200, b"", "text/plain; charset=utf-8"


_GET = ("GET", "HEAD")
_POST = ("POST", "PUT")
_ROUTES = {
    "/ping": (_GET, _ping),
    "/info": (_GET, _info),
    "/stats": (_GET, _stats),
    "/pub": (_POST, _pub),
    "/mpub": (_POST, _mpub),
    "/topic/create": (_POST, _topic_create),
    "/topic/delete": (_POST, _topic_delete),
    "/channel/create": (_POST, _channel_create),
    "/channel/delete": (_POST, _channel_delete),
}
