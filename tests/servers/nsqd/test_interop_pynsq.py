"""pynsq 0.9.1, unchanged, against the broker: Reader + Writer, plain/snappy/deflate/TLS."""

from __future__ import annotations

import pytest

from nsqviz.servers.nsqd import EmbeddedBroker
from tests.servers.nsqd._interop import CLIENTS, python_clients, run_client, self_signed_cert

pytestmark = [pytest.mark.interop, pytest.mark.slow]


@pytest.fixture(scope="module")
def client_python():
    return python_clients()


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.mark.parametrize("mode", ["plain", "snappy", "deflate", "tls"])
def test_pynsq_reader_writer(client_python, cert, tmp_path, mode):
    cert_file, key_file = cert
    opts = {"data_path": str(tmp_path)}
    if mode == "tls":
        opts.update(tls_cert=cert_file, tls_key=key_file)
    with EmbeddedBroker(**opts) as b:
        argv = [str(client_python), str(CLIENTS / "pynsq_flow.py"), b.tcp_address,
                f"pynsq_{mode}", mode]
        if mode == "tls":
            argv.append(cert_file)
        report = run_client(argv)
    assert report["errors"] == []
    assert report["published"] == 11  # 5 PUB, 1 MPUB, 1 DPUB, 3 PUB and the late one
    attempts = report["attempts"]
    assert attempts["req-me"] == [1, 2]  # REQ 0: back at once with attempts + 1
    assert attempts["timeout-me"] == [1, 2]  # msg_timeout 1 s: redelivered
    assert attempts["touch-me"] == [1]  # held 2 s on a 1 s timeout thanks to TOUCH
    assert set(report["done"]) == {
        *(f"pub-{i}" for i in range(5)), *(f"mpub-{i}" for i in range(5)),
        "dpub", "req-me", "touch-me", "timeout-me", "late",
    }
    # heartbeats answered for 3 s: still the first connection
    assert report["conns_before_late"] == report["conns_after"]
    assert len(report["conns_after"]) == 1
    encoder = {"snappy": "SnappyEncoder", "deflate": "DeflateEncoder"}.get(mode, "DefaultEncoder")
    assert report["connections"] == [{"encoder": encoder, "tls": mode == "tls"}] * 2


def test_pynsq_with_auth(client_python, tmp_path):
    """pynsq's auth_secret against a real HTTP auth service (ttl 1 s: re-checked mid-flow)."""
    from tests.servers.nsqd._authservice import AuthService

    service = AuthService()
    try:
        with EmbeddedBroker(data_path=str(tmp_path), auth_http_address=[service.address]) as b:
            report = run_client([str(client_python), str(CLIENTS / "pynsq_flow.py"),
                                 b.tcp_address, "allowed_pynsq", "auth"])
    finally:
        service.close()
    assert report["errors"] == [] and report["published"] == 11
    assert "late" in report["done"] and report["attempts"]["timeout-me"] == [1, 2]
    secrets = [q["secret"] for q in service.queries]
    assert secrets.count("good") >= 3  # reader + writer AUTH, then re-checks after the ttl


def test_pynsq_against_the_nsqviz_broker_command(client_python, tmp_path):
    from tests.servers.nsqd._interop import CLIBroker

    with CLIBroker("--data-path", str(tmp_path)) as b:
        report = run_client([str(client_python), str(CLIENTS / "pynsq_flow.py"),
                             b.tcp_address, "pynsq_cli", "snappy"])
    assert report["errors"] == [] and report["published"] == 11
    assert report["attempts"]["req-me"] == [1, 2] and "late" in report["done"]
