"""TLS upgrade in nsqd's order: IDENTIFY JSON response in clear, TLS handshake, ``OK``
inside TLS, then (if negotiated) the compression switch and a compressed ``OK``."""

from __future__ import annotations

import json
import ssl

import pytest

from nsqviz.nsq.events import Fin, Identify, Message, Pub, Rdy, Response, Sub, TLSUpgrade
from nsqviz.servers.nsqd import EmbeddedBroker
from tests.servers.nsqd._client import RawClient, channel_stats
from tests.servers.nsqd._interop import self_signed_cert


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


def _upgrade(c: RawClient, cafile: str) -> None:
    """Run the handshake when the codec says so, then tell the codec."""
    ctx = ssl.create_default_context(cafile=cafile)
    c.sock = ctx.wrap_socket(c.sock, server_hostname="127.0.0.1")
    c.codec.tls_established()


def _identify_tls(c: RawClient, cafile: str, **extra) -> dict:
    c.send(Identify({"feature_negotiation": True, "tls_v1": True, **extra}))
    resp = c.expect(Response)
    # the codec reports the switch point right after the JSON response
    assert isinstance(c.events.pop(0), TLSUpgrade)
    _upgrade(c, cafile)
    c.expect_ok()  # the OK inside TLS
    return json.loads(resp.data)


@pytest.mark.parametrize("compression", [None, "snappy", "deflate"])
def test_tls_upgrade_then_traffic(cert, compression):
    cert_file, key_file = cert
    with EmbeddedBroker(tls_cert=cert_file, tls_key=key_file) as b:
        c = RawClient(b.tcp_address)
        extra = {compression: True} if compression else {}
        features = _identify_tls(c, cert_file, **extra)
        assert features["tls_v1"] is True
        if compression:
            assert features[compression] is True
            c.expect_ok()  # compressed, inside TLS
            assert c.codec.compression == compression
        c.send(Sub("t", "c"), Rdy(1))
        c.expect_ok()
        c.send(Pub("t", b"secret"))
        c.expect_ok()
        m = c.expect(Message)
        assert m.body == b"secret"
        c.send(Fin(m.id))
        cl = channel_stats(b.http_address, "t", "c")["clients"][0]
        assert cl["tls"] is True and cl["tls_version"].startswith("TLS1.")


def test_tls_not_offered_without_certificate(broker):
    c = RawClient(broker.tcp_address)
    features = json.loads(c.identify(feature_negotiation=True, tls_v1=True).data)
    assert features["tls_v1"] is False
    c.send(Pub("t", b"x"))
    c.expect_ok()


def test_tls_required(cert):
    cert_file, key_file = cert
    with EmbeddedBroker(tls_cert=cert_file, tls_key=key_file, tls_required=True) as b:
        plain = RawClient(b.tcp_address)
        plain.send(Pub("t", b"x"), check=False)
        plain.expect_error("E_INVALID", "cannot PUB in current state (TLS required)",
                           fatal=True)
        c = RawClient(b.tcp_address)
        _identify_tls(c, cert_file)
        c.send(Pub("t", b"x"))
        c.expect_ok()
