"""The "  V1" protocol in captures, through the protocol interface alone: the real nsqd
registering with the real nsqlookupd (data/lookupd/, made by
data/make_lookupd_captures.py) decodes in ``nsqviz decode`` -- text and JSON -- with
the records nsqd's registration is made of and no error record; refusals of the real
nsqlookupd ride on the commands they answer; ``nsqviz broker`` registering with
``nsqviz lookupd`` says what the real pair says; the replay and sequence views draw it.
The observer is also driven without a capture: mid-connection starts and gaps."""

from __future__ import annotations

import contextlib
import json
from io import StringIO
from pathlib import Path

import pytest

from nsqviz import palette, protocols
from nsqviz.capture.decode import decode_capture
from nsqviz.capture.replay import Replay
from nsqviz.cli import main as nsqviz_main
from nsqviz.lookupd import grammar
from nsqviz.lookupd.events import COMMAND_EVENTS
from nsqviz.lookupd.protocol import LOOKUPD
from nsqviz.protocols import detection
from nsqviz.stream.direction import Direction
from nsqviz.widgets.replay import ReplayView
from nsqviz.widgets.sequence import from_records

DATA = Path(__file__).resolve().parents[2] / "data" / "lookupd"
REAL = DATA / "nsqd-register-real.pcap"
ERRORS = DATA / "lookupd-errors-real.pcap"
OURS = DATA / "broker-register-nsqviz.pcap"

REGISTRATION = [
    ("command", "MAGIC", None, None),
    ("command", "IDENTIFY", None, None),
    ("frame", "Response", None, None),
    *[step for topic, channel in (("orders", None), ("orders", "audit"),
                                  ("orders", "billing"), ("clicks", None))
      for step in (("command", "REGISTER", topic, channel), ("frame", "Response", None, None))],
    ("command", "PING", None, None), ("frame", "Response", None, None),
    ("command", "PING", None, None), ("frame", "Response", None, None),
    ("command", "UNREGISTER", "orders", "billing"), ("frame", "Response", None, None),
    ("command", "UNREGISTER", "clicks", None), ("frame", "Response", None, None),
]
"""What data/make_lookupd_captures.py makes the real nsqd do (two PINGs in 33 s)."""


def _steps(records) -> list[tuple]:
    return [(r.kind, r.name, r.fields.get("topic"), r.fields.get("channel"))
            for r in records if r.kind in ("command", "frame")]


def _decode(*args: str) -> str:
    out = StringIO()
    with contextlib.redirect_stdout(out):
        assert nsqviz_main(["decode", *args]) == 0
    return out.getvalue()


def test_lookupd_is_registered_through_builtin():
    assert protocols.by_name("lookupd") is LOOKUPD
    assert "nsqviz.lookupd.protocol:LOOKUPD" in protocols.BUILTIN
    assert set(COMMAND_EVENTS) == set(grammar.COMMANDS)


def test_real_registration_decodes_with_no_error_record():
    records = list(decode_capture(REAL))
    assert {r.protocol for r in records} == {"lookupd"}
    assert not [r for r in records if r.kind in ("error", "gap")]
    assert _steps(records) == REGISTRATION
    answers = [r for r in records if r.kind == "frame"]
    assert [r.fields.get("answers") for r in answers] == \
        [r.name for r in records if r.kind == "command" and r.name != "MAGIC"]
    assert {r.fields["data"] for r in answers[1:]} == {"OK"}
    identify = next(r for r in records if r.name == "IDENTIFY")
    assert identify.fields["data"]["version"] == "1.3.0"
    assert json.loads(answers[0].fields["data"])["tcp_port"] == 4160
    # nsqd writes each parameter of a command on its own: one command, several packets
    assert max(len(r.packets) for r in records) > 1


def test_text_and_json_output():
    text = _decode(str(REAL))
    assert "REGISTER           topic=orders channel=audit" in text
    assert "OK (to PING)" in text
    rows = [json.loads(line) for line in _decode("--json", str(REAL)).splitlines()]
    # nsqviz decode also shows each side's TCP FIN (records of kind tcp)
    assert [(r["kind"], r["name"]) for r in rows if r["kind"] != "tcp"] \
        == [s[:2] for s in REGISTRATION]
    assert sorted(r["fields"]["side"] for r in rows if r["kind"] == "tcp") \
        == ["client", "server"]


def test_forcing_nsq_on_the_lookup_port_changes_nothing():
    """The magic "  V1" outranks a port given to NSQ: no E_BAD_PROTOCOL per packet."""
    plain = _steps(decode_capture(REAL))
    forced = list(decode_capture(REAL, ports={"nsq": [4160]}))
    assert _steps(forced) == plain
    assert not [r for r in forced if r.kind == "error"]


def test_a_port_given_to_two_protocols_goes_to_the_one_the_bytes_look_like():
    """Mid-connection (no magic), port 4160 forced on NSQ too: a tie on the port, broken
    by the bytes -- a REGISTER is the lookup protocol's, not NSQ's."""
    ports = {p.name: p.server_ports for p in protocols.registered()}
    ports["nsq"] = ports["nsq"] | {4160}
    proto, why = detection.detect(protocols.registered(), "c2s", b"REGISTER orders\n",
                                  from_start=False, ports=ports, server_port=4160)
    assert proto is LOOKUPD and "look like" in why
    proto, _ = detection.detect(protocols.registered(), "c2s", b"SUB orders c\n",
                                from_start=False, ports=ports, server_port=4160)
    assert proto.name == "nsq"


def test_real_refusals_ride_on_their_commands():
    records = [r for r in decode_capture(ERRORS) if r.protocol == "lookupd"]
    refused = {(r.name, r.fields.get("topic")): r.fields["violation"]["code"]
               for r in records if r.kind == "command" and "violation" in r.fields}
    assert refused == {("REGISTER", "orders"): "E_INVALID",
                       ("REGISTER", "bad*topic"): "E_BAD_TOPIC",
                       ("IDENTIFY", None): "E_BAD_BODY"}
    errors = [r.fields["code"] for r in records if r.name == "Error"]
    assert errors == ["E_BAD_PROTOCOL", "E_INVALID", "E_BAD_TOPIC", "E_BAD_BODY"]
    # an NSQ client's magic "  V2" on the lookup port: nsqlookupd refuses it in its own
    # framing, so the flow stays lookupd's -- the magic refused, with nsqlookupd's answer
    (magic,) = [r for r in records if r.kind == "error"]
    assert (magic.name, magic.fields["text"], magic.packets) == ("E_BAD_PROTOCOL", "", (4,))
    assert bytes.fromhex(magic.fields["data"]) == b"  V2"
    assert not [r for r in decode_capture(ERRORS) if r.protocol != "lookupd"]


def test_our_broker_registers_as_the_real_nsqd_does():
    def shape(records):
        return [s for s in _steps(records) if s[1] != "PING"
                and not (s[0] == "frame" and s[1] == "Response")]

    assert shape(decode_capture(OURS)) == shape(decode_capture(REAL))
    assert not [r for r in decode_capture(OURS) if r.kind == "error"]


def test_views_draw_it():
    records = list(decode_capture(REAL))
    diagram = from_records(records).text()
    assert "REGISTER orders audit" in diagram and "UNREGISTER clicks" in diagram
    html = ReplayView(Replay.load(str(REAL))).html()
    assert palette.name_colour("REGISTER") != palette.OTHER
    assert palette.name_colour("REGISTER") in html
    assert len({palette.name_colour(n) for n in LOOKUPD.names()}) == len(LOOKUPD.names())


def test_every_unit_has_a_hex_view_laid_out_by_its_grammar():
    view = ReplayView(Replay.load(str(REAL)))
    units = [r for r in view.replay.records if r.kind in ("command", "frame")]
    assert len(units) == len(REGISTRATION)
    for rec in units:
        hexview = view.hexview(rec)
        assert hexview is not None, rec.name
        assert "topic" in hexview.html() if rec.fields.get("topic") else True


# ------------------------------------------------------------------ the observer alone


def _feed(observer, direction, data: bytes):
    return [(i.kind, i.name, i.fields) for i in observer.feed(direction, data, 1)]


def test_midstream_start_is_not_judged_by_state():
    obs = LOOKUPD.observer(midstream=True)
    got = _feed(obs, Direction.C2S, b"REGISTER orders audit\nPING\n")
    assert got == [("command", "REGISTER", {"topic": "orders", "channel": "audit"}),
                   ("command", "PING", {})]
    assert _feed(obs, Direction.S2C, b"\x00\x00\x00\x02OK")[0][2] == \
        {"data": "OK", "answers": "REGISTER"}


def test_a_gap_loses_the_unit_it_cuts_and_decoding_goes_on():
    obs = LOOKUPD.observer(midstream=False)
    _feed(obs, Direction.C2S, b"  V1PING\nREGIS")
    lost = obs.gap(Direction.C2S)
    assert lost.partial == b"REGIS" and lost.length is None and not lost.dead
    got = _feed(obs, Direction.C2S, b"opic\nUNREGISTER clicks\n")
    assert got[0][0] == "error" and got[1][1] == "UNREGISTER"
    # answers: the size prefix proves where the next one starts
    _feed(obs, Direction.S2C, b"\x00\x00\x00\x02O")
    lost = obs.gap(Direction.S2C)
    assert (lost.partial, lost.length) == (b"\x00\x00\x00\x02O", 6)


def test_garbage_answers_resynchronise_on_the_next_answer():
    obs = LOOKUPD.observer(midstream=True)
    got = _feed(obs, Direction.S2C, b"\xff\xff\xff\xffjunk\x00\x00\x00\x02OK")
    assert [g[:2] for g in got] == [("error", "Undecodable"), ("frame", "Response")]


def test_end_of_stream_inside_a_unit_is_truncated():
    obs = LOOKUPD.observer(midstream=False)
    _feed(obs, Direction.C2S, b"  V1REGISTER ord")
    assert [i.kind for i in obs.end(Direction.C2S, 2)] == ["truncated"]


@pytest.mark.parametrize("data, direction", [(b"  V1", "c2s"), (b"REGISTER t\n", "c2s")])
def test_detection(data, direction):
    assert LOOKUPD.detect(direction, data, from_start=direction == "c2s" and data == b"  V1",
                          server_port=False).score >= 1
    assert LOOKUPD.detect("c2s", b"  V2", from_start=True, server_port=False).score == 0
