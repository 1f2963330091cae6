"""Issue 31's wrong answers, each on the real capture that showed it: who reset a
connection, which answer is a publish's, what counts as an error -- and what
``nsqviz messages`` says when it lists no message, and of a REQ's redelivery."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nsqviz

DATA = Path(__file__).resolve().parents[2] / "data"
SNAPLEN = DATA / "nsqd" / "snaplen" / "pubsub-s96.pcap"


def _nsqviz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nsqviz.cli", *args], capture_output=True,
                          text=True, timeout=120)


def test_a_reset_is_the_side_whose_packet_carried_it():
    """nsqd refused a PUB (E_BAD_TOPIC) and reset the connection with its input unread:
    packet 50 goes from nsqd's port to the client."""
    out = _nsqviz("connections", str(DATA / "doctor" / "tcp-reset.pcap"))
    assert out.returncode == 0, out.stderr
    last = out.stdout.split("connection ")[-1]
    assert "  error      E_BAD_TOPIC packet 48 answers PUB (packet 44); nsqd closed\n" \
        in last
    assert "  ended      RST from the server (packet 50) after FrameTypeError (packet 48)\n" \
        in last
    cap = nsqviz.open(str(DATA / "doctor" / "tcp-reset.pcap"))
    assert cap.errors.closed.tolist() == [True]
    conns = cap.connections.set_index("end_packet")
    assert conns.loc[50].ended_from == "s2c" and conns.loc[50].ended_by == "rst"
    # the consumer reset its own connection (packet 36 goes from the client)
    assert conns.loc[36].ended_from == "c2s"


def test_a_publish_is_paired_with_the_answer_that_answers_it():
    """The snaplen cut every PUB: the answers still name the PUB each answers
    (``response_to``), and publishes and stats read that, not the answers' order."""
    cap = nsqviz.open(str(SNAPLEN))
    pubs = cap.publishes.sort_values("packet")
    assert list(zip(pubs.packet, pubs.answer_packet, strict=True)) == [
        (16, 17), (18, 19), (20, 21), (22, 23), (34, 35), (36, 37)]
    frames = cap.frames
    for p in pubs.itertuples():
        answer = frames[(frames.conn_id == p.conn_id) & (frames.kind == "frame") & (
            frames.packets.map(lambda ps, at=p.answer_packet: list(ps) == [at]))].iloc[0]
        assert answer.response_to == p.packet
        assert abs(p.latency_s - (answer.ts - p.ts)) < 1e-9
    s = json.loads(_nsqviz("stats", "--json", str(SNAPLEN)).stdout)
    assert s["pub_to_answer"]["n"] == 6
    assert s["pub_to_answer"]["p100_ms"] == round(max(pubs.latency_s) * 1000, 3)


def test_errors_are_what_the_server_sent_and_problems_what_nsqviz_found():
    s = json.loads(_nsqviz("stats", "--json", str(SNAPLEN)).stdout)
    assert s["errors"] == {}  # nsqd sent no error; the snaplen cut units
    assert s["problems"] == {"Gap": 14, "Resync": 13}
    text = _nsqviz("stats", str(SNAPLEN)).stdout
    assert "errors by code (the servers' error answers)\n  none\n" in text
    assert "  Gap                    14\n" in text
    # nsqd sent one E_BAD_BODY (to an MPUB of no message); nsqviz's own verdict on that
    # MPUB is a problem, not a second E_BAD_BODY
    refused = DATA / "doctor" / "nsq-publish-refused.pcap"
    s = json.loads(_nsqviz("stats", "--json", str(refused)).stdout)
    assert s["errors"]["E_BAD_BODY"] == 1
    conns = [json.loads(line) for line in
             _nsqviz("connections", "--json", str(refused)).stdout.splitlines()]
    for c in conns:
        for e in c["errors"]:
            assert e["code"] != e["command"]  # an error never answers an error


def test_messages_says_why_it_lists_no_message():
    out = _nsqviz("messages", str(SNAPLEN))
    assert out.returncode == 0
    assert out.stdout == (
        "no message ids in the capture: it cut its 2 message frames short of their "
        "16-digit id (first: packet 60) -- its snaplen: capture with tcpdump -s 0\n")
    out = _nsqviz("messages", "--json", str(SNAPLEN))
    assert out.stdout == "" and out.stderr.startswith("nsqviz messages: no message ids")
    refused = DATA / "doctor" / "nsq-publish-refused.pcap"
    frames = nsqviz.open(str(refused)).frames
    publishes = frames[(frames.kind == "command") & frames.name.isin(["PUB", "MPUB", "DPUB"])]
    out = _nsqviz("messages", str(refused))
    assert out.stdout.startswith(
        f"no message ids in the capture: {len(publishes)} publishes (first: packet "
        f"{min(p[0] for p in publishes.packets)}) but no consumer in the capture")
    out = _nsqviz("messages", str(DATA / "snaplen120-small-messages.pcap"))
    assert out.stdout.splitlines()[-1].startswith(
        "4 of the capture's 23 message frames are not listed")


def test_a_reqs_redelivery_is_explained_as_a_timeouts():
    """REQ with delay 200 ms: the requeue was due 200 ms after the REQ, the redelivery
    came with nsqd's next scan seconds later -- said as for a timeout."""
    out = _nsqviz("messages", str(DATA / "doctor" / "nsq-redelivery-late.pcap"))
    assert out.returncode == 0, out.stderr
    assert ("  delivered  packet 25 +0.004998s attempts 1: REQ packet 26 +0.005107s delay "
            "200 ms: requeue due +0.205107s, redelivery seen +4.969588s (+4.764s)\n"
            ) in out.stdout
    timeout = _nsqviz("messages", str(DATA / "nsqd" / "debugging" / "debugging.pcap"))
    assert ("timeout (msg_timeout 1000 ms): requeue due +1.013094s, redelivery seen "
            "+4.492779s (+3.480s)") in timeout.stdout
    msgs = [json.loads(line) for line in _nsqviz(
        "messages", "--json", str(DATA / "doctor" / "nsq-redelivery-late.pcap")
    ).stdout.splitlines()]
    first = msgs[0]["deliveries"][0]
    assert first["requeue_due_ts"] == first["outcome_ts"] + 0.2
    cap = nsqviz.open(str(DATA / "doctor" / "nsq-redelivery-late.pcap"))
    html = cap.lifecycle(msgs[0]["id"])._repr_html_()
    assert "REQ: requeue due +0.205 s, redelivery seen +4.970 s (+4.764 s)" in html
