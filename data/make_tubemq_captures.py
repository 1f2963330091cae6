"""Re-makes the TubeMQ sample captures in data/tubemq/: real tcpdump captures on loopback of the
simulated Master and Brokers (``nsqviz.servers.tubemq.EmbeddedSim`` on the default ports
8715, 8123 and 8124) with the real Go client (Apache InLong ``tubemq-client-go``, the
``tubemq-producer``/``tubemq-consumer`` programs, found as ``nsqviz.servers.peers`` finds them)
and the project's own clients. Needs root (tcpdump) and free ports 8715, 8123, 8124, 8717.

    sudo .venv/bin/python data/make_tubemq_captures.py [NAME ...]

Each capture is described in data/README.md. Captures are real, so timings, client ids
and ephemeral ports differ from run to run; what each file contains does not.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from make_captures import Tcpdump

from nsqviz.clients.tubemq import Channel, Producer
from nsqviz.servers.peers import require
from nsqviz.servers.tubemq import EmbeddedSim
from nsqviz.tubemq.grammar import frame_bytes

DATA = Path(__file__).resolve().parent
MASTER, BROKERS, STANDBY = 8715, (8123, 8124), 8717
GO_OPTS = "heartbeatInterval=1000"


def go_producer(master: str, n: int, size: int, topic: str = "demo") -> str:
    out = subprocess.run([str(require("tubemq-producer")), "-master", master, "-topic", topic,
                          "-n", str(n), "-size", str(size), "-opts", GO_OPTS],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip().splitlines()[-1]


def go_consumer(master: str, group: str, n: int, timeout: str) -> subprocess.Popen:
    return subprocess.Popen([str(require("tubemq-consumer")), "-master", master, "-topic",
                             "demo", "-group", group, "-n", str(n), "-timeout", timeout,
                             "-opts", GO_OPTS], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def producer_go(sim: EmbeddedSim) -> str:
    """The Go producer: register, heartbeats, five 64-byte messages."""
    return go_producer(sim.master_address, 5, 64)


def consumer_rebalance(sim: EmbeddedSim) -> str:
    """Two Go consumers of one group: A gets every partition, B joins, the Master moves
    two partitions from A to B; then the project's producer sends 40 messages, both
    consume and commit until they give up waiting and close."""
    a = go_consumer(sim.master_address, "group1", 1000, "9s")
    held = lambda: sim.call(lambda: sim.simulation.master.assignment().get("group1", {}))  # noqa: E731
    deadline = time.monotonic() + 10
    while sum(map(len, held().values())) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    b = go_consumer(sim.master_address, "group1", 1000, "7s")
    while sorted(map(len, held().values())) != [2, 2] and time.monotonic() < deadline:
        time.sleep(0.1)

    async def produce():
        producer = await Producer(sim.master_address, ["demo"]).start()
        for i in range(40):
            await producer.send("demo", b"event-%03d" % i)
        await producer.close()

    asyncio.run(produce())
    outs = [p.communicate(timeout=30)[0] for p in (a, b)]
    return f"A got {outs[0].count('msg ')}, B got {outs[1].count('msg ')} messages"


def large_message(sim: EmbeddedSim) -> str:
    """One 100,000-byte message: its SendMessageRequestP2B and the GetMessageResponseB2C
    that carries it each span 13 blocks and several loopback segments."""
    sent = go_producer(sim.master_address, 1, 100_000)
    consumer = go_consumer(sim.master_address, "big", 1, "20s")
    return f"{sent}; consumer: {consumer.communicate(timeout=30)[0].count('msg ')} message"


def glued(sim: EmbeddedSim) -> str:
    """The project's producer writes 100 small SendMessageRequestP2B in one send(): the
    Broker receives them glued in one segment, and answers them glued too."""
    master = Channel(sim.master_address)
    master.call("producerRegisterP2M", {"clientId": "glue", "brokerCheckSum": -1,
                                        "hostName": "127.0.0.1", "topicList": ["demo"]})
    master.call("producerHeartbeatP2M", {"clientId": "glue", "brokerCheckSum": -1,
                                         "hostName": "127.0.0.1", "topicList": ["demo"]})
    broker = Channel(sim.broker_addresses[0])
    calls = broker.call_many([("sendMessageP2B", {
        "clientId": "glue", "topicName": "demo", "partitionId": i % 2, "data": b"tick %d" % i,
        "flag": 0, "checkSum": -1, "sentAddr": 0x7F000001}) for i in range(100)])
    master.call("producerCloseClientP2M", {"clientId": "glue"})
    for channel in (master, broker):
        channel.close()
    return f"{sum(c.ok for c in calls)} of {len(calls)} acknowledged"


def errors(sim: EmbeddedSim) -> str:
    """Error answers with the real codes, one connection each (see data/README.md)."""
    codes = []

    def call(address, method, fields, **kw):
        channel = Channel(address, timeout=2.0)
        got = channel.call(method, fields, check=False, **kw)
        channel.close()
        codes.append(got.err_code if got.message is not None else
                     f"status {got.answer.status}" if got.answer else "none")
        return got

    m, b1 = sim.master_address, sim.broker_addresses[0]
    call(m, "producerHeartbeatP2M", {"clientId": "ghost", "brokerCheckSum": -1,
                                     "hostName": "127.0.0.1"})  # 411 before register
    call(m, "consumerRegisterC2M", {"clientId": "c1", "groupName": "group1",
                                    "hostName": "127.0.0.1", "topicList": ["nosuch"]})  # 431
    call(b1, "sendMessageP2B", {"clientId": "p1", "topicName": "demo", "partitionId": 0,
                                "data": b"corrupted?", "flag": 0, "checkSum": 12345,
                                "sentAddr": 0x7F000001})  # 403 CRC
    call(b1, "sendMessageP2B", {"clientId": "p1", "topicName": "nosuch", "partitionId": 0,
                                "data": b"x", "flag": 0, "checkSum": -1,
                                "sentAddr": 0x7F000001})  # 403 unknown topic
    call(b1, "getMessagesC2B", {"clientId": "c1", "partitionId": 0, "groupName": "group1",
                                "topicName": "demo"})  # 411 not registered
    holder = Channel(b1)
    reg = {"opType": 31, "groupName": "group1", "topicName": "demo", "partitionId": 0,
           "readStatus": 0}
    holder.call("consumerRegisterC2B", {**reg, "clientId": "c1"})
    call(b1, "consumerRegisterC2B", {**reg, "clientId": "c2"})  # 410 occupied
    holder.call("consumerRegisterC2B", {**reg, "opType": 32, "clientId": "c1"})
    holder.close()
    call(b1, "brokerProducerRegister", {})  # FATAL: no decoder for method 11
    with EmbeddedSim(standby=True, master_port=STANDBY, broker_ports=(0,)) as standby:
        call(standby.master_address, "producerRegisterP2M", {
            "clientId": "p1", "brokerCheckSum": -1, "hostName": "127.0.0.1"},
            protocol_ver=2)  # ERROR StandbyException
    bad = Channel(m, timeout=2.0)
    bad.send_raw(b"\x00\x00\x00\x01" + frame_bytes(99, b"\x02\x08\x00")[4:])  # bad token
    bad.close()
    return f"codes {codes}"


SCENARIOS = {
    "tubemq-producer-go.pcap": producer_go,
    "tubemq-consumer-rebalance-go.pcap": consumer_rebalance,
    "tubemq-large-message-go.pcap": large_message,
    "tubemq-glued-requests.pcap": glued,
    "tubemq-errors.pcap": errors,
}


def main(names: list[str]) -> None:
    for name in names or list(SCENARIOS):
        with EmbeddedSim(topics=("demo",), master_port=MASTER, broker_ports=BROKERS) as sim:
            dump = Tcpdump(DATA / "tubemq" / name, [MASTER, *BROKERS, STANDBY])
            try:
                report = SCENARIOS[name](sim)
            finally:
                summary = dump.stop()
            print(f"{name}: {summary.splitlines()[-2] if summary else ''} {report}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
