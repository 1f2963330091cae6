"""The HTTP API subset of nsqd v1.3.0: ping, info, stats, pub, mpub, topic/channel admin.

Responses follow nsqd's v1 API: ``OK`` as text for /ping, /pub and /mpub, JSON for
/info and /stats, and errors as ``{"message": "CODE"}`` with nsqd's status codes
(``MISSING_ARG_TOPIC``, ``INVALID_TOPIC``, ``MSG_EMPTY``, ``MSG_TOO_BIG`` ...). A small
HTTP/1.1 server of :mod:`nsqviz.servers.httpd`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence
from typing import Any

from nsqviz.nsq import fastpath
from nsqviz.nsq.events import Mpub
from nsqviz.nsq.grammar_errors import GrammarError
from nsqviz.nsq.refusals import nsqd_answer
from nsqviz.servers.goflags import VERSION
from nsqviz.servers.httpd import (
    GET,
    POST,
    TEXT,
    BodyLimit,
    HTTPError,
    Query,
    Reply,
    Routes,
    arg,
    channel_arg,
    empty,
    json_reply,
    route_table,
    serve,
    text,
    topic_arg,
)
from nsqviz.servers.nsqd.stats import stats, stats_text
from nsqviz.stream.sizes import INT32

__all__ = ["serve_http"]


log = logging.getLogger(__name__)


async def serve_http(broker: Any, host: str, port: int) -> asyncio.base_events.Server:
    return await serve(route_table(_ROUTES, broker), host, port,
                       max_body_size=broker.opts.max_body_size,
                       timeout=broker.opts.client_timeout)


def _ping(broker: Any, query: Query, body: bytes) -> Reply:
    """nsqd's health: ``OK``, or 500 with ``NOK - <error>`` after a write to a disk queue
    failed (until one succeeds again)."""
    if broker.health != "OK":
        return 500, broker.health.encode(), TEXT
    return text(b"OK")


def _msg_limit(broker: Any) -> BodyLimit:
    """nsqd's /pub reads at most --max-msg-size bytes: more is ``MSG_TOO_BIG``."""
    return BodyLimit(broker.opts.max_msg_size, "MSG_TOO_BIG")


def _put(broker: Any, topic_name: str, bodies: Sequence[bytes], defer: float = 0.0) -> None:
    """Queue a publish's messages; a disk queue that cannot be written is nsqd's 503
    ``EXITING`` (its ``PutMessage`` failed)."""
    topic = broker.get_topic(topic_name)
    try:
        topic.publish(broker.ids.batch(bodies), defer)
    except OSError as exc:
        log.error("TOPIC(%s): failed to write message to backend - %s", topic_name, exc)
        raise HTTPError(503, "EXITING") from None


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
    # a body past --max-msg-size was refused by the server (see _msg_limit)
    if not body:
        raise HTTPError(400, "MSG_EMPTY")
    name = topic_arg(query, "INVALID_TOPIC")
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
    _put(broker, name, (body,), defer)
    return text(b"OK")


def _mpub(broker: Any, query: Query, body: bytes) -> Reply:
    name = topic_arg(query, "INVALID_TOPIC")
    opts = broker.opts
    bodies: list[bytes] = []
    if arg(query, "binary") in ("true", "1"):
        # the binary body is an MPUB command's body: decode it with the shared fast path
        command = b"MPUB " + name.encode() + b"\n" + INT32.pack(len(body)) + body
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
    # nsqd: an MPUB of no lines is a 200 that adds nothing (the topic is created)
    _put(broker, name, bodies)
    return text(b"OK")


def _topic_create(broker: Any, query: Query, body: bytes) -> Reply:
    broker.get_topic(topic_arg(query, "INVALID_TOPIC"))
    return empty()


def _topic_delete(broker: Any, query: Query, body: bytes) -> Reply:
    name = topic_arg(query, invalid=None)
    if not broker.delete_topic(name):
        raise HTTPError(404, "TOPIC_NOT_FOUND")
    return empty()


def _channel_create(broker: Any, query: Query, body: bytes) -> Reply:
    name = topic_arg(query)
    channel = channel_arg(query)
    topic = broker.topics.get(name)
    if topic is None:  # nsqd creates channels of existing topics only
        raise HTTPError(404, "TOPIC_NOT_FOUND")
    topic.get_channel(channel)
    return empty()


def _channel_delete(broker: Any, query: Query, body: bytes) -> Reply:
    name = topic_arg(query)
    channel = channel_arg(query)
    topic = broker.topics.get(name)
    if topic is None:
        raise HTTPError(404, "TOPIC_NOT_FOUND")
    if channel not in topic.channels:
        raise HTTPError(404, "CHANNEL_NOT_FOUND")
    topic.delete_channel(channel)
    return empty()


_ROUTES: Routes = {
    "/ping": (GET, _ping),
    "/info": (GET, _info),
    "/stats": (GET, _stats),
    "/pub": (POST, _pub, _msg_limit),
    "/mpub": (POST, _mpub),
    "/topic/create": (POST, _topic_create),
    "/topic/delete": (POST, _topic_delete),
    "/channel/create": (POST, _channel_create),
    "/channel/delete": (POST, _channel_delete),
}
