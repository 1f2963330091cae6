"""gnsq 1.0.2, unchanged, against the broker: Producer, Consumer and its HTTP client."""

from __future__ import annotations

import pytest

from nsqviz.servers.nsqd import EmbeddedBroker
from tests.servers.nsqd._interop import CLIENTS, python_clients, run_client

pytestmark = [pytest.mark.interop, pytest.mark.slow]


@pytest.mark.parametrize("mode", ["plain", "snappy", "deflate"])
def test_gnsq_producer_consumer_http(tmp_path, mode):
    python = python_clients()
    with EmbeddedBroker(data_path=str(tmp_path), msg_timeout=2.0) as b:
        report = run_client([str(python), str(CLIENTS / "gnsq_flow.py"), b.tcp_address,
                             b.http_address, f"gnsq_{mode}", mode])
    assert report["done"] == sorted([
        *(f"pub-{i}" for i in range(3)), *(f"mpub-{i}" for i in range(3)), "deferred",
        "http-pub", "http-mpub-0", "http-mpub-1", "req-me", "touch-me", "timeout-me",
    ])
    attempts = report["attempts"]
    assert attempts["req-me"] == [1, 2]
    assert attempts["timeout-me"] == [1, 2]
    assert attempts["touch-me"] == [1]
    assert report["ping"] == "OK" and report["stats_version"] == "1.3.0"
    # the broker's view of the consumer, via /stats, after 2.5 s of heartbeats
    (client,) = report["clients"]
    assert client["ready_count"] == 20 and client["user_agent"] == "gnsq/1.0.2"
    assert client["snappy"] is (mode == "snappy") and client["deflate"] is (mode == "deflate")


def test_gnsq_against_the_nsqviz_broker_command(tmp_path):
    from tests.servers.nsqd._interop import CLIBroker

    python = python_clients()
    with CLIBroker("--data-path", str(tmp_path), "--msg-timeout", "2s") as b:
        report = run_client([str(python), str(CLIENTS / "gnsq_flow.py"), b.tcp_address,
                             b.http_address, "gnsq_cli", "deflate"])
    assert len(report["done"]) == 13 and report["attempts"]["timeout-me"] == [1, 2]
