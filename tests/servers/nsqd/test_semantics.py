"""Protocol V2 semantics of the broker, checked with raw sockets and the project's codec (what
it refuses, and how it closes then: test_refusals.py)."""

from __future__ import annotations

import json
import time

import pytest

from nsqviz.nsq.events import (
    Cls,
    Dpub,
    Error,
    Fin,
    Identify,
    Message,
    Mpub,
    Nop,
    Pub,
    Rdy,
    Req,
    Response,
    Sub,
    Touch,
)
from nsqviz.nsq.identify_fields import FEATURE_NEGOTIATION_FIELDS
from tests.servers.nsqd._client import RawClient, channel_stats, http, stats, subscriber, wait_for


def test_publish_subscribe_fin(broker):
    pub = RawClient(broker.tcp_address)
    pub.send(Pub("t", b"one"), Pub("t", b"two"))
    pub.expect_ok()
    pub.expect_ok()
    sub = subscriber(broker.tcp_address, "t", "c", rdy=10)
    msgs = sub.messages(2)
    assert [m.body for m in msgs] == [b"one", b"two"]
    assert all(m.attempts == 1 for m in msgs)
    sub.send(*(Fin(m.id) for m in msgs))
    wait_for(lambda: channel_stats(broker.http_address, "t", "c")["in_flight_count"] == 0)
    c = channel_stats(broker.http_address, "t", "c")
    assert c["depth"] == 0 and c["message_count"] == 2
    assert c["clients"][0]["finish_count"] == 2


def test_feature_negotiation_keys_order_and_values(broker):
    c = RawClient(broker.tcp_address)
    resp = c.identify(feature_negotiation=True, client_id="x", msg_timeout=5000)
    data = json.loads(resp.data)
    assert tuple(data) == FEATURE_NEGOTIATION_FIELDS
    assert data == {
        "max_rdy_count": 2500, "version": "1.3.0", "max_msg_timeout": 900000,
        "msg_timeout": 5000, "tls_v1": False, "deflate": False, "deflate_level": 6,
        "max_deflate_level": 6, "snappy": False, "sample_rate": 0, "auth_required": False,
        "output_buffer_size": 16384, "output_buffer_timeout": 250,
    }
    # compact like Go's encoder
    assert b" " not in resp.data


def test_identify_without_feature_negotiation_is_plain_ok(broker):
    c = RawClient(broker.tcp_address)
    assert c.identify(client_id="x").data == b"OK"


def test_fin_req_touch_of_unknown_id_are_not_fatal(broker):
    c = subscriber(broker.tcp_address, "t", "c", rdy=1)
    mid = b"0123456789abcdef"
    c.send(Fin(mid), check=False)
    c.expect_error("E_FIN_FAILED", "FIN 0123456789abcdef failed ID not in flight", fatal=False)
    c.send(Req(mid, 0), check=False)
    c.expect_error("E_REQ_FAILED", "REQ 0123456789abcdef failed ID not in flight", fatal=False)
    c.send(Touch(mid), check=False)
    c.expect_error("E_TOUCH_FAILED", "TOUCH 0123456789abcdef failed ID not in flight",
                   fatal=False)
    # still alive and subscribed
    c.send(Pub("t", b"after"))
    c.expect_ok()
    assert c.expect(Message).body == b"after"


def test_fins_in_one_write_with_other_commands_between(broker):
    """A consumer's write of many FINs is taken as a run up to the first other command:
    the commands after it still run in order, a FIN of an id already finished (earlier in
    the same write) or never sent is refused on its own, and the rest are finished."""
    pub = RawClient(broker.tcp_address)
    pub.send(Mpub("t", [b"%d" % i for i in range(6)]))
    pub.expect_ok()
    sub = subscriber(broker.tcp_address, "t", "c", rdy=6)
    ids = [m.id for m in sub.messages(6)]
    unknown = b"0123456789abcdef"
    sub.send(Fin(ids[0]), Fin(ids[1]), Fin(ids[0]), Nop(), Fin(ids[2]), Fin(unknown),
             Fin(ids[3]), Rdy(6), Fin(ids[4]), Fin(ids[5]), check=False)
    sub.expect_error("E_FIN_FAILED", f"FIN {ids[0].decode()} failed ID not in flight",
                     fatal=False)
    sub.expect_error("E_FIN_FAILED", f"FIN {unknown.decode()} failed ID not in flight",
                     fatal=False)
    wait_for(lambda: channel_stats(broker.http_address, "t", "c")["in_flight_count"] == 0)
    assert channel_stats(broker.http_address, "t", "c")["clients"][0]["finish_count"] == 6


def test_every_message_goes_to_every_channel(broker):
    a = subscriber(broker.tcp_address, "t", "a", rdy=5)
    b = subscriber(broker.tcp_address, "t", "b", rdy=5)
    pub = RawClient(broker.tcp_address)
    pub.send(Mpub("t", (b"1", b"2", b"3")))
    pub.expect_ok()
    assert [m.body for m in a.messages(3)] == [b"1", b"2", b"3"]
    assert [m.body for m in b.messages(3)] == [b"1", b"2", b"3"]


def test_channel_spreads_messages_over_its_clients(broker):
    a = subscriber(broker.tcp_address, "t", "c", rdy=100)
    b = subscriber(broker.tcp_address, "t", "c", rdy=100)
    wait_for(lambda: [cl["ready_count"] for cl in
                      channel_stats(broker.http_address, "t", "c")["clients"]] == [100, 100])
    pub = RawClient(broker.tcp_address)
    pub.send(Mpub("t", tuple(b"%d" % i for i in range(20))))
    pub.expect_ok()
    got_a = a.quiet(0.6)
    got_b = b.quiet(0.1)
    assert len(got_a) + len(got_b) == 20
    assert got_a and got_b
    assert {m.body for m in got_a}.isdisjoint({m.body for m in got_b})


def test_rdy_bounds_in_flight(broker):
    pub = RawClient(broker.tcp_address)
    pub.send(Mpub("t", tuple(b"%d" % i for i in range(5))))
    pub.expect_ok()
    c = subscriber(broker.tcp_address, "t", "c")
    assert c.quiet(0.3) == []  # RDY starts at 0
    c.send(Rdy(2))
    msgs = c.messages(2)
    assert c.quiet(0.4) == []
    c.send(Fin(msgs[0].id))
    assert len(c.messages(1)) == 1
    assert c.quiet(0.4) == []


def test_req_requeues_with_attempts_plus_one(broker):
    c = subscriber(broker.tcp_address, "t", "c", rdy=1)
    c.send(Pub("t", b"x"))
    c.expect_ok()
    m1 = c.expect(Message)
    c.send(Req(m1.id, 0))
    m2 = c.expect(Message)
    assert (m2.id, m2.body, m2.attempts) == (m1.id, b"x", 2)
    t0 = time.monotonic()
    c.send(Req(m2.id, 500))
    m3 = c.expect(Message)
    assert m3.attempts == 3
    assert time.monotonic() - t0 >= 0.45
    c.send(Fin(m3.id))
    wait_for(lambda: channel_stats(broker.http_address, "t", "c")["requeue_count"] == 2)


@pytest.mark.parametrize("channel_first", [False, True],
                         ids=["backlog-read-in-place", "fanned-out"])
def test_req_zero_goes_behind_what_is_queued(broker, channel_first):
    """Issue 24 item 7b: nsqd's REQ with timeout 0 is ``c.put``: the message goes to the
    back of the channel's queue. Published before the first SUB, the topic's backlog is
    read in place by its only channel, and the requeued message went before it."""
    p = RawClient(broker.tcp_address)
    if channel_first:  # as nsqd: the topic first
        assert http(broker.http_address, "/topic/create?topic=t", b"")[0] == 200
        assert http(broker.http_address, "/channel/create?topic=t&channel=c", b"")[0] == 200
    p.send(Pub("t", b"a"), Pub("t", b"b"))
    p.expect_ok()
    p.expect_ok()
    c = subscriber(broker.tcp_address, "t", "c", rdy=1)
    first = c.expect(Message)
    assert first.body == b"a"
    c.send(Req(first.id, 0))
    second = c.expect(Message)
    c.send(Fin(second.id))
    third = c.expect(Message)
    assert [(second.body, second.attempts), (third.body, third.attempts)] == [(b"b", 1), (b"a", 2)]


def test_msg_timeout_requeues_and_touch_extends(broker):
    c = subscriber(broker.tcp_address, "t", "c", rdy=1, msg_timeout=2000)
    c.send(Pub("t", b"slow"))
    c.expect_ok()
    m1 = c.expect(Message)
    # TOUCH every 0.5 s keeps it ours well past its 2 s timeout
    t0 = time.monotonic()
    for _ in range(5):
        time.sleep(0.5)
        c.send(Touch(m1.id))
    assert time.monotonic() - t0 > 2.4
    assert c.quiet(0.5) == []
    m2 = c.expect(Message, timeout=5)
    assert m2.id == m1.id and m2.attempts == 2
    st = channel_stats(broker.http_address, "t", "c")
    assert st["timeout_count"] == 1
    # the timed-out id is no longer ours: FIN of the old delivery of it still works
    # because it was delivered again; FIN once more fails without closing
    c.send(Fin(m2.id))
    c.send(Fin(m2.id), check=False)
    c.expect_error("E_FIN_FAILED", fatal=False)


def test_dpub_defers_delivery(broker):
    c = subscriber(broker.tcp_address, "t", "c", rdy=5)
    t0 = time.monotonic()
    c.send(Dpub("t", 1500, b"later"), Pub("t", b"now"))
    c.expect_ok()
    c.expect_ok()
    assert c.expect(Message).body == b"now"
    wait_for(lambda: channel_stats(broker.http_address, "t", "c")["deferred_count"] == 1, 1.0)
    m = c.expect(Message, timeout=5)
    assert m.body == b"later" and time.monotonic() - t0 >= 1.45


def test_mpub_is_atomic(broker):
    c = RawClient(broker.tcp_address)
    big = b"x" * (1024 * 1024 + 1)
    c.send(Mpub("t", (b"ok", big)), check=False)
    ev = c.expect(Error)
    assert ev.code in ("E_BAD_BODY", "E_BAD_MESSAGE") and "too big" in ev.text
    c.expect_closed()
    assert all(t["message_count"] == 0 for t in stats(broker.http_address)["topics"])


def test_cls_close_wait_and_no_more_deliveries(broker):
    c = subscriber(broker.tcp_address, "t", "c", rdy=10)
    c.send(Cls())
    assert c.expect(Response).data == b"CLOSE_WAIT"
    c.send(Rdy(5), check=False)  # ignored after CLS
    pub = RawClient(broker.tcp_address)
    pub.send(Pub("t", b"x"))
    pub.expect_ok()
    assert c.quiet(0.4) == []


def test_heartbeats_and_close_after_two_missed(broker):
    c = RawClient(broker.tcp_address)
    c.identify(heartbeat_interval=1000)
    t0 = time.monotonic()
    # read without answering
    c.sock.settimeout(5)
    beats = 0
    while not c.closed:
        c._read(5)
        for ev in c.events:
            if isinstance(ev, Response) and ev.is_heartbeat:
                beats += 1
        c.events.clear()
    elapsed = time.monotonic() - t0
    assert beats >= 1
    assert 1.8 <= elapsed <= 6.0


def test_heartbeats_disabled(broker):
    c = RawClient(broker.tcp_address)
    c.identify(heartbeat_interval=-1)
    c.send(Pub("t", b"x"))
    c.expect_ok()
    c.send(Sub("t", "c"), check=False)
    c.expect_error("E_INVALID", "cannot SUB with heartbeats disabled", fatal=True)


def test_answered_heartbeats_keep_the_connection(broker):
    c = RawClient(broker.tcp_address)
    c.identify(heartbeat_interval=1000)
    assert c.quiet(3.0) == []  # next() answers each heartbeat with NOP
    c.send(Pub("t", b"x"))
    c.expect_ok()


def test_ephemeral_channel_and_topic_deleted_when_last_client_leaves(broker):
    c = subscriber(broker.tcp_address, "e#ephemeral", "c#ephemeral", rdy=1)
    names = [t["topic_name"] for t in stats(broker.http_address)["topics"]]
    assert names == ["e#ephemeral"]
    c.close()
    wait_for(lambda: stats(broker.http_address)["topics"] == [])


def test_ephemeral_channel_of_durable_topic(broker):
    c = subscriber(broker.tcp_address, "t", "c#ephemeral", rdy=1)
    c.close()
    wait_for(lambda: [t["channels"] for t in stats(broker.http_address)["topics"]] == [[]])


def test_sample_rate_delivers_a_fraction(broker):
    c = subscriber(broker.tcp_address, "t", "c", rdy=2500, sample_rate=20)
    pub = RawClient(broker.tcp_address)
    pub.send(Mpub("t", tuple(b"%d" % i for i in range(1000))))
    pub.expect_ok()
    got = c.quiet(1.0)
    assert 100 <= len(got) <= 320, len(got)


def test_output_buffer_timeout_delays_small_batches(broker):
    c = subscriber(broker.tcp_address, "t", "c", rdy=10, output_buffer_timeout=1000)
    pub = RawClient(broker.tcp_address)
    t0 = time.monotonic()
    pub.send(Pub("t", b"x"))
    pub.expect_ok()
    c.expect(Message, timeout=3)
    # buffered until the 1 s timeout: the client still has RDY left
    assert time.monotonic() - t0 >= 0.8


def test_output_buffer_flushes_when_rdy_used_up(broker):
    c = subscriber(broker.tcp_address, "t", "c", rdy=1, output_buffer_timeout=5000)
    pub = RawClient(broker.tcp_address)
    t0 = time.monotonic()
    pub.send(Pub("t", b"x"))
    pub.expect_ok()
    c.expect(Message, timeout=3)
    assert time.monotonic() - t0 < 3.0  # long before the 5 s buffer timeout


@pytest.mark.parametrize("kind", ["snappy", "deflate"])
def test_compression_switch_and_traffic(broker, kind):
    c = RawClient(broker.tcp_address)
    resp = c.identify(feature_negotiation=True, **{kind: True})
    assert json.loads(resp.data)[kind] is True
    c.expect_ok()  # the compressed OK
    assert c.codec.compression == kind
    c.send(Sub("t", "c"), Rdy(3))
    c.expect_ok()
    pub = RawClient(broker.tcp_address)
    pub.send(Mpub("t", (b"a" * 1000, b"b", b"c")))
    pub.expect_ok()
    msgs = c.messages(3)
    assert msgs[0].body == b"a" * 1000
    c.send(*(Fin(m.id) for m in msgs))
    c.send(Nop())
    cl = channel_stats(broker.http_address, "t", "c")["clients"][0]
    assert cl[kind] is True


def test_snappy_and_deflate_together_refused(broker):
    c = RawClient(broker.tcp_address)
    c.send(Identify({"feature_negotiation": True, "snappy": True, "deflate": True}),
           check=False)
    c.expect_error("E_IDENTIFY_FAILED", "cannot enable both deflate and snappy compression",
                   fatal=True)


def test_req_timeout_clamped_to_max_req_timeout(tmp_path):
    from nsqviz.servers.nsqd import EmbeddedBroker

    with EmbeddedBroker(max_req_timeout=1.0) as b:
        c = subscriber(b.tcp_address, "t", "c", rdy=1)
        c.send(Pub("t", b"x"))
        c.expect_ok()
        m = c.expect(Message)
        t0 = time.monotonic()
        c.send(Req(m.id, 3_600_000))
        m2 = c.expect(Message, timeout=4)
        assert m2.attempts == 2 and 0.9 <= time.monotonic() - t0 <= 4


def test_http_api(broker):
    addr = broker.http_address
    assert http(addr, "/ping") == (200, b"OK")
    info = json.loads(http(addr, "/info")[1])
    assert info["version"] == "1.3.0" and info["tcp_port"] == broker.tcp_port
    assert list(info) == ["version", "broadcast_address", "hostname", "http_port", "tcp_port",
                          "start_time", "max_heartbeat_interval", "max_output_buffer_size",
                          "max_output_buffer_timeout", "max_deflate_level"]
    assert http(addr, "/pub?topic=h", b"hello") == (200, b"OK")
    assert http(addr, "/mpub?topic=h", b"a\nb\n") == (200, b"OK")
    assert http(addr, "/pub?topic=h", b"") == (400, b'{"message":"MSG_EMPTY"}')
    assert http(addr, "/pub", b"x")[0] == 400
    assert json.loads(http(addr, "/pub?topic=bad!", b"x")[1]) == {"message": "INVALID_TOPIC"}
    assert http(addr, "/pub?topic=h", method="GET")[0] == 405
    assert http(addr, "/nope")[0] == 404
    assert http(addr, "/channel/create?topic=h&channel=c", b"")[0] == 200
    c = subscriber(broker.tcp_address, "h", "c", rdy=10)
    assert [m.body for m in c.messages(3)] == [b"hello", b"a", b"b"]
    st = stats(addr)
    (t,) = st["topics"]
    assert t["topic_name"] == "h" and t["message_count"] == 3
    assert t["channels"][0]["client_count"] == 1
    assert http(addr, "/topic/create?topic=other", b"")[0] == 200
    assert http(addr, "/channel/delete?topic=h&channel=nope", b"")[0] == 404
    assert http(addr, "/topic/delete?topic=other", b"")[0] == 200
    assert http(addr, "/topic/delete?topic=other", b"")[0] == 404
    assert b"[h" in http(addr, "/stats")[1]


def test_http_mpub_binary(broker):
    from nsqviz.nsq import fastpath

    body = fastpath.encode_command(Mpub("b", (b"x", b"yy")))[len(b"MPUB b\n") + 4:]
    assert http(broker.http_address, "/mpub?topic=b&binary=true", body) == (200, b"OK")
    c = subscriber(broker.tcp_address, "b", "c", rdy=10)
    assert [m.body for m in c.messages(2)] == [b"x", b"yy"]


def test_stats_shape_matches_nsqd(broker):
    c = subscriber(broker.tcp_address, "t", "c", rdy=1)
    st = stats(broker.http_address)
    assert set(st) == {"version", "health", "start_time", "topics", "memory", "producers"}
    t = st["topics"][0]
    assert set(t) == {"topic_name", "channels", "depth", "backend_depth", "message_count",
                      "message_bytes", "paused", "e2e_processing_latency"}
    ch = t["channels"][0]
    assert set(ch) == {"channel_name", "depth", "backend_depth", "in_flight_count",
                       "deferred_count", "message_count", "requeue_count", "timeout_count",
                       "client_count", "clients", "paused", "e2e_processing_latency"}
    cl = ch["clients"][0]
    for key in ("client_id", "hostname", "version", "remote_address", "state", "ready_count",
                "in_flight_count", "message_count", "finish_count", "requeue_count",
                "connect_ts", "sample_rate", "deflate", "snappy", "user_agent", "tls"):
        assert key in cl
    assert cl["ready_count"] == 1 and cl["state"] == 3
    c.send(Nop())


def test_silent_client_timed_out():
    """A client that connects and says nothing is cut after --client-timeout (nsqd reads
    with a deadline of two heartbeat intervals, client_timeout/2 each by default)."""
    from nsqviz.servers.nsqd import EmbeddedBroker

    with EmbeddedBroker(client_timeout=1.0) as b:
        c = RawClient(b.tcp_address, magic=False)
        t0 = time.monotonic()
        c.expect_closed(timeout=8)
        assert 0.9 <= time.monotonic() - t0 <= 5


def test_dribbling_client_timed_out():
    """Bytes that never complete a command are not a sign of life."""
    from nsqviz.servers.nsqd import EmbeddedBroker

    with EmbeddedBroker(client_timeout=1.0) as b:
        c = RawClient(b.tcp_address)
        t0 = time.monotonic()
        for ch in b"PUB t\n\x00\x00\x00\x10abc":
            if c.closed:
                break
            try:
                c.send_raw(bytes([ch]))
            except OSError:
                break
            time.sleep(0.2)
        c.expect_closed(timeout=8)
        assert time.monotonic() - t0 <= 6


def test_max_channel_consumers():
    from nsqviz.servers.nsqd import EmbeddedBroker

    with EmbeddedBroker(max_channel_consumers=1) as b:
        first = subscriber(b.tcp_address, "t", "c")
        second = RawClient(b.tcp_address)
        second.send(Sub("t", "c"))
        second.expect_error("E_SUB_FAILED", "SUB failed consumers for t:c exceeds limit of 1",
                            fatal=True)
        other = subscriber(b.tcp_address, "t", "other")  # the limit is per channel
        first.send(Nop())
        other.send(Nop())


def test_http_hostile_requests(broker):
    import socket

    host, port = broker.http_address.rsplit(":", 1)

    def raw(data: bytes) -> bytes:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(data)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
            return out

    assert raw(b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n").startswith(
        b"HTTP/1.1 400")
    big = raw(b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n")
    assert big.startswith(b"HTTP/1.1 413") and b"MSG_TOO_BIG" in big  # nsqd's /pub limit
    big = raw(b"POST /mpub?topic=t HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n")
    assert big.startswith(b"HTTP/1.1 413") and b"BODY_TOO_BIG" in big
    assert raw(b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert http(broker.http_address, "/ping") == (200, b"OK")  # still serving


def test_http_silent_client_dropped():
    import socket

    from nsqviz.servers.nsqd import EmbeddedBroker

    with EmbeddedBroker(client_timeout=1.0) as b:
        host, port = b.http_address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as s:
            t0 = time.monotonic()
            assert s.recv(100) == b""  # closed by the broker
            assert time.monotonic() - t0 < 3


def test_fin_of_a_message_in_flight_elsewhere(broker):
    """nsqd's channel knows every client's in-flight ids: FIN of another client's message
    is 'client does not own message', not 'ID not in flight'."""
    a = subscriber(broker.tcp_address, "t", "c", rdy=1)
    b = subscriber(broker.tcp_address, "t", "c", rdy=0)
    pub = RawClient(broker.tcp_address)
    pub.send(Pub("t", b"x"))
    pub.expect_ok()
    m = a.expect(Message)
    b.send(Fin(m.id), check=False)
    b.expect_error("E_FIN_FAILED", f"FIN {m.id.decode()} failed client does not own message",
                   fatal=False)
    b.send(Touch(m.id), check=False)
    b.expect_error("E_TOUCH_FAILED",
                   f"TOUCH {m.id.decode()} failed client does not own message", fatal=False)
    a.send(Fin(m.id))
    wait_for(lambda: channel_stats(broker.http_address, "t", "c")["in_flight_count"] == 0)


def test_deleting_a_channel_disconnects_its_clients(broker):
    c = subscriber(broker.tcp_address, "t", "c", rdy=1)
    assert http(broker.http_address, "/channel/delete?topic=t&channel=c", b"")[0] == 200
    c.expect_closed()
    st = stats(broker.http_address)
    assert [t["channels"] for t in st["topics"]] == [[]]
