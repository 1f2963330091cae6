"""AUTH against a real HTTP auth service (started by the test), the way nsqd asks it."""

from __future__ import annotations

import json
import time

import pytest

from nsqviz.nsq.events import Auth, Message, Pub, Rdy, Response, Sub
from nsqviz.servers.nsqd import EmbeddedBroker
from tests.servers.nsqd._authservice import AuthService
from tests.servers.nsqd._client import RawClient, stats


@pytest.fixture(scope="module")
def auth_broker(tmp_path_factory):
    service = AuthService()
    with EmbeddedBroker(data_path=str(tmp_path_factory.mktemp("d")),
                        auth_http_address=[service.address]) as b:
        b.auth = service
        yield b
    service.close()


def _authed(b, secret: str) -> tuple[RawClient, Response]:
    c = RawClient(b.tcp_address)
    resp = c.identify(feature_negotiation=True)
    assert json.loads(resp.data)["auth_required"] is True
    c.send(Auth(secret.encode()))
    return c, c.next()


def test_auth_success_and_query_parameters(auth_broker):
    before = len(auth_broker.auth.queries)
    c, resp = _authed(auth_broker, "good")
    assert json.loads(resp.data) == {"identity": "alice", "identity_url": "https://id/alice",
                                     "permission_count": 1}
    assert list(json.loads(resp.data)) == ["identity", "identity_url", "permission_count"]
    q = auth_broker.auth.queries[before]
    assert q == {"path": "/auth", "remote_ip": "127.0.0.1", "tls": "false", "secret": "good",
                 "common_name": ""}
    c.send(Pub("allowed_topic", b"x"))
    c.expect_ok()


def test_publish_before_auth_refused(auth_broker):
    c = RawClient(auth_broker.tcp_address)
    c.identify(feature_negotiation=True)
    c.send(Pub("allowed", b"x"), check=False)
    c.expect_error("E_AUTH_FIRST", "AUTH required before PUB", fatal=True)


def test_subscribe_before_auth_refused(auth_broker):
    c = RawClient(auth_broker.tcp_address)
    c.send(Sub("allowed", "c"), check=False)
    c.expect_error("E_AUTH_FIRST", "AUTH required before SUB", fatal=True)


def test_topic_outside_permissions_refused(auth_broker):
    c, _ = _authed(auth_broker, "good")
    c.send(Pub("other", b"x"))
    c.expect_error("E_UNAUTHORIZED", 'AUTH failed for PUB on "other" ""', fatal=True)


def test_publish_only_cannot_subscribe(auth_broker):
    c, resp = _authed(auth_broker, "pubonly")
    assert json.loads(resp.data)["identity"] == "bob"
    c.send(Pub("allowed", b"x"))
    c.expect_ok()
    c.send(Sub("allowed", "c"))
    c.expect_error("E_UNAUTHORIZED", 'AUTH failed for SUB on "allowed" "c"', fatal=True)


def test_no_authorizations(auth_broker):
    c, resp = _authed(auth_broker, "none")
    assert resp.code == "E_UNAUTHORIZED" and resp.text == "AUTH no authorizations found"
    c.expect_closed()


def test_auth_service_refusal_is_not_leaked(auth_broker):
    c, resp = _authed(auth_broker, "bad")
    assert (resp.code, resp.text) == ("E_AUTH_FAILED", "AUTH failed")
    c.expect_closed()


def test_expired_auth_is_checked_again(auth_broker):
    c, _ = _authed(auth_broker, "good")  # ttl 1 s
    queries = len(auth_broker.auth.queries)
    c.send(Pub("allowed", b"1"))
    c.expect_ok()
    assert len(auth_broker.auth.queries) == queries  # still fresh: no new query
    time.sleep(1.2)
    c.send(Pub("allowed", b"2"))
    c.expect_ok()
    assert len(auth_broker.auth.queries) == queries + 1
    assert auth_broker.auth.queries[-1]["secret"] == "good"


def test_second_auth_refused(auth_broker):
    c, _ = _authed(auth_broker, "pubonly")
    c.send(Auth(b"pubonly"), check=False)
    c.expect_error("E_INVALID", "AUTH already set", fatal=True)


def test_auth_disabled_without_auth_address(broker):
    c = RawClient(broker.tcp_address)
    assert json.loads(c.identify(feature_negotiation=True).data)["auth_required"] is False
    c.send(Auth(b"x"), check=False)
    c.expect_error("E_AUTH_DISABLED", "AUTH disabled", fatal=True)


# Issue 24 item 4: AUTH pipelined with the command it is for, in one write. nsqd reads
# the next command only after the auth service answered, then authorizes it.


def _pipelined(b, secret: str, *cmds) -> RawClient:
    c = RawClient(b.tcp_address)
    c.identify(feature_negotiation=True)
    c.send(Auth(secret.encode()), *cmds)
    return c


def test_auth_pipelined_with_pub(auth_broker):
    c = _pipelined(auth_broker, "good", Pub("allowed_pipelined", b"x"))
    assert json.loads(c.expect(Response).data)["identity"] == "alice"
    c.expect_ok()


def test_auth_pipelined_with_sub_and_rdy(auth_broker):
    p, _ = _authed(auth_broker, "good")
    p.send(Pub("allowed_pipesub", b"m"))
    p.expect_ok()
    c = _pipelined(auth_broker, "good", Sub("allowed_pipesub", "c"), Rdy(1))
    assert json.loads(c.expect(Response).data)["identity"] == "alice"
    c.expect_ok()
    assert c.expect(Message).body == b"m"


def test_auth_pipelined_still_authorizes_the_command(auth_broker):
    c = _pipelined(auth_broker, "pubonly", Sub("allowed", "c"))
    assert json.loads(c.expect(Response).data)["identity"] == "bob"
    c.expect_error("E_UNAUTHORIZED", 'AUTH failed for SUB on "allowed" "c"', fatal=True)


def test_failed_auth_pipelined_runs_nothing_after_it(auth_broker):
    c = _pipelined(auth_broker, "bad", Pub("allowed_never", b"x"))
    c.expect_error("E_AUTH_FAILED", "AUTH failed", fatal=True)
    topics = [t["topic_name"] for t in stats(auth_broker.http_address)["topics"]]
    assert "allowed_never" not in topics


def test_auth_pipelined_twice_is_already_set(auth_broker):
    c = RawClient(auth_broker.tcp_address)
    c.identify(feature_negotiation=True)
    c.send(Auth(b"pubonly"), Auth(b"pubonly"), check=False)
    c.expect(Response)
    c.expect_error("E_INVALID", "AUTH already set", fatal=True)
