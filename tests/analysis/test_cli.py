"""nsqviz messages / connections / stats and nsqviz.open on real-nsqd captures in data/:
what the analyses say about them, checked against what the captures hold."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data"


def _nsqviz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nsqviz.cli", *args], capture_output=True,
                          text=True, timeout=120)


def test_messages_json_follows_a_requeue_to_its_redelivery():
    out = _nsqviz("messages", "--json", str(DATA / "pubsub-pynsq.pcap"))
    assert out.returncode == 0, out.stderr
    msgs = [json.loads(line) for line in out.stdout.splitlines()]
    requeued = [m for m in msgs if any(d["outcome"] == "REQ" for d in m["deliveries"])]
    assert requeued
    for m in requeued:
        first, second = m["deliveries"][:2]
        assert (first["attempts"], second["attempts"]) == (1, 2)
        assert first["packet"] < first["outcome_packet"] < second["packet"]
        assert first["redelivered_ts"] == second["ts"]
        assert first["req_delay_ms"] is not None
    assert all(m["published"] and m["published"]["packet"] > 0 for m in msgs)


def test_messages_unknown_id_is_one_line_with_the_nearest_and_exit_2():
    out = _nsqviz("messages", "--id", "18e9fb372532b7c", str(DATA / "pubsub-pynsq.pcap"))
    assert out.returncode == 2
    assert out.stderr == ("nsqviz messages: no message '18e9fb372532b7c' in the capture"
                          " (nearest: 18e9fb372532b7c0, 18e9fb372532b7c1, 18e9fb372532b7c2)\n")


def test_connections_link_each_error_to_its_command_and_say_who_closed():
    out = _nsqviz("connections", "--json", str(DATA / "nsqd" / "errors.pcap"))
    assert out.returncode == 0, out.stderr
    conns = [json.loads(line) for line in out.stdout.splitlines()]
    errors = {e["code"]: e for c in conns for e in c["errors"]}
    assert errors["E_BAD_TOPIC"]["command"] == "SUB" and errors["E_BAD_TOPIC"]["nsqd_closed"]
    assert errors["E_FIN_FAILED"]["command"] == "FIN"
    assert errors["E_REQ_FAILED"]["command"] == "REQ"
    assert not errors["E_FIN_FAILED"]["nsqd_closed"]
    bad_topic = next(c for c in conns if any(e["code"] == "E_BAD_TOPIC" for e in c["errors"]))
    assert bad_topic["ended"]["first_side"] == "s2c"
    assert bad_topic["ended"]["after"] == "FrameTypeError"
    assert {c["ended"]["how"] for c in conns} == {"fin", "rst"}


def test_connections_show_where_each_feature_came_from():
    out = _nsqviz("connections", str(DATA / "nsqd" / "snappy-pynsq.pcap"))
    assert out.returncode == 0, out.stderr
    assert "snappy: asked true (packet" in out.stdout
    assert "negotiated true (packet" in out.stdout


def test_stats_text_and_json():
    out = _nsqviz("stats", "--json", str(DATA / "nsqd" / "snappy-pynsq.pcap"))
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["pub_to_answer"]["n"] > 0 and s["pub_to_answer"]["p50_ms"] > 0
    assert {c["compression"] for c in s["compression"]} == {"snappy"}
    text = _nsqviz("stats", str(DATA / "tubemq" / "tubemq-producer-go.pcap")).stdout
    assert "sendMessageP2B" in text


def test_open_gives_dataframes_and_a_lifecycle_picture():
    import nsqviz

    cap = nsqviz.open(str(DATA / "pubsub-pynsq.pcap"))
    assert len(cap.frames) and len(cap.messages) and len(cap.connections)
    assert cap.errors.empty
    msg = cap.messages[cap.messages.requeues > 0].msg_id.iloc[0]
    html = cap.lifecycle(msg)._repr_html_()
    assert html.count("<title>delivery ") == 2 and ": REQ packet" in html
    assert "msg_timeout 2000 ms" in html
    # a legend says what each mark is, and every event's time is written under its lane
    legend = re.sub(r"<[^>]+>", "", html.rpartition('class="nv-muted"')[2])
    for mark in ("publish", "a delivery until its answer", "FIN", "REQ", "timeout",
                 "msg_timeout (2000 ms)", "REQ delay", "requeue due → redelivery seen"):
        assert mark in legend, mark
    written = re.findall(r'<text [^>]*font-size="10" fill="#[0-9a-f]+" [^>]*>([^<]+)</text>',
                         html)
    assert any(w.startswith("delivery 1 +") for w in written), written
    assert any(w.startswith("delivery 2 +") for w in written), written
    assert any(w.startswith("REQ +") for w in written) and any(
        w.startswith("requeue due +") for w in written), written
    assert re.search(r'<text [^>]*text-anchor="middle" fill="#6b7280">[\d.]+ s</text>', html)
    stem = msg[:-1]  # as near to each id of the topic's (...c0 to ...c7): named in order
    with pytest.raises(KeyError, match=f"no message '{stem}' in the capture"
                                       rf" \(nearest: {stem}0, {stem}1, {stem}2\)"):
        cap.lifecycle(stem)


def test_a_file_that_is_not_a_capture_is_one_line_and_exit_2():
    out = _nsqviz("stats", str(DATA / "README.md"))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "README.md" in out.stderr


def test_filter_selects_the_redelivery_by_a_display_filter():
    import nsqviz

    cap = nsqviz.open(str(DATA / "nsqd" / "debugging" / "debugging.pcap"))
    again = cap.filter("nsq.msg.attempts > 1")
    msgs = again[again.name == "FrameTypeMessage"]
    assert len(msgs) == 1
    second = cap.deliveries[cap.deliveries.attempts == 2]
    assert list(msgs.packets.iloc[0]) == [second.packet.iloc[0]]


TUBEMQ = DATA / "tubemq" / "tubemq-consumer-rebalance-go.pcap"
NSQ_KEYS = {"heartbeats", "pub_to_answer", "delivery_to_fin", "delivery_to_req", "compression"}


def test_tubemq_messages_go_from_send_to_fetch_and_commit():
    out = _nsqviz("messages", "--json", str(TUBEMQ))
    assert out.returncode == 0, out.stderr
    msgs = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(msgs) == 40 and {m["protocol"] for m in msgs} == {"tubemq"}
    for m in msgs:
        assert m["sent"]["packet"] < m["sent"]["answer_packet"]
        [fetch] = m["fetches"]
        assert fetch["group"] == "group1" and fetch["outcome"] == "committed"
        assert m["sent"]["answer_packet"] < fetch["packet"] < fetch["outcome_packet"]
    text = _nsqviz("messages", "--id", "7", str(TUBEMQ)).stdout
    assert text.count("message 7  topic demo  partition 0") == 2  # one per Broker
    assert "committed by consumerCommitC2B packet" in text


def test_tubemq_connections_say_who_holds_what():
    out = _nsqviz("connections", "--json", str(TUBEMQ))
    assert out.returncode == 0, out.stderr
    conns = {c["connection"]: c for c in map(json.loads, out.stdout.splitlines())}
    master = conns["127.0.0.1:42338->127.0.0.1:8715"]
    assert (master["role"], master["server_role"], master["group"]) == (
        "consumer", "master", "group1")
    assert [e["event"] for e in master["rebalances"]] == [
        "ONLY_CONNECT", "ONLY_DISCONNECT", "ONLY_CONNECT"]
    assert master["heartbeats"]["count"] == 9 and master["closed"]["packet"] == 552
    broker = conns["127.0.0.1:49614->127.0.0.1:8123"]
    assert [(p["partition"], p["released"]) for p in broker["partition_registrations"]] == [
        (0, "unregistered"), (1, "unregistered"), (1, "unregistered")]
    assert "identify" not in broker and "rdy" not in broker  # no NSQ keys
    text = _nsqviz("connections", str(TUBEMQ)).stdout
    assert "rebalance  1 ONLY_CONNECT 1:demo:0, 1:demo:1, 2:demo:0, 2:demo:1 (packet 9): " \
           "reported DONE (packet 58" in text
    assert " other " not in text


def test_stats_show_the_sections_of_the_protocols_present_only():
    tube = json.loads(_nsqviz("stats", "--json", str(TUBEMQ)).stdout)
    assert not NSQ_KEYS & tube.keys()
    beats = {h["method"]: h for h in tube["tubemq"]["heartbeats"]}
    assert sum(h["count"] for h in beats.values()) == 41
    assert beats["consumerHeartbeatC2M"]["answered"] == 16
    assert tube["tubemq"]["messages"]["committed"] == 40
    text = _nsqviz("stats", str(TUBEMQ)).stdout
    assert "TubeMQ heartbeats" in text and "PUB -> answer" not in text
    assert "delivery -> FIN" not in text
    nsq = json.loads(_nsqviz("stats", "--json", str(DATA / "pubsub-pynsq.pcap")).stdout)
    assert nsq.keys() >= NSQ_KEYS and "tubemq" not in nsq
    assert "TubeMQ" not in _nsqviz("stats", str(DATA / "pubsub-pynsq.pcap")).stdout


def test_open_gives_every_table_by_its_name():
    import nsqviz
    from nsqviz.pipeline.definitions import tables

    cap = nsqviz.open(str(TUBEMQ))
    assert cap.protocols == ("tubemq",)
    for name in tables():
        assert getattr(cap, name) is cap.table(name)
    assert set(tables()) <= set(dir(cap))
    assert len(cap.tubemq_messages) == 40 and cap.messages.empty
    with pytest.raises(AttributeError, match="tubemq_message.*nearest: tubemq_messages"):
        _ = cap.tubemq_message
