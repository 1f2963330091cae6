"""A simulated Broker: producers append messages to its partitions; consumers register
to a partition, fetch, commit, heartbeat and unregister.

As for the Master, each public method is named after the Java handler
(``BrokerServiceServer``), takes the decoded inner request and the time, and returns
the inner response's fields; checks, codes and texts follow the real handler. A
partition of a group is held by one consumer at a time (``group:topic:partitionId``,
the broker's ``partStr``); a holder silent for ``client_timeout`` is dropped when
someone else asks for the partition (and told 410 that once, as the real broker does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nsqviz.servers.tubemq.cluster import BrokerNode, SimConfig
from nsqviz.servers.tubemq.master import fail, has, missing, ok
from nsqviz.servers.tubemq.store import BrokerStore
from nsqviz.tubemq.metadata import MetadataError, checksum, parse_partition
from nsqviz.tubemq.tables import (
    MSG_OPTYPE_REGISTER,
    MSG_OPTYPE_UNREGISTER,
    ErrorCode,
    UnregisterStatus,
)

__all__ = ["Broker"]

Check = Callable[[], dict[str, Any] | None]
"""One of a handler's parameter checks: the failure answer, or ``None``."""



@dataclass
class _Holder:
    consumer_id: str
    last_seen: float
    filters: frozenset[str]


class Broker:
    """One Broker's state and handlers."""

    def __init__(self, config: SimConfig, node: BrokerNode, store: BrokerStore | None = None):
        self.config = config
        self.node = node
        self.store = store or BrokerStore()
        self.holders: dict[str, _Holder] = {}  # partStr -> consumer holding it

    @property
    def broker_id(self) -> int:
        return self.node.broker_id

    # -- checks shared by the handlers ----------------------------------------------

    def _topic(self, req: Any) -> dict[str, Any] | None:
        if bad := missing(req, "topicName"):
            return bad
        if req.topicName.strip() not in self.config.topics:
            return fail(ErrorCode.FORBIDDEN, f"topicName {req.topicName.strip()} not existed, "
                        "please check your configure")
        return None

    def _partition(self, req: Any) -> dict[str, Any] | None:
        if bad := self._topic(req):
            return bad
        pid = req.partitionId
        real = pid if pid < 10000 else pid % 10000
        if not 0 <= real < self.config.partitions:
            return fail(ErrorCode.FORBIDDEN,
                        f"partitionId {req.topicName.strip()}-{pid} not existed,"
                        " please check your configure")
        return None

    @staticmethod
    def _part_str(group: str, topic: str, pid: int) -> str:
        return f"{group}:{topic}:{pid}"

    # -- producer -------------------------------------------------------------------

    def sendMessageP2B(self, req: Any, now: float) -> dict[str, Any]:  # noqa: N802
        if bad := missing(req, "clientId") or self._partition(req):
            return bad
        topic = req.topicName.strip()
        data = bytes(req.data)
        if not data:
            return fail(ErrorCode.BAD_REQUEST, "data length is zero!")
        if len(data) > self.config.max_msg_size:
            return fail(ErrorCode.BAD_REQUEST, "data length over max length, allowed max length is "
                        f"{self.config.max_msg_size}, data length is {len(data)}")
        crc = checksum(data)
        if req.checkSum != -1 and req.checkSum != crc:
            return fail(ErrorCode.FORBIDDEN,
                        f"Checksum msg data failure: {req.checkSum} of {topic} "
                        f"not equal to the data's checksum of {crc}")
        msg_type = req.msgType.strip() if has(req, "msgType") else ""
        message, offset = self.store.append(topic, req.partitionId, flag=req.flag,
                                            payload=data, msg_type=msg_type,
                                            now_ms=int(now * 1000))
        return {"success": True, "errCode": ErrorCode.SUCCESS, "errMsg": str(message.message_id),
                "requireAuth": False, "messageId": message.message_id,
                "appendTime": message.append_time, "appendOffset": offset}

    # -- consumer -------------------------------------------------------------------

    def consumerRegisterC2B(self, req: Any, now: float) -> dict[str, Any]:  # noqa: N802
        base = {"currOffset": -1}
        checks: tuple[Check, ...] = (lambda: missing(req, "clientId"), lambda: self._topic(req),
                                     lambda: missing(req, "groupName"))
        for check in checks:
            if bad := check():
                return {**bad, **base}
        topic, group, cid = req.topicName.strip(), req.groupName.strip(), req.clientId.strip()
        part_str = self._part_str(group, topic, req.partitionId)
        if req.opType == MSG_OPTYPE_REGISTER:
            return self._register(req, now, topic, group, cid, part_str, base)
        if req.opType == MSG_OPTYPE_UNREGISTER:
            return self._unregister(req, topic, group, cid, part_str, base)
        return fail(ErrorCode.BAD_REQUEST, f"Invalid request:{req.opType}", **base)

    def _register(self, req: Any, now: float, topic: str, group: str, cid: str,
                  part_str: str, base: dict[str, Any]) -> dict[str, Any]:
        holder = self.holders.get(part_str)
        if holder is not None and holder.consumer_id != cid:
            if now - holder.last_seen >= self.config.client_timeout:
                del self.holders[part_str]
                text = f"[Duplicated Register] Remove Invalid Consumer Register " \
                       f"{holder.consumer_id}#{part_str}"
            else:
                text = f"[Duplicated Register] Partition {self.broker_id}#{part_str} " \
                       f"has been registered by {holder.consumer_id}"
            return fail(ErrorCode.PARTITION_OCCUPIED, text, **base)
        if not 0 <= req.partitionId < self.config.partitions:
            return fail(ErrorCode.FORBIDDEN, f"Topic {topic}-{req.partitionId} not existed, "
                        "please check your configure", **base)
        filters = frozenset(f.strip() for f in req.filterCondStr if f.strip())
        self.holders[part_str] = _Holder(cid, now, filters)
        req_offset = req.currOffset if has(req, "currOffset") else -1
        pos = self.store.load_offset(group, topic, req.partitionId, req.readStatus, req_offset)
        return ok(currOffset=pos.offset,
                  maxOffset=self.store.log(topic, req.partitionId).max_offset)

    def _unregister(self, req: Any, topic: str, group: str, cid: str, part_str: str,
                    base: dict[str, Any]) -> dict[str, Any]:
        holder = self.holders.get(part_str)
        if holder is None:
            return fail(ErrorCode.HB_NO_NODE, f"UnRegistered Consumer {cid}, "
                        "you have to register firstly!", **base)
        if holder.consumer_id != cid:
            return fail(ErrorCode.DUPLICATE_PARTITION, f"[Duplicated Request]Partition {part_str} "
                        f"has been consumed by {holder.consumer_id};Current consumer {cid}, "
                        f"broker={self.node.host}", **base)
        pos = self.store.group_offset(group, topic, req.partitionId)
        if pos is not None:
            pos.commit(req.readStatus == UnregisterStatus.CONSUMED)
        del self.holders[part_str]
        return ok(**base)

    def consumerHeartbeatC2B(self, req: Any, now: float) -> dict[str, Any]:  # noqa: N802
        for name in ("clientId", "groupName"):
            if bad := missing(req, name):
                return bad
        cid, group = req.clientId.strip(), req.groupName.strip()
        failures = []
        for info in req.partitionInfo:
            try:
                part = parse_partition(info)
            except MetadataError:  # the broker skips what it cannot read
                continue
            holder = self.holders.get(self._part_str(group, part["topic"], part["partitionId"]))
            if holder is None:
                failures.append(f"{ErrorCode.HB_NO_NODE}:{info}")
            elif holder.consumer_id != cid:
                failures.append(f"{ErrorCode.DUPLICATE_PARTITION}:{info}")
            else:
                holder.last_seen = now
        return ok(requireAuth=False, hasPartFailure=bool(failures), failureInfo=failures)

    def getMessagesC2B(self, req: Any, now: float) -> dict[str, Any]:  # noqa: N802
        base = {"currOffset": -1, "escFlowCtrl": False, "currDataDlt": -1, "minLimitTime": 0}
        checks: tuple[Check, ...] = (lambda: missing(req, "clientId"),
                                     lambda: missing(req, "groupName"), lambda: self._topic(req))
        for check in checks:
            if bad := check():
                return {**bad, **base}
        topic, group, cid = req.topicName.strip(), req.groupName.strip(), req.clientId.strip()
        part_str = self._part_str(group, topic, req.partitionId)
        holder = self.holders.get(part_str)
        if holder is None:
            return fail(ErrorCode.HB_NO_NODE, f"UnRegistered Consumer:{cid}, "
                        "you have to register firstly!", **base)
        if holder.consumer_id != cid:
            return fail(ErrorCode.DUPLICATE_PARTITION, f"[Duplicated Request] Partition={part_str} "
                        f"of Broker={self.broker_id} has been consumed by {holder.consumer_id};"
                        f"Current consumer {cid}", **base)
        holder.last_seen = now
        log = self.store.log(topic, req.partitionId)
        pos = self.store.group_offset(group, topic, req.partitionId)
        assert pos is not None  # a registered holder has its group's offset
        if req.lastPackConsumed:
            pos.commit(True)
        offset = pos.offset
        if offset >= log.max_offset:
            return fail(ErrorCode.NOT_FOUND, "The request offset reached maxOffset!", **base)
        messages, read = log.read(offset, self.config.fetch_max_bytes, holder.filters)
        pos.tmp = read
        if not messages:
            pos.commit(True)
        return ok(**{**base, "currOffset": offset, "maxOffset": log.max_offset,
                     "currDataDlt": log.max_offset - offset - read, "requireSlow": False},
                  messages=[{"messageId": m.message_id, "checkSum": m.checksum,
                             "payLoadData": m.payload, "flag": m.flag} for m in messages])

    def consumerCommitC2B(self, req: Any, now: float) -> dict[str, Any]:  # noqa: N802
        base = {"currOffset": -1}
        checks: tuple[Check, ...] = (lambda: missing(req, "clientId"),
                                     lambda: missing(req, "groupName"),
                                     lambda: self._partition(req))
        for check in checks:
            if bad := check():
                return {**bad, **base}
        topic, group, cid = req.topicName.strip(), req.groupName.strip(), req.clientId.strip()
        holder = self.holders.get(self._part_str(group, topic, req.partitionId))
        if holder is None:
            return fail(ErrorCode.UNAUTHORIZED, "The partition not registered by consumers", **base)
        if holder.consumer_id != cid:
            return fail(ErrorCode.UNAUTHORIZED, "The partition has been registered by other "
                        f"consumer: {holder.consumer_id}", **base)
        consumed = req.lastPackConsumed if has(req, "lastPackConsumed") else True
        pos = self.store.group_offset(group, topic, req.partitionId)
        assert pos is not None  # a registered holder has its group's offset
        offset = pos.commit(consumed)
        return ok(currOffset=offset,
                  maxOffset=self.store.log(topic, req.partitionId).max_offset)
