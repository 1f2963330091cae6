"""What the simulated cluster is made of: its Brokers, topics and partitions, and the
metadata strings the Master hands out about them (the formats of ``corebase/cluster``'s
``BrokerInfo``, ``TopicInfo``, ``Partition``).

A :class:`SimConfig` is all a simulator needs to start: the topics it serves, how many
Brokers and partitions per Broker (at least 2 x 2 by default, so that a group of two
consumers has something to share), the timeouts, and where to keep state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nsqviz.servers.listen import LOOPBACK
from nsqviz.tubemq.metadata import (
    format_broker_info,
    format_partition,
    format_subscribe_info,
    format_topic_info,
)
from nsqviz.tubemq.tables import DEFAULT_BROKER_PORT, DEFAULT_MASTER_PORT

__all__ = [
    "BrokerNode",
    "Part",
    "SimConfig",
]

MAX_MSG_SIZE = 1024 * 1024  # META_MAX_MESSAGE_DATA_SIZE


@dataclass(frozen=True, slots=True, order=True)
class BrokerNode:
    """A Broker as clients address it."""

    broker_id: int
    host: str
    port: int

    @property
    def info(self) -> str:
        """``brokerId:host:port`` -- with a single space for the default port, as the
        Master writes brokerInfos (``BrokerConfEntity.getSimpleBrokerInfo``)."""
        return format_broker_info(self.broker_id, self.host, self.port)


@dataclass(frozen=True, slots=True, order=True)
class Part:
    """One partition of a topic on a Broker: what a consumer group's members share."""

    broker: BrokerNode
    topic: str
    partition_id: int

    @property
    def key(self) -> str:
        """The partition key ``brokerId:topic:partitionId``."""
        return f"{self.broker.broker_id}:{self.topic}:{self.partition_id}"

    @property
    def full(self) -> str:
        """``brokerId:host:port#topic:partitionId`` (``Partition.toString``)."""
        b = self.broker
        return format_partition(b.broker_id, b.host, b.port, self.topic, self.partition_id)

    def subscribe_info(self, consumer_id: str, group: str) -> str:
        """``consumerId@group#brokerId:host:port#topic:partitionId``."""
        return format_subscribe_info(consumer_id, group, self.full)


@dataclass
class SimConfig:
    """How the simulated cluster is laid out and behaves.

    ``broker_ports``: one port per Broker (0 = a free port); the Brokers get ids 1, 2, ...
    ``partitions``: partitions per topic on each Broker (ids 0..n-1, storeNum 1).
    ``client_timeout``: seconds without a heartbeat after which the Master forgets a
    producer or consumer and a Broker frees a consumer's partition (30 s on the real
    servers). ``fetch_max_bytes``: payload bytes a GetMessage returns at most.
    ``standby``: the Master answers every request as a standby Master does.
    """

    topics: tuple[str, ...] = ("demo",)
    host: str = LOOPBACK
    master_port: int = DEFAULT_MASTER_PORT
    broker_ports: tuple[int, ...] = (DEFAULT_BROKER_PORT, DEFAULT_BROKER_PORT + 1)
    partitions: int = 2
    client_timeout: float = 30.0
    fetch_max_bytes: int = 256 * 1024
    max_msg_size: int = MAX_MSG_SIZE
    standby: bool = False
    data_path: Path | None = None
    visit_token: int = 1
    config_id: int = 1
    broker_checksum: int = 1  # the Broker list's version stamp (it never changes here)
    brokers: list[BrokerNode] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.partitions < 1 or not self.broker_ports:
            raise ValueError("a cluster needs at least one Broker and one partition")
        self.topics = tuple(self.topics)
        self.broker_ports = tuple(self.broker_ports)
        if self.data_path is not None:
            self.data_path = Path(self.data_path)
        self.set_broker_ports(self.broker_ports)

    def set_broker_ports(self, ports: tuple[int, ...]) -> None:
        """The Brokers' real ports, once they listen (port 0 picks a free one)."""
        self.brokers = [BrokerNode(i + 1, self.host, p) for i, p in enumerate(ports)]

    def topic_parts(self, topic: str) -> list[Part]:
        """Every partition of ``topic``, Broker by Broker."""
        return [Part(b, topic, p) for b in self.brokers for p in range(self.partitions)]

    def topic_info(self, topic: str) -> str:
        """``topic#brokerId:partNum:storeNum,...#maxMsgSize`` (HeartResponseM2P.topicInfos)."""
        return format_topic_info(topic, [(b.broker_id, self.partitions, 1)
                                         for b in self.brokers], self.max_msg_size)

