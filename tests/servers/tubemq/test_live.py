"""The project's own producer and consumer through the simulator over real sockets:
nothing lost, uncommitted batches redelivered, rebalancing between two consumers, a
graceful restart, and every error case answered with the real code."""

from __future__ import annotations

import asyncio
import time

import pytest

from nsqviz.clients.tubemq import Channel, Consumer, Producer
from nsqviz.servers.tubemq import EmbeddedSim
from nsqviz.tubemq.grammar import frame_bytes

TOPIC = "demo"


@pytest.fixture
def sim(tmp_path):
    with EmbeddedSim(topics=(TOPIC, "other"), data_path=tmp_path / "sim") as running:
        yield running


async def produce(master: str, bodies: list[bytes]) -> None:
    producer = await Producer(master, [TOPIC]).start()
    for i, body in enumerate(bodies):
        answer = await producer.send(TOPIC, body, attribute=f"seq={i}" if i % 2 else None)
        assert answer.success and answer.messageId > 0
    await producer.close()


async def drain(consumer: Consumer, commit: bool = True) -> list[bytes]:
    got = []
    while (batch := await consumer.fetch()) is not None:
        got += [m.body for m in batch.messages]
        if not commit:
            break
        await consumer.commit(batch)
    return got


def test_nothing_lost_including_a_multi_block_message(sim):
    bodies = [b"m%03d" % i for i in range(60)] + [bytes(range(256)) * 120]  # 30 KiB

    async def run():
        await produce(sim.master_address, bodies)
        consumer = await Consumer(sim.master_address, "g1", [TOPIC]).start()
        got = await drain(consumer)
        await consumer.close()
        return got

    got = asyncio.run(run())
    assert sorted(got) == sorted(bodies)  # every message once, the big one intact


def test_consume_waits_for_messages_produced_later(sim):
    async def run():
        consumer = await Consumer(sim.master_address, "g3", [TOPIC]).start()
        waiting = asyncio.ensure_future(consumer.consume(5, timeout=10, idle_wait=0.05))
        await asyncio.sleep(0.2)  # the consumer finds nothing and waits
        await produce(sim.master_address, [b"late%d" % i for i in range(5)])
        got = await waiting
        await consumer.close()
        return got

    got = asyncio.run(run())
    assert sorted(m.body for m in got) == [b"late%d" % i for i in range(5)]


def test_attributes_come_back(sim):
    async def run():
        producer = await Producer(sim.master_address, [TOPIC]).start()
        await producer.send(TOPIC, b"hello", attribute="k=v")
        await producer.close()
        consumer = await Consumer(sim.master_address, "g1", [TOPIC]).start()
        batch = await consumer.fetch()
        await consumer.close()
        return batch.messages[0]

    message = asyncio.run(run())
    assert (message.body, message.attribute, message.flag) == (b"hello", "k=v", 1)


def test_uncommitted_batch_is_redelivered_to_the_next_owner(tmp_path):
    async def run(sim):
        await produce(sim.master_address, [b"a%d" % i for i in range(8)])
        first = await Consumer(sim.master_address, "g1", [TOPIC]).start()
        seen = await drain(first, commit=False)  # one batch, never committed
        assert seen
        for channel in [first._master, *first._channels.values()]:  # it dies: no close
            await channel.close()
        first._task.cancel()
        second = await Consumer(sim.master_address, "g1", [TOPIC],
                                heartbeat_interval=0.2).start()
        deadline = time.monotonic() + 10
        while len(second.held) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)  # the Master expires the dead one, then rebalances
        got = await drain(second)
        await second.close()
        return seen, got

    with EmbeddedSim(topics=(TOPIC,), client_timeout=1.0) as sim:
        seen, got = asyncio.run(run(sim))
    assert set(seen) <= set(got)  # what the dead consumer read comes again
    assert sorted(got) == sorted(b"a%d" % i for i in range(8))


def test_rebalance_between_two_consumers(sim):
    async def run():
        a = await Consumer(sim.master_address, "g2", [TOPIC]).start()
        assert len(a.held) == 4
        b = await Consumer(sim.master_address, "g2", [TOPIC]).start()
        await a.heartbeat()  # the DISCONNECT event; A releases two partitions
        await b.heartbeat()  # the CONNECT event; B takes them
        shared = (sorted(a.held), sorted(b.held))
        await a.close()
        await b.heartbeat()  # A left: ONLY_CONNECT of its partitions to B
        alone = sorted(b.held)
        await b.close()
        return shared, alone, [e.opType for e in a.events], [e.opType for e in b.events]

    (held_a, held_b), alone, ops_a, ops_b = asyncio.run(run())
    assert len(held_a) == len(held_b) == 2 and not set(held_a) & set(held_b)
    assert sorted(held_a + held_b) == ["1:demo:0", "1:demo:1", "2:demo:0", "2:demo:1"]
    assert alone == sorted(held_a + held_b)
    assert ops_a == [10, 20] and ops_b == [10, 10]
    assignment = sim.call(lambda: sim.simulation.master.assignment())
    assert assignment == {}  # both closed: the group is gone


def test_graceful_restart_keeps_messages_and_offsets(tmp_path):
    path = tmp_path / "state"

    async def consume(master, commit=True):
        consumer = await Consumer(master, "g1", [TOPIC]).start()
        got = await drain(consumer, commit)
        await consumer.close()
        return got

    xs = [b"x%d" % i for i in range(10)]
    ys = [b"y%d" % i for i in range(5)]
    with EmbeddedSim(topics=(TOPIC,), data_path=path) as sim:
        asyncio.run(produce(sim.master_address, xs))
        before = asyncio.run(consume(sim.master_address))  # committed
        asyncio.run(produce(sim.master_address, ys))
        peeked = asyncio.run(consume(sim.master_address, commit=False))  # read, not committed
    with EmbeddedSim(topics=(TOPIC,), data_path=path) as sim:
        after = asyncio.run(consume(sim.master_address))
        again = asyncio.run(consume(sim.master_address))
    assert sorted(before) == sorted(xs)
    assert peeked and set(peeked) <= set(ys)
    assert sorted(after) == sorted(ys)  # stored messages and committed offsets survived
    assert again == []


# --------------------------------------------------------------------------- errors


def master_call(sim, method, **fields):
    channel = Channel(sim.master_address)
    try:
        return channel.call(method, fields, check=False)
    finally:
        channel.close()


def test_error_codes_on_the_wire(sim):
    before = master_call(sim, "producerHeartbeatP2M", clientId="p", brokerCheckSum=-1,
                         hostName="h")
    assert (before.err_code, before.message.success) == (411, False)  # before register
    unknown = master_call(sim, "consumerRegisterC2M", clientId="c", groupName="g",
                          hostName="h", topicList=["nosuch"])
    assert unknown.err_code == 431
    broker = Channel(sim.broker_addresses[0])
    bad_crc = broker.call("sendMessageP2B", {
        "clientId": "p", "topicName": TOPIC, "partitionId": 0, "data": b"x", "flag": 0,
        "checkSum": 1, "sentAddr": 0})
    assert bad_crc.err_code == 403 and "Checksum msg data failure" in bad_crc.message.errMsg
    assert [v.code for v in bad_crc.violations] == []  # the answer itself is well formed
    no_topic = broker.call("sendMessageP2B", {
        "clientId": "p", "topicName": "nosuch", "partitionId": 0, "data": b"x", "flag": 0,
        "checkSum": -1, "sentAddr": 0})
    assert no_topic.err_code == 403
    fetch = broker.call("getMessagesC2B", {"clientId": "c", "partitionId": 0,
                                            "groupName": "g", "topicName": TOPIC}, check=False)
    assert fetch.err_code == 411
    reg = {"opType": 31, "groupName": "g", "topicName": TOPIC, "partitionId": 0,
           "readStatus": 0}
    assert broker.call("consumerRegisterC2B", {**reg, "clientId": "c1"}).ok
    other = Channel(sim.broker_addresses[0])
    occupied = other.call("consumerRegisterC2B", {**reg, "clientId": "c2"})
    assert occupied.err_code == 410 and "has been registered by c1" in occupied.message.errMsg
    broker.close()
    other.close()


def test_standby_master_answers_error_with_the_class_name_per_version():
    with EmbeddedSim(standby=True) as sim:
        channel = Channel(sim.master_address, protocol_ver=2)
        call = channel.call("producerRegisterP2M", {"clientId": "p", "brokerCheckSum": -1,
                                                    "hostName": "h"})
        channel.close()
    assert call.answer.status == 1  # ERROR
    assert call.answer.body.exceptionName == \
        "com.apache.tubemq.corerpc.exception.StandbyException"
    assert call.answer.body.stackTrace.endswith(
        "is not master now. the connecting client id is p")


def test_envelope_errors(sim):
    channel = Channel(sim.broker_addresses[0], timeout=1.0)
    # method 11 passes the service check but has no decoder: FATAL, no protocolVer
    fatal = channel.call("brokerProducerRegister", {}, check=False)
    assert fatal.answer.status == 2 and not fatal.answer.header.HasField("protocolVer")
    # a Master method on a Broker: ERROR
    wrong = channel.call("producerCloseClientP2M", {"clientId": "p"}, check=False)
    assert wrong.answer.status == 1
    # no timeout: a Java server never answers
    silent = channel.call("producerCloseClientP2M", {"clientId": "p"}, check=False,
                          timeout=None, service=2)
    assert silent.answer is None
    channel.close()
    # a bad begin token: the server closes the connection (the Java decoder does)
    channel = Channel(sim.master_address, timeout=2.0)
    channel.send_raw(b"\x00\x00\x00\x01" + frame_bytes(1, b"\x02\x08\x00")[4:])
    assert channel.sock.recv(10) == b""
    channel.close()


def test_command_line_simulator_stops_gracefully_and_keeps_state(tmp_path):
    import re
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "nsqviz.cli", "tubemq-sim", "--master-port", "0",
         "--broker-port", "0", "--topic", TOPIC, "--data-path", str(tmp_path / "d"),
         "--log-level", "warn"], stdout=subprocess.PIPE, text=True)
    try:
        master = re.search(r"Master: listening on (\S+)", proc.stdout.readline()).group(1)
        brokers = [proc.stdout.readline() for _ in range(2)]
        assert all(b.startswith("Broker ") for b in brokers)
        asyncio.run(produce(master, [b"kept"]))
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["broker-1.json",
                                                                  "broker-2.json"]
