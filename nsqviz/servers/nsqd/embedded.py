"""The broker in-process: its own event loop on a background thread.

For notebooks and tests: ``with EmbeddedBroker() as b: ... b.tcp_address`` starts a
broker on free loopback ports, and leaving the block stops it gracefully (with a
``data_path``, queued, deferred and in-flight messages are written to disk, so a new
``EmbeddedBroker`` on the same path gets them back).
"""

from __future__ import annotations

from nsqviz.servers.embedded import ListeningServer
from nsqviz.servers.listen import LOOPBACK
from nsqviz.servers.nsqd.options import Options
from nsqviz.servers.nsqd.server import Broker

__all__ = ["EmbeddedBroker"]


class EmbeddedBroker(ListeningServer[Broker]):
    """A running broker on a daemon thread. Options as keyword arguments (nsqd's names
    with underscores: ``msg_timeout=2.0``, ``data_path=...``)."""

    thread_name = "nsqviz-broker"

    def default_options(self) -> Options:
        return Options(tcp_address=f"{LOOPBACK}:0", http_address=f"{LOOPBACK}:0")

    def make_server(self) -> Broker:
        return Broker(self.opts)

    @property
    def broker(self) -> Broker | None:
        return self.server
