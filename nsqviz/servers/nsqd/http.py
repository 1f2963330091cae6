"""The HTTP API subset of nsqd v1.3.0: ping, info, stats, pub, mpub, topic/channel admin.

Responses follow nsqd's v1 API: ``OK`` as text for /ping, /pub and /mpub, JSON for
/info and /stats, and errors as ``{"message": "CODE"}`` with nsqd's status codes
(``MISSING_ARG_TOPIC``, ``INVALID_TOPIC``, ``MSG_EMPTY``, ``MSG_TOO_BIG`` ...). A small
HTTP/1.1 server of :mod:`nsqviz.servers.httpd`.
"""

from __future__ import annotations

import asyncio
import socket
from struct import Struct
from typing import Any

from nsqviz.nsq import fastpath
from nsqviz.nsq.events import Mpub
from nsqviz.nsq.grammar_errors import GrammarError
from nsqviz.nsq.refusals import nsqd_answer
from nsqviz.nsq.wire import is_valid_channel_name, is_valid_topic_name
from nsqviz.servers.goflags import VERSION
from nsqviz.servers.httpd import (
    GET,
    POST,
    HTTPError,
    Query,
    Reply,
    arg,
    empty,
    json_reply,
    route_table,
    serve,
    text,
)
from nsqviz.servers.nsqd.message import BrokerMessage
from nsqviz.servers.nsqd.stats import stats, stats_text

__all__ = ["serve_http"]

_I32 = Struct(">i")


async def serve_http(broker: Any, host: str, port: int) -> asyncio.base_events.Server:
    return await serve(route_table(_ROUTES, broker), host, port,
                       max_body_size=broker.opts.max_body_size,
                       timeout=broker.opts.client_timeout)


def _topic_arg(query: Query, invalid: str | None = "INVALID_TOPIC") -> str:
    """The ``topic`` parameter; ``invalid`` is nsqd's code for a bad name (the channel
    endpoints say ``INVALID_ARG_TOPIC``; /topic/delete does not check the name)."""
    name = arg(query, "topic")
    if name is None:
        raise HTTPError(400, "MISSING_ARG_TOPIC")
    if invalid and not is_valid_topic_name(name):
        raise HTTPError(400, invalid)
    return name


def _channel_arg(query: Query) -> str:
    name = arg(query, "channel")
    if name is None:
        raise HTTPError(400, "MISSING_ARG_CHANNEL")
    if not is_valid_channel_name(name):
        raise HTTPError(400, "INVALID_ARG_CHANNEL")
    return name


def _ping(broker: Any, query: Query, body: bytes) -> Reply:
    return text(b"OK")


def _info(broker: Any, query: Query, body: bytes) -> Reply:
    o = broker.opts
    return json_reply({
        "version": VERSION,
        "broadcast_address": o.broadcast_address or socket.gethostname(),
        "hostname": socket.gethostname(),
        "http_port": broker.http_port,
        "tcp_port": broker.tcp_port,
        "start_time": broker.start_time,
        # durations in nanoseconds, as Go marshals a time.Duration
        "max_heartbeat_interval": round(o.max_heartbeat_interval * 1e9),
        "max_output_buffer_size": o.max_output_buffer_size,
        "max_output_buffer_timeout": round(o.max_output_buffer_timeout * 1e9),
        "max_deflate_level": o.max_deflate_level,
    })


def _stats(broker: Any, query: Query, body: bytes) -> Reply:
    topic = arg(query, "topic")
    channel = arg(query, "channel")
    include_clients = arg(query, "include_clients") in (None, "1", "t", "T", "true", "TRUE",
                                                        "True")  # Go's ParseBool
    data = stats(broker, topic=topic, channel=channel, include_clients=include_clients)
    if arg(query, "format") == "json":
        return json_reply(data)
    return text(stats_text(data).encode())


def _pub(broker: Any, query: Query, body: bytes) -> Reply:
    if len(body) > broker.opts.max_msg_size:
        raise HTTPError(413, "MSG_TOO_BIG")
    if not body:
        raise HTTPError(400, "MSG_EMPTY")
    name = _topic_arg(query)
    defer = 0.0
    raw = arg(query, "defer")
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
    return text(b"OK")


def _mpub(broker: Any, query: Query, body: bytes) -> Reply:
    name = _topic_arg(query)
    opts = broker.opts
    bodies: list[bytes] = []
    if arg(query, "binary") in ("true", "1"):
        # the binary body is an MPUB command's body: decode it with the shared fast path
        command = b"MPUB " + name.encode() + b"\n" + _I32.pack(len(body)) + body
        try:
            event = fastpath.decode_command(command)
        except GrammarError as exc:
            # nsqd answers 413 with the code its TCP MPUB would have sent, minus "E_"
            code, _ = nsqd_answer(command, command.index(b"\n"), exc)
            raise HTTPError(413, str(code)[2:]) from None
        assert isinstance(event, Mpub)  # the command is an MPUB's
        if not event.bodies or len(event.bodies) > (opts.max_body_size - 4) // 5:
            raise HTTPError(413, "BAD_BODY")
        if any(len(b) > opts.max_msg_size for b in event.bodies):
            raise HTTPError(413, "BAD_MESSAGE")  # readMPUB's E_BAD_MESSAGE "message too big"
        bodies = list(event.bodies)
    else:
        for line in body.split(b"\n"):
            if not line:
                continue
            if len(line) > opts.max_msg_size:
                raise HTTPError(413, "MSG_TOO_BIG")
            bodies.append(line)
    topic = broker.get_topic(name)  # nsqd: an MPUB of no lines is a 200 that adds nothing
    topic.put_many([BrokerMessage(broker.new_id(), b) for b in bodies])
    return text(b"OK")


def _topic_create(broker: Any, query: Query, body: bytes) -> Reply:
    broker.get_topic(_topic_arg(query))
    return empty()


def _topic_delete(broker: Any, query: Query, body: bytes) -> Reply:
    name = _topic_arg(query, invalid=None)
    if not broker.delete_topic(name):
        raise HTTPError(404, "TOPIC_NOT_FOUND")
    return empty()


def _channel_create(broker: Any, query: Query, body: bytes) -> Reply:
    name = _topic_arg(query, "INVALID_ARG_TOPIC")
    channel = _channel_arg(query)
    topic = broker.topics.get(name)
    if topic is None:  # nsqd creates channels of existing topics only
        raise HTTPError(404, "TOPIC_NOT_FOUND")
    topic.get_channel(channel)
    return empty()


def _channel_delete(broker: Any, query: Query, body: bytes) -> Reply:
    name = _topic_arg(query, "INVALID_ARG_TOPIC")
    channel = _channel_arg(query)
    topic = broker.topics.get(name)
    if topic is None:
        raise HTTPError(404, "TOPIC_NOT_FOUND")
    if channel not in topic.channels:
        raise HTTPError(404, "CHANNEL_NOT_FOUND")
    topic.delete_channel(channel)
    return empty()


_ROUTES = {
    "/ping": (GET, _ping),
    "/info": (GET, _info),
    "/stats": (GET, _stats),
    "/pub": (POST, _pub),
    "/mpub": (POST, _mpub),
    "/topic/create": (POST, _topic_create),
    "/topic/delete": (POST, _topic_delete),
    "/channel/create": (POST, _channel_create),
    "/channel/delete": (POST, _channel_delete),
}
