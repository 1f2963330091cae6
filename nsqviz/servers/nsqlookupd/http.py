"""nsqlookupd v1.3.0's HTTP API: what consumers poll to find nsqd.

``/lookup?topic=`` (channels + active producers), ``/topics``, ``/channels?topic=``,
``/nodes``, ``/ping``, ``/info``, and the admin ``POST`` endpoints ``/topic/create``,
``/topic/delete``, ``/channel/create``, ``/channel/delete``, ``/topic/tombstone``.
JSON shapes, status codes and error messages are nsqlookupd's (its "v1" API: the
document itself, errors as ``{"message": "TOPIC_NOT_FOUND"}``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

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
from nsqviz.servers.nsqlookupd.registry import Registry

__all__ = ["serve_http"]


class Service(Protocol):
    """What the HTTP API reads of the service (:class:`~nsqviz.servers.nsqlookupd.server.Lookupd`),
    named here so that this module does not import the server that starts it."""

    @property
    def registry(self) -> Registry: ...


async def serve_http(lookupd: Service, host: str, port: int) -> asyncio.base_events.Server:
    return await serve(route_table(_ROUTES, lookupd), host, port,
                       max_body_size=5 * 1024 * 1024, timeout=60.0)


def _topic(query: Query) -> str:
    name = arg(query, "topic")
    if name is None:
        raise HTTPError(400, "MISSING_ARG_TOPIC")
    return name


def _topic_channel(query: Query) -> tuple[str, str]:
    """nsq's ``GetTopicChannelArgs``: both present and valid."""
    topic = _topic(query)
    if not is_valid_topic_name(topic):
        raise HTTPError(400, "INVALID_ARG_TOPIC")
    channel = arg(query, "channel")
    if channel is None:
        raise HTTPError(400, "MISSING_ARG_CHANNEL")
    if not is_valid_channel_name(channel):
        raise HTTPError(400, "INVALID_ARG_CHANNEL")
    return topic, channel


def _ping(lookupd: Service, query: Query, body: bytes) -> Reply:
    return text(b"OK")


def _info(lookupd: Service, query: Query, body: bytes) -> Reply:
    return json_reply({"version": VERSION})


def _topics(lookupd: Service, query: Query, body: bytes) -> Reply:
    regs = lookupd.registry.find_registrations("topic", "*", "")
    return json_reply({"topics": [r[1] for r in regs]})


def _channels(lookupd: Service, query: Query, body: bytes) -> Reply:
    regs = lookupd.registry.find_registrations("channel", _topic(query), "*")
    return json_reply({"channels": [r[2] for r in regs]})


def _lookup(lookupd: Service, query: Query, body: bytes) -> Reply:
    reg = lookupd.registry
    topic = _topic(query)
    if not reg.find_registrations("topic", topic, ""):
        raise HTTPError(404, "TOPIC_NOT_FOUND")
    channels = [r[2] for r in reg.find_registrations("channel", topic, "*")]
    producers = reg.active(reg.find_producers("topic", topic, ""), time.monotonic())
    return json_reply({"channels": channels, "producers": [p.peer.json() for p in producers]})


def _nodes(lookupd: Service, query: Query, body: bytes) -> Reply:
    reg = lookupd.registry
    now = time.monotonic()
    nodes = []
    for p in reg.active(reg.find_producers("client", "", ""), now, tombstones=False):
        topics = [r[1] for r in reg.registrations_of(p.peer.id) if r[0] == "topic"]
        tombstones = []
        for t in topics:
            mine = [tp for tp in reg.find_producers("topic", t, "") if tp.peer is p.peer]
            tombstones.append(bool(mine) and mine[0].is_tombstoned(reg.tombstone_lifetime, now))
        nodes.append({**p.peer.json(), "tombstones": tombstones, "topics": topics})
    return json_reply({"producers": nodes})


def _topic_create(lookupd: Service, query: Query, body: bytes) -> Reply:
    topic = _topic(query)
    if not is_valid_topic_name(topic):
        raise HTTPError(400, "INVALID_ARG_TOPIC")
    lookupd.registry.add_registration(("topic", topic, ""))
    return empty()


def _topic_delete(lookupd: Service, query: Query, body: bytes) -> Reply:
    reg = lookupd.registry
    topic = _topic(query)
    for key in reg.find_registrations("channel", topic, "*"):
        reg.remove_registration(key)
    for key in reg.find_registrations("topic", topic, ""):
        reg.remove_registration(key)
    return empty()


def _tombstone(lookupd: Service, query: Query, body: bytes) -> Reply:
    topic = _topic(query)
    node = arg(query, "node")
    if node is None:
        raise HTTPError(400, "MISSING_ARG_NODE")
    lookupd.registry.tombstone(topic, node, time.monotonic())
    return empty()


def _channel_create(lookupd: Service, query: Query, body: bytes) -> Reply:
    topic, channel = _topic_channel(query)
    lookupd.registry.add_registration(("channel", topic, channel))
    lookupd.registry.add_registration(("topic", topic, ""))
    return empty()


def _channel_delete(lookupd: Service, query: Query, body: bytes) -> Reply:
    reg = lookupd.registry
    topic, channel = _topic_channel(query)
    regs = reg.find_registrations("channel", topic, channel)
    if not regs:
        raise HTTPError(404, "CHANNEL_NOT_FOUND")
    for key in regs:
        reg.remove_registration(key)
    return empty()


_ROUTES = {
    "/ping": (GET, _ping),
    "/info": (GET, _info),
    "/lookup": (GET, _lookup),
    "/topics": (GET, _topics),
    "/channels": (GET, _channels),
    "/nodes": (GET, _nodes),
    "/topic/create": (POST, _topic_create),
    "/topic/delete": (POST, _topic_delete),
    "/channel/create": (POST, _channel_create),
    "/channel/delete": (POST, _channel_delete),
    "/topic/tombstone": (POST, _tombstone),
}
