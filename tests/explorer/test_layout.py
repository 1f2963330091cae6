"""Byte attribution: every byte of every NSQ command and frame belongs to exactly one leaf."""

from __future__ import annotations

import pytest
from construct import Const, FixedSized, GreedyBytes, Int8ub, Int16ub, PrefixedArray, Struct, this
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.layout import annotate
from nsqviz.nsq import grammar as g
from nsqviz.nsq import grammar_errors

MSG_ID = b"0a1b2c3d4e5f6789"

COMMAND_SAMPLES = {
    "IDENTIFY": {"body": {"value": {"client_id": "w1", "feature_negotiation": True}}},
    "AUTH": {"secret": b"s3cret"},
    "SUB": {"topic": "orders", "channel": "audit#ephemeral"},
    "PUB": {"topic": "orders", "body": b"hello"},
    "MPUB": {"topic": "orders", "body": {"messages": [b"a", b"bc", b"def"]}},
    "DPUB": {"topic": "orders", "defer_time": 1500, "body": b"later"},
    "RDY": {"count": 25},
    "FIN": {"id": MSG_ID},
    "REQ": {"id": MSG_ID, "timeout": 0},
    "TOUCH": {"id": MSG_ID},
    "CLS": {},
    "NOP": {},
}

FRAME_SAMPLES = {
    "OK": {"frame_type": "FrameTypeResponse", "data": b"OK"},
    "heartbeat": {"frame_type": "FrameTypeResponse", "data": b"_heartbeat_"},
    "error": {"frame_type": "FrameTypeError", "data": b"E_INVALID cannot SUB in current state"},
    "message": {
        "frame_type": "FrameTypeMessage",
        "data": {"timestamp": 1_700_000_000_000_000_000, "attempts": 3, "id": MSG_ID,
                 "body": b"payload"},
    },
    "empty message": {
        "frame_type": "FrameTypeMessage",
        "data": {"timestamp": 0, "attempts": 1, "id": MSG_ID, "body": b""},
    },
}


def assert_tiles(layout, length):
    """Non-empty leaves cover [0, length) exactly once, in order, with their own bytes."""
    pos = 0
    for leaf in layout.leaves():
        assert leaf.start == pos, f"{leaf.dotted} starts at {leaf.start}, expected {pos}"
        assert leaf.raw == layout.data[leaf.start : leaf.end]
        pos = leaf.end
    assert pos == length
    for node in layout.root.walk():  # every composite spans exactly its children
        if node.children:
            assert node.start == node.children[0].start
            assert node.end == node.children[-1].end


def test_all_commands_covered():
    assert set(COMMAND_SAMPLES) == set(g.COMMANDS)


@pytest.mark.parametrize("verb", sorted(COMMAND_SAMPLES))
def test_command_leaves_tile_input(verb):
    data = g.Command.build({"verb": verb, "command": COMMAND_SAMPLES[verb]})
    layout = annotate(g.Command, data)
    assert layout.error is None
    assert_tiles(layout, len(data))
    assert layout.find("command.verb").raw == verb.encode()
    assert layout.find("command.verb").kind == "const"
    with pytest.raises(KeyError):  # the dispatch peek owns no bytes: not in the tree
        layout.find("verb")
    names = [leaf.name for leaf in layout.root.walk()]
    assert not [n for n in names if isinstance(n, str) and n.startswith("_")], names
    assert "newline" in names


def test_separators_and_newline_have_protocol_words():
    data = b"REQ 0123456789abcdef 500\n"
    layout = annotate(g.Command, data)
    assert [f.dotted for f in layout.leaves()] == [
        "command.verb", "command.separator", "command.id", "command.separator2",
        "command.timeout", "command.newline",
    ]


@pytest.mark.parametrize("name", sorted(FRAME_SAMPLES))
def test_frame_leaves_tile_input(name):
    data = g.Frame.build(FRAME_SAMPLES[name])
    layout = annotate(g.Frame, data)
    assert layout.error is None
    assert_tiles(layout, len(data))
    size = layout.find("size")
    assert (size.start, size.end, size.value, size.kind) == (0, 4, len(data) - 4, "int32 BE")
    assert layout.find("frame_type").value == FRAME_SAMPLES[name]["frame_type"]


def test_message_fields_have_spec_offsets():
    layout = annotate(g.Frame, g.Frame.build(FRAME_SAMPLES["message"]))
    spans = {f.dotted: (f.start, f.end) for f in layout.leaves()}
    assert spans == {
        "size": (0, 4),
        "frame_type": (4, 8),
        "data.timestamp": (8, 16),
        "data.attempts": (16, 18),
        "data.id": (18, 34),
        "data.body": (34, 41),
    }
    assert layout.find("data.id").value == MSG_ID
    assert layout.find("data.attempts").kind == "uint16 BE"


def test_mpub_paths_name_each_message():
    data = g.Command.build({"verb": "MPUB", "command": COMMAND_SAMPLES["MPUB"]})
    layout = annotate(g.Command, data)
    assert layout.find("command.body.data.messages.count").value == 3
    second = layout.find("command.body.data.messages[1].data")
    assert second.value == b"bc" and second.raw == b"bc"
    assert layout.find("command.body.data.messages[2].size").value == 3


def test_empty_mpub_message_is_refused_with_its_offset():
    """nsqd refuses a zero-size message inside MPUB; the layout shows where."""
    good = g.Command.build({"verb": "MPUB", "command": {"topic": "t",
                                                        "body": {"messages": [b"x"]}}})
    data = good[:-5] + b"\x00\x00\x00\x00"  # message size 0, no data
    data = data[:7] + (len(data) - 11).to_bytes(4, "big") + data[11:]
    layout = annotate(g.Command, data)
    assert isinstance(layout.error, grammar_errors.BadSize)
    assert layout.error_offset == 15
    assert_tiles(layout, len(data))


def test_identify_json_value_is_decoded_but_bytes_are_kept():
    data = g.Command.build({"verb": "IDENTIFY", "command": COMMAND_SAMPLES["IDENTIFY"]})
    body = annotate(g.Command, data).find("command.body.data")
    assert body.value == {"client_id": "w1", "feature_negotiation": True}
    assert body.raw == b'{"client_id":"w1","feature_negotiation":true}'


def test_bad_input_keeps_partial_tree_and_names_offset():
    data = b"SUB bad!name ch\n"
    layout = annotate(g.Command, data)
    assert isinstance(layout.error, grammar_errors.BadName)
    assert layout.error_offset == 7  # the "!", not the name's first byte
    assert_tiles(layout, len(data))
    assert layout.find("command.verb").raw == b"SUB"
    assert layout.leaves()[-1].dotted == "(unparsed)"
    assert any(f.failed for f in layout.root.walk())


def test_unknown_frame_type_reports_offset_4():
    layout = annotate(g.Frame, b"\x00\x00\x00\x06\x00\x00\x00\x07OK")
    assert isinstance(layout.error, grammar_errors.UnknownFrameType)
    assert layout.error_offset == 4
    assert_tiles(layout, 10)


def test_short_input_is_an_error_not_a_crash():
    layout = annotate(g.Frame, b"\x00\x00")
    assert layout.error is not None
    assert_tiles(layout, 2)


def test_trailing_bytes_get_their_own_leaf():
    data = g.Frame.build(FRAME_SAMPLES["OK"]) + b"xyz"
    layout = annotate(g.Frame, data)
    assert layout.error is None
    assert layout.leaves()[-1].dotted == "(trailing)"
    assert_tiles(layout, len(data))


def test_protocol_independent_grammar():
    """Not NSQ: a toy TLV with FixedSized, an unnamed Const and a PrefixedArray."""
    toy = Struct(
        "magic" / Const(b"TV"),
        Const(b"\x00"),
        "length" / Int16ub,
        "payload" / FixedSized(this.length, Struct("items" / PrefixedArray(Int8ub, Int8ub),
                                                     "rest" / GreedyBytes)),
    )
    data = toy.build({"length": 6, "payload": {"items": [7, 8, 9], "rest": b"zz"}})
    layout = annotate(toy, data)
    assert layout.error is None
    assert_tiles(layout, len(data))
    assert [f.dotted for f in layout.leaves()] == [
        "magic", "_1", "length", "payload.items.count", "payload.items[0]",
        "payload.items[1]", "payload.items[2]", "payload.rest",
    ]
    assert layout.find("payload.items[2]").start == 8


def test_to_dict_is_json_serialisable():
    import json

    data = g.Frame.build(FRAME_SAMPLES["message"])
    doc = json.loads(json.dumps(annotate(g.Frame, data).to_dict()))
    assert doc["root"]["children"][0]["path"] == "size"


def test_tracing_hook_is_removed_after_use():
    from construct import Construct

    from nsqviz import layout as layout_mod

    annotate(g.Frame, b"\x00\x00")
    assert Construct._parsereport is layout_mod._original_parsereport


@settings(max_examples=60, deadline=None)
@given(
    topic=st.from_regex(r"[a-z0-9_.-]{1,20}", fullmatch=True),
    bodies=st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=5),
)
def test_mpub_tiles_for_any_bodies(topic, bodies):
    data = g.Command.build({"verb": "MPUB", "command": {"topic": topic,
                                                         "body": {"messages": bodies}}})
    layout = annotate(g.Command, data)
    assert layout.error is None
    assert_tiles(layout, len(data))


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=48))
def test_any_bytes_tile_as_frame_without_crash(data):
    layout = annotate(g.Frame, data)
    assert_tiles(layout, len(data))


@settings(max_examples=80, deadline=None)
@given(st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"PUB ", b"MPUB t\n", b"IDENTIFY\n", b"REQ ", b"SUB a "]).flatmap(
        lambda head: st.binary(max_size=24).map(lambda tail: head + tail)),
))
def test_any_bytes_tile_as_command_without_crash(data):
    layout = annotate(g.Command, data)
    assert_tiles(layout, len(data))
    if layout.error is not None:
        assert layout.error_offset is not None and 0 <= layout.error_offset <= len(data)
