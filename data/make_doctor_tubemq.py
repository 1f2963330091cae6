"""Records data/doctor/tubemq-*.pcap: TubeMQ problems for the ``tubemq.*`` rules of
``nsqviz doctor`` (issue 35) -- the real Go client (Apache InLong ``tubemq-client-go``, the
``tubemq-producer``/``tubemq-consumer`` programs) against the project's simulated Master
and Brokers (no TubeMQ server can run here), and, where no real client misbehaves that
way, a consumer driven call by call through the project's RPC channel. One function per
file; tcpdump on lo records the simulator's ports (free ones: the begin token finds the
flows).

TubeMQ frames are protobuf inside blocks, which tshark cannot read without a dissector:
here the packets come from ``nsqviz decode --json`` (:func:`doctor_expected.rpcs`), and
each story is checked against what the simulator decided (its Master's history) and what
the Go client logged, before expected.json is written.

Run as root from the repository: ``.venv/bin/python data/make_doctor_tubemq.py [--only NAME]``.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from doctor_expected import DATA, conn, finding, record, rpcs, run
from make_captures import Tcpdump
from make_tubemq_captures import GO_OPTS, go_consumer

from nsqviz.clients.tubemq import Channel, Producer
from nsqviz.servers.peers import require
from nsqviz.servers.tubemq import EmbeddedSim
from nsqviz.servers.tubemq.events import ConsumerLeft, RebalanceDone
from nsqviz.tubemq.metadata import parse_subscribe_info
from nsqviz.tubemq.tables import MSG_OPTYPE_REGISTER, ErrorCode

MADE_BY = "data/make_doctor_tubemq.py --only {}"
UNDEFINED = -2


@contextmanager
def recorded(name: str, **config: Any) -> Iterator[EmbeddedSim]:
    """The simulator (topic ``demo``, two Brokers of two partitions, ``config``) on free
    ports, with tcpdump on them writing data/NAME."""
    with EmbeddedSim(topics=("demo",), **config) as sim:
        ports = [int(a.rpartition(":")[2]) for a in (sim.master_address, *sim.broker_addresses)]
        dump = Tcpdump(DATA / name, ports)
        try:
            yield sim
        finally:
            print(f"{name}: {' / '.join(dump.stop().splitlines()[-3:])}", flush=True)


def go_producer(master: str, n: int, interval: str, size: int = 64,
                topic: str = "demo") -> subprocess.Popen[str]:
    return subprocess.Popen([str(require("tubemq-producer")), "-master", master, "-topic",
                             topic, "-n", str(n), "-size", str(size), "-interval", interval,
                             "-opts", GO_OPTS, "-log", "info"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def history(sim: EmbeddedSim) -> list[Any]:
    return list(sim.call(lambda: list(sim.simulation.master.history)))


class RawConsumer:
    """A consumer of group ``group`` driven one call at a time (the project's RPC
    channel, Java-style requests), so that it can skip what a real client does."""

    def __init__(self, sim: EmbeddedSim, group: str, client_id: str):
        self.sim, self.group, self.client_id = sim, group, client_id
        self.master = Channel(sim.master_address)
        self.brokers: dict[str, Channel] = {}
        self.master.call("consumerRegisterC2M", {
            "clientId": client_id, "groupName": group, "hostName": "127.0.0.1",
            "topicList": ["demo"]})

    def heartbeat(self, event: Any = None, held: list[str] = ()) -> Any:
        """A HeartRequestC2M; with ``event``, reported DONE with ``held`` as subscribeInfo."""
        request: dict[str, Any] = {"clientId": self.client_id, "groupName": self.group,
                                   "reportSubscribeInfo": event is not None}
        if event is not None:
            request["event"] = {"rebalanceId": event.rebalanceId, "opType": event.opType,
                                "status": 2, "subscribeInfo": list(event.subscribeInfo)}
            request["subscribeInfo"] = list(held)
        return self.master.call("consumerHeartbeatC2M", request).result()

    def broker(self, info: dict[str, Any]) -> Channel:
        address = f"{info['host']}:{info['port']}"
        if address not in self.brokers:
            self.brokers[address] = Channel(address)
        return self.brokers[address]

    def register(self, subscribe_info: str) -> Any:
        info = parse_subscribe_info(subscribe_info)
        return self.broker(info).call("consumerRegisterC2B", {
            "opType": MSG_OPTYPE_REGISTER, "clientId": self.client_id, "groupName": self.group,
            "topicName": info["topic"], "partitionId": info["partitionId"], "readStatus": 0,
            "qryPriorityId": UNDEFINED}).result()

    def fetch(self, subscribe_info: str) -> Any:
        info = parse_subscribe_info(subscribe_info)
        return self.broker(info).call("getMessagesC2B", {
            "clientId": self.client_id, "groupName": self.group, "topicName": info["topic"],
            "partitionId": info["partitionId"], "lastPackConsumed": True,
            "escFlowCtrl": False, "manualCommitOffset": False}).result()

    def close(self) -> None:
        self.master.call("consumerCloseClientC2M", {"clientId": self.client_id,
                                                    "groupName": self.group})
        for channel in (self.master, *self.brokers.values()):
            channel.close()


def _event(answer: Any) -> Any:
    return answer.event if answer.HasField("event") else None


# -- the scenarios ------------------------------------------------------------------


def heartbeat_timeout() -> None:
    """Simulator started with ``--client-timeout 3`` (the real Master's 30 s, scaled to the
    Go clients' 1 s heartbeat). A Go consumer and a Go producer (one message a second)
    run; then both processes are frozen (SIGSTOP) for 4.5 s -- a GC pause, a VM stall --
    and the Master forgets them. Their next heartbeats are answered 411 HB_NO_NODE, the
    registration-timeout answer: the consumer gets five in a row, then registers again
    (RegisterRequestC2M) and its heartbeats are answered again; the producer never
    registers again, gets 411 on every heartbeat to the end, and keeps sending to the
    Brokers."""
    name = "doctor/tubemq-heartbeat-timeout.pcap"
    with recorded(name, client_timeout=3.0) as sim:
        consumer = go_consumer(sim.master_address, "hbgroup", 1000, "16s")
        wait_until(lambda: _held(sim, "hbgroup") == 4, 10)
        producer = go_producer(sim.master_address, 12, "1s")
        time.sleep(3.0)
        for p in (consumer, producer):
            p.send_signal(signal.SIGSTOP)
        time.sleep(4.5)
        for p in (consumer, producer):
            p.send_signal(signal.SIGCONT)
        logs = [p.communicate(timeout=60)[1] for p in (consumer, producer)]
        left = [e for e in history(sim) if isinstance(e, ConsumerLeft)]
    assert any(e.reason == "heartbeat timeout" for e in left), left
    calls = rpcs(DATA / name)
    found = []
    for who, hb, reg in (("consumer", "HeartResponseM2C", "RegisterRequestC2M"),
                         ("producer", "HeartResponseM2P", "RegisterRequestP2M")):
        timeouts = [c for c in calls if c["name"] == hb and c["errCode"] == ErrorCode.HB_NO_NODE]
        flow = timeouts[0]["flow"]
        again = [c for c in calls if c["name"] == reg and c["flow"] == flow
                 and c["packets"][0] > timeouts[0]["packets"][0]]
        beats = [c for c in calls if c["name"] == hb.replace("Response", "Request")
                 .replace("M2C", "C2M").replace("M2P", "P2M") and c["flow"] == flow]
        found.append(finding(
            "tubemq.heartbeat-timeout",
            f"{who}: {len(timeouts)} heartbeat(s) answered 411 HB_NO_NODE after a 4.5 s "
            "freeze; " + (f"it registered again (packet {again[0]['packets'][0]})"
                          if again else "it never registered again"),
            [c["packets"][0] for c in timeouts + again[:1]], _conn(flow),
            timeouts=[c["packets"][0] for c in timeouts],
            reregistered=[c["packets"][0] for c in again],
            last_heartbeat=beats[-1]["packets"][0] if beats else None,
            client_timeout_s=3.0, heartbeat_interval_ms=1000))
    record(name, MADE_BY.format("heartbeat_timeout"), heartbeat_timeout.__doc__, found,
           not_expected=["tubemq.rebalance"])
    print("  go client logs:", [line for log in logs for line in log.splitlines()
                               if "no-node" in line or "register" in line.lower()][:4])


def rebalance_unacked() -> None:
    """A consumer of group ``stuckgroup`` (driven call by call) registers and gets, in a
    heartbeat answer, the event ONLY_CONNECT with all four partitions -- then neither
    registers them with the Brokers nor reports the event, while it keeps heartbeating.
    A Go consumer joins the group: the Master does not balance a group whose events are
    unreported, so it gets no partition for the 7 s it waits, and gives up."""
    name = "doctor/tubemq-rebalance-unacked.pcap"
    with recorded(name) as sim:
        stuck = RawConsumer(sim, "stuckgroup", "stuck-consumer")
        event = _event(stuck.heartbeat())
        assert event is not None and len(event.subscribeInfo) == 4
        go = go_consumer(sim.master_address, "stuckgroup", 1000, "7s")
        deadline = time.monotonic() + 8.0
        while time.monotonic() < deadline:
            time.sleep(1.0)
            assert _event(stuck.heartbeat()) is None
        go.communicate(timeout=30)
        stuck.close()
        events = history(sim)
    assert not [e for e in events if isinstance(e, RebalanceDone)], events
    calls = rpcs(DATA / name)
    sent = [c for c in calls if c["name"] == "HeartResponseM2C" and "event" in c["message"]]
    later = [c["packets"][0] for c in calls if c["name"] == "HeartRequestC2M"
             and c["flow"] == sent[0]["flow"] and c["packets"][0] > sent[0]["packets"][0]]
    other = [c for c in calls if c["name"] == "HeartRequestC2M" and c["flow"] != sent[0]["flow"]]
    record(name, MADE_BY.format("rebalance_unacked"), rebalance_unacked.__doc__, [
        finding("tubemq.rebalance", f"rebalance {event.rebalanceId} (ONLY_CONNECT, 4 "
                f"partitions) sent to stuck-consumer and never reported done in its "
                f"{len(later)} later heartbeats; the Go consumer of the group got no "
                f"partition in {len(other)} heartbeats", [sent[0]["packets"][0], *later[:3]],
                _conn(sent[0]["flow"]), rebalance_id=event.rebalanceId, op_type=event.opType,
                event_packet=sent[0]["packets"][0], unreported_heartbeats=later,
                waiting_consumer=_conn(other[0]["flow"]) if other else None,
                waiting_heartbeats=[c["packets"][0] for c in other])],
        not_expected=["tubemq.heartbeat-timeout"])


def partition_twice() -> None:
    """A consumer of group ``twogroup`` (driven call by call) takes all four partitions
    properly; a Go consumer joins and the Master moves two of them: the first is sent
    ONLY_DISCONNECT, reports it DONE with a subscribeInfo that no longer lists them --
    but never unregisters them from the Brokers and keeps fetching them. The Go consumer
    is sent ONLY_CONNECT for the same two and its RegisterRequestC2B is answered 410
    PARTITION_OCCUPIED, again at every round: the Master counts each partition as the Go
    consumer's, the Broker as the first consumer's."""
    name = "doctor/tubemq-partition-twice.pcap"
    with recorded(name) as sim:
        liar = RawConsumer(sim, "twogroup", "liar-consumer")
        connect = _event(liar.heartbeat())
        for info in connect.subscribeInfo:
            liar.register(info)
        liar.heartbeat(connect, list(connect.subscribeInfo))
        go = go_consumer(sim.master_address, "twogroup", 1000, "8s")
        lose = None
        while lose is None:
            time.sleep(0.5)
            lose = _event(liar.heartbeat())
        kept = [s for s in connect.subscribeInfo if s not in lose.subscribeInfo]
        liar.heartbeat(lose, kept)
        asyncio_produce(sim, 8)
        deadline = time.monotonic() + 7.0
        while time.monotonic() < deadline:
            for info in lose.subscribeInfo:
                liar.fetch(info)
            liar.heartbeat()
            time.sleep(1.0)
        go.communicate(timeout=30)
        liar.close()
    calls = rpcs(DATA / name)
    liar_flow = next(c["flow"] for c in calls if c["name"] == "RegisterRequestC2M"
                     and c["message"].get("clientId") == "liar-consumer")
    disconnect = next(c for c in calls if c["name"] == "HeartResponseM2C"
                      and c["flow"] == liar_flow and c["message"].get("event", {})
                      .get("opType") == 20)
    report = next(c for c in calls if c["name"] == "HeartRequestC2M" and c["flow"] == liar_flow
                  and c["message"].get("event", {}).get("opType") == 20)
    occupied = [c for c in calls if c["name"] == "RegisterResponseB2C"
                and c["errCode"] == ErrorCode.PARTITION_OCCUPIED]
    fetches = [c["packets"][0] for c in calls if c["name"] == "GetMessageRequestC2B"
               and c["message"].get("clientId") == "liar-consumer"
               and c["packets"][0] > report["packets"][0]]
    unregisters = [c for c in calls if c["name"] == "RegisterRequestC2B"
                   and c["message"].get("clientId") == "liar-consumer"
                   and c["message"].get("opType") == 32]
    assert occupied and not unregisters
    record(name, MADE_BY.format("partition_twice"), partition_twice.__doc__, [
        finding("tubemq.rebalance", f"2 partitions ({', '.join(_keys(lose))}) held by two "
                f"consumers: liar-consumer reported ONLY_DISCONNECT done (packet "
                f"{report['packets'][0]}) without unregistering and fetched them "
                f"{len(fetches)} more times; the Go consumer was refused 410 "
                f"PARTITION_OCCUPIED {len(occupied)} times",
                [disconnect["packets"][0], report["packets"][0], *[c["packets"][0]
                                                                  for c in occupied]],
                _conn(liar_flow), partitions=_keys(lose), disconnect_event=disconnect["packets"][0],
                reported_done=report["packets"][0], fetches_after=fetches,
                occupied=[c["packets"][0] for c in occupied],
                occupied_connections=sorted({c["flow"] for c in occupied})),
        finding("tubemq.rpc-error", f"consumerRegisterC2B answered 410 PARTITION_OCCUPIED "
                f"{len(occupied)} times", [c["packets"][0] for c in occupied], None,
                method="consumerRegisterC2B", err_code=410, count=len(occupied))],
        not_expected=["tubemq.heartbeat-timeout"])


def rpc_error() -> None:
    """Go clients the simulator refuses: a consumer of group ``lostgroup`` for the topic
    ``nosuch``, which is not deployed (RegisterRequestC2M answered 431 TOPIC_NOT_DEPLOYED;
    it tries again every second, 431 each time), and a producer sending three messages of
    2,000 bytes to a topic whose maximum message size is 1,024 (the simulator's
    ``max_msg_size``; the Master announces it in topicInfos, the Go producer does not
    check it): each SendMessageRequestP2B answered 400 "data length over max length"."""
    name = "doctor/tubemq-rpc-error.pcap"
    with recorded(name, max_msg_size=1024) as sim:
        lost = subprocess.Popen([str(require("tubemq-consumer")), "-master", sim.master_address,
                                 "-topic", "nosuch", "-group", "lostgroup", "-n", "1",
                                 "-timeout", "5s", "-opts", GO_OPTS], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        big = go_producer(sim.master_address, 3, "200ms", size=2000)
        logs = [p.communicate(timeout=60) for p in (lost, big)]
    calls = rpcs(DATA / name)
    failed: dict[tuple[str, int], list[int]] = {}
    for c in calls:
        if c["kind"] == "frame" and c["errCode"] not in (None, ErrorCode.SUCCESS):
            failed.setdefault((c["method"], c["errCode"]), []).append(c["packets"][0])
    assert failed, logs
    record(name, MADE_BY.format("rpc_error"), rpc_error.__doc__, [
        finding("tubemq.rpc-error", f"{method} answered {code} {ErrorCode(code).name} "
                f"{len(packets)} times", packets, None, method=method, err_code=code,
                count=len(packets))
        for (method, code), packets in sorted(failed.items())],
        not_expected=["tubemq.rebalance"])


def asyncio_produce(sim: EmbeddedSim, n: int) -> None:
    import asyncio

    async def produce() -> None:
        producer = await Producer(sim.master_address, ["demo"]).start()
        for i in range(n):
            await producer.send("demo", b"event-%03d" % i)
        await producer.close()

    asyncio.run(produce())


def wait_until(ready: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.1)


def _held(sim: EmbeddedSim, group: str) -> int:
    held = sim.call(lambda: sim.simulation.master.assignment().get(group, {}))
    return sum(map(len, held.values()))


def _keys(event: Any) -> list[str]:
    return [parse_subscribe_info(s)["partitionKey"] for s in event.subscribeInfo]


def _conn(flow: str) -> dict[str, str]:
    client, _, server = flow.partition("->")
    return conn(client, server)


SCENARIOS: dict[str, Callable[[], None]] = {f.__name__: f for f in (
    heartbeat_timeout, rebalance_unacked, partition_twice, rpc_error)}


if __name__ == "__main__":
    run(__doc__, SCENARIOS)
