"""Producer (PUB/MPUB/DPUB, size checks, MPUB splitting, failover) and the negotiated
features (TLS, snappy, deflate, AUTH, sample_rate, msg_timeout), seen on the wire."""

from __future__ import annotations

import asyncio
import time

import pytest

from nsqviz.clients.nsq import (
    Consumer,
    MessageTooBig,
    NSQError,
    Producer,
    SyncConsumer,
    SyncProducer,
    split_mpub,
)
from nsqviz.nsq.events import (
    Auth,
    Cls,
    CompressionStarted,
    Dpub,
    Identify,
    Message,
    Mpub,
    Pub,
    Rdy,
    Response,
    Sub,
    TLSUpgrade,
)
from nsqviz.nsq.server_connection import ServerConnection
from tests.clients.nsq.conftest import run
from tests.clients.nsq.test_consumer_rules import until


def test_pub_mpub_dpub_on_the_wire(tapped):
    ((b, tap),) = tapped(1)

    async def main():
        async with Producer(tap.address) as p:
            await p.publish("t", b"one")
            assert await p.mpub("t", [b"a", b"b", b"c"]) == 1
            await p.dpub("t", 0.25, b"later")

    run(main())
    (conn,) = tap.connections
    cmds = [e.event for e in conn.commands()][2:]
    assert cmds == [Pub("t", b"one"), Mpub("t", (b"a", b"b", b"c")), Dpub("t", 250, b"later")]
    oks = [e.event for e in conn.frames() if type(e.event) is Response][1:]
    assert [r.data for r in oks] == [b"OK"] * 3


def test_mpub_of_text_and_bytes_sends_utf8(tapped):
    # the usual batch (bytes, one MPUB) skips the per-message looks; text goes the long way
    ((b, tap),) = tapped(1)

    async def main():
        async with Producer(tap.address) as p:
            assert await p.mpub("t", ["h\u00e9", b"b", bytearray(b"c")]) == 1
            assert await p.mpub("t", [b"d", b"ee"]) == 1

    run(main())
    (conn,) = tap.connections
    mpubs = [e.event for e in conn.commands() if type(e.event) is Mpub]
    assert [m.bodies for m in mpubs] == [("h\u00e9".encode(), b"b", b"c"), (b"d", b"ee")]


def test_sizes_are_checked_before_sending_and_big_mpubs_split(tapped):
    ((b, tap),) = tapped(1)

    async def main():
        async with Producer(tap.address, max_msg_size=100, max_body_size=60) as p:
            with pytest.raises(ValueError, match="message 1 is empty"):
                await p.mpub("t", [b"x", b""])
            with pytest.raises(MessageTooBig, match="message 0 is 101 bytes"):
                await p.publish("t", b"x" * 101)
            with pytest.raises(MessageTooBig, match="pass split=True"):
                await p.mpub("t", [b"y" * 20] * 3, split=False)
            assert await p.mpub("t", [b"z" * 20] * 5) == 3  # 4 + 2*24 = 52 <= 60

    run(main())
    (conn,) = tap.connections
    mpubs = [e.event for e in conn.commands() if type(e.event) is Mpub]
    assert [len(m.bodies) for m in mpubs] == [2, 2, 1]  # nothing sent for the refusals
    assert split_mpub([b"a" * 10] * 4, max_body_size=4 + 3 * 14) == [[b"a" * 10] * 3,
                                                                    [b"a" * 10]]


def test_split_mpub_checks_each_message_only_when_the_batch_could_hide_one():
    # a body within max_msg_size: no message can be over it
    assert split_mpub([b"a" * 10] * 3, max_msg_size=46, max_body_size=100) == [[b"a" * 10] * 3]
    # a body over max_msg_size, every message within it: one batch still
    assert split_mpub([b"a" * 10] * 3, max_msg_size=10, max_body_size=100) == [[b"a" * 10] * 3]
    # a body within max_body_size hiding one message over max_msg_size: refused, named
    with pytest.raises(MessageTooBig, match="message 2 is 11 bytes > max_msg_size 10"):
        split_mpub([b"a" * 10, b"b" * 10, b"c" * 11], max_msg_size=10, max_body_size=100)
    with pytest.raises(ValueError, match="message 1 is empty"):
        split_mpub([b"a", b"", b"c"])


def test_publishing_fails_over_to_the_next_nsqd(tapped):
    (b1, t1), (b2, t2) = tapped(2)

    async def main():
        async with Producer([t1.address, t2.address], retry_delay=0.05) as p:
            await p.publish("t", b"first")
            t1.pause(10)
            t1.drop()
            await asyncio.sleep(0.05)
            await p.publish("t", b"second")  # the lost connection fails over to nsqd 2
            return p.failovers

    assert run(main()) == 1
    assert [e.event.body for c in t1.connections for e in c.commands()
            if type(e.event) is Pub] == [b"first"]
    assert [e.event.body for c in t2.connections for e in c.commands()
            if type(e.event) is Pub] == [b"second"]


def test_nsqd_refusals_are_raised_not_retried(tapped):
    ((b, tap),) = tapped(1, max_msg_size=50)

    async def main():
        async with Producer(tap.address) as p:  # our limit is nsqd's default, 1 MiB
            with pytest.raises(NSQError) as info:
                await p.publish("t", b"x" * 100)
            return info.value.code

    assert run(main()) == "E_BAD_MESSAGE"
    assert sum(type(e.event) is Pub for c in tap.connections for e in c.commands()) == 1


@pytest.mark.parametrize("feature", ["snappy", "deflate"])
def test_compression_negotiated_and_used(tapped, feature):
    ((b, tap),) = tapped(1)

    async def main():
        await _publish_n(b.tcp_address, 30)
        got = []
        async with Consumer("t", "c", lambda m: got.append(m.body), nsqd_tcp_addresses=tap.address,
                            max_in_flight=10, **{feature: True}):
            await until(lambda: len(got) == 30)
        return got

    assert len(run(main())) == 30
    (conn,) = tap.connections
    identify = next(e.event for e in conn.commands() if type(e.event) is Identify)
    assert identify.data[feature] is True
    assert any(type(e.event) is CompressionStarted and e.event.kind == feature
               for e in conn.frames())
    assert sum(type(e.event) is Message for e in conn.frames()) == 30  # decoded through it


def test_tls_then_messages(tapped, tmp_path):
    from tests.servers.nsqd._interop import self_signed_cert

    cert, key = self_signed_cert(tmp_path)
    ((b, tap),) = tapped(1, tls_cert=cert, tls_key=key)

    async def main():
        await _publish_n(b.tcp_address, 5)
        got = []
        async with Consumer("t", "c", lambda m: got.append(m.body), nsqd_tcp_addresses=tap.address,
                            tls_v1=True, max_in_flight=5, snappy=True):
            await until(lambda: len(got) == 5)

    run(main())
    (conn,) = tap.connections
    assert next(e.event for e in conn.commands() if type(e.event) is Identify).data["tls_v1"]
    assert any(type(e.event) is TLSUpgrade for e in conn.frames())
    assert not any(type(e.event) is Message for e in conn.frames())  # encrypted from there


def test_auth_sample_rate_and_msg_timeout_in_identify(tapped):
    from tests.servers.nsqd._authservice import AuthService

    service = AuthService()
    try:
        ((b, tap),) = tapped(1, auth_http_address=[service.address])

        async def main():
            async with Producer(b.tcp_address, auth_secret="good") as p:
                await p.mpub("allowed", [b"%d" % i for i in range(200)])
            got = []
            async with Consumer("allowed", "c", lambda m: got.append(m),
                                nsqd_tcp_addresses=tap.address, auth_secret="good",
                                sample_rate=50, msg_timeout=5.0, max_in_flight=50):
                await asyncio.sleep(1.5)
            return len(got)

        n = run(main())
    finally:
        service.close()
    assert 40 < n < 160  # about half of 200
    (conn,) = tap.connections
    cmds = [e.event for e in conn.commands()]
    assert [type(c) for c in cmds[1:4]] == [Identify, Auth, Sub]
    assert cmds[1].data["sample_rate"] == 50 and cmds[1].data["msg_timeout"] == 5000
    answer = next(e.event for e in conn.frames() if type(e.event) is Response).json()
    assert answer["auth_required"] is True and answer["msg_timeout"] == 5000


def test_rdy_assumes_2500_without_feature_negotiation():
    """An nsqd that answers IDENTIFY with a bare OK: RDY must stay <= 2500."""
    seen: list[int] = []

    async def fake_nsqd(reader, writer):
        codec = ServerConnection()
        while data := await reader.read(65536):
            for ev in codec.receive(data):
                if type(ev) in (Identify, Sub):
                    writer.write(codec.send(Response(b"OK")))
                elif type(ev) is Cls:
                    writer.write(codec.send(Response(b"CLOSE_WAIT")))
                elif type(ev) is Rdy:
                    seen.append(ev.count)
                    if ev.count == 1:  # one message, so that the share is sent
                        writer.write(codec.send_messages([Message(0, 1, b"0" * 16, b"x")]))

    async def main():
        server = await asyncio.start_server(fake_nsqd, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with Consumer("t", "c", lambda m: None, nsqd_tcp_addresses=f"127.0.0.1:{port}",
                            max_in_flight=5000):
            await until(lambda: len(seen) >= 2)
        server.close()

    run(main())
    assert seen[:2] == [1, 2500]


def test_sync_wrappers(tapped):
    ((b, tap),) = tapped(1)
    got = []
    with SyncProducer(b.tcp_address) as p:
        p.mpub("t", [b"1", b"2", b"3"])
    with SyncConsumer("t", "c", lambda m: got.append(m.body), nsqd_tcp_addresses=tap.address,
                      max_in_flight=3) as c:
        end = time.monotonic() + 5  # the FIN follows the handler: wait for it, not the body
        while c.stats["finished"] < 3 and time.monotonic() < end:
            time.sleep(0.02)
        assert c.stats["finished"] == 3
    assert sorted(got) == [b"1", b"2", b"3"]


async def _publish_n(address: str, n: int) -> None:
    async with Producer(address) as p:
        await p.mpub("t", [b"m%d" % i for i in range(n)])
