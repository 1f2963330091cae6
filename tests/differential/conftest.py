"""The real nsqd and ``nsqviz broker`` side by side, started with the same flags.

A *configuration* is a set of nsqd flags (the probe corpus's small limits plus, say,
an auth service or a certificate); for each one the fixture runs both servers as
processes on free loopback ports. Tests skip with the reason when no real nsqd is found
(see :mod:`nsqviz.servers.peers`).
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

import pytest

from nsqviz.servers.authd import AuthService, Grant, self_signed_certificate
from nsqviz.servers.peers import NsqdProcess, RealNsqd
from tests.conftest import peer
from tests.differential._probes import AUTH_SECRET, LIMITS


@pytest.fixture(scope="session")
def server_pairs(tmp_path_factory):
    """``{config: (real nsqd, nsqviz broker)}``, both with the same flags."""
    nsqd = peer("nsqd")
    tmp = tmp_path_factory.mktemp("pairs")
    cert, key = self_signed_certificate(tmp)
    tls = {"tls_cert": str(cert), "tls_key": str(key)}
    with contextlib.ExitStack() as stack:
        auth = stack.enter_context(AuthService({AUTH_SECRET.decode(): Grant("probe")}))
        configs = {
            "plain": {},
            "auth": {"auth_http_address": auth.address},
            "tls": tls,
            "tls-required": {**tls, "tls_required": True},
            "nocompress": {"deflate": False, "snappy": False},
            "http": {},  # the HTTP API's own pair: its /stats sees only its own topics
        }
        servers = {}
        for name, extra in configs.items():
            flags = {**LIMITS, **extra}
            servers[name] = (
                RealNsqd(nsqd, data_path=str(tmp / f"{name}-nsqd"), **flags),
                NsqdProcess.nsqviz(data_path=str(tmp / f"{name}-ours"), **flags),
            )
        every = [s for pair in servers.values() for s in pair]
        for server in every:
            stack.callback(server.stop)
        with ThreadPoolExecutor(len(every)) as pool:
            list(pool.map(lambda s: s.start(), every))
        yield servers
