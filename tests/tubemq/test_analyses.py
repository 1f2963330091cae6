"""TubeMQ's analyses (nsqviz/tubemq/analyses.py) on real captures of the Go client
(tubemq-client-go, against the simulated Master and Brokers): what they say, checked
against what the captures hold -- read back from ``nsqviz decode``'s records, pairing
each answer with its request by serialNo in plain Python, and from tshark with the
generated dissector -- and the doctor captures' facts (data/doctor/expected.json, whose
packet numbers data/make_doctor_tubemq.py read back with tshark)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nsqviz.analysis.capture import Capture
from nsqviz.capture.decode import decode_capture
from nsqviz.cli import main as nsqviz_main
from nsqviz.wireshark.tshark import find_tshark, tshark_args

DATA = Path(__file__).resolve().parents[2] / "data"
REBALANCE = DATA / "tubemq" / "tubemq-consumer-rebalance-go.pcap"
DOCTOR = DATA / "doctor"


@pytest.fixture(scope="module")
def rebalance() -> Capture:
    return Capture(str(REBALANCE), fields=False)


def _calls(path: Path) -> list[tuple[Any, dict[str, Any] | None]]:
    """Every TubeMQ unit of ``path`` from ``nsqviz decode``'s records, each answer with its
    request's inner message (paired by flow and serialNo, as the protocol says)."""
    asked: dict[tuple[str, int], Any] = {}
    out = []
    for rec in decode_capture(str(path)):
        if rec.protocol != "tubemq" or rec.kind not in ("command", "frame"):
            continue
        key = (rec.flow, rec.fields["serialNo"])
        if rec.kind == "command":
            asked[key] = rec
            out.append((rec, None))
        else:
            request = asked.pop(key, None)
            out.append((rec, None if request is None else request.fields.get("message", {})))
    return out


def test_every_message_is_followed_from_its_send_to_its_fetch_and_commit(rebalance):
    """40 messages, sent by the project's producer, fetched by the two Go consumers of
    group1: each linked by its Broker, topic, partition and the Broker's message id, the
    batch committed by the next CommitOffsetRequestC2B of its partition."""
    sent, fetched = {}, {}
    pending: dict[tuple[str, str, int], list[tuple[Any, ...]]] = {}
    for rec, request in _calls(REBALANCE):
        server = rec.flow.split("->")[1]
        message = rec.fields.get("message", {})
        if rec.name == "SendMessageResponseB2P" and message["errCode"] == 200:
            key = (server, request["topicName"], request["partitionId"], message["messageId"])
            sent[key] = rec.packets[0]
        elif rec.name == "GetMessageResponseB2C" and message.get("messages"):
            part = (rec.flow, request["topicName"], request["partitionId"])
            for m in message["messages"]:
                key = (server, request["topicName"], request["partitionId"], m["messageId"])
                pending.setdefault(part, []).append((key, rec.packets[0],
                                                     request["groupName"]))
        elif rec.name == "CommitOffsetRequestC2B":
            part = (rec.flow, message["topicName"], message["partitionId"])
            for key, packet, group in pending.pop(part, []):
                fetched[key] = (packet, group, rec.packets[0], message["lastPackConsumed"])
    assert len(sent) == 40 and set(fetched) == set(sent)

    rows = rebalance.tubemq_messages
    assert len(rows) == 40
    for r in rows.to_dict("records"):
        key = (r["server"], r["topic"], r["partition_id"], r["msg_id"])
        assert r["send_answer_packet"] == sent[key]
        [fetch] = r["fetches"]
        packet, group, commit, consumed = fetched[key]
        assert (fetch["packet"], fetch["group_name"], fetch["outcome_packet"]) == (
            packet, group, commit)
        assert consumed and fetch["outcome"] == "committed"
        assert fetch["outcome_method"] == "consumerCommitC2B" and fetch["batch"] == 10
        assert list(r["committed_by"]) == ["group1"]
    # the Brokers number messages per Broker: ids 1..20 on each, odd ones in partition 0
    for server in ("127.0.0.1:8123", "127.0.0.1:8124"):
        mine = rows[rows.server == server]
        assert sorted(mine.msg_id) == list(range(1, 21))
        assert set(mine[mine.msg_id % 2 == 1].partition_id) == {0}
        assert set(mine[mine.msg_id % 2 == 0].partition_id) == {1}


def _values(node: Any, name: str) -> list[str]:
    """Every value of field ``name`` in a tshark JSON tree (``--no-duplicate-keys``: a
    field seen several times is a list)."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == name:
                found += value if isinstance(value, list) else [value]
            else:
                found += _values(value, name)
    elif isinstance(node, list):
        for value in node:
            found += _values(value, name)
    return found


@pytest.mark.skipif(find_tshark() is None, reason="tshark is not installed")
def test_tshark_sees_each_message_id_in_the_same_packets(rebalance, tmp_path):
    """tshark with the generated dissector (protobuf fields by name) finds each message id
    in the send answer and the fetch answer the analyses name."""
    assert nsqviz_main(["wireshark", "--out", str(tmp_path)]) == 0
    proc = subprocess.run(["tshark", *tshark_args(tmp_path), "-r", str(REBALANCE), "-Y",
                           "tubemq", "-T", "json", "--no-duplicate-keys"],
                          capture_output=True, text=True, timeout=300, check=True)
    seen: dict[str, set[tuple[str, int, int]]] = {"send": set(), "fetch": set()}
    for packet in json.loads(proc.stdout):
        layers = packet["_source"]["layers"]
        number = int(layers["frame"]["frame.number"])
        broker = f"{layers['ip']['ip.src']}:{layers['tcp']['tcp.srcport']}"
        for kind, field in (("send", "SendMessageResponseB2P"), ("fetch", "TransferedMessage")):
            for value in _values(layers, f"pbf.{field}.messageId"):
                seen[kind].add((broker, int(value), number))
    rows = rebalance.tubemq_messages.to_dict("records")
    assert seen["send"] == {(r["server"], r["msg_id"], r["send_answer_packet"]) for r in rows}
    assert seen["fetch"] == {(r["server"], r["msg_id"], f["packet"])
                             for r in rows for f in r["fetches"]}


def test_a_producer_alone_sends_messages_nobody_fetched():
    """The Go producer's five sends: each with the partition it chose and the id and
    appendOffset the Broker answered, none fetched."""
    path = DATA / "tubemq" / "tubemq-producer-go.pcap"
    cap = Capture(str(path), fields=False)
    rows = cap.tubemq_messages
    assert len(rows) == 5 and (rows.fetches_count == 0).all() and rows.fetches.isna().all()
    answered = {(rec.flow.split("->")[1], request["partitionId"], rec.fields["message"][
                 "messageId"], rec.fields["message"]["appendOffset"], rec.packets[0])
                for rec, request in _calls(path) if rec.name == "SendMessageResponseB2P"}
    assert len(answered) == 5
    assert set(zip(rows.server, rows.partition_id, rows.msg_id, rows.append_offset,
                   rows.send_answer_packet, strict=True)) == answered
    assert {p for _, p, *_ in answered} == {0, 1}


def test_connections_name_role_client_group_topics_and_partitions(rebalance):
    conns = rebalance.connections.set_index("flow")
    assert set(conns.protocol) == {"tubemq"}
    master = conns.loc["127.0.0.1:42338->127.0.0.1:8715"]
    assert (master.role, master.server_role, master.group_name) == (
        "consumer", "master", "group1")
    assert master.client_id == "group1_192.0.2.2-12051-1795510229000-1-go-0.1.2"
    assert list(master.partitions) == ["1:demo:0", "1:demo:1", "2:demo:0", "2:demo:1"]
    assert (master.rebalances, master.rebalances_unreported) == (3, 1)
    assert (master.closed_with, master.close_packet, master.close_err_code) == (
        "consumerCloseClientC2M", 552, 200)
    broker = conns.loc["127.0.0.1:49614->127.0.0.1:8123"]
    assert (broker.role, broker.server_role, list(broker.topics)) == (
        "consumer", "broker", ["demo"])
    assert (broker.messages_in, broker.heartbeats) == (10, 8)
    producer = conns.loc["127.0.0.1:53770->127.0.0.1:8715"]
    assert (producer.role, producer.server_role, producer.registered_packet) == (
        "producer", "master", 226)
    assert sorted(conns.role) == ["consumer"] * 6 + ["producer"] * 3
    # every heartbeat RPC, to the Master and to the Brokers
    assert conns.heartbeats.sum() == len(rebalance.tubemq_heartbeats) == 41


def test_rebalance_events_and_their_reports(rebalance):
    events = rebalance.tubemq_rebalances.sort_values("packet")
    got = [(r["rebalance_id"], r["event"], list(r["partitions"]), r["packet"], r["reported"],
            r["report_status_name"], r["report_packet"])
           for r in events.to_dict("records")]
    assert [(i, e, p, k, ok, s, None if s is None else int(q))
            for i, e, p, k, ok, s, q in got] == [
        (1, "ONLY_CONNECT", ["1:demo:0", "1:demo:1", "2:demo:0", "2:demo:1"], 9, True,
         "DONE", 58),
        (2, "ONLY_DISCONNECT", ["1:demo:1", "2:demo:1"], 108, True, "DONE", 140),
        (2, "ONLY_CONNECT", ["1:demo:1", "2:demo:1"], 159, True, "DONE", 214),
        (3, "ONLY_CONNECT", ["1:demo:1", "2:demo:1"], 525, False, None, None)]
    stuck = Capture(str(DOCTOR / "tubemq-rebalance-unacked.pcap"), fields=False)
    [event] = stuck.tubemq_rebalances.to_dict("records")
    assert (event["client_id"], event["rebalance_id"], event["op_type"], event["packet"]) == (
        "stuck-consumer", 1, 10, 9)
    assert not event["reported"] and event["heartbeats_before_report"] == 8


def test_heartbeats_answered_411_and_who_registered_again():
    cap = Capture(str(DOCTOR / "tubemq-heartbeat-timeout.pcap"), fields=False)
    beats = cap.tubemq_heartbeats
    lost = beats[beats.hb_no_node].sort_values("answer_packet")
    consumer = lost[lost.method == "consumerHeartbeatC2M"]
    producer = lost[lost.method == "producerHeartbeatP2M"]
    assert list(consumer.answer_packet) == [277, 327, 377, 427, 478]
    assert list(consumer.hb_no_node_in_row) == [1, 2, 3, 4, 5]
    assert set(consumer.registered_again_packet) == {526}
    assert list(producer.answer_packet) == [236, 283, 333, 383, 432, 481, 531, 582, 608]
    assert producer.registered_again_packet.isna().all()
    conns = cap.connections
    assert sorted(conns[conns.hb_no_node > 0].hb_no_node) == [5, 9]


def test_partitions_held_refused_and_released():
    cap = Capture(str(DOCTOR / "tubemq-partition-twice.pcap"), fields=False)
    parts = cap.tubemq_partitions
    refused = parts[~parts.held]
    assert sorted(refused.answer_packet) == [107, 117, 133, 144, 159, 174, 193, 204]
    assert set(refused.err_name) == {"PARTITION_OCCUPIED"}
    kept = parts[(parts.client_id == "liar-consumer") & (parts.partition_id == 1)]
    assert set(kept.released) == {"to the end"} and list(kept.fetches) == [7, 7]
    rebalance = Capture(str(REBALANCE), fields=False).tubemq_partitions
    gone = rebalance[rebalance.released == "unregistered"]
    assert len(gone) == len(rebalance) == 8 and set(gone.released_read_status) == {1}


def test_statuses_by_method_and_the_errors_they_are():
    cap = Capture(str(DOCTOR / "tubemq-rpc-error.pcap"), fields=False)
    statuses = cap.tubemq_statuses.set_index(["method", "err_code"])
    assert statuses.loc[("consumerRegisterC2M", 431), "answers"] == 6
    assert statuses.loc[("sendMessageP2B", 400), "answers"] == 3
    assert statuses.error.sum() == 2
    errors = cap.errors
    assert sorted(errors.packet) == [6, 23, 30, 33, 36, 48, 51, 54, 57]
    assert set(errors.code) == {"431 TOPIC_NOT_DEPLOYED", "400 BAD_REQUEST"}
    assert set(errors.command) == {"RegisterRequestC2M", "SendMessageRequestP2B"}
    # an idle consumer's 404 NOT_FOUND fetches are no errors
    idle = Capture(str(REBALANCE), fields=False)
    assert idle.errors.empty
    fetch = idle.tubemq_statuses.set_index(["method", "err_code"]).loc[("getMessagesC2B", 404)]
    assert fetch.answers == 74 and not fetch.error
