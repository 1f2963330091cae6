"""The simulator in-process: its own event loop on a background thread.

For notebooks and tests: ``with EmbeddedSim(topics=("demo",)) as sim: ... sim.master_address``
starts a Master and two Brokers on free loopback ports, and leaving the block stops
them gracefully (with a ``data_path``, every stored message and committed offset is
written out, so a new ``EmbeddedSim`` on the same path gets them back).
"""

from __future__ import annotations

from typing import Any

from nsqviz.servers.embedded import BackgroundServer
from nsqviz.servers.tubemq.cluster import SimConfig
from nsqviz.servers.tubemq.server import SimServer
from nsqviz.servers.tubemq.state import Simulation

__all__ = ["EmbeddedSim"]


class EmbeddedSim(BackgroundServer[SimServer]):
    """A running simulator on a daemon thread. :class:`SimConfig` fields as keywords;
    ports default to free ones (0), not to 8715/8123. :meth:`call` runs a function on
    its loop, to read or change the model safely while it runs."""

    thread_name = "nsqviz-tubemq-sim"

    def __init__(self, config: SimConfig | None = None, **fields: Any):
        super().__init__()
        if config is None:
            fields.setdefault("master_port", 0)
            fields.setdefault("broker_ports", (0, 0))
            config = SimConfig(**fields)
        elif fields:
            raise TypeError("give a SimConfig or its fields, not both")
        self.config = config

    def make_server(self) -> SimServer:
        return SimServer(self.config)

    @property
    def master_address(self) -> str:
        return self._running().master_address

    @property
    def broker_addresses(self) -> list[str]:
        return self._running().broker_addresses

    @property
    def simulation(self) -> Simulation | None:
        """The model (:class:`~nsqviz.servers.tubemq.state.Simulation`): Master, Brokers, stores.
        Read it through :meth:`call` while the simulator runs."""
        return self._running().sim
