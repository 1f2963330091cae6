"""The TubeMQ sample captures in data/ decode with no unexplained error, and a fresh
``tcpdump -i lo`` capture of a simulator session decodes to exactly the requests and
answers the client sent and got."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from nsqviz.capture.files import CaptureFormatError
from nsqviz.clients.tubemq import Channel
from nsqviz.servers.tubemq import EmbeddedSim
from tests.servers.tubemq._pcap import conversations

DATA = Path(__file__).resolve().parents[3] / "data" / "tubemq"
PORTS = {8715, 8123, 8124, 8717}  # what data/make_tubemq_captures.py listens on
SAMPLES = ["tubemq-producer-go.pcap", "tubemq-consumer-rebalance-go.pcap",
           "tubemq-large-message-go.pcap", "tubemq-glued-requests.pcap", "tubemq-errors.pcap"]
# the errors capture's violations, each on purpose (data/README.md)
EXPECTED = {"tubemq-errors.pcap": Counter({"NotAllowedInState": 2, "CrcMismatch": 1,
                                           "NoDecoder": 1, "BadToken": 1})}


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_capture_decodes(name):
    convs = conversations(DATA / name, PORTS)
    assert convs and not any(c.gaps for c in convs)
    requests = [r for c in convs for r in c.requests]
    answers = [a for c in convs for a in c.answers]
    assert requests and all(r.info is not None for r in requests)
    # every answer is paired with its request by serialNo, and every request answered
    assert all(a.request is not None for a in answers)
    assert len(answers) == len(requests)
    codes = Counter(v.code for c in convs for v in c.violations)
    assert codes == EXPECTED.get(name, Counter())


@pytest.mark.parametrize("name", SAMPLES)
def test_nsqviz_decode_reads_the_sample(name, capsys):
    from nsqviz.cli import main

    assert main(["decode", "--json", str(DATA / name)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    units = [r for r in records if r["kind"] in ("command", "frame")]
    assert units and not [r for r in records if r["kind"] == "gap"]
    assert {r["name"] for r in units} >= ({"RegisterRequestP2M"} if "producer" in name else set())
    problems = Counter(v["code"] for r in records for v in r["fields"].get("violations", []))
    problems.update(r["name"] for r in records if r["kind"] == "error")
    assert problems == EXPECTED.get(name, Counter())


def test_large_message_spans_blocks_and_segments():
    convs = conversations(DATA / "tubemq-large-message-go.pcap", PORTS)
    big = [e for c in convs for e in c.events
           if getattr(e, "raw", None) is not None and len(e.raw.data) > 100_000]
    assert sorted(e.name for e in big) == ["GetMessageResponseB2C", "SendMessageRequestP2B"]
    for e in big:
        assert len({s.segment for s in e.raw.sources}) >= 2  # several TCP segments
        assert e.raw.data[8:12] == (13).to_bytes(4, "big")  # listSize: 13 blocks


def test_glued_requests_share_one_segment():
    convs = conversations(DATA / "tubemq-glued-requests.pcap", PORTS)
    per_segment = Counter(r.raw.sources[0].segment for c in convs for r in c.requests
                          if len(r.raw.sources) == 1)
    assert per_segment.most_common(1)[0][1] == 100


def _tcpdump_or_skip():
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump is not installed")
    if os.geteuid() != 0:
        pytest.skip("tcpdump on lo needs root")


def _exchanges(pcap: Path, ports: list[int]) -> list[tuple[bytes, bytes]] | None:
    """Each request's bytes with its answer's, as the capture holds them so far."""
    try:
        convs = conversations(pcap, ports)
    except CaptureFormatError:  # not even the file header written yet
        return None
    return sorted((r.raw.data, a.raw.data) for c in convs for r in c.requests
                  for a in c.answers if a.request is r)


def test_fresh_capture_decodes_to_what_the_client_sent_and_got(tmp_path):
    _tcpdump_or_skip()
    pcap = tmp_path / "session.pcap"
    with EmbeddedSim(topics=("demo",)) as sim:
        ports = [int(a.rsplit(":", 1)[1]) for a in [sim.master_address, *sim.broker_addresses]]
        dump = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-s", "0", "-B", "65536", "--immediate-mode", "-U",
             "-w", str(pcap),
             " or ".join(f"tcp port {p}" for p in ports)],
            stderr=subprocess.PIPE, text=True)
        while "listening" not in (line := dump.stderr.readline()):
            assert line, "tcpdump did not start"
        master, broker = Channel(sim.master_address), Channel(sim.broker_addresses[0])
        calls = [master.call("producerRegisterP2M", {"clientId": "p", "brokerCheckSum": -1,
                                                     "hostName": "127.0.0.1"}),
                 broker.call("sendMessageP2B", {"clientId": "p", "topicName": "demo",
                                                "partitionId": 0, "data": b"x" * 30000,
                                                "flag": 0, "checkSum": -1, "sentAddr": 0}),
                 broker.call("sendMessageP2B", {"clientId": "p", "topicName": "nosuch",
                                                "partitionId": 0, "data": b"y", "flag": 0,
                                                "checkSum": -1, "sentAddr": 0}),
                 master.call("producerCloseClientP2M", {"clientId": "p"})]
        master.close()
        broker.close()
        want = sorted((c.sent, c.received) for c in calls)
        deadline = time.monotonic() + 20  # tcpdump writes each packet as it comes (-U)
        while _exchanges(pcap, ports) != want and time.monotonic() < deadline:
            time.sleep(0.1)
        dump.send_signal(signal.SIGINT)
        dump.wait(timeout=10)
    assert _exchanges(pcap, ports) == want
    convs = conversations(pcap, ports)
    assert not any(c.violations for c in convs)
