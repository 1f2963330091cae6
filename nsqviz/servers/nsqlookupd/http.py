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

from nsqviz.nsq.framing import DEFAULT_MAX_BODY_SIZE
from nsqviz.servers.goflags import VERSION
from nsqviz.servers.httpd import (
    GET,
    JSON,
    POST,
    SLICE,
    HTTPError,
    Query,
    Reply,
    Routes,
    arg,
    channel_arg,
    dumps,
    empty,
    json_array,
    json_reply,
    route_table,
    serve,
    text,
    topic_arg,
)
from nsqviz.servers.nsqlookupd.registry import Registry

__all__ = ["serve_http"]


class Service(Protocol):
    """What the HTTP API reads of the service (:class:`~nsqviz.servers.nsqlookupd.server.Lookupd`),
    named here so that this module does not import the server that starts it."""

    @property
    def registry(self) -> Registry: ...


async def serve_http(lookupd: Service, host: str, port: int) -> asyncio.base_events.Server:
    # nsqlookupd's HTTP server bounds no body; ours takes nsqd's --max-body-size default
    return await serve(route_table(_ROUTES, lookupd), host, port,
                       max_body_size=DEFAULT_MAX_BODY_SIZE, timeout=60.0)


def _topic_channel(query: Query) -> tuple[str, str]:
    """nsq's ``GetTopicChannelArgs``: both present and valid."""
    return topic_arg(query), channel_arg(query)


def _ping(lookupd: Service, query: Query, body: bytes) -> Reply:
    return text(b"OK")


def _info(lookupd: Service, query: Query, body: bytes) -> Reply:
    return json_reply({"version": VERSION})


async def _topics(lookupd: Service, query: Query, body: bytes) -> Reply:
    regs = lookupd.registry.find_registrations("topic", "*", "")
    return _json_of(b"topics", await json_array([r[1] for r in regs]))


async def _channels(lookupd: Service, query: Query, body: bytes) -> Reply:
    regs = lookupd.registry.find_registrations("channel", topic_arg(query, invalid=None), "*")
    return _json_of(b"channels", await json_array([r[2] for r in regs]))


def _lookup(lookupd: Service, query: Query, body: bytes) -> Reply:
    reg = lookupd.registry
    topic = topic_arg(query, invalid=None)
    if not reg.find_registrations("topic", topic, ""):
        raise HTTPError(404, "TOPIC_NOT_FOUND")
    channels = [r[2] for r in reg.find_registrations("channel", topic, "*")]
    producers = reg.active(reg.find_producers("topic", topic, ""), time.monotonic())
    return json_reply({"channels": channels, "producers": [p.peer.json() for p in producers]})


async def _nodes(lookupd: Service, query: Query, body: bytes) -> Reply:
    """Every active nsqd with its topics, each with its tombstone (tombstoned nsqd are
    not left out here). Built a slice at a time (:func:`~nsqviz.servers.httpd.json_array`):
    nsqadmin polls it, and 100,000 topics must not hold up PINGs and REGISTERs."""
    reg = lookupd.registry
    now = time.monotonic()
    lifetime = reg.tombstone_lifetime
    nodes = []
    for p in reg.active(reg.find_producers("client", "", ""), now, tombstones=False):
        mine = reg.registrations_of(p.peer.id)
        keys = list(mine)  # a copy: registrations may come and go between slices
        topics: list[str] = []
        tombs: list[bool] = []
        for start in range(0, len(keys), SLICE):
            for r in keys[start:start + SLICE]:
                producer = mine.get(r)
                if r[0] == "topic" and producer is not None:
                    topics.append(r[1])
                    tombs.append(producer.is_tombstoned(lifetime, now))
            await asyncio.sleep(0)
        tombstones, topics_json = await json_array(tombs), await json_array(topics)
        peer = dumps(p.peer.json())[:-1]
        nodes.append(peer + b',"tombstones":' + tombstones + b',"topics":' + topics_json + b"}")
    return 200, b'{"producers":[' + b",".join(nodes) + b"]}", JSON


def _json_of(key: bytes, array: bytes) -> Reply:
    """``{"key": array}``, the array already JSON."""
    return 200, b'{"' + key + b'":' + array + b"}", JSON


def _topic_create(lookupd: Service, query: Query, body: bytes) -> Reply:
    topic = topic_arg(query)
    lookupd.registry.add_registration(("topic", topic, ""))
    return empty()


def _topic_delete(lookupd: Service, query: Query, body: bytes) -> Reply:
    reg = lookupd.registry
    topic = topic_arg(query, invalid=None)
    for key in reg.find_registrations("channel", topic, "*"):
        reg.remove_registration(key)
    for key in reg.find_registrations("topic", topic, ""):
        reg.remove_registration(key)
    return empty()


def _tombstone(lookupd: Service, query: Query, body: bytes) -> Reply:
    topic = topic_arg(query, invalid=None)
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


_ROUTES: Routes = {
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
