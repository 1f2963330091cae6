"""Faults: consumers that die with messages in flight, restarts with a disk backlog,
and many messages through random disconnects -- nothing acknowledged is lost."""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest

from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.events import Fin, Identify, Magic, Message, Mpub, Rdy, Sub
from nsqviz.servers.nsqd import EmbeddedBroker
from tests.servers.nsqd._client import RawClient, channel_stats, subscriber, wait_for


def test_killed_consumer_messages_redelivered_to_another(broker):
    dying = subscriber(broker.tcp_address, "t", "c", rdy=10, msg_timeout=1000)
    pub = RawClient(broker.tcp_address)
    pub.send(Mpub("t", tuple(b"%d" % i for i in range(5))))
    pub.expect_ok()
    first = dying.messages(5)
    dying.sock.shutdown(socket.SHUT_RDWR)
    dying.close()
    other = subscriber(broker.tcp_address, "t", "c", rdy=10)
    again = other.messages(5, timeout=5)
    assert sorted(m.body for m in again) == sorted(m.body for m in first)
    assert all(m.attempts == 2 for m in again)
    other.send(*(Fin(m.id) for m in again))
    wait_for(lambda: channel_stats(broker.http_address, "t", "c")["in_flight_count"] == 0)
    assert channel_stats(broker.http_address, "t", "c")["timeout_count"] == 5


def test_restart_with_disk_backlog_delivers_all(tmp_path):
    data = str(tmp_path / "d")
    n = 3000
    with EmbeddedBroker(data_path=data, mem_queue_size=100) as b:
        subscriber(b.tcp_address, "t", "c").close()
        pub = RawClient(b.tcp_address)
        for start in range(0, n, 500):
            pub.send(Mpub("t", tuple(b"%05d" % i for i in range(start, start + 500))))
            pub.expect_ok()
        wait_for(lambda: channel_stats(b.http_address, "t", "c")["depth"] == n)
    with EmbeddedBroker(data_path=data, mem_queue_size=100) as b:
        assert channel_stats(b.http_address, "t", "c")["depth"] == n
        c = subscriber(b.tcp_address, "t", "c", rdy=500)
        seen = set()
        while len(seen) < n:
            msgs = c.messages(1)
            seen.update(m.body for m in msgs)
            c.send(*(Fin(m.id) for m in msgs))
        assert seen == {b"%05d" % i for i in range(n)}


def _flaky_consumer(address, topic, stop, finned, lock, seed):
    """Connects, takes some messages, FINs some, drops the connection at random."""
    rng = random.Random(seed)
    host, port = address.rsplit(":", 1)
    while not stop.is_set():
        try:
            s = socket.create_connection((host, int(port)), timeout=5)
        except OSError:
            continue
        c = ClientConnection()
        s.sendall(c.send(Magic()) + c.send(Identify({"msg_timeout": 1000}))
                  + c.send(Sub(topic, "c")) + c.send(Rdy(rng.choice([1, 10, 100, 500]))))
        budget = rng.randint(1, 400)
        deadline = time.monotonic() + 2
        try:
            while budget > 0 and time.monotonic() < deadline and not stop.is_set():
                s.settimeout(0.2)
                try:
                    data = s.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                fins = []
                for ev in c.receive(data):
                    if isinstance(ev, Message):
                        budget -= 1
                        if rng.random() < 0.8:
                            fins.append(ev)
                if fins:
                    s.sendall(b"".join(c.send(Fin(m.id)) for m in fins))
                    with lock:
                        finned.update(m.body for m in fins)
        except OSError:
            pass
        finally:
            # FINs sent right before a drop may not be read; the broker then redelivers,
            # which is "at least once": the message counts as done either way
            s.close()


@pytest.mark.slow
def test_ten_thousand_messages_through_random_disconnects(broker):
    n = 10_000
    pub = RawClient(broker.tcp_address)
    for start in range(0, n, 1000):
        pub.send(Mpub("t", tuple(b"%05d" % i for i in range(start, start + 1000))))
        pub.expect_ok()
    stop = threading.Event()
    finned: set[bytes] = set()
    lock = threading.Lock()
    workers = [threading.Thread(target=_flaky_consumer,
                                args=(broker.tcp_address, "t", stop, finned, lock, seed))
               for seed in range(4)]
    for w in workers:
        w.start()
    try:
        wait_for(lambda: len(finned) == n, timeout=120, interval=0.2)
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert finned == {b"%05d" % i for i in range(n)}
    # and the broker agrees: nothing left queued
    wait_for(lambda: channel_stats(broker.http_address, "t", "c")["depth"] == 0, timeout=10)


def test_consumer_that_does_not_read_is_not_buffered_without_bound(broker):
    """A consumer with a high RDY that stops reading: the broker stops handing it
    messages once its socket and write buffer are full, instead of queueing them all
    in memory (what nsqd's blocking write gives for free)."""
    slow = subscriber(broker.tcp_address, "t", "c", rdy=2500)
    pub = RawClient(broker.tcp_address)
    body = b"x" * 500_000
    for _ in range(10):
        pub.send(Mpub("t", (body,) * 10))
        pub.expect_ok()
    wait_for(lambda: channel_stats(broker.http_address, "t", "c")["in_flight_count"] > 0)
    time.sleep(0.5)
    st = channel_stats(broker.http_address, "t", "c")
    assert st["in_flight_count"] + st["depth"] == 100
    assert st["in_flight_count"] < 50, st  # ~4 MB write buffer + socket buffers
    # once it reads again, everything arrives
    got = slow.messages(100, timeout=30)
    assert len(got) == 100
