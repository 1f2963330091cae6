"""The stepping session: one request per step, bytes, blocks, protobufs, pairing,
state -- a producer and two consumers of one group against an embedded simulator."""

from __future__ import annotations

import pytest

from nsqviz.clients.session.tubemq import TubeSession
from nsqviz.servers.tubemq import EmbeddedSim
from nsqviz.tubemq.grammar import RPC_MAX_BUFFER_SIZE
from nsqviz.widgets.tubemq_steps import (
    history_table,
    partition_moves,
    sequence,
    step_hex,
    step_html,
)

PARTS = ["1:demo:0", "1:demo:1", "2:demo:0", "2:demo:1"]


@pytest.fixture
def session():
    with EmbeddedSim(topics=("demo",)) as sim:
        s = TubeSession(sim=sim)
        yield s
        s.close()


def test_producer_steps(session):
    p = session.producer(client="p1")
    reg = p.register()
    assert reg.summary == "RegisterRequestP2M #1 → RegisterResponseM2P 200 OK!"
    assert reg.request.header.protocolVer == 3 and reg.answer.request is reg.request
    assert reg.answer.serialNo == reg.serial and reg.latency is not None
    assert reg.after["connections"] == {"Master": "REGISTERED"}
    p.heartbeat()
    assert p.state()["partitions"] == {"demo": PARTS}
    sent = [p.send(f"m{i}") for i in range(4)]
    assert [s.server for s in sent] == ["Broker 1", "Broker 1", "Broker 2", "Broker 2"]
    big = p.send(b"x" * 20000)  # the content spans three 8192-byte blocks
    assert [len(b) for b in big.request_frame.blocks][:2] == [RPC_MAX_BUFFER_SIZE] * 2
    assert len(big.request_frame.blocks) == 3 and big.call.ok
    bad = p.send("bad", check_sum=5)
    assert bad.call.err_code == 403
    html = step_html(big)
    assert "listSize 3" in html and "block lengths [8192, 8192," in html
    closing = p.close()
    assert closing.call.ok
    hexes = step_hex(closing)
    assert "CloseRequestP2M" in hexes and "CloseResponseM2P" in hexes


def test_consumers_rebalance_and_commit(session):
    p = session.producer(client="p1")
    p.register()
    p.heartbeat()
    for i in range(4):
        p.send(f"m{i}")
    a = session.consumer("A", client="A1")
    a.register()
    event = a.heartbeat()
    assert event.answer.message.event.opType == 10
    assert [s.call.ok for s in a.act()] == [True] * 4
    a.heartbeat()  # reports the event done
    got = a.fetch("1:demo:0")
    assert [m.payLoadData for m in got.call.message.messages] == [b"m0"]
    assert a.commit("1:demo:0").call.message.currOffset == 28
    assert a.fetch("1:demo:0").call.err_code == 404
    b = session.consumer("B", client="B1")
    b.register()
    assert not b.heartbeat().answer.message.HasField("event")
    assert a.heartbeat().answer.message.event.opType == 20  # ONLY_DISCONNECT
    a.act()
    a.heartbeat()
    assert b.heartbeat().answer.message.event.opType == 10  # ONLY_CONNECT
    b.act()
    b.heartbeat()
    assert session.assignment() == {"group1": {"A1": ["1:demo:0", "2:demo:0"],
                                               "B1": ["1:demo:1", "2:demo:1"]}}
    # B starts where the group left off: m1 on 1:demo:1 was never committed
    assert [m.payLoadData for m in b.fetch("1:demo:1").call.message.messages] == [b"m1"]
    history = session.master_history()
    names = {"A1": "A", "B1": "B"}
    moves = partition_moves(history, PARTS, names)
    assert moves.count("<tr>") == 4  # header + three reported events
    assert "RebalanceQueued" in history_table(history, names).text()
    assert len(sequence(session).arrows) == 2 * len(session.steps)
    assert [s.summary.split(" #")[0] for s in a.close()] == [
        "CloseRequestC2M", "RegisterRequestC2B", "RegisterRequestC2B"]


def test_default_session_starts_the_process_simulator():
    from nsqviz.clients.session.tubemq import default_sim

    session = TubeSession()  # no address: the process's embedded simulator
    assert session.sim is default_sim() and session.master_address == default_sim().master_address
    step = session.producer(client="p-default").register()
    assert step.call.ok
    session.close()
