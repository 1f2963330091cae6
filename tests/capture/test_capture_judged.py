"""Errors linked, states judged: in ``nsqviz decode`` every answer of nsqd names the
command it answers (``response_to``), and a passive observer that saw the whole
connection marks the commands nsqd refuses for their state or their flight
(``refused``) -- on real captures, nsqd's own answers being the proof."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.conformance.report import check
from nsqviz.conformance.sources import from_capture
from nsqviz.records import summary

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLES = sorted(p.relative_to(DATA).as_posix() for p in DATA.glob("**/*.pcap*")
                 if "tubemq" not in p.parts)


def _records(name: str) -> list:
    return list(CaptureDecoder().decode([DATA / name]))


def _prediction(r) -> str | None:
    """nsqd's answer a command's (or undecodable bytes') verdict predicts, if any."""
    predicted = r.fields.get("refused") or r.fields.get("violation") or (
        r.fields if r.kind == "error" else None)
    if isinstance(predicted, dict):
        return f"{predicted['code']} {predicted['text']}".rstrip()  # E_BAD_PROTOCOL: no text
    return predicted


@pytest.mark.parametrize("name", SAMPLES)
def test_every_error_frame_names_the_command_it_answers(name):
    records = _records(name)
    for r in records:
        if r.name != "FrameTypeError":
            continue
        # a packet may carry several commands (Wireshark's frame number names the packet)
        asked = [c for c in records if c.flow == r.flow and c.kind in ("command", "error")
                 and c.packets[-1] == r.fields["response_to"]]
        predictions = {_prediction(c) for c in asked}
        assert asked, r
        # nsqd's answer is the one a verdict predicted, unless none did
        assert bytes.fromhex(r.fields["data"]).decode() in predictions or None in predictions


def test_responses_name_their_command_too_but_not_heartbeats_or_switch_oks():
    records = _records("deflate-pynsq.pcap")
    flows = {r.flow for r in records}
    for flow in flows:
        rows = [r for r in records if r.flow == flow]
        responses = [r for r in rows if r.name == "FrameTypeResponse"]
        linked = [r for r in responses if "response_to" in r.fields]
        asked = {r.packets[-1]: r.name for r in rows if r.kind == "command"}
        assert [asked[r.fields["response_to"]] for r in linked][:1] == ["IDENTIFY"]
        # the compressed OK that follows the switch answers no command
        switch = next(i for i, r in enumerate(responses) if "compression_starts" in r.fields)
        assert "response_to" not in responses[switch + 1].fields
        assert all(bytes.fromhex(r.fields["data"]) != b"_heartbeat_" for r in linked)


def test_nsqjs_writer_cls_is_refused_and_its_error_points_at_it():
    records = _records("pubsub-nsqjs.pcapng")
    cls = [r for r in records if r.name == "CLS"]
    refused = [r for r in cls if "refused" in r.fields]
    assert len(cls) == 2 and len(refused) == 1  # the Reader's CLS is allowed
    (writer_cls,) = refused
    assert writer_cls.fields["refused"] == "E_INVALID cannot CLS in current state"
    assert "[refused: E_INVALID cannot CLS in current state]" in summary(writer_cls)
    (error,) = [r for r in records if r.name == "FrameTypeError"]
    assert error.fields["response_to"] == writer_cls.packets[-1]
    assert f"[response to {writer_cls.packets[-1]}]" in summary(error)
    close_wait = next(r for r in records if r.name == "FrameTypeResponse"
                      and bytes.fromhex(r.fields["data"]) == b"CLOSE_WAIT")
    (reader_cls,) = [r for r in cls if r is not writer_cls]
    assert close_wait.fields["response_to"] == reader_cls.packets[-1]


@pytest.mark.parametrize("name", ["errors.pcap", "nsqd/errors.pcap"])
def test_fin_and_req_of_ids_never_delivered_are_refused_as_nsqd_refused_them(name):
    records = _records(name)
    refused = {r.name: r.fields["refused"] for r in records if "refused" in r.fields}
    assert refused == {"FIN": "E_FIN_FAILED FIN 0123456789abcdef failed ID not in flight",
                       "REQ": "E_REQ_FAILED REQ 0123456789abcdef failed ID not in flight"}
    answers = {bytes.fromhex(r.fields["data"]).decode() for r in records
               if r.name == "FrameTypeError"}
    assert set(refused.values()) <= answers


@pytest.mark.parametrize("name", SAMPLES)
def test_no_false_alarm(name):
    """Every command marked refused got nsqd's error (the samples hold every answer)."""
    records = _records(name)
    answered = {(r.flow, r.fields.get("response_to")) for r in records
                if r.name == "FrameTypeError"}
    for r in records:
        if "refused" in r.fields:
            assert (r.flow, r.packets[-1]) in answered, r


def test_midstream_observer_judges_only_ids_it_saw_leave_flight():
    """Without the start of a connection its state is unknown: nothing is judged by it;
    a FIN of an id the capture showed FIN'ed already is refused all the same."""
    from nsqviz.nsq import events as ev
    from nsqviz.nsq.observer import Observer

    mid = b"0123456789abcdef"
    obs = Observer(midstream=True)
    assert obs.c2s(b"SUB t c\n") == [ev.Sub("t", "c")]  # SUB again? it cannot tell
    assert obs.c2s(b"FIN " + mid + b"\n") == [ev.Fin(mid)]  # in flight before the capture?
    first, verdict = obs.c2s(b"FIN " + mid + b"\n")
    assert first == ev.Fin(mid) and isinstance(verdict, ev.Refused)
    assert verdict.answer == f"E_FIN_FAILED FIN {mid.decode()} failed ID not in flight"
    whole = Observer()
    assert whole.c2s(b"  V2SUB t c\n") == [ev.Magic(), ev.Sub("t", "c")]
    sub, again = whole.c2s(b"SUB t c\n")
    assert again == ev.Refused("E_INVALID", "cannot SUB in current state", True, sub)


def test_conformance_fails_the_state_rule_on_the_nsqjs_writer():
    report = check(from_capture([DATA / "pubsub-nsqjs.pcapng"]))
    verdicts = {label: {v.rule: v for v in vs} for label, vs in report.connections.items()}
    failed = [vs["state"] for vs in verdicts.values() if vs["state"].status == "fail"]
    assert len(failed) == 1 and "CLS" in failed[0].detail
    assert "E_INVALID cannot CLS in current state" in failed[0].detail
    assert failed[0].packets == (53,)
    assert report.summary()["state"] == "fail"
    # the in-flight refusals of errors.pcap are the in-flight rule's, not the state rule's
    errors = check(from_capture([DATA / "errors.pcap"]))
    assert errors.summary()["in-flight"] == "fail" and errors.summary()["state"] == "pass"
