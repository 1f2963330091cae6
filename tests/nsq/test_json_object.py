"""The one JSON-object reader every decoder uses (issue 24, item 2): Go's nesting
bound instead of Python's ``RecursionError``, and the same answers as ``json.loads``
for everything else."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.lookupd import codec as lookupd_codec
from nsqviz.lookupd import grammar as lg
from nsqviz.lookupd.events import Violation as LookupViolation
from nsqviz.nsq import events as ev
from nsqviz.nsq import fastpath as fp
from nsqviz.nsq import grammar as g
from nsqviz.nsq.json_object import MAX_DEPTH, _read_deep, read_object
from nsqviz.nsq.server_connection import ServerConfig, ServerConnection


def nested(depth: int) -> bytes:
    """An IDENTIFY-shaped object holding ``depth`` levels in all (the object counts)."""
    inner = depth - 1
    return b'{"client_id":"x","deep":' + b"[" * inner + b"]" * inner + b"}"


def identify(body: bytes) -> bytes:
    return b"IDENTIFY\n" + struct.pack(">i", len(body)) + body


def outcome(fn, data: bytes):
    try:
        return ("ok", fn(data))
    except ValueError as exc:
        return ("error", type(exc).__name__)


def test_go_depth_is_accepted_and_one_more_is_refused() -> None:
    assert read_object(nested(MAX_DEPTH))["client_id"] == "x"
    with pytest.raises(g.BadJSON, match="exceeded max depth 10000 at character"):
        read_object(nested(MAX_DEPTH + 1))


@pytest.mark.parametrize("decode", [fp.decode_command, g.parse_command],
                         ids=["fastpath", "grammar"])
def test_nsq_decoders_refuse_deep_nesting_with_offset_and_field(decode) -> None:
    with pytest.raises(g.BadJSON) as caught:
        decode(identify(nested(MAX_DEPTH + 50)))
    assert (caught.value.offset, caught.value.field) == (13, "body")
    assert "exceeded max depth" in caught.value.reason


def test_server_connection_answers_bad_body_like_nsqd() -> None:
    server = ServerConnection(ServerConfig())
    events = server.receive(b"  V2" + identify(nested(MAX_DEPTH + 1)))
    (violation,) = [e for e in events if isinstance(e, ev.Violation)]
    assert (violation.code, violation.text) == ("E_BAD_BODY", "IDENTIFY failed to decode JSON body")
    assert violation.field == "body" and violation.field_offset == 4 + 13


def test_lookupd_refuses_deep_nesting_as_bad_body() -> None:
    with pytest.raises(lg.LookupError_) as caught:
        lg.parse_command(identify(nested(MAX_DEPTH + 1)))
    assert caught.value.code == "E_BAD_BODY" and caught.value.offset == 13
    server = lookupd_codec.ServerConnection()
    events = server.receive(lg.MAGIC_V1 + identify(nested(MAX_DEPTH + 1)))
    assert isinstance(events[-1], LookupViolation) and events[-1].code == "E_BAD_BODY"


def test_huge_integers_are_refused_not_raised() -> None:
    with pytest.raises(g.BadJSON):
        read_object(b'{"a":' + b"1" * 5000 + b"}")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.sampled_from([None, 0, 2]))
def test_iterative_reader_reads_what_json_loads_reads(value, indent) -> None:
    text = json.dumps(value, indent=indent)
    assert _read_deep(text) == json.loads(text)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='{}[]",:0123456789.eE-+ \ntrufalsnNIiy\\', max_size=40))
def test_iterative_reader_accepts_and_refuses_as_json_loads(text) -> None:
    assert outcome(_read_deep, text)[0] == outcome(json.loads, text)[0], text
