"""One definition: the command table and the transition table drive everything else.

Change one entry of a table and the state diagram, the codec's refusals and the
broker's answers all change with it; nsqd's lenience (``\\r\\n``, parameters it never
reads) and its refusals of well-framed commands with bad values (kept as the command,
with the violation attached) follow from the same tables.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.nsq import events as ev
from nsqviz.nsq import fastpath as fp
from nsqviz.nsq import grammar as g
from nsqviz.nsq import identify_fields
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.commands import ABOUT_A_MESSAGE, BODY_VERBS, BY_EVENT, COMMANDS, MESSAGE_ID
from nsqviz.nsq.errors import ErrorCode
from nsqviz.nsq.framing import CommandFraming
from nsqviz.nsq.observer import Observer
from nsqviz.nsq.server_connection import ServerConnection
from nsqviz.nsq.states import TRANSITIONS, Role, State, allowed_states, diagram
from nsqviz.sansio import LocalProtocolError
from nsqviz.stream import Reassembler
from tests.servers.nsqd._client import RawClient

ID = b"0123456789abcdef"


def connected_server(**kw) -> ServerConnection:
    s = ServerConnection(**kw)
    assert s.receive(b"  V2") == [ev.Magic()]
    return s


# ------------------------------------------------------------------- one table


def test_the_grammar_and_the_events_are_built_from_the_command_table():
    assert set(g.COMMANDS) == set(COMMANDS)
    assert {s.wire for s in COMMANDS.values() if s.body.value != "none"} == BODY_VERBS
    for verb, spec in COMMANDS.items():
        assert BY_EVENT[spec.event] is spec
        names = [sc.name for sc in g.COMMANDS[verb].subcons if sc.name]
        assert names[1:] == [p.field for p in spec.params] + (
            [spec.grammar_body] if spec.event_body else []
        )


def test_change_one_transition_and_diagram_codec_and_broker_all_change(monkeypatch, broker):
    """Forbid SUB in CONNECTED in the one table: the drawn diagram loses the edge, the
    client codec refuses to send it, the server codec refuses it with nsqd's answer,
    and the running broker answers that too."""
    before = diagram(Role.SERVER)[1]
    assert ("CONNECTED", "SUBSCRIBED", "SUB") in before
    for role in Role:
        # a copy without SUB in place of the entry (deleting and re-adding SUB would move
        # it to the end of the table and reorder what is drawn from it afterwards)
        kept = {e: s for e, s in TRANSITIONS[role][State.CONNECTED].items() if e is not ev.Sub}
        monkeypatch.setitem(TRANSITIONS[role], State.CONNECTED, kept)

    assert ("CONNECTED", "SUBSCRIBED", "SUB") not in diagram(Role.SERVER)[1]
    assert State.CONNECTED not in allowed_states(Role.SERVER, ev.Sub)

    client = ClientConnection()
    client.send(ev.Magic())
    with pytest.raises(LocalProtocolError, match="cannot SUB in state CONNECTED"):
        client.send(ev.Sub("t", "c"))

    [v] = connected_server().receive(b"SUB t c\n")
    assert (v.code, v.text, v.fatal) == ("E_INVALID", "cannot SUB in current state", True)

    c = RawClient(broker.tcp_address)
    c.send_raw(b"SUB t c\n")
    c.expect_error("E_INVALID", "cannot SUB in current state", fatal=True)


def test_allow_one_more_transition_and_the_broker_runs_it(monkeypatch, broker):
    """CLS allowed before SUB by the table alone: the broker answers CLOSE_WAIT."""
    monkeypatch.setitem(TRANSITIONS[Role.SERVER][State.CONNECTED], ev.Cls, State.CLOSING)
    assert ("CONNECTED", "CLOSING", "CLS") in diagram(Role.SERVER)[1]
    c = RawClient(broker.tcp_address)
    c.send_raw(b"CLS\n")
    assert c.expect(ev.Response).data == b"CLOSE_WAIT"


def test_the_diagram_closes_from_every_open_state():
    states, edges = diagram(Role.CLIENT)
    closing = {src for src, dst, label in edges if dst == "CLOSED"}
    assert closing == set(states) - {"CLOSED"}  # SUBSCRIBED -> CLOSED included


def test_error_fatality_comes_from_the_error_table():
    assert {c for c in ErrorCode if not c.fatal} == ev.NON_FATAL_ERRORS
    assert ev.Error(ErrorCode.FIN_FAILED.frame("x")).fatal is False
    assert ev.Error(ErrorCode.BAD_TOPIC.frame("x")).fatal is True


# ------------------------------------------------------------------ \r\n like nsqd


@pytest.mark.parametrize(
    "wire, event",
    [
        (b"NOP\r\n", ev.Nop()),
        (b"SUB t c\r\n", ev.Sub("t", "c")),
        (b"RDY 5\r\n", ev.Rdy(5)),
        (b"PUB t\r\n\x00\x00\x00\x01x", ev.Pub("t", b"x")),
        (b"IDENTIFY\r\n\x00\x00\x00\x02{}", ev.Identify({})),
    ],
)
def test_a_carriage_return_before_the_newline_is_trimmed_as_nsqd_does(wire, event):
    assert fp.decode_command(wire) == event
    parsed = g.parse_command(wire)
    assert parsed.verb == event.__class__.__name__.upper()


def test_the_server_accepts_crlf_commands():
    s = connected_server()
    assert s.receive(b"NOP\r\nSUB t c\r\n") == [ev.Nop(), ev.Sub("t", "c")]
    assert s.state is State.SUBSCRIBED


@pytest.mark.parametrize(
    "stream",
    [b"IDENTIFY\r\n\x00\x00\x00\x02{}NOP\n", b"PUB t\r\n\x00\x00\x00\x01xNOP\r\n",
     b"NOP\r\nNOP\n"],
)
def test_measure_and_scan_cut_crlf_lines_alike(stream):
    """The bulk scan and the per-frame measure share the lexer: same boundaries."""
    by_measure = Reassembler(CommandFraming(expect_magic=False))
    cut = [e.data for e in by_measure.feed(stream)]
    rule = CommandFraming(expect_magic=False)
    ends: list[int] = []
    stop = rule.scan(stream, 0, ends)
    pos, scanned = 0, []
    for end in ends:
        scanned.append(stream[pos:end])
        pos = end
    while pos < len(stream):
        n = rule.measure(stream, pos)
        scanned.append(stream[pos : pos + n])
        pos += n
    assert stop <= len(stream) and scanned == cut


# --------------------------------------------- well framed, bad values: the command kept


def test_a_pub_to_a_bad_topic_is_refused_as_a_pub_with_its_violation():
    [v] = connected_server().receive(b"PUB bad*topic\n\x00\x00\x00\x02hi")
    assert (v.code, v.text, v.fatal) == (
        ErrorCode.BAD_TOPIC, 'PUB topic name "bad*topic" is not valid', True)
    assert v.command == ev.Pub("bad*topic", b"hi")
    assert (v.field, v.field_offset, v.offset) == ("topic", 11, 4)  # the "*" after "  V2PUB bad"
    assert "topic name 'bad*topic' is not valid" in v.reason


def test_the_observer_keeps_refused_commands_and_reads_on():
    obs = Observer(provenance=False)
    obs.c2s(b"  V2")
    events = obs.c2s(b"SUB t c\nFIN abc\nRDY 99999\nNOP\n")
    assert events[0] == ev.Sub("t", "c")
    fin, rdy, nop = events[1:]
    assert fin.command == ev.Fin(b"abc") and fin.code == "E_INVALID" and fin.field == "id"
    # above max_rdy_count (2500: no IDENTIFY response announced another)
    assert rdy.command == ev.Rdy(99999) and rdy.code == "E_INVALID" and rdy.field == "count"
    assert nop == ev.Nop()


@pytest.mark.parametrize(
    "wire, command",
    [
        (b"NOP x\n", ev.Nop()),
        (b"SUB t c extra\n", ev.Sub("t", "c")),
        (b"IDENTIFY x\n\x00\x00\x00\x02{}", ev.Identify({})),
        (b"PUB t x\n\x00\x00\x00\x01a", ev.Pub("t", b"a")),
    ],
)
def test_parameters_nsqd_never_reads_are_accepted_with_a_note(wire, command):
    """nsqd v1.3.0 ignores them (checked against the real nsqd): the command runs."""
    s = connected_server()
    note, cmd = s.receive(wire)
    assert cmd == command and note.accepted and note.command == command
    assert note.field == "line" and not note.code and not note.fatal


def test_rdy_without_a_count_is_rdy_1_as_nsqd_reads_it():
    s = connected_server()
    s.receive(b"SUB t c\n")
    note, rdy = s.receive(b"RDY\n")
    assert rdy == ev.Rdy(1) and note.accepted and s.rdy == 1


def test_auth_with_a_parameter_is_still_refused():
    [v] = connected_server().receive(b"AUTH x\n\x00\x00\x00\x01s")
    assert (v.code, v.text) == ("E_INVALID", "AUTH invalid number of parameters")
    assert v.command == ev.Auth(b"s")


# ------------------------------------------------------- the server owns flow control


def test_the_server_refuses_to_send_a_message_before_sub_or_beyond_rdy():
    s = connected_server()
    msg = ev.Message(0, 1, ID, b"x")
    with pytest.raises(LocalProtocolError, match="CONNECTED"):
        s.send(msg)
    s.receive(b"SUB t c\nRDY 1\n")
    s.send(msg)
    assert s.room == 0
    with pytest.raises(LocalProtocolError, match="RDY 1"):
        s.send_messages([ev.Message(0, 1, b"0123456789abcdee", b"y")])
    s.receive(b"FIN " + ID + b"\n")
    assert s.room == 1
    s.receive(b"CLS\n")
    with pytest.raises(LocalProtocolError, match="CLOSING"):
        s.send(msg)


# ------------------------------------------- both encoders refuse what the grammar does


def _grammar_value(cmd: ev.Command) -> dict:
    """The grammar's build value for a command event, read off the command table."""
    spec = BY_EVENT[type(cmd)]
    value: dict = {p.field: getattr(cmd, p.field) for p in spec.params}
    if spec.event_body is not None:
        body = getattr(cmd, spec.event_body)
        value[spec.grammar_body] = {
            "JSON object": lambda: {"value": body},
            "messages": lambda: {"messages": list(body)},
        }.get(spec.body.value, lambda: body)()
    return {"verb": spec.verb, "command": value}


_bad_name = st.sampled_from(["", "bad*topic", "has space", "x" * 65, "a#ephemeral#ephemeral",
                             "new\nline", "é"])
_bad_id = st.one_of(st.binary(max_size=15), st.binary(min_size=17, max_size=20),
                    st.just(b"0123456789abcdeZ"))
_bad_number = st.integers(max_value=-1)
_ok_id = st.just(ID)

invalid_events = st.one_of(
    st.builds(ev.Sub, _bad_name, st.just("c")),
    st.builds(ev.Sub, st.just("t"), _bad_name),
    st.builds(ev.Pub, _bad_name, st.just(b"x")),
    st.builds(ev.Pub, st.just("t"), st.just(b"")),
    st.builds(ev.Mpub, st.just("t"), st.just(())),
    st.builds(ev.Mpub, st.just("t"), st.tuples(st.just(b"a"), st.just(b""))),
    st.builds(ev.Mpub, _bad_name, st.just((b"a",))),
    st.builds(ev.Dpub, st.just("t"), _bad_number, st.just(b"x")),
    st.builds(ev.Dpub, _bad_name, st.just(1), st.just(b"x")),
    st.builds(ev.Rdy, _bad_number),
    st.builds(ev.Fin, _bad_id),
    st.builds(ev.Req, _bad_id, st.just(0)),
    st.builds(ev.Req, _ok_id, _bad_number),
    st.builds(ev.Touch, _bad_id),
    st.builds(ev.Auth, st.just(b"")),
)


@settings(max_examples=150, deadline=None)
@given(invalid_events)
def test_both_encoders_refuse_every_event_the_grammar_refuses(event):
    with pytest.raises(g.GrammarError):
        g.Command.build(_grammar_value(event))
    with pytest.raises(g.GrammarError):
        fp.encode_command(event)
    with pytest.raises(g.GrammarError):
        ClientConnection().send(event, check=False)


def test_the_real_nsqd_sample_shows_each_refused_command_as_sent():
    """data/nsqd/refused/bad-values.pcap: the real nsqd v1.3.0 refusing well-framed commands."""
    from pathlib import Path

    from nsqviz.capture.decode import decode_capture

    sample = Path(__file__).resolve().parents[2] / "data" / "nsqd" / "refused" / "bad-values.pcap"
    records = [r for r in decode_capture(sample) if r.dir == "c2s" and r.name != "MAGIC"]
    pub = records[0]
    assert (pub.kind, pub.name, pub.fields["topic"]) == ("command", "PUB", "bad*topic")
    assert pub.fields["violation"]["code"] == "E_BAD_TOPIC"
    assert pub.event.command == ev.Pub("bad*topic", b"hello")
    fin = next(r for r in records if r.name == "FIN")
    assert fin.fields["id"] == "abc" and fin.fields["violation"]["code"] == "E_INVALID"
    nop = next(r for r in records if r.name == "NOP")
    assert nop.fields["violation"]["code"] == "" and not nop.fields["violation"]["fatal"]
    assert [r.name for r in records][-1] == "PUB"  # PUB t\r\n runs, as nsqd ran it


def test_the_broker_checks_identify_against_identify_fields(monkeypatch):
    """Narrow sample_rate's range in the grammar's IDENTIFY table: the broker refuses."""
    from nsqviz.servers.nsqd.identify import IdentifyRefused, Negotiated, negotiate
    from nsqviz.servers.nsqd.options import Options

    current = Negotiated("", "", "", 30.0, 16384, 0.25, 0, 60.0, False)
    kw = {"current": current, "tls_available": False, "auth_required": False}
    assert negotiate({"sample_rate": 60}, Options(), **kw)[0].sample_rate == 60
    monkeypatch.setattr(identify_fields.IDENTIFY_FIELDS["sample_rate"], "high", 50)
    with pytest.raises(IdentifyRefused, match=r"IDENTIFY sample rate \(60\) is invalid"):
        negotiate({"sample_rate": 60}, Options(), **kw)


def test_a_refused_name_says_the_rule_it_broke():
    # the learner editing a topic sees what would pass, read from the one rule (wire.py)
    from nsqviz.nsq import grammar
    from nsqviz.nsq.wire import EPHEMERAL, NAME_CHARS, NAME_MAX
    with pytest.raises(grammar.GrammarError) as info:
        grammar.Command.build({"verb": "PUB", "command": {"topic": "orders!", "body": b""}})
    assert all(part in str(info.value) for part in (NAME_CHARS, str(NAME_MAX), EPHEMERAL))


def test_the_commands_about_a_message_are_those_with_a_message_id():
    assert set(ABOUT_A_MESSAGE) == {spec.event for spec in COMMANDS.values()
                                    if MESSAGE_ID in spec.params}
