"""Durability like nsqd's: disk queues past --mem-queue-size, and a graceful stop that
writes queued, deferred and in-flight messages out for the next start."""

from __future__ import annotations

import os

from nsqviz.nsq.events import Dpub, Fin, Mpub, Pub
from nsqviz.servers.nsqd import EmbeddedBroker
from tests.servers.nsqd._client import RawClient, channel_stats, stats, subscriber, wait_for


def test_overflow_goes_to_disk_queue(tmp_path):
    data = str(tmp_path / "d")
    with EmbeddedBroker(data_path=data, mem_queue_size=10) as b:
        subscriber(b.tcp_address, "t", "c").close()
        pub = RawClient(b.tcp_address)
        pub.send(Mpub("t", tuple(b"m%03d" % i for i in range(100))))
        pub.expect_ok()
        wait_for(lambda: channel_stats(b.http_address, "t", "c")["depth"] == 100)
        st = channel_stats(b.http_address, "t", "c")
        assert st["backend_depth"] == 90
        files = sorted(os.listdir(data))
        assert "t:c.diskqueue.000000.dat" in files
        c = subscriber(b.tcp_address, "t", "c", rdy=200)
        got = c.messages(100)
        assert sorted(m.body for m in got) == [b"m%03d" % i for i in range(100)]


def test_restart_brings_back_queued_deferred_and_in_flight(tmp_path):
    data = str(tmp_path / "d")
    with EmbeddedBroker(data_path=data) as b:
        sub = subscriber(b.tcp_address, "t", "c", rdy=2)
        pub = RawClient(b.tcp_address)
        pub.send(Mpub("t", tuple(b"q%d" % i for i in range(10))))
        pub.expect_ok()
        pub.send(Dpub("t", 3_600_000, b"deferred"))
        pub.expect_ok()
        in_flight = sub.messages(2)
        st = channel_stats(b.http_address, "t", "c")
        assert (st["in_flight_count"], st["deferred_count"], st["depth"]) == (2, 1, 8)
        # topic with no channel yet: its backlog must survive too
        pub.send(Pub("lonely", b"waiting"))
        pub.expect_ok()
    assert os.path.exists(os.path.join(data, "nsqd.dat"))
    with EmbeddedBroker(data_path=data) as b:
        names = {t["topic_name"]: [c["channel_name"] for c in t["channels"]]
                 for t in stats(b.http_address)["topics"]}
        assert names == {"t": ["c"], "lonely": []}
        sub = subscriber(b.tcp_address, "t", "c", rdy=100)
        got = sub.messages(11)
        bodies = sorted(m.body for m in got)
        assert bodies == sorted([b"q%d" % i for i in range(10)] + [b"deferred"])
        # the two that were in flight keep their attempt count
        redelivered = {m.body: m.attempts for m in got}
        for m in in_flight:
            assert redelivered[m.body] == 2
        sub.send(*(Fin(m.id) for m in got))
        lonely = subscriber(b.tcp_address, "lonely", "c", rdy=1)
        assert lonely.messages(1)[0].body == b"waiting"


def test_memory_only_without_data_path():
    with EmbeddedBroker(data_path="", mem_queue_size=1) as b:
        pub = RawClient(b.tcp_address)
        pub.send(Mpub("t", tuple(b"%d" % i for i in range(50))))
        pub.expect_ok()
        c = subscriber(b.tcp_address, "t", "c", rdy=100)
        assert len(c.messages(50)) == 50


def test_ephemeral_overflow_is_dropped_like_nsqd(tmp_path):
    with EmbeddedBroker(data_path=str(tmp_path), mem_queue_size=5) as b:
        c = subscriber(b.tcp_address, "e#ephemeral", "c#ephemeral", rdy=0)
        pub = RawClient(b.tcp_address)
        pub.send(Mpub("e#ephemeral", tuple(b"%d" % i for i in range(20))))
        pub.expect_ok()
        from nsqviz.nsq.events import Rdy

        c.send(Rdy(100))
        got = c.quiet(0.6)
        assert len(got) == 5


def test_cli_broker_sigterm_keeps_messages(tmp_path):
    """``nsqviz broker`` on SIGTERM writes its queues out; the next start has them."""
    import signal
    import subprocess
    import sys

    data = str(tmp_path / "d")

    def start():
        proc = subprocess.Popen(
            [sys.executable, "-m", "nsqviz.cli", "broker", "--tcp-address", "127.0.0.1:0",
             "--http-address", "127.0.0.1:0", "--data-path", data, "--log-level", "warn"],
            stdout=subprocess.PIPE, text=True)
        tcp = proc.stdout.readline().split()[-1]
        http_address = proc.stdout.readline().split()[-1]
        return proc, tcp, http_address

    proc, tcp, _ = start()
    try:
        sub = subscriber(tcp, "t", "c", rdy=1)
        pub = RawClient(tcp)
        pub.send(Mpub("t", (b"a", b"b", b"c")))
        pub.expect_ok()
        assert sub.messages(1)[0].body == b"a"  # in flight when the signal comes
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    proc, tcp, http_address = start()
    try:
        assert channel_stats(http_address, "t", "c")["depth"] == 3
        c = subscriber(tcp, "t", "c", rdy=10)
        assert sorted(m.body for m in c.messages(3)) == [b"a", b"b", b"c"]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def test_dpub_to_a_topic_without_channels_keeps_its_delay(broker):
    import time

    pub = RawClient(broker.tcp_address)
    t0 = time.monotonic()
    pub.send(Dpub("t", 1200, b"later"), Pub("t", b"now"))
    pub.expect_ok()
    pub.expect_ok()
    c = subscriber(broker.tcp_address, "t", "c", rdy=5)
    assert c.messages(1)[0].body == b"now"
    m = c.messages(1, timeout=5)[0]
    assert m.body == b"later" and time.monotonic() - t0 >= 1.15


def test_failed_disk_write_is_e_pub_failed(tmp_path):
    """When the disk queue cannot be written, nsqd answers E_PUB_FAILED and closes."""
    import shutil

    data = tmp_path / "d"
    with EmbeddedBroker(data_path=str(data), mem_queue_size=1) as b:
        subscriber(b.tcp_address, "t", "c").close()
        pub = RawClient(b.tcp_address)
        pub.send(Pub("t", b"in memory"))
        pub.expect_ok()
        shutil.rmtree(data)
        data.write_bytes(b"not a directory")  # even root cannot write files inside this
        try:
            pub.send(Pub("t", b"to disk"))
            err = pub.expect_error("E_PUB_FAILED", fatal=True)
            assert err.text.startswith("PUB failed ")
            other = RawClient(b.tcp_address)
            other.send(Mpub("t", (b"a", b"b")))
            other.expect_error("E_MPUB_FAILED", fatal=True)
        finally:
            data.unlink()
            data.mkdir()
