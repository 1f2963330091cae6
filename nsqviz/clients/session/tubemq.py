"""A stepping TubeMQ session for notebooks: one request per step, everything recorded.

Like the NSQ session beside it (:mod:`nsqviz.clients.session.nsq`): a :class:`TubeSession`
holds clients -- a producer, one or more consumers -- and each method of a client sends
exactly one request (or, for a consumer acting on a rebalance event, one per partition)
and returns the :class:`Step`: the request and answer frames, their blocks, the three
protobuf messages on each side and the inner request and response, the serialNo that
pairs them, the latency, and the client's state before and after.

By default a session talks to an embedded simulator
(:class:`~nsqviz.servers.tubemq.EmbeddedSim` started once per process on free loopback
ports) and can show what its Master decided (:meth:`TubeSession.master_history`);
``TubeSession("host:8715")`` talks to any Master.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from nsqviz.clients.session.outcomes import SessionClosed, closed_message, made_where
from nsqviz.clients.tubemq.clients import client_id
from nsqviz.clients.tubemq.rpc import Call, Channel
from nsqviz.tubemq.events import Answer, Request
from nsqviz.tubemq.grammar import FrameParts, parse_frame
from nsqviz.tubemq.metadata import (
    checksum,
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
    EventStatus,
    EventType,
    ReadStatus,
    UnregisterStatus,
)

if TYPE_CHECKING:
    from nsqviz.servers.tubemq import EmbeddedSim

__all__ = ["ConsumerSteps", "NotHeld", "ProducerSteps", "Step", "TubeSession", "default_sim"]

UNDEFINED = META_VALUE_UNDEFINED

_default_sim = None
_default_lock = threading.Lock()


def default_sim(**fields: Any) -> EmbeddedSim:
    """The process's embedded simulator: started on first use (topic ``demo``, two
    Brokers of two partitions), stopped at interpreter exit."""
    global _default_sim
    with _default_lock:
        if _default_sim is None:
            from nsqviz.servers.tubemq import EmbeddedSim

            sim = EmbeddedSim(**({"topics": ("demo",)} | fields)).start()
            atexit.register(sim.stop)
            _default_sim = sim
        return _default_sim


@dataclass
class Step:
    """One request sent and the answer that came back for it."""

    index: int
    client: str
    server: str  # "Master" or "Broker <id>"
    call: Call
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)

    @property
    def request(self) -> Request:
        return self.call.request

    @property
    def answer(self) -> Answer | None:
        return self.call.answer

    @property
    def serial(self) -> int:
        return self.call.request.serialNo

    @property
    def latency(self) -> float | None:
        return self.call.latency

    @property
    def request_frame(self) -> FrameParts:
        return parse_frame(self.call.sent)

    @property
    def answer_frame(self) -> FrameParts | None:
        return parse_frame(self.call.received) if self.call.received else None

    @property
    def summary(self) -> str:
        """``RequestName → ResponseName errCode errMsg`` (no times or ports)."""
        answer = self.call.answer
        if answer is None:
            got = "no answer"
        elif self.call.message is None:
            got = f"{answer.name} {answer.body.exceptionName.rsplit('.', 1)[-1]}"
        else:
            msg = self.call.message
            got = f"{answer.name} {msg.errCode} {msg.errMsg}" if msg.HasField("errCode") \
                else answer.name
        return f"{self.call.request.name} #{self.serial} → {got}"

    def __repr__(self) -> str:  # no times or ports: notebooks store this text
        return f"<Step {self.index} {self.client}→{self.server}: {self.summary}>"


class TubeSession:
    """Clients stepped one request at a time, and the transcript of their steps."""

    def __init__(self, master: str | None = None, *, sim: Any = None):
        if master is None:
            sim = sim or default_sim()
            master = sim.master_address
        self.sim = sim
        self.master_address = master
        self.steps: list[Step] = []
        self.clients: dict[str, _Client] = {}
        self._closed = False
        self.made = made_where()  # named when a step comes after close()

    @property
    def closed(self) -> bool:
        """:meth:`close` ran, or the embedded simulator it talks to was stopped."""
        return self._closed or (self.sim is not None and not self.sim.running)

    def check_open(self) -> None:
        """Raise :class:`~nsqviz.clients.session.outcomes.SessionClosed` once :attr:`closed`."""
        if self._closed:
            raise SessionClosed(closed_message("session", self.made))
        if self.closed:
            raise SessionClosed(closed_message("session's simulator", self.made,
                                               how="stop"))

    def producer(self, name: str = "producer", topics: tuple[str, ...] = ("demo",),
                 **kw: Any) -> ProducerSteps:
        client = self.clients[name] = ProducerSteps(self, name, list(topics), **kw)
        return client

    def consumer(self, name: str = "consumer", group: str = "group1",
                 topics: tuple[str, ...] = ("demo",), **kw: Any) -> ConsumerSteps:
        client = self.clients[name] = ConsumerSteps(self, name, group, list(topics), **kw)
        return client

    def master_history(self) -> list[Any]:
        """What the embedded simulator's Master decided (joins, rebalance events)."""
        sim = self.sim
        if sim is None:
            raise RuntimeError("only an embedded simulator shows its Master's decisions")
        self.check_open()
        history: list[Any] = sim.call(lambda: list(sim.simulation.master.history))
        return history

    def assignment(self) -> dict[str, dict[str, list[str]]]:
        """group -> consumer -> partition keys, as the embedded Master sees it."""
        self.check_open()
        sim = self.sim
        assignment: dict[str, dict[str, list[str]]] = sim.call(
            lambda: sim.simulation.master.assignment())
        return assignment

    def close(self) -> None:
        """Disconnect every client; a later step raises
        :class:`~nsqviz.clients.session.outcomes.SessionClosed`."""
        self._closed = True
        for client in self.clients.values():
            client.disconnect()


class _Client:
    """What producers and consumers share: a channel per server, stepping."""

    def __init__(self, session: TubeSession, name: str, *, host: str = "127.0.0.1",
                 protocol_ver: int = 3):
        self.session = session
        self.name = name
        self.host = host
        self.protocol_ver = protocol_ver
        self.channels: dict[str, Channel] = {}
        self.brokers: dict[int, str] = {}  # brokerId -> host:port

    def _channel(self, address: str) -> Channel:
        if address not in self.channels:
            self.channels[address] = Channel(address, protocol_ver=self.protocol_ver)
        return self.channels[address]

    def _server(self, address: str) -> str:
        if address == self.session.master_address:
            return "Master"
        ids = [b for b, a in self.brokers.items() if a == address]
        return f"Broker {ids[0]}" if ids else address

    def state(self) -> dict[str, Any]:
        """The client's state (each connection's session state from the codec)."""
        return {"connections": {self._server(a): c.codec.state.value
                                for a, c in self.channels.items()}}

    def step(self, address: str, method: str, fields: dict[str, Any] | Message, *,
             check: bool = True, **envelope: Any) -> Step:
        """Send one request (``check=False``: even one the codec would refuse)."""
        self.session.check_open()
        before = self.state()
        call = self._channel(address).call(method, fields, check=check, **envelope)
        self._absorb(call)
        step = Step(len(self.session.steps) + 1, self.name, self._server(address), call,
                    before, self.state())
        self.session.steps.append(step)
        return step

    def _absorb(self, call: Call) -> None:
        """Update the client's own bookkeeping from an answer."""

    def _learn_brokers(self, infos: Iterable[str]) -> None:
        for text in infos:
            info = parse_broker_info(text)
            self.brokers[info["brokerId"]] = f"{info['host']}:{info['port']}"

    def disconnect(self) -> None:
        for channel in self.channels.values():
            channel.close()
        self.channels.clear()


class ProducerSteps(_Client):
    """A producer, one request per method (the Go client's producer sequence)."""

    def __init__(self, session: TubeSession, name: str, topics: list[str], *,
                 client: str | None = None, **kw: Any):
        super().__init__(session, name, **kw)
        self.topics = topics
        self.client_id = client or client_id(host=self.host)
        self.broker_checksum = -1
        self.partitions: dict[str, list[tuple[int, int]]] = {}
        self.sent = 0
        self._rr = 0

    def state(self) -> dict[str, Any]:
        return {**super().state(), "brokerCheckSum": self.broker_checksum,
                "partitions": {t: [f"{b}:{t}:{p}" for b, p in ps]
                               for t, ps in self.partitions.items()}, "sent": self.sent}

    def _absorb(self, call: Call) -> None:
        msg = call.message
        if msg is None or not call.ok:
            return
        if msg.DESCRIPTOR.name in ("RegisterResponseM2P", "HeartResponseM2P"):
            self.broker_checksum = msg.brokerCheckSum
            self._learn_brokers(msg.brokerInfos)
        if msg.DESCRIPTOR.name == "HeartResponseM2P":
            for text in msg.topicInfos:
                info = parse_topic_info(text)
                self.partitions[info["topic"]] = [
                    (b["brokerId"], pid) for b in info["brokers"] for pid in b["partitionIds"]]
        if msg.DESCRIPTOR.name == "SendMessageResponseB2P":
            self.sent += 1

    def register(self, **extra: Any) -> Step:
        return self.step(self.session.master_address, "producerRegisterP2M", {
            "clientId": self.client_id, "topicList": self.topics, "brokerCheckSum": -1,
            "hostName": self.host, **extra})

    def heartbeat(self, **extra: Any) -> Step:
        return self.step(self.session.master_address, "producerHeartbeatP2M", {
            "clientId": self.client_id, "brokerCheckSum": self.broker_checksum,
            "hostName": self.host, "topicList": self.topics, **extra})

    def send(self, body: bytes | str, *, topic: str | None = None,
             partition: tuple[int, int] | None = None, attribute: str | None = None,
             check_sum: int | None = None, **extra: Any) -> Step:
        """Send one message to ``partition`` ``(brokerId, partitionId)`` or the next one
        (round robin); ``check_sum`` overrides the CRC the producer computes."""
        self.session.check_open()  # before the partition choice reads what close() cleared
        topic = topic or self.topics[0]
        if partition is None:
            parts = self.partitions.get(topic) or [(min(self.brokers or {1: ""}), 0)]
            partition = parts[self._rr % len(parts)]
            self._rr += 1
        broker_id, pid = partition
        body = body.encode() if isinstance(body, str) else body
        data, flag = encode_payload(body, attribute)
        return self.step(self.brokers[broker_id], "sendMessageP2B", {
            "clientId": self.client_id, "topicName": topic, "partitionId": pid, "data": data,
            "flag": flag, "checkSum": checksum(data) if check_sum is None else check_sum,
            "sentAddr": 0x7F000001, **extra})

    def close(self) -> Step:
        return self.step(self.session.master_address, "producerCloseClientP2M",
                         {"clientId": self.client_id})


class NotHeld(LookupError):
    """A fetch or commit named a partition the consumer does not hold; one line in
    IPython, like :class:`~nsqviz.clients.session.outcomes.SessionClosed`."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class ConsumerSteps(_Client):
    """A consumer of one group, one request per method (the Go client's consumer sequence)."""

    def __init__(self, session: TubeSession, name: str, group: str, topics: list[str], *,
                 client: str | None = None, **kw: Any):
        super().__init__(session, name, **kw)
        self.group = group
        self.topics = topics
        self.client_id = client or client_id(group, self.host)
        self.held: dict[str, dict[str, Any]] = {}  # partition key -> parsed subscribeInfo
        self.offsets: dict[str, int] = {}  # partition key -> committed offset
        self.event: Message | None = None  # the last event the Master sent
        self.report: dict[str, Any] | None = None  # the event to report as done
        self._pending_key: str | None = None  # the partition the step in flight is about

    def state(self) -> dict[str, Any]:
        pending = None if self.event is None else \
            f"rebalanceId {self.event.rebalanceId} opType {self.event.opType}"
        return {**super().state(), "held": sorted(self.held), "offsets": dict(self.offsets),
                "event": pending, "to report": None if self.report is None
                else self.report["rebalanceId"]}

    def _absorb(self, call: Call) -> None:
        msg = call.message
        if msg is None or not call.ok:
            return
        if msg.DESCRIPTOR.name == "HeartResponseM2C" and msg.HasField("event"):
            self.event = msg.event
        if msg.DESCRIPTOR.name in ("RegisterResponseB2C", "CommitOffsetResponseB2C"):
            key = self._pending_key
            if key and msg.currOffset >= 0:
                self.offsets[key] = msg.currOffset

    def register(self, **extra: Any) -> Step:
        return self.step(self.session.master_address, "consumerRegisterC2M", {
            "clientId": self.client_id, "groupName": self.group, "hostName": self.host,
            "topicList": self.topics, "defFlowCheckId": UNDEFINED,
            "groupFlowCheckId": UNDEFINED, "qryPriorityId": UNDEFINED, **extra})

    def heartbeat(self) -> Step:
        """A heartbeat to the Master; it reports the last event acted on (status DONE)
        with every partition held, and may bring the next event."""
        fields: dict[str, Any] = {
            "clientId": self.client_id, "groupName": self.group,
            "reportSubscribeInfo": self.report is not None, "defFlowCheckId": UNDEFINED,
            "groupFlowCheckId": UNDEFINED, "qryPriorityId": UNDEFINED}
        if self.report is not None:
            fields["event"] = self.report
            fields["subscribeInfo"] = [i["text"] for i in self.held.values()]
            self.report = None
        return self.step(self.session.master_address, "consumerHeartbeatC2M", fields)

    def act(self) -> list[Step]:
        """Do what the last event says: register (opType 31) to each partition of a
        CONNECT, unregister (32) from each of a DISCONNECT; one step per partition."""
        event = self.event
        steps: list[Step] = []
        if event is None:
            return steps
        connect = event.opType in (EventType.CONNECT, EventType.ONLY_CONNECT)
        for text in event.subscribeInfo:
            info = parse_subscribe_info(text)
            self.brokers.setdefault(info["brokerId"], f"{info['host']}:{info['port']}")
            step = self._register(info, MSG_OPTYPE_REGISTER if connect
                                  else MSG_OPTYPE_UNREGISTER)
            key = info["partitionKey"]
            if connect and step.call.ok:
                partition = format_partition(info["brokerId"], info["host"], info["port"],
                                             info["topic"], info["partitionId"])
                self.held[key] = {**info, "partition": partition, "text":
                                  format_subscribe_info(self.client_id, self.group, partition)}
            elif not connect:
                self.held.pop(key, None)
            step.after = self.state()
            steps.append(step)
        self.report = {"rebalanceId": event.rebalanceId, "opType": event.opType,
                       "status": EventStatus.DONE, "subscribeInfo": list(event.subscribeInfo)}
        self.event = None
        return steps

    def _register(self, info: dict[str, Any], op: int) -> Step:
        self._pending_key = info["partitionKey"]
        return self.step(self.brokers[info["brokerId"]], "consumerRegisterC2B", {
            "opType": op, "clientId": self.client_id, "groupName": self.group,
            "topicName": info["topic"], "partitionId": info["partitionId"],
            "readStatus": ReadStatus.NORMAL if op == MSG_OPTYPE_REGISTER
            else UnregisterStatus.NOT_CONSUMED, "qryPriorityId": UNDEFINED})

    def _held(self, key: str | None) -> dict[str, Any]:
        self.session.check_open()  # a closed session, not "does not hold", is the news
        if key is None and self.held:
            key = sorted(self.held)[0]
        if key is None or key not in self.held:
            raise NotHeld(f"{self.name} does not hold {key or 'any partition'} (it holds: "
                          f"{', '.join(sorted(self.held)) or 'none'}) -- "
                          f"the Master gives partitions in a heartbeat's event; act() "
                          f"registers to them")
        self._pending_key = key
        return self.held[key]

    def fetch(self, key: str | None = None, *, consumed: bool = False) -> Step:
        """GetMessage on a held partition (the first one by default)."""
        info = self._held(key)
        return self.step(self.brokers[info["brokerId"]], "getMessagesC2B", {
            "clientId": self.client_id, "partitionId": info["partitionId"],
            "groupName": self.group, "topicName": info["topic"],
            "lastPackConsumed": consumed, "manualCommitOffset": False})

    def commit(self, key: str | None = None, *, consumed: bool = True) -> Step:
        info = self._held(key)
        return self.step(self.brokers[info["brokerId"]], "consumerCommitC2B", {
            "clientId": self.client_id, "topicName": info["topic"],
            "partitionId": info["partitionId"], "groupName": self.group,
            "lastPackConsumed": consumed})

    def broker_heartbeat(self, broker_id: int) -> Step:
        self.session.check_open()
        return self.step(self.brokers[broker_id], "consumerHeartbeatC2B", {
            "clientId": self.client_id, "groupName": self.group,
            "readStatus": ReadStatus.NORMAL,
            "partitionInfo": [i["partition"] for i in self.held.values()
                              if i["brokerId"] == broker_id]})

    def close(self) -> list[Step]:
        """CloseRequestC2M, then unregister from every held partition (the Go order)."""
        steps = [self.step(self.session.master_address, "consumerCloseClientC2M",
                           {"clientId": self.client_id, "groupName": self.group})]
        for key, info in sorted(self.held.items()):
            steps.append(self._register(info, MSG_OPTYPE_UNREGISTER))
            del self.held[key]
        return steps
