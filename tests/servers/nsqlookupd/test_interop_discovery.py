"""Real clients, unchanged, discover brokers through nsqviz's lookupd: pynsq
``Reader(lookupd_http_addresses=...)``, gnsq ``Consumer(lookupd_http_addresses=...)``,
nsqjs ``lookupdHTTPAddresses`` -- and nsqviz.clients.nsq. Two lookupds each know one broker."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.servers.nsqd._interop import node_clients, python_clients, run_client
from tests.servers.nsqlookupd._discovery import TOPIC, N, discovery_scenario

pytestmark = [pytest.mark.interop, pytest.mark.slow]
CLIENTS = Path(__file__).resolve().parents[3] / "data" / "clients"


def _argv(lib: str, lookupds: str) -> list[str]:
    if lib == "nsqjs":
        return ["node", str(CLIENTS / "guide_nsqjs.js"), lookupds, TOPIC, str(N)]
    python = sys.executable if lib == "nsqviz" else str(python_clients())
    return [python, str(CLIENTS / f"guide_{lib}.py"), lookupds, TOPIC, str(N)]


@pytest.mark.parametrize("lib", ["pynsq", "gnsq", "nsqjs", "nsqviz"])
def test_real_clients_discover_through_nsqviz_lookupd(lib):
    env = {"NODE_PATH": str(node_clients() / "node_modules")} if lib == "nsqjs" else None
    with discovery_scenario() as (lks, brokers):
        report = run_client(_argv(lib, ",".join(lk.http_address for lk in lks)),
                            timeout=60, env=env)
    assert report["done"] == N  # messages of both brokers: both were discovered
    assert report["failed_first"] == 2
    if "nsqds" in report:
        assert sorted(report["nsqds"]) == sorted(b.tcp_address for b in brokers)
