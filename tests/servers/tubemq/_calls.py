"""Calling the simulator's handlers the way its server does: build the method's request
message from the method table, call the handler, and build the response message from
what it returns (so a missing required field fails here, as it would on the wire)."""

from __future__ import annotations

from typing import Any

from nsqviz.servers.tubemq.cluster import Part
from nsqviz.tubemq.protos import MESSAGES
from nsqviz.tubemq.tables import METHODS_BY_NAME


def call(target: Any, method: str, now: float = 0.0, **fields: Any):
    m = METHODS_BY_NAME[method]
    request = MESSAGES[m.request](**fields)
    answer = getattr(target, method)(request, now)
    response = MESSAGES[m.response](**answer)
    assert response.IsInitialized(), response.FindInitializationErrors()
    return response


def register_c2b(broker, part: Part, cid: str, group: str, now: float = 0.0, *,
                 op: int = 31, read_status: int = 0):
    return call(broker, "consumerRegisterC2B", now, opType=op, clientId=cid, groupName=group,
                topicName=part.topic, partitionId=part.partition_id, readStatus=read_status)


def send(broker, topic: str, pid: int, data: bytes, now: float = 0.0, **extra: Any):
    fields = {"clientId": "p1", "topicName": topic, "partitionId": pid, "data": data,
              "flag": 0, "checkSum": -1, "sentAddr": 0x7F000001, **extra}
    return call(broker, "sendMessageP2B", now, **fields)


def fetch(broker, part: Part, cid: str, group: str, now: float = 0.0, consumed: bool = False):
    return call(broker, "getMessagesC2B", now, clientId=cid, partitionId=part.partition_id,
                groupName=group, topicName=part.topic, lastPackConsumed=consumed,
                manualCommitOffset=False)


def commit(broker, part: Part, cid: str, group: str, now: float = 0.0, consumed: bool = True):
    return call(broker, "consumerCommitC2B", now, clientId=cid, topicName=part.topic,
                partitionId=part.partition_id, groupName=group, lastPackConsumed=consumed)
