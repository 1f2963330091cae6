"""What the simulated Master does on its own, as small frozen dataclasses.

Requests and responses are what the codec shows; these are the decisions in between
that a learner cannot see on the wire: a consumer joined or left a group, a balance
round queued a rebalance event for a consumer, the event went out in a heartbeat
response, the consumer reported it done. A notebook draws partitions moving from them.
"""

from __future__ import annotations

from dataclasses import dataclass

from nsqviz.tubemq.tables import EventType

__all__ = [
    "ConsumerJoined",
    "ConsumerLeft",
    "MasterEvent",
    "RebalanceDone",
    "RebalanceQueued",
    "RebalanceSent",
    "op_name",
]


def op_name(op_type: int) -> str:
    """The EventType name of an opType (the number itself when it is none)."""
    try:
        return EventType(op_type).name
    except ValueError:
        return str(op_type)


@dataclass(frozen=True, slots=True)
class MasterEvent:
    """Base of everything the Master records. ``t``: simulator time, seconds."""

    t: float
    group: str
    consumer_id: str


@dataclass(frozen=True, slots=True)
class ConsumerJoined(MasterEvent):
    """A consumer registered with the Master (RegisterRequestC2M)."""


@dataclass(frozen=True, slots=True)
class ConsumerLeft(MasterEvent):
    """A consumer closed (CloseRequestC2M) or stopped heartbeating (``reason``)."""

    reason: str


@dataclass(frozen=True, slots=True)
class RebalanceQueued(MasterEvent):
    """A balance round queued an event for the consumer (not yet on the wire)."""

    rebalance_id: int
    op_type: int
    partitions: tuple[str, ...]  # partition keys brokerId:topic:partitionId

    @property
    def op_name(self) -> str:
        return op_name(self.op_type)


@dataclass(frozen=True, slots=True)
class RebalanceSent(MasterEvent):
    """The event went out in a HeartResponseM2C (the Master marks it PROCESSING)."""

    rebalance_id: int
    op_type: int

    @property
    def op_name(self) -> str:
        return op_name(self.op_type)


@dataclass(frozen=True, slots=True)
class RebalanceDone(MasterEvent):
    """The consumer reported the event back in a HeartRequestC2M, with the partitions it
    now holds (``held``)."""

    rebalance_id: int
    status: int
    held: tuple[str, ...]
