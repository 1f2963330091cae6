"""The evaluator: Wireshark 4's meaning of each relation over multi-valued fields, literals
read by the field's type, and errors that name the position and the nearest fields."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz import filters

PUB_AND_RDY = {"nsq": [True], "nsq.command": ["PUB", "RDY"], "nsq.count": [5],
               "nsq.body": [b"hello\x00"], "frame.number": [7], "nsq.frame_type": [],
               "ip.addr": [ipaddress.ip_address("10.1.2.3"), ipaddress.ip_address("10.9.0.1")]}
RESPONSE = {"nsq": [True], "nsq.frame_type": [0], "nsq.response.text": ["OK"],
            "frame.number": [8], "frame.time_relative": [0.25]}


def ok(expr: str, values: dict) -> bool:
    return filters.compile(expr).matches(values)


@pytest.mark.parametrize("expr,pub,resp", [
    ("nsq.command", True, False),
    ("nsq", True, True),
    ('nsq.command == "PUB"', True, False),
    ("nsq.command == PUB", True, False),
    ('nsq.command != "PUB"', False, False),  # != is "all differ", absent is false
    ('nsq.command != "SUB"', True, False),
    ('nsq.command ~= "PUB"', True, False),  # any differs
    ('nsq.command === "PUB"', False, False),
    ('!(nsq.command == "PUB")', False, True),
    ('nsq.command in {"SUB", "RDY"}', True, False),
    ('nsq.command in {"A".."Q"}', True, False),
    ("nsq.count in {1..4, 6}", False, False),
    ("nsq.count > 4 && nsq.count <= 5", True, False),
    ("nsq.count gt 4 and nsq.count le 5", True, False),
    ('nsq.command contains "U"', True, False),
    ('nsq.command contains "u"', False, False),  # contains is case-sensitive
    ('nsq.command matches "^p"', True, False),  # matches is not
    ('nsq.command matches "(?-i)^p"', False, False),
    ('nsq.body contains "lo"', True, False),
    ("nsq.body contains 6c:6f:00", True, False),
    ('nsq.body == "hello\\x00"', True, False),
    ("len(nsq.body) == 6", True, False),
    ("count(nsq.command) == 2", True, False),
    ("count(nsq.command) == 0", False, True),
    ("nsq.frame_type == FrameTypeResponse", False, True),
    ('nsq.frame_type == "FrameTypeResponse"', False, True),
    ("nsq.frame_type == 0x0", False, True),
    ("frame.time_relative > 0.2", False, True),
    ("frame.number in {7..8}", True, True),
    ("ip.addr == 10.0.0.0/8", True, False),
    ("ip.addr == 10.9.0.1", True, False),
    ("ip.addr != 10.9.0.1", False, False),
    ("ip.addr != 192.168.0.0/16", True, False),
    ("frame.number == frame.number", True, True),
    ("nsq.count > frame.number", False, False),
    ("nsq.command == PUB or nsq.response.text == OK and frame.number == 7", True, False),
])
def test_relations_over_multi_valued_fields(expr, pub, resp):
    assert ok(expr, PUB_AND_RDY) is pub
    assert ok(expr, RESPONSE) is resp


@pytest.mark.parametrize("expr,position,words", [
    ("nsq.comand", 0, "nsq.comand is neither a field nor a protocol name (did you mean"
                      " nsq.command"),
    ('nsq.topic == "t" and nsq.chanel == "c"', 21, "did you mean nsq.channel"),
    ("tubemq.metod == 4", 0, "tubemq.method"),
    ('frame.number == "4"', 16, "integer: a string cannot be compared"),
    ("frame.number == four", 16, "\"four\" is not a valid number"),  # tshark's words
    ("nsq.frame_type == FrameTypeBogus", 18, "cannot be found among the values of"
                                             " nsq.frame_type (FrameTypeResponse"),
    ("nsq.violation.fatal == 2", 23, "not a boolean"),
    ("nsq.body == zz:1", 12, "not a byte string"),
    ("ip.addr == 1.2.3.300", 11, "not an IPv4 address"),
    ("ipv6.addr == 10.0.0.1", 13, "not an IPv6 address"),
    ("nsq.count contains 1", 10, "contains needs a string or byte field"),
    ('nsq.count matches "1"', 10, "matches needs a string or byte field"),
    ('nsq.topic matches "("', 19, "bad regular expression"),  # at the (
    ("nsq == 1", 0, "nsq is a protocol: only its presence can be tested"),
    ('"PUB"', 0, "a value alone is not a test"),
    ("PUB == SUB", 0, "PUB is neither a field"),
    ("len(nsq.count) > 1", 4, "len() needs a string or byte field"),
    ("nsq.topic == frame.number", 10, "cannot be compared"),
])
def test_errors_name_the_position_and_the_nearest_fields(expr, position, words):
    with pytest.raises(filters.FilterError) as info:
        filters.compile(expr)
    assert info.value.position == position, info.value
    assert words in str(info.value)
    assert info.value.caret().splitlines()[1].startswith(" " * position + "^")


def test_a_value_on_the_left_is_the_same_test_mirrored():
    assert ok("5 <= nsq.count", PUB_AND_RDY) and not ok("5 < nsq.count", PUB_AND_RDY)
    assert ok('"RDY" == nsq.command', PUB_AND_RDY)


def test_every_registry_field_and_protocol_name_compiles():
    from nsqviz import protocols

    for name in [*protocols.filter_fields(), *(p.name for p in protocols.registered())]:
        filters.compile(name)


_ALPHABET = 'nsq.cmdoatpi01239xX_-:/"\\(){}[],.=!<>~&| '


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=60))
def test_any_text_compiles_or_is_a_filter_error(text):
    """Never another exception: garbage is an error with a position inside the text."""
    try:
        flt = filters.compile(text)
    except filters.FilterError as exc:
        assert 0 <= exc.position <= len(text)
        return
    flt.matches(PUB_AND_RDY)
    flt.matches(RESPONSE)


_WORDS = ["nsq", "nsq.command", "nsq.count", "nsq.body", "nsq.frame_type", "frame.number",
          "ip.addr", "frame.time_relative", "nsq.violation.fatal", "len(nsq.body)",
          "count(nsq.command)", "==", "!=", "===", "~=", ">", "<=", "contains", "matches",
          "in", "{", "}", "..", ",", "and", "or", "not", "(", ")", '"PUB"', "PUB", "1", "0x10",
          "aa:bb", "10.0.0.0/8", '"(x"', "FrameTypeMessage", "True", "0.5"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12))
def test_any_sequence_of_tokens_compiles_or_is_a_filter_error(words):
    test_any_text_compiles_or_is_a_filter_error.hypothesis.inner_test(" ".join(words))
