"""The NSQ grammar against the spec: golden bytes, round-trip properties, named errors."""

from __future__ import annotations

import json

import pytest
from construct import Container
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.nsq import commands as nsq_commands
from nsqviz.nsq import grammar as g
from nsqviz.nsq import grammar_errors, grammar_frames, identify_fields
from nsqviz.nsq import wire as nsq_wire
from tests.nsq._vectors import (
    GOLDEN_COMMANDS,
    GOLDEN_FRAMES,
    ID,
    VERBS,
    be32,
    command_vectors,
    frame_vectors,
    json_objects,
    json_texts,
    message_ids,
    names,
    subset,
)

# ------------------------------------------------------------------ golden vectors


def test_magic_is_two_spaces_V2():
    assert g.MAGIC_V2 == b"\x20\x20\x56\x32"
    assert g.Magic.parse(b"  V2") == b"  V2"
    assert g.Magic.build(None) == b"  V2"


@pytest.mark.parametrize("name", ["  V1", " V2 ", "V2  ", "\x00\x00V2"])
def test_magic_rejects_other_protocols(name):
    with pytest.raises(g.ConstructError):
        g.Magic.parse(name.encode())


@pytest.mark.parametrize(
    "wire, verb, fields, build_from",
    [v[1:] for v in GOLDEN_COMMANDS],
    ids=[v[0] for v in GOLDEN_COMMANDS],
)
def test_golden_command(wire, verb, fields, build_from):
    # parse, through the command's own struct and through the dispatcher
    own = g.COMMANDS[verb].parse(wire)
    assert subset(fields, own), own
    parsed = g.parse_command(wire)
    assert parsed.verb == verb
    assert subset(fields, parsed.command)
    # build from plain field values gives exactly the spec's bytes
    value = build_from if build_from is not None else fields
    assert g.COMMANDS[verb].build(value) == wire
    assert g.Command.build({"verb": verb, "command": value}) == wire


@pytest.mark.parametrize(
    "wire, frame_type, data", [v[1:] for v in GOLDEN_FRAMES], ids=[v[0] for v in GOLDEN_FRAMES]
)
def test_golden_frame(wire, frame_type, data):
    parsed = g.parse_frame(wire)
    assert parsed.size == len(wire) - 4
    assert parsed.frame_type == frame_type
    assert subset(data, parsed.data)
    # size is computed on build, never given
    assert g.Frame.build({"frame_type": frame_type, "data": data}) == wire


def test_golden_message_layout_alone():
    data = b"\x00\x00\x00\x00\x00\x00\x00\x2a\x00\x03" + ID + b"body"
    msg = g.Message.parse(data)
    assert (msg.timestamp, msg.attempts, msg.id, msg.body) == (42, 3, ID, b"body")
    assert g.Message.build({"timestamp": 42, "attempts": 3, "id": ID, "body": b"body"}) == data


def test_every_command_and_frame_type_has_a_golden_vector():
    assert {v[2] for v in GOLDEN_COMMANDS} == set(g.COMMANDS) == set(VERBS)
    assert {v[2] for v in GOLDEN_FRAMES} == set(grammar_frames.FRAME_TYPES)
    assert grammar_frames.FRAME_TYPES == {"FrameTypeResponse": 0, "FrameTypeError": 1,
                                          "FrameTypeMessage": 2}


def test_body_verbs_are_exactly_those_with_a_size_prefixed_body():
    assert {b"IDENTIFY", b"AUTH", b"PUB", b"MPUB", b"DPUB"} == nsq_commands.BODY_VERBS


# --------------------------------------------------------------- JSON vocabularies


def test_identify_fields_carry_the_spec_ranges_and_defaults():
    f = identify_fields.IDENTIFY_FIELDS
    spec_names = {
        "client_id", "hostname", "feature_negotiation", "heartbeat_interval",
        "output_buffer_size", "output_buffer_timeout", "tls_v1", "snappy", "deflate",
        "deflate_level", "sample_rate", "user_agent", "msg_timeout", "short_id", "long_id",
    }  # fmt: skip
    assert set(f) == spec_names
    hb = f["heartbeat_interval"]
    assert (hb.low, hb.high, hb.disable) == (1000, "max_heartbeat_interval", -1)
    obs = f["output_buffer_size"]
    assert (obs.low, obs.default, obs.disable) == (64, 16384, -1)
    obt = f["output_buffer_timeout"]
    assert (obt.low, obt.default, obt.disable) == (1, 250, -1)
    assert (f["sample_rate"].low, f["sample_rate"].high, f["sample_rate"].default) == (0, 99, 0)
    assert (f["deflate_level"].low, f["deflate_level"].high) == (1, "max_deflate_level")
    for flag in ("feature_negotiation", "tls_v1", "snappy", "deflate"):
        assert f[flag].type is bool and f[flag].default is False


def test_feature_negotiation_fields_are_the_spec_example_keys():
    # the response example in the spec (seed 001), key for key
    example = json.loads(
        '{"max_rdy_count": 2500, "version": "1.0.0-compat", "max_msg_timeout": 900000,'
        ' "msg_timeout": 60000, "tls_v1": false, "deflate": false, "deflate_level": 0,'
        ' "max_deflate_level": 6, "snappy": false, "sample_rate": 0, "auth_required": true,'
        ' "output_buffer_size": 16384, "output_buffer_timeout": 250}'
    )
    assert list(identify_fields.FEATURE_NEGOTIATION_FIELDS) == list(example)
    assert identify_fields.AUTH_RESPONSE_FIELDS == ("identity", "identity_url", "permission_count")


# ----------------------------------------------------------------------- name rule


@pytest.mark.parametrize(
    "name",
    ["a", ".", "-", "_", "a" * 64, "a" * 54 + "#ephemeral", "Topic.Name_1-x", "c#ephemeral"],
)
def test_valid_names(name):
    assert nsq_wire.is_valid_topic_name(name) and nsq_wire.is_valid_channel_name(name)
    assert g.parse_command(f"SUB {name} {name}\n".encode()).command.topic == name


@pytest.mark.parametrize(
    ("name", "bad_at"),  # bad_at: the byte of the name where the rule breaks
    [
        ("", 0),
        ("a" * 65, 64),
        ("a" * 55 + "#ephemeral", 64),  # 65 in total: the suffix counts toward the 64
        ("#ephemeral", 0),
        ("a#ephemeralx", 1),
        ("a#eph", 1),
        ("a#b", 1),
        ("a/b", 1),
        ("a$", 1),
        ("é", 0),
        ("a:b", 1),
        ("a\tb", 1),
    ],
)
def test_invalid_names(name, bad_at):
    assert not nsq_wire.is_valid_topic_name(name)
    with pytest.raises(grammar_errors.BadName) as exc:
        g.parse_command(f"SUB {name} c\n".encode())
    assert exc.value.offset == 4 + bad_at
    with pytest.raises(grammar_errors.BadName):
        g.parse_command(f"SUB t {name}\n".encode())
    with pytest.raises(grammar_errors.BadName):
        g.SUB.build({"topic": name, "channel": "c"})


@given(names())
def test_generated_names_are_valid(name):
    assert nsq_wire.is_valid_topic_name(name)


# ----------------------------------------------------------- round-trip properties


@pytest.mark.parametrize("verb", VERBS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_command_round_trip(verb, data):
    """build(parse(x)) == x, and build(fields) == the hand-assembled bytes."""
    wire, fields = data.draw(command_vectors(verb))
    own = g.COMMANDS[verb].parse(wire)
    assert subset(fields, own)
    assert g.COMMANDS[verb].build(own) == wire
    parsed = g.parse_command(wire)
    assert parsed.verb == verb
    assert g.Command.build(parsed) == wire
    if verb != "IDENTIFY":  # IDENTIFY built from a value is compact JSON, tested below
        assert g.Command.build({"verb": verb, "command": fields}) == wire


@settings(max_examples=200, deadline=None)
@given(frame_vectors())
def test_frame_round_trip(vector):
    wire, frame_type, data = vector
    parsed = g.parse_frame(wire)
    assert parsed.frame_type == frame_type
    assert subset(data, parsed.data)
    assert g.Frame.build(parsed) == wire
    assert g.Frame.build({"frame_type": frame_type, "data": data}) == wire


@settings(max_examples=100, deadline=None)
@given(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**16 - 1),
    message_ids,
    st.binary(max_size=100),
)
def test_message_round_trip(ts, attempts, mid, body):
    data = ts.to_bytes(8, "big", signed=True) + attempts.to_bytes(2, "big") + mid + body
    msg = g.Message.parse(data)
    assert (msg.timestamp, msg.attempts, msg.id, msg.body) == (ts, attempts, mid, body)
    assert g.Message.build(msg) == data
    assert grammar_frames.MessageID.parse(mid) == mid and grammar_frames.MessageID.build(mid) == mid


@settings(max_examples=200, deadline=None)
@given(json_texts())
def test_identify_keeps_json_whitespace(vector):
    obj, text = vector
    wire = b"IDENTIFY\n" + be32(len(text)) + text
    parsed = g.parse_command(wire).command
    assert parsed.body.value == obj
    assert parsed.body.data == text
    assert g.IDENTIFY.build(parsed) == wire
    # a body given as a value is written compact, as Go's encoding/json does
    compact = json.dumps(obj, separators=(",", ":")).encode()
    assert (
        g.IDENTIFY.build({"body": {"value": obj}}) == b"IDENTIFY\n" + be32(len(compact)) + compact
    )


@settings(max_examples=100, deadline=None)
@given(json_objects)
def test_json_object_element(obj):
    text = json.dumps(obj, indent=1).encode()
    assert g.JSONObject.parse(text) == obj
    assert g.JSONObject.build(obj) == json.dumps(obj, separators=(",", ":")).encode()


def test_non_canonical_decimal_round_trip():
    # nsqd's ByteToBase10 reads '007' as 7; the parsed value is 7 and remembers its spelling.
    wire = b"RDY 007\n"
    assert g.parse_command(wire).command.count == 7
    assert g.Command.build(g.parse_command(wire)) == wire
    assert g.RDY.build({"count": 7}) == b"RDY 7\n"


# ------------------------------------------------------------------- named errors


def _error(parse, wire: bytes) -> g.GrammarError:
    with pytest.raises(g.GrammarError) as exc:
        parse(wire)
    return exc.value


@pytest.mark.parametrize(
    "wire, error, offset",
    [
        # bad size prefixes: nsqd refuses bodies of size <= 0
        (b"IDENTIFY\n\x00\x00\x00\x00", grammar_errors.BadSize, 9),
        (b"IDENTIFY\n\xff\xff\xff\xff", grammar_errors.BadSize, 9),
        (b"PUB t\n\x00\x00\x00\x00", grammar_errors.BadSize, 6),
        (b"PUB t\n\x80\x00\x00\x00", grammar_errors.BadSize, 6),
        (b"AUTH\n\x00\x00\x00\x00", grammar_errors.BadSize, 5),
        (b"DPUB t 10\n\xff\xff\xff\xfe", grammar_errors.BadSize, 10),
        (b"MPUB t\n\x00\x00\x00\x00", grammar_errors.BadSize, 7),
        (b"MPUB t\n\x00\x00\x00\x08\x00\x00\x00\x01\x00\x00\x00\x00", grammar_errors.BadSize, 15),
        # JSON that is not a JSON object: the offset is where the body starts
        (b"IDENTIFY\n\x00\x00\x00\x03{a}", grammar_errors.BadJSON, 13),
        (b"IDENTIFY\n\x00\x00\x00\x02[]", grammar_errors.BadJSON, 13),
        (b"IDENTIFY\n\x00\x00\x00\x04true", grammar_errors.BadJSON, 13),
        (b'IDENTIFY\n\x00\x00\x00\x05{"a":', grammar_errors.BadJSON, 13),
        (b'IDENTIFY\n\x00\x00\x00\x07{"\xff":1}', grammar_errors.BadJSON, 13),
        # message ids: 16 hex digits
        (b"FIN 0123456789abcdeg\n", grammar_errors.BadMessageID, 4),
        (b"FIN 0123456789abcde\n", grammar_errors.BadMessageID, 4),
        (b"FIN 0123456789abcdef0\n", grammar_errors.BadMessageID, 4),
        (b"TOUCH 0123456789abcdeX\n", grammar_errors.BadMessageID, 6),
        (b"REQ 0123456789abcd-f 0\n", grammar_errors.BadMessageID, 4),
        # names: the offset of the byte that breaks the rule (the 65th; the first bad one)
        (b"SUB " + b"a" * 65 + b" c\n", grammar_errors.BadName, 68),
        (b"SUB a\xff c\n", grammar_errors.BadName, 5),
        (b"SUB  c\n", grammar_errors.BadName, 4),
        (b"SUB a \n", grammar_errors.BadName, 6),
        (b"PUB a*b\n\x00\x00\x00\x01x", grammar_errors.BadName, 5),
        (b"SUB orders bad!name\n", grammar_errors.BadName, 14),
        (b"SUB t c#ephemeral#ephemeral\n", grammar_errors.BadName, 7),
        (b"DPUB #ephemeral 1\n\x00\x00\x00\x01x", grammar_errors.BadName, 5),
        # decimal parameters
        (b"RDY -1\n", grammar_errors.BadNumber, 4),
        (b"RDY \n", grammar_errors.BadNumber, 4),
        (b"RDY 1e3\n", grammar_errors.BadNumber, 4),
        (b"REQ 0123456789abcdef x\n", grammar_errors.BadNumber, 21),
        (b"DPUB t 1a\n\x00\x00\x00\x01a", grammar_errors.BadNumber, 7),
        # verbs
        (b"FOO bar\n", grammar_errors.UnknownCommand, 0),
        (b"sub a b\n", grammar_errors.UnknownCommand, 0),
        (b"GET / HTTP/1.1\r\n", grammar_errors.UnknownCommand, 0),
        (b"\n", grammar_errors.UnknownCommand, 0),
    ],
)
def test_malformed_command_names_the_error(wire, error, offset):
    exc = _error(g.parse_command, wire)
    assert type(exc) is error, exc
    assert exc.offset == offset
    assert exc.reason and f"at offset {offset}" in str(exc)


@pytest.mark.parametrize(
    "wire, error, offset",
    [
        (b"\x00\x00\x00\x06\x00\x00\x00\x07OK", grammar_errors.UnknownFrameType, 4),
        (b"\x00\x00\x00\x06\xff\xff\xff\xffOK", grammar_errors.UnknownFrameType, 4),
        (b"\x00\x00\x00\x03\x00\x00\x00", grammar_errors.BadSize, 0),
        (b"\x00\x00\x00\x00", grammar_errors.BadSize, 0),
        (b"\xff\xff\xff\xff\x00\x00\x00\x00", grammar_errors.BadSize, 0),
        # a message whose id is not hex: 4 size + 4 type + 8 timestamp + 2 attempts
        (
            b"\x00\x00\x00\x1f\x00\x00\x00\x02"
            + b"\x00" * 8
            + b"\x00\x01"
            + b"0123456789abcdeZ"
            + b"h",
            grammar_errors.BadMessageID,
            18,
        ),
    ],
)
def test_malformed_frame_names_the_error(wire, error, offset):
    exc = _error(g.parse_frame, wire)
    assert type(exc) is error, exc
    assert exc.offset == offset


def test_short_frame_and_leftover_bytes_are_grammar_errors_with_offsets():
    # size says 8 (type + 4 bytes of data) but only "OK" follows
    exc = _error(g.parse_frame, b"\x00\x00\x00\x08\x00\x00\x00\x00OK")
    assert exc.offset == 10 and exc.reason == "data is cut short" and exc.field == "data"
    # a message frame too short for its 26-byte header
    exc = _error(g.parse_frame, b"\x00\x00\x00\x08\x00\x00\x00\x02abcd")
    assert exc.offset == 12
    exc = _error(g.parse_command, b"NOP\nX")
    assert exc.offset == 4 and "left over" in exc.reason
    exc = _error(g.parse_frame, b"\x00\x00\x00\x06\x00\x00\x00\x00OKextra")
    assert exc.offset == 10


def test_mpub_count_must_be_positive():
    # nsqd: numMessages <= 0 -> E_BAD_BODY "MPUB invalid message count"
    exc = _error(g.parse_command, b"MPUB t\n\x00\x00\x00\x04\x00\x00\x00\x00")
    assert type(exc) is grammar_errors.BadSize and exc.offset == 11


def test_mpub_bytes_after_the_last_message_are_not_dropped():
    # body size 11 = count(4) + size(4) + "a" + 2 stray bytes
    exc = _error(g.parse_command, b"MPUB t\n\x00\x00\x00\x0b\x00\x00\x00\x01\x00\x00\x00\x01ab\x00")
    assert type(exc) is grammar_errors.BadSize and exc.offset == 20


def test_mpub_count_beyond_the_body_is_an_error():
    exc = _error(g.parse_command, b"MPUB t\n\x00\x00\x00\x09\x00\x00\x00\x02\x00\x00\x00\x01a")
    assert exc.offset == 20


@pytest.mark.parametrize(
    "con, value, error",
    [
        (g.Frame, {"frame_type": "FrameTypeBogus", "data": b""}, grammar_errors.UnknownFrameType),
        (g.SUB, {"topic": "ok", "channel": "not ok"}, grammar_errors.BadName),
        (g.FIN, {"id": b"xyz"}, grammar_errors.BadMessageID),
        (g.REQ, {"id": ID, "timeout": -1}, grammar_errors.BadNumber),
        (g.RDY, {"count": "5"}, grammar_errors.BadNumber),
        (g.Command, {"verb": "HELLO", "command": {}}, grammar_errors.UnknownCommand),
    ],
)
def test_building_invalid_values_names_the_error(con, value, error):
    with pytest.raises(error):
        con.build(value)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_never_crash_the_command_parser(data):
    try:
        parsed = g.parse_command(data)
    except g.GrammarError as exc:
        assert exc.offset is not None and 0 <= exc.offset <= len(data)
    else:
        assert g.Command.build(parsed) == data


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=64) | st.binary(max_size=56).map(lambda b: be32(len(b) + 4) + be32(2) + b)
)
def test_arbitrary_bytes_never_crash_the_frame_parser(data):
    try:
        parsed = g.parse_frame(data)
    except g.GrammarError as exc:
        assert exc.offset is not None and 0 <= exc.offset <= len(data)
    else:
        assert isinstance(parsed, Container)
        assert g.Frame.build(parsed) == data


def test_building_an_empty_mpub_is_refused():
    with pytest.raises(grammar_errors.BadSize):
        g.MPUB.build({"topic": "t", "body": {"messages": []}})
