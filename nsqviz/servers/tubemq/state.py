"""The whole simulated cluster in one object: a Master, its Brokers, and their state on
``data_path`` (one JSON file per Broker, written on a graceful stop and read back on
start, so committed offsets and every stored message survive a restart)."""

from __future__ import annotations

from pathlib import Path

from nsqviz.servers.tubemq.broker import Broker
from nsqviz.servers.tubemq.cluster import SimConfig
from nsqviz.servers.tubemq.master import Master
from nsqviz.servers.tubemq.store import BrokerStore

__all__ = ["Simulation"]


class Simulation:
    """A Master and ``len(config.broker_ports)`` Brokers sharing one configuration."""

    def __init__(self, config: SimConfig):
        self.config = config
        self.master = Master(config)
        self.brokers = [Broker(config, node, self._load(node.broker_id))
                        for node in config.brokers]

    def set_broker_ports(self, ports: tuple[int, ...]) -> None:
        """The ports the Brokers really listen on (after binding port 0)."""
        self.config.set_broker_ports(ports)
        for broker, node in zip(self.brokers, self.config.brokers, strict=True):
            broker.node = node

    def _path(self, broker_id: int) -> Path | None:
        if self.config.data_path is None:
            return None
        return self.config.data_path / f"broker-{broker_id}.json"

    def _load(self, broker_id: int) -> BrokerStore:
        path = self._path(broker_id)
        return BrokerStore.load(path) if path is not None else BrokerStore()

    def save(self) -> None:
        """Write every Broker's committed state to ``data_path`` (if there is one)."""
        for broker in self.brokers:
            path = self._path(broker.broker_id)
            if path is not None:
                broker.store.save(path)

    def expire(self, now: float) -> None:
        self.master.expire(now)
