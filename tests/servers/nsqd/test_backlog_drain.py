"""A backlog that waited for a first channel: the SUB that creates the channel is
answered at once, and the backlog then reaches the channel in slices (as in nsqd, memory
and disk are read side by side, so the order is not kept across them)."""

from __future__ import annotations

import time

import pytest

from nsqviz.nsq.events import Mpub, Rdy, Response, Sub
from nsqviz.servers.nsqd import topic as queues_topic
from tests.servers.nsqd._client import RawClient


@pytest.fixture
def broker_options():
    return {"mem_queue_size": 100}  # most of the backlog goes to disk


def test_sub_on_a_disk_backlog_is_answered_before_the_backlog_moves(broker, monkeypatch):
    monkeypatch.setattr(queues_topic, "DRAIN_SLICE", 50)
    publisher = RawClient(broker.tcp_address)
    bodies = [b"m%05d" % i for i in range(2000)]
    for start in range(0, len(bodies), 200):
        publisher.send(Mpub("backlog", tuple(bodies[start:start + 200])))
        assert publisher.next() == Response(b"OK")
    topic = broker.broker.topics["backlog"]
    assert topic.backlog.backend_depth == 1900
    consumer = RawClient(broker.tcp_address)
    consumer.send(Sub("backlog", "c"))
    assert consumer.next() == Response(b"OK")
    assert topic.draining  # answered before the backlog moved
    publisher.send(Mpub("backlog", (b"late",)))
    assert publisher.next() == Response(b"OK")
    consumer.send(Rdy(2500))
    got = [m.body for m in consumer.messages(2001)]
    assert sorted(got) == sorted([*bodies, b"late"])
    deadline = time.monotonic() + 5
    while topic.draining and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not topic.draining and topic.depth == 0


def test_without_an_event_loop_the_backlog_moves_at_once(tmp_path):
    from nsqviz.servers.nsqd.options import Options
    from nsqviz.servers.nsqd.server import Broker

    broker = Broker(Options(data_path=str(tmp_path), mem_queue_size=10))
    broker.loading = True  # as at start-up, from the metadata file: no loop, no drain yet
    topic = broker.get_topic("t")
    topic.publish(broker.ids.batch([b"x%d" % i for i in range(100)]))
    channel = topic.get_channel("c")
    assert channel.depth == 0
    topic.drain_backlog()
    assert not topic.draining and topic.depth == 0 and channel.depth == 100
    assert channel.backlog.backend_depth == 90  # records moved to its disk as they were
