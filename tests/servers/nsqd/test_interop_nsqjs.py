"""nsqjs 0.13.0 (Node), unchanged, against the broker: Reader + Writer, plain/snappy/
deflate/TLS. npm installs it into the git-ignored .venv-nsqjs/ on first use."""

from __future__ import annotations

import pytest

from nsqviz.servers.nsqd import EmbeddedBroker
from tests.servers.nsqd._interop import CLIENTS, node_clients, run_client, self_signed_cert

pytestmark = [pytest.mark.interop, pytest.mark.slow]


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.mark.parametrize("mode", ["plain", "snappy", "deflate", "tls"])
def test_nsqjs_reader_writer(tmp_path, cert, mode):
    modules = node_clients() / "node_modules"
    cert_file, key_file = cert
    opts = {"data_path": str(tmp_path)}
    if mode == "tls":
        opts.update(tls_cert=cert_file, tls_key=key_file)
    with EmbeddedBroker(**opts) as b:
        argv = ["node", str(CLIENTS / "nsqjs_flow.js"), b.tcp_address, f"nsqjs_{mode}", mode]
        if mode == "tls":
            argv.append(cert_file)
        report = run_client(argv, env={"NODE_PATH": str(modules)})
    assert report["errors"] == []
    assert report["done"] == sorted(["pub-0", "pub-1", "mpub-0", "mpub-1", "mpub-2",
                                     "deferred", "req-me", "touch-me", "timeout-me"])
    assert report["attempts"]["req-me"] == [1, 2]
    assert report["attempts"]["timeout-me"] == [1, 2]
    assert report["attempts"]["touch-me"] == [1]
    assert report["closed"] == 0  # heartbeats answered: the reader never lost its connection


def test_nsqjs_against_the_nsqviz_broker_command(tmp_path):
    from tests.servers.nsqd._interop import CLIBroker

    modules = node_clients() / "node_modules"
    with CLIBroker("--data-path", str(tmp_path)) as b:
        report = run_client(["node", str(CLIENTS / "nsqjs_flow.js"), b.tcp_address,
                             "nsqjs_cli", "deflate"], env={"NODE_PATH": str(modules)})
    assert report["errors"] == [] and len(report["done"]) == 9 and report["closed"] == 0
