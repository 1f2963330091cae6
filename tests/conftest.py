"""Shared fixtures. Keep additive: each part of the project adds its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The real NSQ and TubeMQ programs the differential and interop tests run: where this
# project's machines keep them (beside the checkout), unless the environment says.
_MACHINE_PEERS = Path(__file__).resolve().parent.parent.parent / "shared" / "peers"
if _MACHINE_PEERS.is_dir():
    os.environ.setdefault("NSQVIZ_PEERS", str(_MACHINE_PEERS))


@pytest.fixture
def broker_options() -> dict:
    """Options for the ``broker`` fixture (nsqd's names, underscores); override per module."""
    return {}


@pytest.fixture
def broker(tmp_path, broker_options):
    """An in-process nsqd-compatible broker on free loopback ports, stopped afterwards.

    ``broker.tcp_address`` / ``broker.http_address`` are ``"127.0.0.1:PORT"``.
    """
    from nsqviz.servers.nsqd import EmbeddedBroker

    options = {"data_path": str(tmp_path / "nsqd"), **broker_options}
    with EmbeddedBroker(**options) as running:
        yield running


def peer(name: str):
    """The real program ``name`` (nsqd, to_nsq, ...), or skip the test saying how to provide it.

    Found by :func:`nsqviz.servers.peers.find`: ``$NSQD``-style variable, PATH, ``$NSQVIZ_PEERS``.
    """
    from nsqviz.servers.peers import PeerNotFound, require

    try:
        return require(name)
    except PeerNotFound as exc:
        pytest.skip(str(exc))


@pytest.fixture
def real_nsqd_options() -> dict:
    """Flags for the ``real_nsqd`` fixture (nsqd's names, underscores); override per module."""
    return {}


@pytest.fixture
def real_nsqd(tmp_path, real_nsqd_options):
    """The real nsqd on free loopback ports (skips when none is found), stopped afterwards.

    ``real_nsqd.tcp_address`` / ``real_nsqd.http_address`` are ``"127.0.0.1:PORT"``.
    """
    from nsqviz.servers.peers import RealNsqd

    binary = peer("nsqd")
    with RealNsqd(binary, data_path=str(tmp_path / "real-nsqd"), **real_nsqd_options) as running:
        yield running
