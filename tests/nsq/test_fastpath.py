"""The struct fast path against the construct grammar: same values, same errors.

Every input, valid or not, goes through both ``grammar.parse_*`` and
``fastpath.decode_*``; they must agree on the decoded fields, or raise the same
:class:`~nsqviz.nsq.grammar.GrammarError` subclass at the same offset. The encoders must
produce the bytes the grammar builds.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nsqviz.nsq import events as ev
from nsqviz.nsq import fastpath as fp
from nsqviz.nsq import grammar as g
from nsqviz.nsq import grammar_errors, runs
from nsqviz.nsq.commands import COMMANDS
from nsqviz.nsq.framing import CommandFraming, FrameFraming
from nsqviz.stream import FramingError
from tests.nsq._vectors import (
    GOLDEN_COMMANDS,
    GOLDEN_FRAMES,
    ID,
    VERBS,
    be32,
    canonical,
    command_vectors,
    frame_vectors,
)

# ------------------------------------------------------------ grammar -> events


def event_from_grammar_command(parsed) -> ev.Command:
    """The event the fast path should give, from the grammar's parse tree."""
    c = parsed.command
    return {
        "IDENTIFY": lambda: ev.Identify(c.body.value),
        "AUTH": lambda: ev.Auth(c.secret),
        "SUB": lambda: ev.Sub(c.topic, c.channel),
        "PUB": lambda: ev.Pub(c.topic, c.body),
        "MPUB": lambda: ev.Mpub(c.topic, tuple(c.body.messages)),
        "DPUB": lambda: ev.Dpub(c.topic, c.defer_time, c.body),
        "RDY": lambda: ev.Rdy(c.count),
        "FIN": lambda: ev.Fin(c.id),
        "REQ": lambda: ev.Req(c.id, c.timeout),
        "TOUCH": lambda: ev.Touch(c.id),
        "CLS": lambda: ev.Cls(),
        "NOP": lambda: ev.Nop(),
    }[parsed.verb]()


def event_from_grammar_frame(parsed) -> ev.ServerFrame:
    if parsed.frame_type == "FrameTypeResponse":
        return ev.Response(parsed.data)
    if parsed.frame_type == "FrameTypeError":
        return ev.Error(parsed.data)
    d = parsed.data
    return ev.Message(d.timestamp, d.attempts, d.id, d.body)


def outcome(fn, data: bytes):
    """("ok", value) or ("error", class, offset): what both decoders must agree on."""
    try:
        return ("ok", fn(data))
    except g.GrammarError as exc:
        return ("error", type(exc).__name__, exc.offset, exc.field)


def grammar_command(data):
    return event_from_grammar_command(g.parse_command(data))


def grammar_frame(data):
    return event_from_grammar_frame(g.parse_frame(data))


def as_cut(rule, data: bytes) -> bool:
    """Whether ``data`` is one whole unit as the framing rule cuts the stream.

    That is the decoders' contract. Input the framing would cut elsewhere (bytes left
    over, or cut short) must still be refused by both, but each may notice a different
    fault first. Input the framing itself refuses is held to the strict contract too.
    """
    try:
        return rule.measure(data, 0) == len(data)
    except FramingError:
        return True


def assert_same(grammar_fn, fast_fn, rule, data: bytes) -> tuple:
    want = outcome(grammar_fn, data)
    got = outcome(fast_fn, data)
    if as_cut(rule, data):
        assert got == want, data
    else:
        assert got[0] == want[0] == "error", (data, got, want)
    return got


def assert_same_command(data: bytes) -> tuple:
    return assert_same(grammar_command, fp.decode_command, CommandFraming(expect_magic=False), data)


def assert_same_frame(data: bytes) -> tuple:
    return assert_same(grammar_frame, fp.decode_frame, FrameFraming(max_size=2**31 - 1), data)


# ------------------------------------------------------------------- mutations


@st.composite
def mutated(draw, wire: bytes) -> bytes:
    """A valid wire with one byte flipped, inserted, deleted, or the tail cut off."""
    op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "append"]))
    i = draw(st.integers(0, len(wire) - 1))
    b = draw(st.sampled_from([0x00, 0x20, 0x0A, 0x23, 0x7F, 0xFF, 0x41, 0x67, 0x31]))
    if op == "flip":
        return wire[:i] + bytes([b]) + wire[i + 1 :]
    if op == "insert":
        return wire[:i] + bytes([b]) + wire[i:]
    if op == "delete":
        return wire[:i] + wire[i + 1 :]
    if op == "truncate":
        return wire[:i]
    return wire + bytes([b])


any_command_vector = st.sampled_from(VERBS).flatmap(command_vectors)
any_command = any_command_vector.map(lambda v: v[0])
any_frame = frame_vectors().map(lambda v: v[0])

# --------------------------------------------------------------------- valid


@pytest.mark.parametrize(
    "wire", [v[1] for v in GOLDEN_COMMANDS], ids=[v[0] for v in GOLDEN_COMMANDS]
)
def test_golden_commands_agree(wire):
    kind, event = assert_same_command(wire)
    assert kind == "ok"
    if not isinstance(event, ev.Identify):  # the fast encoder writes compact JSON
        assert fp.encode_command(event) == wire


@pytest.mark.parametrize("wire", [v[1] for v in GOLDEN_FRAMES], ids=[v[0] for v in GOLDEN_FRAMES])
def test_golden_frames_agree(wire):
    kind, frame = assert_same_frame(wire)
    assert kind == "ok"
    assert fp.encode_frame(frame) == wire


@settings(max_examples=200, deadline=None)
@given(any_command_vector)
def test_valid_commands_decode_alike_and_encode_like_the_grammar(vector):
    wire, fields = vector
    kind, event = assert_same_command(wire)
    assert kind == "ok"
    parsed = g.parse_command(wire)
    if not canonical(fields):
        # events hold plain ints: the fast encoder writes the canonical spelling
        assert fp.decode_command(fp.encode_command(event)) == event
    elif isinstance(event, ev.Identify):
        # no raw bytes to keep: both builders write the value compact
        assert fp.encode_command(event) == g.IDENTIFY.build({"body": {"value": event.data}})
    else:
        assert fp.encode_command(event) == wire == g.Command.build(parsed)


_same_size = st.integers(1, 300).flatmap(
    lambda k: st.lists(st.binary(min_size=k, max_size=k), min_size=1, max_size=20))
_mixed_sizes = st.lists(st.binary(min_size=1, max_size=300), min_size=2, max_size=20)


@settings(max_examples=100, deadline=None)
@given(st.one_of(_same_size, _mixed_sizes))
def test_mpub_of_one_size_or_many_encodes_as_the_grammar_builds_it(bodies):
    # the encoder joins a batch of one message size differently from a mixed one
    event = ev.Mpub("t", tuple(bodies))
    wire = fp.encode_command(event)
    parsed = g.parse_command(wire)
    assert event_from_grammar_command(parsed) == event
    assert g.Command.build(parsed) == wire


@settings(max_examples=200, deadline=None)
@given(any_frame)
def test_valid_frames_decode_alike_and_encode_like_the_grammar(wire):
    kind, frame = assert_same_frame(wire)
    assert kind == "ok"
    assert fp.encode_frame(frame) == wire


def test_magic_encodes_as_the_grammar_builds_it():
    assert fp.encode_command(ev.Magic()) == g.Magic.build(None)


def test_decode_frame_at_reads_inside_a_larger_buffer():
    wire = GOLDEN_FRAMES[-2][1]  # the message frame
    buf = b"xxxx" + wire + b"yy"
    assert fp.decode_frame_at(buf, 4, 4 + len(wire)) == fp.decode_frame(wire)


# ------------------------------------------------------------------- invalid


@settings(max_examples=300, deadline=None)
@given(any_command.flatmap(mutated))
def test_mutated_commands_fail_alike(wire):
    assert_same_command(wire)


@settings(max_examples=300, deadline=None)
@given(any_frame.flatmap(mutated))
def test_mutated_frames_fail_alike(wire):
    assert_same_frame(wire)


@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 9), count=st.integers(1, 300), data=st.data())
def test_mpubs_of_equal_sizes_decode_alike(size, count, data):
    """MPUB bodies of one size (cut by struct, without a loop), and the same with one
    byte of the body -- a size field's or a message's -- changed: alike with the grammar."""
    body = be32(count) + (be32(size) + b"m" * size) * count
    wire = bytearray(b"MPUB t\n" + be32(len(body)) + body)
    if data.draw(st.booleans()):
        at = data.draw(st.integers(11, len(wire) - 1))
        wire[at] = data.draw(st.integers(0, 255))
    assert_same_command(bytes(wire))


@settings(max_examples=200, deadline=None)
@given(
    st.builds(
        lambda size, ftype, data: be32(size) + be32(ftype) + data,
        st.integers(-2, 80),
        st.integers(-1, 3),
        st.binary(max_size=60),
    )
)
@example(be32(30) + be32(2) + b"\x00" * 10 + b"0123456789abcdeZ")  # non-hex id, no body
@example(be32(4) + be32(2))  # a message frame with no message at all
def test_random_frame_headers_fail_alike(wire):
    assert_same_frame(wire)


@pytest.mark.parametrize(
    "wire",
    [
        b"SUB a b c\n",
        b"SUB a\n",
        b"NOP \n",
        b"CLS x\n",
        b"RDY 1 2\n",
        b"FIN\n",
        b"IDENTIFY x\n\x00\x00\x00\x02{}",
        b"AUTH\n\x00\x00\x00\x01",
        b"MPUB t\n\x00\x00\x00\x04\x00\x00\x00\x01",
        b"MPUB t\n\x00\x00\x00\x02\x00\x00",
        b"MPUB t\n\x00\x00\x00\x08\xff\xff\xff\xff\x00\x00\x00\x00",
        b"PUB t\n\x00\x00\x00\x01",
        b"FIN " + ID + b"\n\n",
    ],
)
def test_hand_picked_malformed_commands_fail_alike(wire):
    kind, *_ = assert_same_command(wire)
    assert kind == "error"


@pytest.mark.parametrize(
    "event, error",
    [
        (ev.Sub("bad name", "c"), grammar_errors.BadName),
        (ev.Pub("t", b""), grammar_errors.BadSize),
        (ev.Mpub("t", ()), grammar_errors.BadSize),
        (ev.Mpub("t", (b"a", b"", b"c")), grammar_errors.BadSize),
        (ev.Fin(b"xyz"), grammar_errors.BadMessageID),
        (ev.Req(ID, -1), grammar_errors.BadNumber),
        (ev.Rdy(-5), grammar_errors.BadNumber),
        (ev.Dpub("t#ephemeral#ephemeral", 1, b"x"), grammar_errors.BadName),
    ],
)
def test_encoders_refuse_what_the_grammar_refuses(event, error):
    with pytest.raises(error):
        fp.encode_command(event)


def test_encoding_a_message_with_a_bad_id_is_refused():
    with pytest.raises(grammar_errors.BadMessageID):
        fp.encode_frame(ev.Message(0, 1, b"0123456789abcdeZ", b"x"))
    with pytest.raises(grammar_errors.BadMessageID):
        g.Frame.build(
            {
                "frame_type": "FrameTypeMessage",
                "data": {"timestamp": 0, "attempts": 1, "id": b"0123456789abcdeZ", "body": b"x"},
            }
        )


@given(ts=st.integers(-(2**63), 2**63 - 1), attempts=st.integers(0, 65535),
       ids=st.lists(st.binary(min_size=8, max_size=8).map(lambda b: b.hex().encode()),
                    max_size=6),
       data=st.data())
def test_a_message_run_encodes_as_its_messages_do(ts, attempts, ids, data):
    bodies = [data.draw(st.binary(min_size=1, max_size=40)) for _ in ids]
    messages = [ev.Message(ts, attempts, i, b) for i, b in zip(ids, bodies, strict=True)]
    assert runs.encode_message_run(ts, attempts, ids, bodies) == fp.encode_messages(messages)


@given(st.lists(st.one_of(st.binary(min_size=8, max_size=8).map(lambda b: b.hex().encode()),
                         st.binary(max_size=20),
                         st.text("0123456789abcdefABCDEF-", max_size=18).map(str.encode))))
def test_a_message_run_is_refused_exactly_when_one_of_its_ids_is(ids):
    valid = all(len(i) == 16 and not i.strip(b"0123456789abcdefABCDEF") for i in ids)
    try:
        runs.encode_message_run(0, 1, ids, [b"x"] * len(ids))
    except grammar_errors.BadMessageID:
        assert not valid
    else:
        assert valid


@pytest.mark.parametrize("bad", [b"0123456789abcdeZ", b"0123456789abcde", b"0123456789abcdef0"])
def test_a_message_run_with_a_bad_id_is_refused(bad):
    ids = [b"0123456789abcdef", bad, b"fedcba9876543210"]
    with pytest.raises(grammar_errors.BadMessageID, match=re.escape(repr(bad))):
        runs.encode_message_run(0, 1, ids, [b"x"] * 3)
    with pytest.raises(grammar_errors.BadMessageID):
        fp.encode_messages([ev.Message(0, 1, i, b"x") for i in ids])


def test_fins_made_in_bulk_are_the_events_fin_makes():
    ids = [b"%016x" % i for i in range(5)]
    made = runs._fins(ids)
    assert made == [ev.Fin(i) for i in ids]
    assert [(type(f), f.id, f.raw) for f in made] == [(ev.Fin, i, None) for i in ids]
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[0].id = b"x"


def _reason(fn, data: bytes) -> str:
    try:
        fn(data)
    except g.GrammarError as exc:
        return exc.reason
    return ""


@settings(max_examples=200, deadline=None)
@given(st.one_of(any_command.flatmap(mutated), any_frame.flatmap(mutated)))
def test_no_construct_internal_text_reaches_a_reader(wire):
    """Every refusal names its field in the protocol's words, never construct's path."""
    for fn in (g.parse_command, g.parse_frame, fp.decode_command, fp.decode_frame):
        reason = _reason(fn, wire)
        assert "(parsing)" not in reason and "Error in path" not in reason, reason


# ------------------------------------------------ the fast path's positional contract


def _field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_command_events_take_their_fields_in_the_table_order():
    """The fast path builds a command as ``spec.event(*line values, [body,] raw)``
    (keywords would cost the hot loop); this is the order that call relies on."""
    for spec in COMMANDS.values():
        body = [spec.event_body] if spec.event_body else []
        assert _field_names(spec.event) == [p.field for p in spec.params] + body + ["raw"]


def test_frame_events_take_their_fields_in_the_order_the_fast_path_passes_them():
    assert _field_names(ev.Message) == ["timestamp", "attempts", "id", "body", "raw"]
    assert _field_names(ev.Response) == ["data", "raw"]
    assert _field_names(ev.Error) == ["data", "raw"]
