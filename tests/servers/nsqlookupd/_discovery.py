"""The discovery scenario the real clients run against nsqviz's lookupd (interop tests and
the guide sample captures): two lookupds, two brokers, each broker registered with ONE
lookupd only -- a consumer finds both only if it polls every lookupd (the guide's union)."""

from __future__ import annotations

import contextlib
import time
import urllib.request

from nsqviz.clients.nsq import SyncProducer
from nsqviz.servers.nsqd import EmbeddedBroker
from nsqviz.servers.nsqlookupd import EmbeddedLookupd

TOPIC = "guide"
BODIES = [["ok-a0", "ok-a1", "ok-a2", "ok-a3", "fail-a4"],
          ["ok-b0", "ok-b1", "ok-b2", "ok-b3", "fail-b4"]]
N = sum(len(b) for b in BODIES)


@contextlib.contextmanager
def discovery_scenario(lookupd_ports: tuple[int, int] = (0, 0)):
    """Yields (lookupds, brokers) with the messages published and registered."""
    with contextlib.ExitStack() as stack:
        lks = [stack.enter_context(EmbeddedLookupd(tcp_address="127.0.0.1:0",
                                                   http_address=f"127.0.0.1:{p}"))
               for p in lookupd_ports]
        brokers = [stack.enter_context(EmbeddedBroker(broadcast_address="127.0.0.1",
                                                      lookupd_tcp_address=[lk.tcp_address]))
                   for lk in lks]
        for b, bodies in zip(brokers, BODIES, strict=True):
            with SyncProducer(b.tcp_address) as p:
                p.mpub(TOPIC, bodies)
        for lk in lks:
            _wait_registered(lk.http_address)
        yield lks, brokers


def _wait_registered(http: str, timeout: float = 10) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://{http}/lookup?topic={TOPIC}") as r:
                if b'"tcp_port"' in r.read():
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"no producer registered at {http}")
