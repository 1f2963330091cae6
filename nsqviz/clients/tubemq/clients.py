"""A TubeMQ producer and consumer on asyncio, on the codec (the Go client's sequences).

They follow the real clients' sequences -- register with the Master, heartbeat, send
to a Broker partition; register with the Master, act on the rebalance events its
heartbeat responses carry, register to Broker partitions, fetch and commit, close --
and work against the simulator or any TubeMQ cluster. Requests are filled as the Java
client fills them (protocolVer 3, timeout 10000 ms), except that the producer sends a
real CRC (the Java client sends -1, "do not check") so the Broker checks every message.

The consumer reports a processed event at once, in an extra heartbeat, instead of
waiting for the next period as the real clients do: a rebalance takes one round trip
per event instead of one heartbeat period.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from nsqviz.clients.tubemq.rpc import AsyncChannel, Call
from nsqviz.tubemq.metadata import (
    checksum,
    decode_payload,
    encode_payload,
    format_partition,
    format_subscribe_info,
    parse_broker_info,
    parse_subscribe_info,
    parse_topic_info,
)
from nsqviz.tubemq.tables import (
    META_VALUE_UNDEFINED,
    MSG_OPTYPE_REGISTER,
    MSG_OPTYPE_UNREGISTER,
    ErrorCode,
    EventStatus,
    EventType,
    ReadStatus,
    UnregisterStatus,
)

__all__ = ["Batch", "ClientError", "Consumer", "Producer", "Received"]

UNDEFINED = META_VALUE_UNDEFINED

_ids = itertools.count(1)


def client_id(group: str = "", host: str = "127.0.0.1") -> str:
    """``[group_]ip-pid-timestampMs-counter-py`` (the Go client's form)."""
    prefix = f"{group}_" if group else ""
    return f"{prefix}{host}-{os.getpid()}-{int(time.time()) * 1000}-{next(_ids)}-py"


class ClientError(Exception):
    """A server answered a call with an error code (or an exception)."""

    def __init__(self, call: Call, text: str):
        super().__init__(text)
        self.call = call
        self.err_code = call.err_code


def _ok(call: Call) -> Message:
    message = call.result()
    if message.errCode != ErrorCode.SUCCESS:
        raise ClientError(call, f"{call.method.name}: {message.errCode} {message.errMsg}")
    return message


class _MasterClient:
    """What a producer and a consumer share: a connection to the Master, one to each
    broker (opened on first use, shared by overlapping calls) and the heartbeat task.
    ``channel`` is the connection class (a benchmark swaps in an in-process one)."""

    channel: type[AsyncChannel] = AsyncChannel

    def __init__(self, master: str) -> None:
        self.master_address = master
        self._master: AsyncChannel | None = None
        self._channels: dict[str, AsyncChannel] = {}
        self._task: asyncio.Task[None] | None = None

    def _channel(self, address: str) -> AsyncChannel:
        if address not in self._channels:
            self._channels[address] = self.channel(address)
        return self._channels[address]

    async def _leave(self, method: str, request: dict[str, Any]) -> None:
        """Stop the heartbeat, say goodbye to the Master with ``method`` and hang up."""
        if self._task is not None:
            self._task.cancel()
        if self._master is not None:
            await self._master.call(method, request)
            await self._master.close()

    async def _hang_up_brokers(self) -> None:
        for channel in self._channels.values():
            await channel.close()


class Producer(_MasterClient):
    """Registers with the Master, learns the partitions of its topics from a heartbeat,
    and sends each message to the next partition (round robin). Calls may overlap
    (``asyncio.gather`` of sends): they share one connection per server, paired by
    serialNo.
    """

    def __init__(self, master: str, topics: list[str], *, heartbeat_interval: float = 10.0,
                 host: str = "127.0.0.1"):
        super().__init__(master)
        self.topics = list(topics)
        self.heartbeat_interval = heartbeat_interval
        self.host = host
        self.client_id = client_id(host=host)
        self.broker_checksum = -1
        self.brokers: dict[int, str] = {}  # brokerId -> host:port
        self.partitions: dict[str, list[tuple[int, int]]] = {}  # topic -> (brokerId, pid)
        self._rr: dict[str, itertools.cycle[tuple[int, int]]] = {}

    async def start(self) -> Producer:
        self._master = await self.channel(self.master_address).connect()
        answer = _ok(await self._master.call("producerRegisterP2M", {
            "clientId": self.client_id, "topicList": self.topics, "brokerCheckSum": -1,
            "hostName": self.host}))
        self._brokers(answer)
        await self.heartbeat()
        self._task = asyncio.get_running_loop().create_task(self._beat())
        return self

    def _brokers(self, answer: Message) -> None:
        self.broker_checksum = answer.brokerCheckSum
        for text in answer.brokerInfos:
            info = parse_broker_info(text)
            self.brokers[info["brokerId"]] = f"{info['host']}:{info['port']}"

    async def heartbeat(self) -> Message:
        assert self._master is not None, "start() first"
        answer = _ok(await self._master.call("producerHeartbeatP2M", {
            "clientId": self.client_id, "brokerCheckSum": self.broker_checksum,
            "hostName": self.host, "topicList": self.topics}))
        self._brokers(answer)
        for text in answer.topicInfos:
            info = parse_topic_info(text)
            parts = [(b["brokerId"], pid) for b in info["brokers"] for pid in b["partitionIds"]]
            if parts != self.partitions.get(info["topic"]):
                self.partitions[info["topic"]] = parts
                self._rr[info["topic"]] = itertools.cycle(parts)
        return answer

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            try:
                await self.heartbeat()
            except (ClientError, ConnectionError):
                continue

    async def send(self, topic: str, body: bytes, *, attribute: str | None = None,
                   msg_type: str | None = None) -> Message:
        """Send one message; returns the Broker's SendMessageResponseB2P (errCode 200),
        raises :class:`ClientError` otherwise."""
        if topic not in self._rr:
            raise ValueError(f"no partitions known for topic {topic!r}")
        broker_id, pid = next(self._rr[topic])
        data, flag = encode_payload(body, attribute)
        request: dict[str, Any] = {
            "clientId": self.client_id, "topicName": topic, "partitionId": pid, "data": data,
            "flag": flag, "checkSum": checksum(data),
            "sentAddr": int.from_bytes(socket.inet_aton(self.host), "big", signed=True)}
        if msg_type:
            request["msgType"] = msg_type
        return _ok(await self._channel(self.brokers[broker_id]).call("sendMessageP2B", request))

    async def close(self) -> None:
        await self._leave("producerCloseClientP2M", {"clientId": self.client_id})
        await self._hang_up_brokers()


@dataclass
class _Held:
    """A partition the consumer holds."""

    subscribe_info: str  # consumerId@group#partition
    partition: str  # brokerId:host:port#topic:partitionId
    broker: str  # host:port
    topic: str
    partition_id: int
    key: str
    offset: int = -1


@dataclass(frozen=True, slots=True)
class Received:
    """One message as the consumer decodes it."""

    partition_key: str
    message_id: int
    body: bytes
    attribute: str | None
    flag: int


@dataclass
class Batch:
    """What one GetMessage returned, to be committed (or rolled back) as a whole."""

    partition_key: str
    messages: list[Received] = field(default_factory=list)
    offset: int = -1


class Consumer(_MasterClient):
    """A consumer of one group: partitions come and go with the Master's events."""

    def __init__(self, master: str, group: str, topics: list[str], *,
                 heartbeat_interval: float = 10.0, read_status: int = ReadStatus.NORMAL,
                 host: str = "127.0.0.1"):
        super().__init__(master)
        self.group = group
        self.topics = list(topics)
        self.heartbeat_interval = heartbeat_interval
        self.read_status = read_status
        self.host = host
        self.client_id = client_id(group, host)
        self.held: dict[str, _Held] = {}  # partition key -> partition
        self.events: list[Message] = []  # every event the Master sent, in order
        self._report: Message | None = None
        self._next = 0

    async def start(self) -> Consumer:
        self._master = await self.channel(self.master_address).connect()
        _ok(await self._master.call("consumerRegisterC2M", {
            "clientId": self.client_id, "groupName": self.group, "hostName": self.host,
            "topicList": self.topics, "defFlowCheckId": UNDEFINED,
            "groupFlowCheckId": UNDEFINED, "qryPriorityId": UNDEFINED}))
        await self.heartbeat()
        self._task = asyncio.get_running_loop().create_task(self._beat())
        return self

    async def heartbeat(self) -> Message:
        """One heartbeat to the Master (reporting the last event done); an event in the
        answer is acted on at once and reported in a further heartbeat."""
        request: dict[str, Any] = {
            "clientId": self.client_id, "groupName": self.group,
            "reportSubscribeInfo": self._report is not None,
            "defFlowCheckId": UNDEFINED, "groupFlowCheckId": UNDEFINED,
            "qryPriorityId": UNDEFINED}
        if self._report is not None:
            request["event"] = self._report
            request["subscribeInfo"] = [h.subscribe_info for h in self.held.values()]
            self._report = None
        assert self._master is not None, "start() first"
        answer = _ok(await self._master.call("consumerHeartbeatC2M", request))
        if answer.HasField("event"):
            event = answer.event
            self.events.append(event)
            await self._act(event)
            self._report = {"rebalanceId": event.rebalanceId, "opType": event.opType,
                            "status": EventStatus.DONE, "subscribeInfo": list(event.subscribeInfo)}
            return await self.heartbeat()
        return answer

    async def _act(self, event: Message) -> None:
        try:
            kind = EventType(event.opType)
        except ValueError:
            kind = EventType.UNKNOWN
        for text in event.subscribeInfo:
            info = parse_subscribe_info(text)
            broker = f"{info['host']}:{info['port']}"
            key = info["partitionKey"]
            if kind.connects and key not in self.held:
                answer = (await self._broker_register(broker, info, MSG_OPTYPE_REGISTER,
                                                      self.read_status)).message
                if answer is not None and answer.errCode == ErrorCode.SUCCESS:
                    partition = format_partition(info["brokerId"], info["host"], info["port"],
                                                 info["topic"], info["partitionId"])
                    self.held[key] = _Held(
                        format_subscribe_info(self.client_id, self.group, partition),
                        partition, broker, info["topic"], info["partitionId"], key,
                        answer.currOffset)
            elif kind.disconnects and key in self.held:
                del self.held[key]
                await self._broker_register(broker, info, MSG_OPTYPE_UNREGISTER,
                                            UnregisterStatus.NOT_CONSUMED)

    async def _broker_register(self, broker: str, info: dict[str, Any], op: int,
                               read_status: int) -> Call:
        return await self._channel(broker).call("consumerRegisterC2B", {
            "opType": op, "clientId": self.client_id, "groupName": self.group,
            "topicName": info["topic"], "partitionId": info["partitionId"],
            "readStatus": read_status, "qryPriorityId": UNDEFINED})

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            try:
                await self.heartbeat()
                for broker in {h.broker for h in self.held.values()}:
                    await self._channel(broker).call("consumerHeartbeatC2B", {
                        "clientId": self.client_id, "groupName": self.group,
                        "readStatus": ReadStatus.NORMAL,
                        "partitionInfo": [h.partition for h in self.held.values()
                                          if h.broker == broker]})
            except (ClientError, ConnectionError):
                continue

    async def fetch(self) -> Batch | None:
        """One GetMessage on the next held partition that has messages (``None`` when
        none has): the batch stays uncommitted until :meth:`commit`."""
        held = list(self.held.values())
        for i in range(len(held)):
            part = held[(self._next + i) % len(held)]
            call = await self._channel(part.broker).call("getMessagesC2B", {
                "clientId": self.client_id, "partitionId": part.partition_id,
                "groupName": self.group, "topicName": part.topic, "lastPackConsumed": False,
                "manualCommitOffset": False, "escFlowCtrl": False})
            answer = call.message
            if answer is None or answer.errCode != ErrorCode.SUCCESS:
                continue
            self._next = (self._next + i + 1) % len(held)
            batch = Batch(part.key, offset=answer.currOffset)
            for m in answer.messages:
                if m.checkSum != checksum(m.payLoadData):
                    continue  # the real clients drop it silently
                payload = decode_payload(m.payLoadData, m.flag)
                batch.messages.append(Received(part.key, m.messageId, payload["body"],
                                               payload.get("attribute"), m.flag))
            return batch
        return None

    async def commit(self, batch: Batch, consumed: bool = True) -> Message:
        """Commit a batch (``consumed=False``: give it back, it comes again)."""
        part = self.held.get(batch.partition_key)
        if part is None:
            raise KeyError(f"partition {batch.partition_key} is no longer held")
        answer = _ok(await self._channel(part.broker).call("consumerCommitC2B", {
            "clientId": self.client_id, "topicName": part.topic,
            "partitionId": part.partition_id, "groupName": self.group,
            "lastPackConsumed": consumed}))
        part.offset = answer.currOffset
        return answer

    async def consume(self, count: int, *, timeout: float = 30.0,
                      idle_wait: float = 0.4) -> list[Received]:
        """Fetch and commit, batch after batch, until ``count`` messages came or
        ``timeout`` seconds passed; when no held partition has data, wait ``idle_wait``
        (the Go client's 404 back-off) and heartbeat, so rebalance events keep coming."""
        got: list[Received] = []
        deadline = asyncio.get_running_loop().time() + timeout
        while len(got) < count and asyncio.get_running_loop().time() < deadline:
            batch = await self.fetch()
            if batch is None:
                await asyncio.sleep(idle_wait)
                await self.heartbeat()
                continue
            await self.commit(batch)
            got.extend(batch.messages)
        return got

    async def close(self) -> None:
        """CloseRequestC2M, then unregister every held partition (as the Go client)."""
        await self._leave("consumerCloseClientC2M",
                          {"clientId": self.client_id, "groupName": self.group})
        for part in list(self.held.values()):
            info = {"topic": part.topic, "partitionId": part.partition_id}
            await self._broker_register(part.broker, info, MSG_OPTYPE_UNREGISTER,
                                        UnregisterStatus.NOT_CONSUMED)
        self.held.clear()
        await self._hang_up_brokers()
