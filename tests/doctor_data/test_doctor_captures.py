"""The doctor's sample captures (data/doctor/, made by data/make_doctor_*.py) and what
data/doctor/expected.json says the doctor should find in them and in the older samples:
every capture decodes, every packet named exists, and the packets said to carry an
error, a redelivery or a TubeMQ failure carry it as ``nsqviz decode`` reads them.

Not the doctor's tests (those check the findings themselves): these keep the data
honest for them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nsqviz.capture.files import Record, read_capture
from nsqviz.cli import main

DATA = Path(__file__).resolve().parents[2] / "data"
EXPECTED = json.loads((DATA / "doctor" / "expected.json").read_text())
CAPTURES = sorted(p.name for p in (DATA / "doctor").glob("*.pcap"))
RULES = {
    "nsq.msg-timeout", "nsq.late-answer", "nsq.heartbeat-missed", "nsq.never-ready",
    "nsq.starved", "nsq.rdy-stuck", "nsq.publish-refused", "nsq.fatal-error",
    "nsq.redelivery-late", "nsq.reconnect-churn", "nsq.poison-message", "nsq.backlog",
    "nsq.rdy-hoarding", "nsq.guide", "tcp.zero-window", "tcp.retransmission", "tcp.reset",
    "capture.truncated", "capture.midstream", "capture.gap", "lookupd.registration",
    "tubemq.heartbeat-timeout", "tubemq.rebalance", "tubemq.rpc-error"}
ADDRESS = re.compile(r"^\d+\.\d+\.\d+\.\d+:\d+$")


def _count(path: Path) -> int:
    return sum(1 for r in read_capture(path) if isinstance(r, Record))


def _ints(value: Any) -> Iterator[int]:
    """Every packet number a finding names: ``packets`` and the numbers in its facts
    whose key names a packet (seconds, counts and ids are not packet numbers)."""
    if isinstance(value, dict):
        for key, v in value.items():
            if key in PACKET_KEYS:
                yield from _numbers(v)
            elif isinstance(v, dict | list):
                yield from _ints(v)
    elif isinstance(value, list):
        for v in value:
            yield from _ints(v)


def _numbers(value: Any) -> Iterator[int]:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)


PACKET_KEYS = {
    "packets", "deliveries", "fin", "delivered", "answer", "refused", "redelivered",
    "fin_of_redelivery", "heartbeats", "close_packet", "sub", "publish", "cls",
    "first_delivery_later", "rdy_packet", "fins", "req", "rdy0", "command", "error",
    "server_fin", "syns", "reqs", "publishes", "zero_window", "probes", "window_update",
    "retransmissions", "fast_retransmissions", "previous_segment_not_captured", "rst",
    "first_packet", "packet", "ping", "nsqd_fin", "late_answer_packets", "lookup",
    "lookup_answer", "timeouts", "reregistered", "last_heartbeat", "event_packet",
    "unreported_heartbeats", "waiting_heartbeats", "disconnect_event", "reported_done",
    "fetches_after", "occupied", "fin_before"}


def _decode(path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    assert main(["decode", "--json", *args, str(path)]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_every_doctor_capture_is_described_and_small():
    assert len(CAPTURES) >= 24
    assert all((DATA / "doctor" / n).stat().st_size < 1_000_000 for n in CAPTURES)
    assert {f"doctor/{n}" for n in CAPTURES} <= set(EXPECTED)
    readme = (DATA / "README.md").read_text()
    assert all(f"`doctor/{n}`" in readme for n in CAPTURES)


def test_every_rule_has_a_capture_of_its_own():
    found = {f["rule"] for name, e in EXPECTED.items() if name.startswith("doctor/")
             for f in e["findings"]}
    assert found == RULES


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_expected_names_packets_that_exist(name):
    entry = EXPECTED[name]
    path = DATA / name
    assert path.exists()
    count = _count(path)
    assert entry["packets"] == count
    for f in entry["findings"]:
        assert f["rule"] in RULES, f
        assert f["what"]
        for number in _ints(f):
            assert 1 <= number <= count, (f["rule"], number)
        if f["connection"] is not None:
            assert ADDRESS.match(f["connection"]["client"])
            assert ADDRESS.match(f["connection"]["server"])
    for q in entry["not_expected"]:
        assert (q if isinstance(q, str) else q["rule"]) in RULES, q
    assert not {f["rule"] for f in entry["findings"]} & {
        q for q in entry["not_expected"] if isinstance(q, str)}


@pytest.mark.parametrize("name", CAPTURES)
def test_doctor_capture_decodes_and_its_evidence_reads_right(name, capsys):
    entry = EXPECTED[f"doctor/{name}"]
    args = []
    for f in entry["findings"]:
        if f.get("decoded_with"):
            args = f["decoded_with"].split()
    records = _decode(DATA / "doctor" / name, capsys, *args)
    assert records
    at: dict[int, list[dict]] = {}
    for r in records:
        for p in r["packets"]:
            at.setdefault(p, []).append(r)
    for f in entry["findings"]:
        for fact in _facts(f):
            for key, want in CHECKS.items():
                if key in fact:
                    for number in _numbers(fact[key]):
                        assert any(want(r) for r in at.get(number, [])), (name, key, number)


def _facts(f: dict) -> Iterator[dict]:
    yield f
    for v in f.values():
        if isinstance(v, list):
            yield from (x for x in v if isinstance(x, dict))


def _error(r: dict) -> bool:
    return r["name"] in ("FrameTypeError", "Error")


def _redelivery(r: dict) -> bool:
    return r["name"] == "FrameTypeMessage" and r["fields"]["attempts"] >= 2


def _failed(r: dict) -> bool:
    message = r["fields"].get("message") or {}
    return r["kind"] == "frame" and message.get("errCode") not in (None, 200)


CHECKS = {"error": _error, "refused": _error, "redelivered": _redelivery,
          "timeouts": _failed, "occupied": _failed}
"""Fact key -> what ``nsqviz decode`` must show at each of its packets."""
