"""The simulator's Master and Brokers without sockets: sequences, balancing, offsets,
error codes, persistence (FACTS.md §5, §8)."""

from __future__ import annotations

import pytest

from nsqviz.servers.tubemq.cluster import SimConfig
from nsqviz.servers.tubemq.events import RebalanceDone, RebalanceQueued, RebalanceSent
from nsqviz.servers.tubemq.master import RpcError
from nsqviz.servers.tubemq.state import Simulation
from nsqviz.servers.tubemq.store import INDEX_UNIT
from nsqviz.tubemq.metadata import checksum
from nsqviz.tubemq.tables import EventType
from tests.servers.tubemq._calls import call, commit, fetch, register_c2b, send

G = "grp"


@pytest.fixture
def sim() -> Simulation:
    return Simulation(SimConfig(topics=("demo", "other"), broker_ports=(8123, 9000)))


def broker_of(sim, part):
    return sim.brokers[part.broker.broker_id - 1]


# ------------------------------------------------------------------------- producers


def test_producer_register_heartbeat_close(sim):
    m = sim.master
    r = call(m, "producerRegisterP2M", clientId="p1", brokerCheckSum=-1, hostName="10.0.0.1")
    assert (r.success, r.errCode, r.errMsg) == (True, 200, "OK!")
    # the default port is written as a single space (BrokerConfEntity.getSimpleBrokerInfo)
    assert list(r.brokerInfos) == ["1:127.0.0.1: ", "2:127.0.0.1:9000"]
    assert r.authorizedInfo.visitAuthorizedToken == 1 and not r.HasField("appdConfig")
    h = call(m, "producerHeartbeatP2M", clientId="p1", brokerCheckSum=r.brokerCheckSum,
             hostName="10.0.0.1", topicList=["demo", "nosuch"])
    assert h.success and list(h.topicInfos) == ["demo#1:2:1,2:2:1#1048576"]
    assert list(h.brokerInfos) == []  # only sent when the client's checksum is stale
    h = call(m, "producerHeartbeatP2M", clientId="p1", brokerCheckSum=-1, hostName="x",
             topicList=["demo"], appdConfig={"configId": 0})
    assert len(h.brokerInfos) == 2 and h.appdConfig.maxMsgSize == 1048576
    c = call(m, "producerCloseClientP2M", clientId="p1")
    assert (c.success, c.errCode) == (True, 200)
    h = call(m, "producerHeartbeatP2M", clientId="p1", brokerCheckSum=-1, hostName="x")
    assert (h.success, h.errCode) == (False, 411)
    assert h.errMsg == "Invalid node id:p1, you have to append node first!"


def test_request_before_register_and_missing_fields(sim):
    m = sim.master
    r = call(m, "producerHeartbeatP2M", clientId="ghost", brokerCheckSum=-1, hostName="h")
    assert r.errCode == 411 and r.brokerCheckSum == -1
    r = call(m, "producerRegisterP2M", clientId=" ", brokerCheckSum=-1, hostName="h")
    assert (r.errCode, r.errMsg) == (400, "Request miss necessary clientId data!")
    r = call(m, "consumerHeartbeatC2M", clientId="c", groupName=G, reportSubscribeInfo=False)
    assert (r.errCode, r.errMsg) == (411, f"Not found groupName {G} in holder!")


def test_standby_master_raises_standby_exception():
    sim = Simulation(SimConfig(standby=True))
    with pytest.raises(RpcError) as info:
        call(sim.master, "producerRegisterP2M", clientId="p1", brokerCheckSum=-1, hostName="h")
    assert info.value.exception_name.endswith("corerpc.exception.StandbyException")
    assert info.value.text == ("127.0.0.1:8715 is not master now. "
                               "the connecting client id is p1")


# ------------------------------------------------------------------------- consumers


def heartbeat(sim, cid, now=0.0, event=None):
    """A consumer heartbeat as the Go client sends it: with a processed event it reports
    the event back (status DONE) and the partitions it holds."""
    fields = {"clientId": cid, "groupName": G, "reportSubscribeInfo": event is not None,
              "defFlowCheckId": -2, "groupFlowCheckId": -2, "qryPriorityId": -2}
    if event is not None:
        fields["event"] = {"rebalanceId": event.rebalanceId, "opType": event.opType,
                           "status": 2, "subscribeInfo": list(event.subscribeInfo)}
        fields["subscribeInfo"] = sorted(held(sim, cid))
    return call(sim.master, "consumerHeartbeatC2M", now, **fields)


def held(sim, cid) -> set[str]:
    """The subscribeInfo strings consumer ``cid`` holds (kept on the test's simulation)."""
    return vars(sim).setdefault("held_by_test", {}).setdefault(cid, set())


def act(sim, cid, event, now=0.0):
    """Do what the event says at the Brokers, as a consumer does, and return the codes."""
    codes = []
    for info in event.subscribeInfo:
        part = next(p for t in sim.config.topics for p in sim.config.topic_parts(t)
                    if info.endswith("#" + p.full))
        broker = broker_of(sim, part)
        if event.opType in (EventType.CONNECT, EventType.ONLY_CONNECT):
            r = register_c2b(broker, part, cid, G, now)
            if r.success:
                held(sim, cid).add(info)
        else:
            r = register_c2b(broker, part, cid, G, now, op=32, read_status=1)
            held(sim, cid).discard(info)
        codes.append(r.errCode)
    return codes


def register_c2m(sim, cid, topics=("demo",), now=0.0):
    return call(sim.master, "consumerRegisterC2M", now, clientId=cid, groupName=G,
                hostName="10.0.0.1", topicList=list(topics), defFlowCheckId=-2,
                groupFlowCheckId=-2, qryPriorityId=-2)


def owners(sim) -> dict[str, str]:
    """partition key -> the consumer the Brokers say holds it."""
    return {f"{b.broker_id}:{ps.split(':')[1]}:{ps.split(':')[2]}": h.consumer_id
            for b in sim.brokers for ps, h in b.holders.items()}


def test_first_consumer_gets_every_partition_as_only_connect(sim):
    r = register_c2m(sim, "A")
    assert (r.success, r.notAllocated, r.defFlowCheckId, r.defFlowControlInfo) == \
        (True, True, -2, " ")
    h = heartbeat(sim, "A")
    assert h.event.opType == EventType.ONLY_CONNECT and not h.event.HasField("status")
    assert list(h.event.subscribeInfo) == [
        "A@grp#1:127.0.0.1:8123#demo:0", "A@grp#1:127.0.0.1:8123#demo:1",
        "A@grp#2:127.0.0.1:9000#demo:0", "A@grp#2:127.0.0.1:9000#demo:1"]
    assert not heartbeat(sim, "A").HasField("event")  # sent once, PROCESSING until reported
    assert act(sim, "A", h.event) == [200] * 4
    done = heartbeat(sim, "A", event=h.event)
    assert done.success and not done.notAllocated and not done.HasField("event")
    assert set(owners(sim).values()) == {"A"} and len(owners(sim)) == 4


def test_second_consumer_joins_then_leaves(sim):
    register_c2m(sim, "A")
    first = heartbeat(sim, "A").event
    act(sim, "A", first)
    heartbeat(sim, "A", event=first)
    register_c2m(sim, "B", now=1)
    # one round: A loses two partitions, B gains them (one rebalanceId), but no connect
    # event goes out while a disconnect event of the group is unreported
    assert not heartbeat(sim, "B", 1).HasField("event")
    lose = heartbeat(sim, "A", 2).event
    assert lose.opType == EventType.ONLY_DISCONNECT
    assert [s.split("#", 1)[1] for s in lose.subscribeInfo] == [
        "1:127.0.0.1:8123#demo:1", "2:127.0.0.1:9000#demo:1"]
    assert act(sim, "A", lose, 2) == [200, 200]
    heartbeat(sim, "A", 3, event=lose)
    gain = heartbeat(sim, "B", 3).event
    assert gain.opType == EventType.ONLY_CONNECT and gain.rebalanceId == lose.rebalanceId
    assert act(sim, "B", gain, 3) == [200, 200]
    heartbeat(sim, "B", 4, event=gain)
    # every partition held by exactly one consumer, two each
    assert sorted(owners(sim).items()) == [
        ("1:demo:0", "A"), ("1:demo:1", "B"), ("2:demo:0", "A"), ("2:demo:1", "B")]
    assert sim.master.assignment() == {G: {"A": ["1:demo:0", "2:demo:0"],
                                           "B": ["1:demo:1", "2:demo:1"]}}
    kinds = [type(e).__name__ for e in sim.master.history]
    assert kinds == ["ConsumerJoined", "RebalanceQueued", "RebalanceSent", "RebalanceDone",
                     "ConsumerJoined", "RebalanceQueued", "RebalanceQueued", "RebalanceSent",
                     "RebalanceDone", "RebalanceSent", "RebalanceDone"]
    # A closes: its partitions go to B as ONLY_CONNECT once the Brokers let them go
    for info in sorted(held(sim, "A")):
        part = next(p for p in sim.config.topic_parts("demo") if info.endswith("#" + p.full))
        register_c2b(broker_of(sim, part), part, "A", G, 5, op=32, read_status=1)
    assert call(sim.master, "consumerCloseClientC2M", 5, clientId="A", groupName=G).success
    take = heartbeat(sim, "B", 6).event
    assert take.opType == EventType.ONLY_CONNECT and len(take.subscribeInfo) == 2
    act(sim, "B", take, 6)
    assert set(owners(sim).values()) == {"B"} and len(owners(sim)) == 4


def test_a_member_losing_and_gaining_gets_disconnect_then_connect(sim):
    register_c2m(sim, "A", topics=("demo", "other"))
    register_c2m(sim, "B", topics=("demo", "other"))
    group = sim.master.groups[G]
    every = [p for t in ("demo", "other") for p in sim.config.topic_parts(t)]
    for c in group.members.values():  # forget the first round: set what each holds so
        c.disconnects.clear()  # that the next round moves partitions both ways
        c.connects.clear()
    group.members["A"].held = set(every[1::2])  # each holds the other's target
    group.members["B"].held = set(every[0::2])
    sim.master._balance(group, 1.0)
    queued = [(e.consumer_id, e.op_name) for e in sim.master.history
              if isinstance(e, RebalanceQueued) and e.t == 1.0]
    assert queued == [("A", "DISCONNECT"), ("A", "CONNECT"), ("B", "DISCONNECT"),
                      ("B", "CONNECT")]


def test_silent_consumer_expires_and_broker_frees_its_partitions(sim):
    register_c2m(sim, "A")
    ev = heartbeat(sim, "A").event
    act(sim, "A", ev)
    heartbeat(sim, "A", event=ev)
    register_c2m(sim, "B", now=10)
    sim.expire(31.0)  # A silent for 31 s > client_timeout: its events go with it
    assert list(sim.master.groups[G].members) == ["B"]
    codes, event, now = [], heartbeat(sim, "B", 31).event, 31
    assert event.opType == EventType.ONLY_CONNECT  # queued when B joined
    while True:  # the Brokers still think A holds them: each is told 410 once, then free
        codes += act(sim, "B", event, now)
        now += 1
        answer = heartbeat(sim, "B", now, event=event)
        if not answer.HasField("event"):
            break
        event = answer.event
    assert 410 in codes and codes.count(200) == 4
    assert set(owners(sim).values()) == {"B"} and len(owners(sim)) == 4


def test_consumer_register_errors(sim):
    r = register_c2m(sim, "A", topics=("nosuch",))
    assert (r.errCode, r.errMsg) == (431, "Requested topic [[nosuch]] not deployed!")
    r = call(sim.master, "consumerRegisterC2M", clientId="A", groupName=G, hostName="h")
    assert r.errCode == 400
    assert register_c2m(sim, "A").success
    r = register_c2m(sim, "B", topics=("other",))
    assert r.errCode == 425 and not r.success


# ------------------------------------------------------------------------- brokers


def test_send_fetch_commit_and_redelivery(sim):
    b = sim.brokers[0]
    part = sim.config.topic_parts("demo")[0]
    for i in range(3):
        r = send(b, "demo", 0, b"m%d" % i, now=1.5)
        assert (r.success, r.errMsg, r.messageId, r.appendOffset) == \
            (True, str(i + 1), i + 1, i * INDEX_UNIT)
    assert r.appendTime == 1500
    assert register_c2b(b, part, "A", G).currOffset == 0
    got = fetch(b, part, "A", G)
    assert [m.payLoadData for m in got.messages] == [b"m0", b"m1", b"m2"]
    assert got.messages[0].checkSum == checksum(b"m0") and got.maxOffset == 3 * INDEX_UNIT
    # not committed: the same batch again
    assert [m.messageId for m in fetch(b, part, "A", G).messages] == [1, 2, 3]
    r = commit(b, part, "A", G, consumed=False)  # a rollback
    assert r.currOffset == 0
    fetch(b, part, "A", G)
    r = commit(b, part, "A", G)
    assert (r.success, r.currOffset, r.maxOffset) == (True, 84, 84)
    r = fetch(b, part, "A", G)
    assert (r.success, r.errCode, r.errMsg, r.currOffset) == \
        (False, 404, "The request offset reached maxOffset!", -1)
    send(b, "demo", 0, b"m3")
    assert [m.payLoadData for m in fetch(b, part, "A", G).messages] == [b"m3"]
    # lastPackConsumed on the next fetch commits the previous batch
    assert fetch(b, part, "A", G, consumed=True).errCode == 404


def test_attribute_payload_stored_as_sent(sim):
    b = sim.brokers[0]
    data = bytes.fromhex("000000036b3d7668656c6c6f")  # attribute k=v, body hello
    r = send(b, "demo", 1, data, flag=1, checkSum=723795346, msgType="t1")
    assert r.success
    part = sim.config.topic_parts("demo")[1]
    register_c2b(b, part, "A", G)
    m = fetch(b, part, "A", G).messages[0]
    assert (m.flag, m.payLoadData, m.checkSum) == (1, data, 723795346)


def test_broker_error_codes(sim):
    b = sim.brokers[0]
    p0, p1 = sim.config.topic_parts("demo")[:2]
    r = send(b, "demo", 0, b"x", checkSum=12345)
    assert r.errCode == 403 and r.errMsg.startswith("Checksum msg data failure: 12345 of demo")
    assert send(b, "nosuch", 0, b"x").errMsg == \
        "topicName nosuch not existed, please check your configure"
    assert send(b, "demo", 7, b"x").errCode == 403
    assert (send(b, "demo", 0, b"").errCode, send(b, "demo", 0, b"").errMsg) == \
        (400, "data length is zero!")
    assert send(b, "demo", 0, b"x" * (1024 * 1024 + 1)).errCode == 400
    r = fetch(b, p0, "A", G)
    assert (r.errCode, r.errMsg) == (411, "UnRegistered Consumer:A, you have to register firstly!")
    assert commit(b, p0, "A", G).errCode == 401
    assert register_c2b(b, p0, "A", G, op=32).errCode == 411
    assert register_c2b(b, p0, "A", G).success
    r = register_c2b(b, p0, "B", G)
    assert (r.errCode, r.errMsg) == (
        410, "[Duplicated Register] Partition 1#grp:demo:0 has been registered by A")
    assert fetch(b, p0, "B", G).errCode == 412
    assert commit(b, p0, "B", G).errCode == 401
    assert register_c2b(b, p0, "B", G, op=32).errCode == 412
    assert register_c2b(b, p1, "A", G, op=33).errCode == 400
    hb = call(b, "consumerHeartbeatC2B", clientId="B", groupName=G, readStatus=0,
              partitionInfo=[p0.full, p1.full])
    assert hb.success and hb.hasPartFailure
    assert list(hb.failureInfo) == [f"412:{p0.full}", f"411:{p1.full}"]


def test_read_status_from_max(sim):
    b = sim.brokers[0]
    part = sim.config.topic_parts("demo")[0]
    send(b, "demo", 0, b"old")
    assert register_c2b(b, part, "A", G, read_status=1).currOffset == INDEX_UNIT
    assert fetch(b, part, "A", G).errCode == 404


def test_state_survives_a_restart(tmp_path):
    config = SimConfig(data_path=tmp_path, broker_ports=(0, 0))
    sim = Simulation(config)
    b = sim.brokers[1]
    part = config.topic_parts("demo")[3]
    for i in range(4):
        send(b, "demo", 1, b"m%d" % i)
    register_c2b(b, part, "A", G)
    fetch(b, part, "A", G)
    commit(b, part, "A", G)  # m0..m3 consumed
    send(b, "demo", 1, b"m4")
    fetch(b, part, "A", G)  # m4 read, never committed
    sim.save()
    again = Simulation(SimConfig(data_path=tmp_path, broker_ports=(0, 0)))
    b2 = again.brokers[1]
    register_c2b(b2, part, "A2", G)
    assert [m.payLoadData for m in fetch(b2, part, "A2", G).messages] == [b"m4"]
    assert send(b2, "demo", 1, b"m5").messageId == 6  # ids go on where they stopped


def test_history_events_are_frozen(sim):
    register_c2m(sim, "A")
    heartbeat(sim, "A")
    queued, sent = sim.master.history[1:3]
    assert isinstance(queued, RebalanceQueued) and isinstance(sent, RebalanceSent)
    assert queued.op_name == "ONLY_CONNECT" and len(queued.partitions) == 4
    with pytest.raises(AttributeError):
        queued.op_type = 2
    assert not any(isinstance(e, RebalanceDone) for e in sim.master.history)
