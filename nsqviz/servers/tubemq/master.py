"""The simulated Master: producers and consumers register and heartbeat with it; it
tells producers where the partitions are and balances each consumer group's partitions
over its members with rebalance events carried in heartbeat responses.

Each public method is named after the Java handler of one RPC method (``TMaster``;
ids from ``RpcConstants``), takes the decoded inner request (a protobuf message) and the time, and
returns the inner response as a dict of its fields in the protocol's words -- the
server turns it into the response message the method table names. The checks, codes
and texts follow the real handlers (``TMaster``, ``TErrCodeConstants``).

Balancing is the real server-side balance, faster: instead of a round every 60 s the
Master balances a group as soon as a member joins or leaves (or, a round having
finished, when what the members report differs from the target). As in ``TMaster``, a
round queues for each member a disconnect event for the partitions it loses and a
connect event for those it gains, under one rebalanceId: DISCONNECT and CONNECT for a
member that both loses and gains, ONLY_DISCONNECT or ONLY_CONNECT for one that only
loses or only gains. And as in ``ConsumerEventManager``, disconnect events go first: no
member of the group is sent a connect event while any member still has a disconnect
event to report, so a Broker never sees two members of a group on one partition. A
group with events still unreported is not balanced again until they are reported.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from nsqviz.servers.tubemq.cluster import Part, SimConfig
from nsqviz.servers.tubemq.events import (
    ConsumerJoined,
    ConsumerLeft,
    MasterEvent,
    RebalanceDone,
    RebalanceQueued,
    RebalanceSent,
)
from nsqviz.tubemq.metadata import MetadataError, parse_subscribe_info
from nsqviz.tubemq.tables import META_VALUE_UNDEFINED, ErrorCode, EventType

__all__ = ["Master", "RpcError"]

UNDEFINED = META_VALUE_UNDEFINED
STANDBY_EXCEPTION = "org.apache.inlong.tubemq.corerpc.exception.StandbyException"


class RpcError(Exception):
    """The handler threw: the server answers with an ERROR ResponseHeader and a
    RspExceptionBody{exceptionName, stackTrace} instead of a response message."""

    def __init__(self, exception_name: str, text: str):
        super().__init__(text)
        self.exception_name = exception_name
        self.text = text


def fail(err_code: int, err_msg: str, **extra: Any) -> dict[str, Any]:
    return {"success": False, "errCode": err_code, "errMsg": err_msg, **extra}


def ok(**fields: Any) -> dict[str, Any]:
    return {"success": True, "errCode": ErrorCode.SUCCESS, "errMsg": "OK!", **fields}


def missing(req: Any, name: str) -> dict[str, Any] | None:
    """The real servers' check of a required string parameter (``getStringParameter``)."""
    if not str(getattr(req, name, "")).strip():
        return fail(ErrorCode.BAD_REQUEST, f"Request miss necessary {name} data!")
    return None


def has(req: Any, name: str) -> bool:
    return bool(req.HasField(name))


@dataclass
class _Event:
    rebalance_id: int
    op_type: int
    parts: tuple[Part, ...]
    sent: bool = False


@dataclass
class _Consumer:
    consumer_id: str
    group: str
    topics: frozenset[str]
    last_seen: float
    held: set[Part] = field(default_factory=set)  # as last reported by the consumer
    disconnects: deque[_Event] = field(default_factory=deque)
    connects: deque[_Event] = field(default_factory=deque)


@dataclass
class _Group:
    topics: frozenset[str]
    members: dict[str, _Consumer] = field(default_factory=dict)  # join order
    not_allocated: bool = True

    def unreported(self) -> bool:
        return any(c.disconnects or c.connects for c in self.members.values())

    def queue_of(self, consumer: _Consumer) -> deque[_Event]:
        """The queue the consumer's next event comes from: disconnects while any member
        of the group has one, connects after."""
        if any(c.disconnects for c in self.members.values()):
            return consumer.disconnects
        return consumer.connects


class Master:
    """The Master's state and handlers (``now``: seconds on any monotonic clock)."""

    def __init__(self, config: SimConfig):
        self.config = config
        self.producers: dict[str, tuple[frozenset[str], float]] = {}
        self.groups: dict[str, _Group] = {}
        self.history: list[MasterEvent] = []
        self._rebalance_id = 0

    # -- housekeeping ---------------------------------------------------------------

    def expire(self, now: float) -> None:
        """Forget producers and consumers silent for longer than ``client_timeout``."""
        limit = now - self.config.client_timeout
        for pid in [p for p, (_, seen) in self.producers.items() if seen < limit]:
            del self.producers[pid]
        for group in list(self.groups.values()):
            for c in [c for c in group.members.values() if c.last_seen < limit]:
                self._leave(c, now, "heartbeat timeout")

    def _check_master(self, client_id: str) -> None:
        if self.config.standby:
            raise RpcError(STANDBY_EXCEPTION,
                           f"{self.config.host}:{self.config.master_port} is not master now. "
                           f"the connecting client id is {client_id}")

    def assignment(self) -> dict[str, dict[str, list[str]]]:
        """group -> consumer -> partition keys it holds (as reported), for views."""
        return {g: {cid: sorted(p.key for p in c.held) for cid, c in grp.members.items()}
                for g, grp in sorted(self.groups.items())}

    # -- producers ------------------------------------------------------------------

    def producerRegisterP2M(self, req: Any, now: float) -> dict[str, Any]:  # noqa: N802
        base = {"brokerCheckSum": -1}
        for name in ("clientId", "hostName"):
            if bad := missing(req, name):
                return {**bad, **base}
        self._check_master(req.clientId)
        topics = frozenset(t.strip() for t in req.topicList if t.strip())
        self.producers[req.clientId] = (topics, now)
        return ok(brokerCheckSum=self.config.broker_checksum,
                  brokerInfos=[b.info for b in self.config.brokers],
                  authorizedInfo={"visitAuthorizedToken": self.config.visit_token},
                  **self._appd_config(req))

    def producerHeartbeatP2M(self, req: Any, now: float) -> dict[str, Any]:  # noqa: N802
        base = {"brokerCheckSum": -1}
        for name in ("clientId", "hostName"):
            if bad := missing(req, name):
                return {**bad, **base}
        self._check_master(req.clientId)
        if req.clientId not in self.producers:
            return fail(ErrorCode.HB_NO_NODE, f"Invalid node id:{req.clientId}, "
                        "you have to append node first!", **base)
        topics = frozenset(t.strip() for t in req.topicList if t.strip())
        self.producers[req.clientId] = (topics, now)
        checksum = self.config.broker_checksum
        fields: dict[str, Any] = {
            "brokerCheckSum": checksum,
            "topicInfos": [self.config.topic_info(t) for t in sorted(topics)
                           if t in self.config.topics],
            "authorizedInfo": {"visitAuthorizedToken": self.config.visit_token},
            **self._appd_config(req),
        }
        if req.brokerCheckSum != checksum:
            fields["brokerInfos"] = [b.info for b in self.config.brokers]
        return ok(**fields)

    def producerCloseClientP2M(self, req: Any, now: float) -> dict[str, Any]:  # noqa: N802
        if bad := missing(req, "clientId"):
            return bad
        self._check_master(req.clientId)
        self.producers.pop(req.clientId, None)
        return ok()

    def _appd_config(self, req: Any) -> dict[str, Any]:
        if not has(req, "appdConfig"):
            return {}
        return {"appdConfig": {"configId": self.config.config_id,
                               "maxMsgSize": self.config.max_msg_size}}

    # -- consumers ------------------------------------------------------------------

    def consumerRegisterC2M(self, req: Any, now: float) -> dict[str, Any]:  # noqa: N802
        for name in ("clientId", "hostName", "groupName"):
            if bad := missing(req, name):
                return bad
        self._check_master(req.clientId)
        topics = frozenset(t.strip() for t in req.topicList if t.strip())
        if not topics:
            return fail(ErrorCode.BAD_REQUEST, "Request miss necessary subscribed topicList data!")
        undeployed = sorted(topics - set(self.config.topics))
        if undeployed:
            return fail(ErrorCode.TOPIC_NOT_DEPLOYED,
                        f"Requested topic [[{', '.join(undeployed)}]] not deployed!")
        group = self.groups.get(req.groupName)
        others = [c for c in group.members.values() if c.consumer_id != req.clientId] \
            if group else []
        if others and group is not None and group.topics != topics:
            return fail(ErrorCode.CLIENT_INCONSISTENT_TOPICSET,
                        f"[Inconsistency subscribe error] group={req.groupName}, "
                        f"request topics {sorted(topics)} not equal to the group's "
                        f"{sorted(group.topics)}!")
        if group is None:
            group = self.groups[req.groupName] = _Group(topics)
        elif not others:
            group.topics = topics
        consumer = group.members.get(req.clientId)
        if consumer is None:
            consumer = group.members[req.clientId] = _Consumer(
                req.clientId, req.groupName, topics, now)
            self.history.append(ConsumerJoined(now, req.groupName, req.clientId))
        consumer.last_seen = now
        consumer.held = self._parse_held(req.subscribeInfo)
        if consumer.held:
            group.not_allocated = False
        self._balance(group, now)
        return ok(notAllocated=group.not_allocated,
                  authorizedInfo={"visitAuthorizedToken": self.config.visit_token},
                  **self._flow_ids(req))

    def consumerHeartbeatC2M(self, req: Any, now: float) -> dict[str, Any]:  # noqa: N802
        for name in ("clientId", "groupName"):
            if bad := missing(req, name):
                return bad
        self._check_master(req.clientId)
        group = self.groups.get(req.groupName)
        if group is None:
            return fail(ErrorCode.HB_NO_NODE, f"Not found groupName {req.groupName} in holder!")
        consumer = group.members.get(req.clientId)
        if consumer is None:
            return fail(ErrorCode.HB_NO_NODE, "Update consumer node exception:Invalid node id:"
                        f"{req.groupName}_{req.clientId}, you have to append node first!")
        consumer.last_seen = now
        if req.reportSubscribeInfo:
            consumer.held = self._parse_held(req.subscribeInfo)
        rebalance_id = req.event.rebalanceId if has(req, "event") else UNDEFINED
        if rebalance_id > 0:
            group.not_allocated = False
            queue = group.queue_of(consumer)
            if queue and queue[0].sent:
                queue.popleft()
            self.history.append(RebalanceDone(
                now, consumer.group, consumer.consumer_id, rebalance_id, req.event.status,
                tuple(sorted(p.key for p in consumer.held))))
            self._balance(group, now)
        fields: dict[str, Any] = {}
        queue = group.queue_of(consumer)
        if queue and not queue[0].sent:
            event = queue[0]
            event.sent = True
            fields["event"] = {
                "rebalanceId": event.rebalance_id, "opType": event.op_type,
                "subscribeInfo": [p.subscribe_info(consumer.consumer_id, consumer.group)
                                  for p in event.parts]}
            self.history.append(RebalanceSent(now, consumer.group, consumer.consumer_id,
                                              event.rebalance_id, event.op_type))
        return ok(**fields, notAllocated=group.not_allocated,
                  authorizedInfo={"visitAuthorizedToken": self.config.visit_token},
                  **self._flow_ids(req))

    def consumerCloseClientC2M(self, req: Any, now: float) -> dict[str, Any]:  # noqa: N802
        for name in ("clientId", "groupName"):
            if bad := missing(req, name):
                return bad
        self._check_master(req.clientId)
        group = self.groups.get(req.groupName)
        if group is not None and req.clientId in group.members:
            self._leave(group.members[req.clientId], now, "closed")
        return ok()

    def _flow_ids(self, req: Any) -> dict[str, Any]:
        """The flow-control block the Master adds when the request carries flow-check
        ids: everything undefined, no rules (as a Master without flow control)."""
        if not (has(req, "defFlowCheckId") or has(req, "groupFlowCheckId")):
            return {}
        return {"ssdStoreId": UNDEFINED, "qryPriorityId": UNDEFINED,
                "defFlowCheckId": UNDEFINED, "groupFlowCheckId": UNDEFINED,
                "defFlowControlInfo": " ", "groupFlowControlInfo": " "}

    def _parse_held(self, subscribe_infos: Any) -> set[Part]:
        """Partitions named in ``consumerId@group#brokerId:host:port#topic:partitionId``
        strings that belong to this cluster (others are ignored, as stale)."""
        by_key = {p.key: p for t in self.config.topics for p in self.config.topic_parts(t)}
        held = set()
        for info in subscribe_infos:
            try:
                key = parse_subscribe_info(info)["partitionKey"]
            except MetadataError:
                continue
            if key in by_key:
                held.add(by_key[key])
        return held

    def _leave(self, consumer: _Consumer, now: float, reason: str) -> None:
        group = self.groups[consumer.group]
        del group.members[consumer.consumer_id]
        self.history.append(ConsumerLeft(now, consumer.group, consumer.consumer_id, reason))
        if group.members:
            self._balance(group, now)
        else:
            del self.groups[consumer.group]

    # -- balancing ------------------------------------------------------------------

    def _target(self, group: _Group) -> dict[str, set[Part]]:
        """Round robin of the group's partitions over its members in join order."""
        parts = [p for t in sorted(group.topics) for p in self.config.topic_parts(t)]
        members = list(group.members)
        target: dict[str, set[Part]] = {cid: set() for cid in members}
        for i, part in enumerate(parts):
            target[members[i % len(members)]].add(part)
        return target

    def _balance(self, group: _Group, now: float) -> None:
        """One balance round (none while the group has events unreported)."""
        if group.unreported():
            return
        target = self._target(group)
        rebalance_id = None
        for c in group.members.values():
            lose = tuple(sorted(c.held - target[c.consumer_id]))
            gain = tuple(sorted(target[c.consumer_id] - c.held))
            if not lose and not gain:
                continue
            if rebalance_id is None:
                self._rebalance_id += 1
                rebalance_id = self._rebalance_id
            if lose:
                self._queue(c, c.disconnects, rebalance_id,
                            EventType.DISCONNECT if gain else EventType.ONLY_DISCONNECT,
                            lose, now)
            if gain:
                self._queue(c, c.connects, rebalance_id,
                            EventType.CONNECT if lose else EventType.ONLY_CONNECT,
                            gain, now)

    def _queue(self, c: _Consumer, queue: deque[_Event], rebalance_id: int, op_type: int,
               parts: tuple[Part, ...], now: float) -> None:
        queue.append(_Event(rebalance_id, op_type, parts))
        self.history.append(RebalanceQueued(now, c.group, c.consumer_id, rebalance_id, op_type,
                                            tuple(p.key for p in parts)))
