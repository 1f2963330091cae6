"""Decoder bugs found while making the doctor's real captures (data/doctor/), each on the
capture that showed it or on a written one that has its shape."""

from __future__ import annotations

from pathlib import Path

from nsqviz.capture.decode import decode_capture
from nsqviz.capture.synth import NsqTalk
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.nsq.events import Fin, Magic, Message, Rdy, Response, Sub
from nsqviz.stream.direction import Direction

DATA = Path(__file__).resolve().parents[2] / "data"


def _shown(path: Path, **options) -> list[tuple]:
    return [(r.packets[0] if r.packets else None, r.dir, r.kind, r.name, r.flow)
            for r in decode_capture(path, **options)]


def test_a_gap_that_took_the_magic_leaves_the_next_commands_commands():
    """capture-gap.pcap: the capture lost the consumer's magic, IDENTIFY and SUB; packet 5
    holds 'RDY 1' and 'RDY 1000' (decode showed a MAGIC there and lost RDY 1)."""
    records = list(decode_capture(DATA / "doctor" / "capture-gap.pcap"))
    at5 = [(r.kind, r.name, r.fields.get("count")) for r in records
           if r.packets == (5,) and r.dir == "c2s"]
    assert at5 == [("gap", "Resync", None), ("command", "RDY", 1), ("command", "RDY", 1000)]
    assert not [r for r in records if r.name == "MAGIC"]


def test_a_connection_seen_midway_is_oriented_by_what_each_side_sends(tmp_path):
    """No SYN, no magic, a server port nobody named -- and higher than the client's
    (an OS-picked one): the side that sends command lines is the client, the one that
    sends size-prefixed frames the server (the higher port was taken for the client's)."""
    path = tmp_path / "midway-high-port.pcap"
    with PcapWriter(path) as w:
        conv = TcpConversation(w, ("127.0.0.1", 40001), ("127.0.0.1", 61001))
        talk = NsqTalk(None)
        talk.say(Magic(), Sub("t", "c"))
        talk.answer(Response(b"OK"))
        talk.say(Rdy(1))  # all before the capture started
        conv.sent = {Direction.C2S: len(talk.written.c2s), Direction.S2C: len(talk.written.s2c)}
        talk.conv = conv
        mid = b"0123456789abcdef"
        talk.answer(Message(1_700_000_000_000_000_000, 1, mid, b"body"))
        talk.say(Fin(mid))
    shown = _shown(path)
    assert [(d, k, n, f) for _, d, k, n, f in shown if k in ("command", "frame")] == [
        ("s2c", "frame", "FrameTypeMessage", "127.0.0.1:40001->127.0.0.1:61001"),
        ("c2s", "command", "FIN", "127.0.0.1:40001->127.0.0.1:61001")]
    # the capture that showed it: its consumer and producer flows, without --port
    flows = {f for *_, k, _, f in _shown(DATA / "doctor" / "capture-midstream.pcap")
             if k == "command"}
    assert flows == {"127.0.0.1:59968->127.0.0.1:45831", "127.0.0.1:59972->127.0.0.1:45831",
                     "127.0.0.1:59982->127.0.0.1:45831"}


def test_an_mpub_of_no_message_is_that_mpub_with_its_violation():
    """nsq-publish-refused.pcap packet 42: ``MPUB events`` whose whole body counts 0
    messages -- nsqd answered E_BAD_BODY to it (it was shown as undecodable bytes, and
    the error as answering itself)."""
    records = list(decode_capture(DATA / "doctor" / "nsq-publish-refused.pcap"))
    (mpub,) = [r for r in records if r.packets == (42,)]
    assert (mpub.kind, mpub.name, mpub.fields["topic"], mpub.fields["bodies"]) == (
        "command", "MPUB", "events", [])
    assert mpub.fields["violation"]["code"] == "E_BAD_BODY"
    assert mpub.fields["violation"]["text"] == "MPUB invalid message count 0"
    (answer,) = [r for r in records if r.packets == (44,)]
    assert answer.fields["response_to"] == 42


def test_conformance_takes_nsqds_refusals_and_leaves_what_the_capture_lost():
    """In-flight: a FIN, REQ and TOUCH nsqd refused 'not in flight' (the messages timed
    out while the client held them: nsq-late-answer.pcap) fail it; FINs for deliveries
    the capture lost (capture-gap.pcap, a snaplen) are not judged. Handshake: an
    IDENTIFY the snaplen cut short still comes before SUB."""
    from nsqviz.conformance.report import check
    from nsqviz.conformance.sources import from_capture

    def verdicts(name: str) -> dict:
        report = check(from_capture([DATA / name]))
        return {(label.split("->")[0], v.rule): v for label, vs in report.connections.items()
                for v in vs}

    late = verdicts("doctor/nsq-late-answer.pcap")[("127.0.0.1:55278", "in-flight")]
    assert (late.status, late.packets) == ("fail", (28, 31, 33))
    assert "3 of them refused by nsqd" in late.detail
    gap = verdicts("doctor/capture-gap.pcap")[("127.0.0.1:51886", "in-flight")]
    assert gap.status == "not exercised" and "the capture lost server bytes" in gap.detail
    cut = verdicts("nsqd/snaplen/pubsub-s96.pcap")
    assert cut[("127.0.0.1:40338", "handshake")].status == "pass"
    assert cut[("127.0.0.1:40314", "handshake")].detail == "IDENTIFY sent (a producer: no SUB)"
    assert cut[("127.0.0.1:40338", "in-flight")].status == "not exercised"


def test_a_close_with_the_master_is_allowed_before_a_registration_succeeded():
    """tubemq-rpc-error.pcap packet 59: the Go consumer closes after registrations the
    Master refused (TOPIC_NOT_DEPLOYED); the Master answers 200 -- a close is released
    and unregistered in any state -- so the close is no violation."""
    records = list(decode_capture(DATA / "doctor" / "tubemq-rpc-error.pcap"))
    (close,) = [r for r in records if r.packets == (59,)]
    assert close.name == "CloseRequestC2M" and "refused" not in close.fields
    assert "violation" not in close.fields and "violations" not in close.fields


def test_an_error_after_a_fin_sent_twice_answers_the_second(tmp_path):
    """A message FIN'ed twice: nsqd is silent to the first (the id was in flight) and
    answers the second E_FIN_FAILED -- which once paired with the first, so that FIN
    seemed refused and its delivery never ended."""
    from nsqviz.nsq.errors import not_in_flight
    from nsqviz.nsq.events import Error, Identify

    path = tmp_path / "fin-twice.pcap"
    with PcapWriter(path) as w:
        conv = TcpConversation(w, ("127.0.0.1", 40002), ("127.0.0.1", 4150))
        conv.open(1_700_000_000.0)
        talk = NsqTalk(conv)
        talk.say(Magic(), Identify({"client_id": "twice"}))
        talk.answer(Response(b"OK"))
        talk.say(Sub("t", "c"))
        talk.answer(Response(b"OK"))
        talk.say(Rdy(1))
        mid = b"0123456789abcdef"
        talk.answer(Message(1_700_000_000_000_000_000, 1, mid, b"body"))
        talk.say(Fin(mid))
        talk.say(Fin(mid))
        code, text = not_in_flight("FIN", mid)
        talk.answer(Error(code.frame(text)))
    records = list(decode_capture(path))
    fins = [r for r in records if r.name == "FIN"]
    (error,) = [r for r in records if r.name == "FrameTypeError"]
    assert error.fields["response_to"] == fins[1].packets[-1] != fins[0].packets[-1]
    import nsqviz

    cap = nsqviz.open(str(path))
    assert cap.deliveries.outcome.tolist() == ["FIN"]
    assert cap.errors.command_seq.tolist() == [int(cap.frames[
        cap.frames.name == "FIN"].seq.max())]
