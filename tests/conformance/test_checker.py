"""The conformance checker: sample captures of real clients, a live run of nsqviz.clients.nsq,
and a deliberately rude client whose every breach must be named with its packets."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

from nsqviz.clients.nsq import Consumer, Producer
from nsqviz.conformance.report import check
from nsqviz.conformance.rules import RULES, check_polls
from nsqviz.conformance.sources import from_capture, from_tap
from nsqviz.conformance.tap import WireTap
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.events import Fin, Identify, Magic, Rdy, Sub

DATA = Path(__file__).resolve().parents[2] / "data"


def _verdicts(report, label_part=""):
    (label,) = [k for k in report.connections if label_part in k and
                any(v.rule == "initial-rdy" and v.status != "not exercised"
                    for v in report.connections[k])]
    return {v.rule: v for v in report.connections[label]}


def test_pynsq_sample_capture():
    report = check(from_capture([DATA / "pubsub-pynsq.pcap"]), max_in_flight=10)
    v = _verdicts(report)
    assert v["initial-rdy"].status == "pass" and v["initial-rdy"].packets == (21,)
    assert v["heartbeat"].status == "pass"
    assert v["in-flight"].status == "pass"
    # pynsq closes its subscribed connection without CLS: the guide's graceful close
    assert v["cls-before-close"].status == "fail" and v["cls-before-close"].packets
    assert report.summary()["rdy-sum"] == "pass"


def test_nsqjs_sample_capture():
    v = _verdicts(check(from_capture([DATA / "pubsub-nsqjs.pcapng"])))
    assert v["initial-rdy"].status == "fail"  # nsqjs starts at max_in_flight
    assert "first RDY 5" in v["initial-rdy"].detail
    assert v["cls-before-close"].status == "pass"


def test_nsqviz_client_live_passes_every_rule_it_exercises(broker):
    with WireTap(broker.tcp_address) as tap:
        async def main():
            async with Producer(broker.tcp_address) as p:
                await p.mpub("t", [b"%d" % i for i in range(200)])
            failed = []

            def handler(m):
                if m.attempts == 1 and len(failed) < 1:
                    failed.append(m)
                    return False
                return True

            async with Consumer("t", "c", handler, nsqd_tcp_addresses=tap.address,
                                max_in_flight=20, heartbeat_interval=1.0, requeue_delay=0,
                                backoff_strategy=lambda n: 0.2) as c:
                end = time.monotonic() + 10
                while c.stats["finished"] < 200 and time.monotonic() < end:
                    await asyncio.sleep(0.05)
                await asyncio.sleep(1.2)  # a heartbeat or two

        asyncio.run(main())
    summary = check(from_tap(tap), max_in_flight=20).summary()
    assert "fail" not in summary.values(), summary
    for rule in ("handshake", "initial-rdy", "rdy-update", "heartbeat", "in-flight",
                 "backoff", "cls-before-close", "rdy-sum", "max-rdy-count"):
        assert summary[rule] == "pass", (rule, summary)


def test_a_rude_client_is_caught_with_its_packets(broker):
    codec = ClientConnection()
    with WireTap(broker.tcp_address) as tap:
        host, _, port = tap.address.rpartition(":")
        with socket.create_connection((host, int(port))) as s:
            s.sendall(codec.send(Magic()) + codec.send(Identify({})) + codec.send(Sub("t", "c"))
                      + codec.send(Rdy(5)))
            time.sleep(0.3)
            s.sendall(codec.send(Fin(b"0" * 16)))
            time.sleep(0.3)
        time.sleep(0.2)
    (verdicts,) = check(from_tap(tap), max_in_flight=100).connections.values()
    v = {x.rule: x for x in verdicts}
    assert v["feature-negotiation"].status == "fail"
    assert v["initial-rdy"].status == "fail"
    assert v["in-flight"].status == "fail" and v["in-flight"].packets
    assert v["cls-before-close"].status == "fail"


def test_polling_rule():
    assert check_polls({}).status == "not exercised"
    even = {"a": [(0, 1), (1.0, 2), (2.3, 3)], "b": [(0, 4), (1.0, 5), (2.3, 6)]}
    assert check_polls(even).status == "pass"
    alternate = {"a": [(0, 1), (2, 2), (4, 3)], "b": [(1, 5), (3, 6)]}  # one lookupd a poll
    assert check_polls(alternate).status == "fail"
    fixed = {"a": [(0, 1), (1.0, 2), (2.0, 3), (3.0, 4)]}
    assert "no jitter" in check_polls(fixed).detail


def test_cli_exit_code_and_rules_listed():
    out = subprocess.run([sys.executable, "-m", "nsqviz.cli", "conformance",
                          str(DATA / "pubsub-nsqjs.pcapng")], capture_output=True, text=True)
    assert out.returncode == 1  # nsqjs fails initial-rdy
    for rule in RULES:
        assert rule in out.stdout


# What each library does differently, on the guide scenario (data/make_guide_captures.py)
GUIDE = {
    "pynsq": {"cls-before-close": "fail", "lookupd-polling": "fail", "initial-rdy": "pass"},
    "gnsq": {"cls-before-close": "fail", "lookupd-polling": "fail", "initial-rdy": "pass"},
    "nsqjs": {"cls-before-close": "pass", "lookupd-polling": "fail", "initial-rdy": "fail"},
    "nsqviz": {"cls-before-close": "pass", "lookupd-polling": "pass", "initial-rdy": "pass"},
}


def test_guide_captures_of_each_library():
    for lib, expected in GUIDE.items():
        summary = check(from_capture([DATA / f"guide-{lib}.pcap"]), max_in_flight=4).summary()
        for rule in ("handshake", "heartbeat", "in-flight", "rdy-sum", "backoff",
                     "max-rdy-count"):
            assert summary[rule] == "pass", (lib, rule, summary)
        for rule, status in expected.items():
            assert summary[rule] == status, (lib, rule, summary)
    assert "fail" not in check(from_capture([DATA / "guide-nsqviz.pcap"]),
                               max_in_flight=4).summary().values()


def test_cli_live_mode_reports_on_a_client_it_proxied(broker):
    proc = subprocess.Popen([sys.executable, "-m", "nsqviz.cli", "conformance", "--live",
                             broker.tcp_address, "--duration", "4", "--max-in-flight", "5"],
                            stdout=subprocess.PIPE, text=True)
    proxy = proc.stdout.readline().split()[3]

    async def main():
        async with Producer(broker.tcp_address) as p:
            await p.mpub("live", [b"a", b"b", b"c"])
        got = []
        async with Consumer("live", "c", lambda m: got.append(m), nsqd_tcp_addresses=proxy,
                            max_in_flight=5):
            while len(got) < 3:
                await asyncio.sleep(0.02)

    asyncio.run(main())
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert "pass           initial-rdy" in out and "pass           cls-before-close" in out
