"""The doctor's rules on the real captures of data/doctor/ and on every older sample: each
registered rule finds its problem with the packets data/doctor/expected.json names (read
back from the captures with tshark when they were made) and says what to change; none
reports a warning or an error where expected.json says the traffic is healthy; and the
client guide's verdicts the doctor reads from the frames table are ``nsqviz
conformance``'s. A rule added to the registry is held to its captures here as soon as it
is registered (expected.json already names the findings of every rule of issue 35)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from nsqviz.analysis.capture import Capture
from nsqviz.doctor.rule import EVIDENCE_LIMIT, Severity
from nsqviz.pipeline.definitions import rules

DATA = Path(__file__).resolve().parents[2] / "data"
EXPECTED = json.loads((DATA / "doctor" / "expected.json").read_text())
NSQ_RULES = sorted(r for r in rules() if r.startswith("nsq."))

NOT_JUDGED = {"lookupd-polling": "nothing in a /lookup request names the consumer whose NSQ "
                                  "connections it feeds"}
"""Client-guide rules ``nsqviz conformance`` judges and the doctor does not (see
:mod:`nsqviz.conformance.frames`)."""


@cache
def findings(name: str) -> tuple[dict[str, Any], ...]:
    cap = Capture(str(DATA / name), fields=False)
    return tuple(cap.diagnose().to_dict("records"))


def _first_of(packets: list[int], finding: dict[str, Any]) -> bool:
    """A finding with more evidence than it keeps (EVIDENCE_LIMIT items, the first in
    time) names the first of the expected packets."""
    mine = list(finding["packets"])
    return (len(finding["evidence"]) == EVIDENCE_LIMIT
            and mine == sorted(packets)[:len(mine)])


def _label(connection: dict[str, str] | None) -> str | None:
    return None if connection is None else f"{connection['client']}->{connection['server']}"


def _expected(doctor: bool) -> list[Any]:
    """The findings expected.json names of the registered rules: in data/doctor/'s
    captures, or the others'."""
    out = []
    for name, entry in EXPECTED.items():
        for k, f in enumerate(entry["findings"]):
            if f["rule"] not in rules() or name.startswith("doctor/") != doctor:
                continue
            if f.get("guide_rule") in NOT_JUDGED:
                continue
            out.append(pytest.param(name, k, id=f"{name}:{f['rule']}:{k}"))
    return out


@pytest.mark.parametrize(("name", "k"), _expected(doctor=True))
def test_each_rule_finds_its_problem_in_its_capture(name, k):
    want = EXPECTED[name]["findings"][k]
    label = _label(want["connection"])
    mine = [f for f in findings(name) if f["rule"] == want["rule"]]
    assert mine, f"{want['rule']} found nothing in {name}: {want['what']}"
    near = [f for f in mine if label is None or label in (f["connection"], *f["connections"])]
    assert near, (label, [f["connection"] for f in mine])
    hit = [f for f in near if set(want["packets"]) <= set(f["packets"])
           or _first_of(want["packets"], f)]
    assert hit, (want["packets"], [list(f["packets"]) for f in near])
    f = hit[0]
    assert f["summary"] and f["explanation"] and f["change"], f
    assert all(item["packet"] in f["packets"] for item in f["evidence"]
               if item["packet"] is not None)
    assert all(p == str(DATA / name) for p in f["packet_files"])
    for figure in ("msg_timeout_ms", "rdy", "code"):  # the figures the capture shows
        if figure in want and f"{want[figure]}" not in f["summary"] + f["explanation"]:
            pytest.fail(f"{figure} {want[figure]} not in {f['summary']!r}")


@pytest.mark.parametrize(("name", "k"), _expected(doctor=False))
def test_the_older_samples_show_what_expected_says(name, k):
    want = EXPECTED[name]["findings"][k]
    label = _label(want["connection"])
    mine = [f for f in findings(name) if f["rule"] == want["rule"]
            and (label is None or f["connection"] == label)]
    assert any(set(want["packets"]) <= set(f["packets"]) for f in mine), (
        want, [(f["summary"], list(f["packets"])) for f in mine])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_no_rule_cries_wolf(name):
    """A rule expected.json does not list for a capture, or lists as not to be reported,
    is never a warning or an error there: a doctor that cries wolf is worse than none."""
    entry = EXPECTED[name]
    shown = {f["rule"] for f in entry["findings"]}
    never = {q for q in entry["not_expected"] if isinstance(q, str)}
    not_here = [(q["rule"], _label(q["connection"])) for q in entry["not_expected"]
                if isinstance(q, dict)]
    for f in findings(name):
        if Severity(f["severity"]) is Severity.INFO:
            continue
        assert f["rule"] not in never, (name, f["summary"])
        for rule, label in not_here:
            assert not (f["rule"] == rule and label in (None, f["connection"])), (
                name, f["summary"], "expected.json says why not")
        # another rule on a capture made for other rules is a finding to look at; on a
        # healthy capture (nothing listed) it is a false alarm
        assert shown or not f["rule"].startswith("nsq."), (name, f["summary"])


def test_every_rule_has_a_capture_and_thresholds_with_reasons():
    found = {f["rule"] for e in EXPECTED.values() for f in e["findings"]}
    assert set(rules()) <= found
    assert set(NSQ_RULES) == {"nsq.msg-timeout", "nsq.late-answer", "nsq.heartbeat-missed",
                              "nsq.never-ready", "nsq.starved", "nsq.rdy-stuck",
                              "nsq.publish-refused", "nsq.fatal-error",
                              "nsq.redelivery-late", "nsq.reconnect-churn",
                              "nsq.poison-message", "nsq.backlog", "nsq.rdy-hoarding",
                              "nsq.guide"}
    for rule in rules().values():
        assert rule.summary and rule.explanation and rule.change
        for t in rule.thresholds:
            assert t.why and str(t).startswith(f"{t.name} = ")


def test_a_finding_states_the_thresholds_that_decided_it():
    (f,) = [f for f in findings("doctor/nsq-poison-message.pcap")
            if f["rule"] == "nsq.poison-message"]
    assert f["thresholds"] == ["POISON_ATTEMPTS = 5 attempts: go-nsq's MaxAttempts and "
                               "pynsq's max_tries default to 5, after which the client guide "
                               "has the library give a message up (FIN it, and call a give-up"
                               " handler)"]
    assert "past 5" in f["explanation"]


def test_the_late_answer_and_its_timeout_are_one_story():
    """nsqd refused the late FIN (E_FIN_FAILED): the delivery timed out, it was not ended
    by the FIN -- so msg-timeout counts it, and the deliveries table agrees."""
    cap = Capture(str(DATA / "doctor" / "nsq-late-answer.pcap"), fields=False)
    first = cap.deliveries[cap.deliveries.delivery == 1]
    assert set(first.outcome) == {"timeout"}
    rules_found = {f["rule"]: f for f in findings("doctor/nsq-late-answer.pcap")}
    assert "3 answers (FIN/REQ/TOUCH)" in rules_found["nsq.late-answer"]["summary"]
    assert rules_found["nsq.msg-timeout"]["summary"].startswith("3 of 3 messages")


GUIDE_SAMPLES = sorted(n for n, e in EXPECTED.items()
                       if not n.startswith(("tubemq/", "doctor/tubemq", "doctor/tcp-retr")))


@pytest.mark.parametrize("name", GUIDE_SAMPLES)
def test_the_guide_from_the_frames_table_is_nsqviz_conformance(name):
    """The ``guide`` view (the frames table's rows rebuilt as what the checks read) gives
    ``nsqviz conformance``'s verdicts, on every connection the doctor judges."""
    from nsqviz.conformance.report import check
    from nsqviz.conformance.sources import from_capture

    cap = Capture(str(DATA / name), fields=False)
    mine = {(r["conn_id"].rsplit("@", 1)[0], r["rule"]): (r["status"], r["detail"],
                                                          tuple(r["packets"]))
            for r in cap.table("guide").to_dict("records")}
    report = check(from_capture([DATA / name]))
    theirs = {(label, v.rule): (v.status, v.detail, v.packets)
              for label, verdicts in report.connections.items() for v in verdicts}
    judged = {label for label, _ in mine}
    assert {k: v for k, v in theirs.items() if k[0] in judged} == mine


def test_the_guide_on_rotated_files_names_each_packet_in_its_file(tmp_path):
    """Packet numbers restart in each rotated file: the guide's verdicts name the same
    packets as on the whole capture, each numbered in its own file."""
    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.writer import PcapWriter

    src = DATA / "doctor" / "nsq-guide.pcap"
    records = [r for r in read_capture(str(src)) if isinstance(r, Record)]
    cuts = [0, 12, 28, len(records)]
    files = []
    for k, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
        files.append(str(tmp_path / f"guide.pcap{k or ''}"))
        with PcapWriter(files[-1], linktype=records[0].linktype) as w:
            for r in records[lo:hi]:
                w.write(r.ts, r.data, orig_len=r.orig_len)
    whole = findings("doctor/nsq-guide.pcap")
    cut = Capture(*files, fields=False).diagnose().to_dict("records")
    assert [f["summary"] for f in cut] == [f["summary"] for f in whole]
    for a, b in zip(whole, cut, strict=True):
        assert list(a["packets"]) == [p + cuts[files.index(f)] for p, f in
                                      zip(b["packets"], b["packet_files"], strict=True)]
    assert len({f for b in cut for f in b["packet_files"]}) == 3
