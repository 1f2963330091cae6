"""Shared fixtures. Keep additive: each part of the project adds its own."""

from __future__ import annotations

import pytest


@pytest.fixture
def broker_options() -> dict:
    """Options for the ``broker`` fixture (nsqd's names, underscores); override per module."""
    return {}


@pytest.fixture
def broker(tmp_path, broker_options):
    """An in-process nsqd-compatible broker on free loopback ports, stopped afterwards.

    ``broker.tcp_address`` / ``broker.http_address`` are ``"127.0.0.1:PORT"``.
    """
    from nsqviz.broker import EmbeddedBroker

    options = {"data_path": str(tmp_path / "nsqd"), **broker_options}
    with EmbeddedBroker(**options) as running:
        yield running
