"""Captures of the real nsqd v1.3.0 refusing well-framed commands: each is decoded as the
command that was sent, with a violation whose answer is the error nsqd sent back.

``data/nsqd/refused/*.pcap`` are made by ``data/make_nsqd_refusals.py`` (tcpdump on lo);
``data/nsqd/errors.pcap`` by ``data/make_captures.py`` against the real nsqd.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqviz.capture.decode import decode_capture
from nsqviz.conformance.report import check
from nsqviz.conformance.sources import from_capture
from nsqviz.nsq import events as ev
from nsqviz.nsq.observer import Observer
from nsqviz.nsq.server_connection import ServerConfig
from nsqviz.stream.direction import Direction

NSQD = Path(__file__).resolve().parents[2] / "data" / "nsqd"
SAMPLES = [NSQD / "refused" / "bad-values.pcap", NSQD / "refused" / "max-rdy-count.pcap",
           NSQD / "errors.pcap"]


def _refused(path: Path):
    """(command record, the error frame nsqd answered it with) for every refused command."""
    records = list(decode_capture(path))
    out = []
    for k, r in enumerate(records):
        v = r.fields.get("violation") if r.kind == "command" else None
        if v and v["code"]:
            answer = next(x for x in records[k + 1:]
                          if x.flow == r.flow and x.name == "FrameTypeError")
            out.append((r, answer))
    return out


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_every_refusal_is_the_error_nsqd_sent(path):
    refused = _refused(path)
    assert refused
    for cmd, answer in refused:
        assert type(cmd.event) is ev.Violation and cmd.event.command is not None
        assert cmd.event.error == bytes.fromhex(answer.fields["data"]), cmd


def test_rdy_over_the_default_max_is_a_rdy_with_nsqds_answer():
    """bad-values.pcap: ``SUB t c`` + ``RDY 99999``, no IDENTIFY: nsqd's limit is 2500."""
    (rdy, answer), = [(c, a) for c, a in _refused(NSQD / "refused" / "bad-values.pcap")
                      if c.name == "RDY"]
    v = rdy.event
    assert rdy.fields["count"] == 99999 and v.command == ev.Rdy(99999)
    assert (v.code, v.text, v.fatal, v.field) == (
        "E_INVALID", "RDY count 99999 out of range 0-2500", True, "count")
    assert answer.fields["text"] == v.text
    assert v.field_offset == v.offset + len(b"RDY ")


def test_rdy_over_the_announced_max_is_judged_by_the_limit_nsqd_announced():
    """max-rdy-count.pcap: nsqd --max-rdy-count=10 says so in its IDENTIFY response; the
    client's RDY 10 is taken, its RDY 11 refused."""
    records = [r for r in decode_capture(NSQD / "refused" / "max-rdy-count.pcap")
               if r.name == "RDY"]
    assert [(r.fields["count"], "violation" in r.fields) for r in records] == [
        (10, False), (11, True)]
    assert records[1].event.text == "RDY count 11 out of range 0-10"


def test_the_observer_learns_the_limit_only_from_nsqds_answer():
    obs = Observer(ServerConfig(max_rdy_count=5))  # what nsqd's options are known to be
    obs.c2s(b"  V2SUB t c\n")
    obs.s2c(b"\x00\x00\x00\x06\x00\x00\x00\x00OK")
    (v,) = obs.c2s(b"RDY 6\n")
    assert type(v) is ev.Violation and v.text == "RDY count 6 out of range 0-5"
    assert obs.c2s(b"RDY 5\n") == [ev.Rdy(5)]


def test_a_sub_with_a_bad_topic_is_a_sub_with_its_violation():
    """errors.pcap (the real nsqd): IDENTIFY, then ``SUB bad*topic c``."""
    (sub, answer), = [(c, a) for c, a in _refused(NSQD / "errors.pcap") if c.name == "SUB"]
    assert (sub.fields["topic"], sub.fields["channel"]) == ("bad*topic", "c")
    assert sub.event.command == ev.Sub("bad*topic", "c")
    assert (sub.fields["violation"]["code"], sub.event.field) == ("E_BAD_TOPIC", "topic")
    assert answer.fields["code"] == "E_BAD_TOPIC"


def test_the_conformance_checker_reads_the_observers_judgement():
    for path, text in ((NSQD / "refused" / "bad-values.pcap", "RDY count 99999"),
                       (NSQD / "refused" / "max-rdy-count.pcap", "RDY count 11")):
        traffic = from_capture([path])
        verdicts = [v for vs in check(traffic).connections.values() for v in vs
                    if v.rule == "max-rdy-count" and v.status == "fail"]
        (v,) = verdicts
        assert text in v.detail and v.packets
        (refused,) = [s for c in traffic.connections.values() for s in c.seen
                      if s.violation is not None and s.violation.field == "count"]
        assert type(refused.event) is ev.Rdy and refused.direction == Direction.C2S


def test_a_refused_fin_with_non_ascii_id_bytes_keeps_them_escaped():
    """Found by the capture fuzzer: a FIN whose id is not ASCII crashed the record maker.
    It is kept as a FIN with its violation, its id escaped, not dropped or replaced."""
    from nsqviz.nsq.protocol import NSQ

    observer = NSQ.observer(midstream=False)
    items = observer.feed(Direction.C2S, b"  V2FIN \xcf123456789abcdef\n", 1)
    (fin,) = [i for i in items if i.name == "FIN"]
    assert fin.fields["id"] == "\\xcf123456789abcdef"
    assert fin.fields["violation"]["code"] == "E_FIN_FAILED"  # nsqd: 16 bytes, not in flight
