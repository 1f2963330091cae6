"""Issue 33 item 2: the lookupd with many topics, in linear time, never frozen.

``/nodes`` lists every topic of every nsqd with its tombstone; it took time quadratic in
the topics (5k 2.3 s, 20k 41 s, 100k over 120 s) while nothing else was served --
nsqlookupd answers 100k in 0.3 s. Here: every endpoint answers from the registry's
indexes, and the big answers are built a slice at a time with the event loop turning
between slices (a PING waits for one slice, not for the answer). The figures are in
``benchmarks/lookupd_nodes.py``; these tests prove the shape without timing it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import struct
import time
import urllib.request

import pytest

from nsqviz.servers.nsqlookupd import http as lookupd_http
from nsqviz.servers.nsqlookupd.registry import Peer, Registry

TERMINATES = 60.0


class _Service:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry


def _registry(topics: int, peers: int = 1) -> Registry:
    reg = Registry()
    now = time.monotonic()
    for n in range(peers):
        peer = Peer(f"127.0.0.1:{40000 + n}", {"broadcast_address": "127.0.0.1",
                                                "tcp_port": 4150 + n, "http_port": 4151 + n,
                                                "version": "1.3.0", "hostname": "h"}, now)
        reg.add_producer(("client", "", ""), peer)
        for i in range(topics):
            reg.add_producer(("channel", f"t{i}", "c"), peer)
            reg.add_producer(("topic", f"t{i}", ""), peer)
    return reg


def _serve(handler, service, query):
    """Run an endpoint's handler as the server does, counting the turns the event loop
    made meanwhile (other connections' turns)."""
    async def main():
        turns = 0
        done = False

        async def other_connections():
            nonlocal turns
            while not done:
                await asyncio.sleep(0)
                turns += 1

        ticker = asyncio.ensure_future(other_connections())
        await asyncio.sleep(0)
        start = turns
        result = handler(service, query, b"")
        if inspect.isawaitable(result):
            result = await asyncio.wait_for(result, TERMINATES)
        done = True
        await ticker
        return result, turns - start

    return asyncio.run(main())


@pytest.fixture(scope="module")
def many() -> _Service:
    """50,000 topics (and a channel each) on two nsqd."""
    return _Service(_registry(50_000, peers=2))


@pytest.mark.timeout(2 * TERMINATES)
@pytest.mark.parametrize("endpoint,query", [("_nodes", {}), ("_topics", {}),
                                            ("_channels", {"topic": ["t7"]}),
                                            ("_lookup", {"topic": ["t7"]})])
def test_every_endpoint_answers_many_topics_and_lets_others_be_served(many, endpoint, query):
    """Each endpoint's answer is right, and the big ones let the event loop turn while
    they are built (main: /nodes of 20,000 topics held it 41 s)."""
    (status, body, _), turns = _serve(getattr(lookupd_http, endpoint), many, query)
    doc = json.loads(body)
    assert status == 200
    if endpoint == "_nodes":
        assert [len(p["topics"]) for p in doc["producers"]] == [50_000, 50_000]
        assert doc["producers"][0]["tombstones"] == [False] * 50_000
        assert turns >= 5  # a slice at a time
    elif endpoint == "_topics":
        assert len(doc["topics"]) == 50_000 and turns >= 5
    else:
        assert doc["channels"] == ["c"]
        if endpoint == "_lookup":
            assert len(doc["producers"]) == 2


def test_the_registry_answers_from_indexes():
    """A peer's registrations, a topic's channels and the topics are kept as they
    change, not found by walking every registration."""
    reg = _registry(3)
    assert reg.find_registrations("channel", "t1", "*") == [("channel", "t1", "c")]
    assert [r[1] for r in reg.find_registrations("topic", "*", "")] == ["t0", "t1", "t2"]
    reg.remove_registration(("channel", "t1", "c"))
    assert reg.find_registrations("channel", "t1", "*") == []
    (peer,) = reg.find_producers("client", "", "")
    mine = reg.registrations_of(peer.peer.id)
    assert ("channel", "t1", "c") not in mine and ("topic", "t1", "") in mine
    reg.remove_peer(peer.peer.id)
    assert not reg.registrations_of(peer.peer.id)
    assert reg.find_producers("topic", "t1", "") == []
    assert len(reg.find_registrations("topic", "*", "")) == 3  # topics stay (nsqlookupd)


def _register(tcp: str, topics: int) -> socket.socket:
    host, _, port = tcp.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    info = json.dumps({"broadcast_address": "127.0.0.1", "hostname": "h", "tcp_port": 4150,
                       "http_port": 4151, "version": "1.3.0"}).encode()
    commands = b"".join(b"REGISTER t%d c\nREGISTER t%d\n" % (i, i) for i in range(topics))
    sock.sendall(b"  V1IDENTIFY\n" + struct.pack(">i", len(info)) + info + commands)
    expected, got = 1 + 2 * topics, 0
    buf = b""
    while got < expected:  # the IDENTIFY answer, then an OK per REGISTER
        buf += sock.recv(1 << 20)
        while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
            buf = buf[4 + struct.unpack_from(">i", buf)[0]:]
            got += 1
    return sock


def _get(http: str, path: str):
    with urllib.request.urlopen(f"http://{http}{path}", timeout=30) as r:
        return json.loads(r.read())


def _normal(doc):
    """Without what differs by nature (the connection's port), lists as sets (Go lists
    registrations in map order, nsqviz in registration order)."""
    if isinstance(doc, dict):
        return {k: _normal(v) for k, v in doc.items() if k != "remote_address"}
    if isinstance(doc, list):
        return sorted((_normal(v) for v in doc), key=json.dumps)
    return doc


def test_many_topics_answer_as_nsqlookupd_does(real_lookupd, lookupd):
    """3,000 topics registered alike with both: the same answers from every endpoint."""
    keep = [_register(lk.tcp_address, 3000) for lk in (real_lookupd, lookupd)]
    try:
        for path in ("/nodes", "/topics", "/channels?topic=t2999", "/lookup?topic=t5"):
            theirs = _normal(_get(real_lookupd.http_address, path))
            assert _normal(_get(lookupd.http_address, path)) == theirs, path
        nodes = _get(lookupd.http_address, "/nodes")["producers"]
        assert len(nodes[0]["topics"]) == 3000
    finally:
        for sock in keep:
            sock.close()
