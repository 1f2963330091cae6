"""Broker processes killed and restarted: the exact count of acknowledged messages lost.

What nsqd may lose on SIGKILL is what it holds only in memory: the memory queues
(``--mem-queue-size`` per topic and per channel) and messages in flight. Every message
acknowledged past the memory queue must come back after the restart -- with ours at
any moment, with the real nsqd only once its disk queue has synced (go-diskqueue saves
its metadata every ``--sync-every`` messages or ``--sync-timeout``). The SIGKILL test
runs against both and prints both counts.
"""

from __future__ import annotations

import threading

import pytest

from nsqviz.nsq.events import Mpub
from tests.servers.nsqd._client import RawClient, channel_stats, subscriber, wait_for
from tests.servers.nsqd._processes import (
    NSQD_MISSING,
    BrokerProcess,
    body,
    drain,
    find_nsqd,
    publish,
)

pytestmark = pytest.mark.slow

MEM = 100  # --mem-queue-size
N = 6000


def _start(kind, tmp_path, *flags) -> BrokerProcess:
    return BrokerProcess(kind, tmp_path / "data", tmp_path / f"{kind}.log",
                         "--mem-queue-size", str(MEM), *flags)


def _create_channel(b: BrokerProcess) -> None:
    subscriber(b.tcp_address, "t", "c").close()
    wait_for(lambda: channel_stats(b.http_address, "t", "c") is not None)


def _sigkill_after_last_ok(kind: str, tmp_path) -> list[bytes]:
    """Publish N in MPUBs (each OK awaited), SIGKILL at once, restart, drain."""
    b = _start(kind, tmp_path)
    try:
        _create_channel(b)
        publish(b.tcp_address, "t", 0, N)
    finally:
        b.kill()  # right after the last OK
    b = _start(kind, tmp_path)
    try:
        got = drain(b.tcp_address, "t", "c")
    finally:
        b.stop()
    assert set(got) <= {body(i) for i in range(N)}
    return got


def _line(kind: str, got: list[bytes]) -> str:
    unique = len(set(got))
    return (f"SIGKILL right after the last OK, {kind}: {N} acknowledged (--mem-queue-size "
            f"{MEM}), {unique} delivered after restart (+{len(got) - unique} twice), "
            f"{N - unique} lost")


def test_sigkill_right_after_the_last_ok(tmp_path, capsys):
    got = _sigkill_after_last_ok("ours", tmp_path / "ours")
    with capsys.disabled():
        print("\n  " + _line("ours", got))
    # exactly the channel's memory queue is lost: the first MEM messages; none twice
    assert sorted(got) == [body(i) for i in range(MEM, N)]


@pytest.mark.skipif(find_nsqd() is None, reason=NSQD_MISSING)
def test_sigkill_right_after_the_last_ok_ours_beside_real_nsqd(tmp_path, capsys):
    """The same run against both servers: nsqd loses its memory queues and, this soon
    after the OK, what go-diskqueue had not yet synced; ours only its memory queue."""
    ours = _sigkill_after_last_ok("ours", tmp_path / "ours")
    nsqd = _sigkill_after_last_ok("nsqd", tmp_path / "nsqd")
    with capsys.disabled():
        print(f"\n  {_line('ours', ours)}\n  {_line('real nsqd', nsqd)}")
    assert sorted(ours) == [body(i) for i in range(MEM, N)]
    assert N - len(set(nsqd)) >= MEM  # nsqd loses at least its channel's memory queue


def test_sigkill_then_restarts_and_more_traffic_strand_nothing(tmp_path, capsys):
    """Kill; restart; consume some; publish more; kill again; restart; publish more;
    stop cleanly; restart; drain. Lost: exactly the memory queue at each kill."""
    b = _start("ours", tmp_path)
    try:
        _create_channel(b)
        publish(b.tcp_address, "t", 0, 3000)
    finally:
        b.kill()
    b = _start("ours", tmp_path)
    try:
        consumed = drain(b.tcp_address, "t", "c", limit=1000)
        assert consumed == [body(i) for i in range(MEM, MEM + 1000)]
        wait_for(lambda: channel_stats(b.http_address, "t", "c")["in_flight_count"] == 0)
        publish(b.tcp_address, "t", 3000, 3000)
    finally:
        b.kill()  # the memory queue now holds 3000..3099
    b = _start("ours", tmp_path)
    try:
        publish(b.tcp_address, "t", 6000, 1000)
    finally:
        b.stop()  # graceful: the memory queue (6000..6099) goes to disk
    b = _start("ours", tmp_path)
    try:
        got = drain(b.tcp_address, "t", "c")
    finally:
        b.stop()
    expected = ({body(i) for i in range(MEM + 1000, 3000)}
                | {body(i) for i in range(3000 + MEM, 7000)})
    redelivered = set(got) - expected
    with capsys.disabled():
        print(f"\n  kill, restart, traffic, kill, restart, traffic, stop, restart: "
              f"{len(expected)} expected, {len(set(got) & expected)} delivered, "
              f"{len(redelivered)} of the 1000 consumed before the 2nd kill redelivered")
    assert len(got) == len(set(got))
    assert expected <= set(got)  # nothing acknowledged past the memory queue lost
    assert redelivered <= set(consumed)  # at least once: a stale read position


def test_sigterm_mid_publish_loses_nothing_acknowledged(tmp_path):
    b = _start("ours", tmp_path)
    acked: list[bytes] = []
    sent: list[bytes] = []

    def publisher():
        pub = RawClient(b.tcp_address)
        i = 0
        try:
            while True:
                batch = tuple(body(k) for k in range(i, i + 100))
                sent.extend(batch)
                pub.send(Mpub("t", batch))
                pub.expect_ok()
                acked.extend(batch)
                i += 100
        except (AssertionError, OSError):
            return  # the broker went away mid-publish

    try:
        _create_channel(b)
        t = threading.Thread(target=publisher)
        t.start()
        wait_for(lambda: len(acked) >= 3000, timeout=30)
    finally:
        b.stop()
    t.join(timeout=30)
    b = _start("ours", tmp_path)
    try:
        got = drain(b.tcp_address, "t", "c")
    finally:
        b.stop()
    assert len(got) == len(set(got))
    assert set(acked) <= set(got) <= set(sent)  # zero acknowledged lost


def test_consumers_killed_holding_messages_in_flight(broker):
    """Consumers take messages and die by reset; every message comes back to the last
    consumer once the dead ones' in-flight messages time out."""
    import socket
    import struct

    n = 1000
    publish(broker.tcp_address, "t", 0, n)
    taken = 0
    for _ in range(3):
        c = subscriber(broker.tcp_address, "t", "c", rdy=200, msg_timeout=1000)
        taken += len(c.messages(200))
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()  # a reset, with 200 messages in flight
    assert taken == 600
    got = drain(broker.tcp_address, "t", "c", quiet=3.0)
    assert sorted(set(got)) == [body(i) for i in range(n)]
    assert len(got) == n
    st = channel_stats(broker.http_address, "t", "c")
    assert (st["depth"], st["in_flight_count"], st["timeout_count"]) == (0, 0, 600)


def test_reconnecting_consumers_at_full_publish_speed(tmp_path):
    """Publishing as fast as OKs come back through a small memory queue (disk in use)
    while consumers connect, take some, FIN most and drop: every acknowledged message
    is FINed in the end, none lost."""
    from nsqviz.servers.nsqd import EmbeddedBroker
    from tests.servers.nsqd.test_faults import _flaky_consumer

    n = 5000
    with EmbeddedBroker(data_path=str(tmp_path / "d"), mem_queue_size=MEM) as b:
        _create_channel(b)
        stop = threading.Event()
        finned: set[bytes] = set()
        lock = threading.Lock()
        workers = [threading.Thread(target=_flaky_consumer,
                                    args=(b.tcp_address, "t", stop, finned, lock, seed))
                   for seed in range(3)]
        for w in workers:
            w.start()
        try:
            publish(b.tcp_address, "t", 0, n, batch=100)
            wait_for(lambda: len(finned) == n, timeout=120, interval=0.2)
        finally:
            stop.set()
            for w in workers:
                w.join()
        st = channel_stats(b.http_address, "t", "c")
    assert finned == {body(i) for i in range(n)}
    assert st["depth"] == 0
