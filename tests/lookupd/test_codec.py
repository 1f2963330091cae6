"""The "  V1" lookup protocol: grammar round trips, nsqlookupd's errors, both roles' states."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.lookupd import grammar
from nsqviz.lookupd.codec import ClientConnection, ServerConnection, encode
from nsqviz.lookupd.events import (
    Answer,
    BadAnswer,
    ConnectionClosed,
    Error,
    Identify,
    Magic,
    Ping,
    Register,
    Truncated,
    Unregister,
    Violation,
)
from nsqviz.sansio import LocalProtocolError

INFO = {"broadcast_address": "127.0.0.1", "tcp_port": 4150, "http_port": 4151,
        "version": "1.3.0", "hostname": "h"}


def _identify(info=INFO) -> bytes:
    body = json.dumps(info).encode()
    return b"IDENTIFY\n" + struct.pack(">i", len(body)) + body


NAMES = st.from_regex(r"[.a-zA-Z0-9_-]{1,40}(#ephemeral)?", fullmatch=True)


@given(NAMES, st.none() | NAMES, st.sampled_from([Register, Unregister]))
def test_register_round_trip(topic, channel, kind):
    data = encode(kind(topic, channel))
    expected = f"{kind.__name__.upper()} {topic}{' ' + channel if channel else ''}\n"
    assert data == expected.encode()
    server = ServerConnection()
    evs = server.receive(b"  V1" + _identify() + data)
    assert evs == [Magic(), Identify(INFO), kind(topic, channel)]


def test_a_whole_registration_split_byte_by_byte():
    stream = b"  V1" + _identify() + b"REGISTER t c\nPING\nUNREGISTER t c\n"
    server = ServerConnection()
    evs = [ev for i in range(len(stream)) for ev in server.receive(stream[i:i + 1])]
    assert evs == [Magic(), Identify(INFO), Register("t", "c"), Ping(), Unregister("t", "c")]
    assert server.receive(b"") == [ConnectionClosed()]


# nsqlookupd v1.3.0's answers (lookup_protocol_v1.go), the stream after the magic
@pytest.mark.parametrize("after_magic, code, text", [
    (b"FOO\n", "E_INVALID", "invalid command FOO"),
    (b"REGISTER t c\n", "E_INVALID", "client must IDENTIFY"),
    (b"UNREGISTER t\n", "E_INVALID", "client must IDENTIFY"),
    (_identify() + b"REGISTER\n", "E_INVALID", "REGISTER insufficient number of params"),
    (_identify() + b"REGISTER bad! c\n", "E_BAD_TOPIC", "REGISTER topic name 'bad!' is not valid"),
    (_identify() + b"UNREGISTER t b@d\n", "E_BAD_CHANNEL",
     "UNREGISTER channel name 'b@d' is not valid"),
    (_identify() + _identify(), "E_INVALID", "cannot IDENTIFY again"),
    (_identify({"tcp_port": 1}), "E_BAD_BODY", "IDENTIFY missing fields"),
    (b"IDENTIFY\n\x00\x00\x00\x03{x}", "E_BAD_BODY", "IDENTIFY failed to decode JSON body"),
])
def test_refusals_are_nsqlookupds(after_magic, code, text):
    server = ServerConnection()
    evs = server.receive(b"  V1" + after_magic + b"PING\n")
    refused = evs[-1]
    assert isinstance(refused, Violation), evs
    assert (refused.code, refused.text) == (code, text)
    assert refused.offset is not None and 4 <= refused.offset < 4 + len(after_magic)
    assert server.refuse(refused) == struct.pack(">i", len(refused.error)) + refused.error
    assert server.receive(b"PING\n") == []  # closed: nothing more is read


def test_bad_magic_is_answered_with_the_bare_code():
    server = ServerConnection()
    (refused,) = server.receive(b"  V2PING\n")
    assert server.refuse(refused) == b"\x00\x00\x00\x0eE_BAD_PROTOCOL"


def test_client_pairs_answers_and_keeps_the_order():
    client = ClientConnection()
    out = client.send(Magic()) + client.send(Identify(INFO)) + client.send(Register("t"))
    assert out.startswith(b"  V1IDENTIFY\n")
    answer = json.dumps({"tcp_port": 4160, "http_port": 4161, "version": "1.3.0",
                         "broadcast_address": "x", "hostname": "x"}).encode()
    data = grammar.Response.build(answer) + grammar.Response.build(b"OK")
    evs = [ev for b in data for ev in client.receive(bytes([b]))]
    assert evs == [Answer(Identify(INFO), answer), Answer(Register("t"), b"OK")]
    assert client.peer_info["tcp_port"] == 4160
    (refused,) = client.receive(grammar.Response.build(b"E_INVALID client must IDENTIFY"))
    assert (refused.code, refused.text) == ("E_INVALID", "client must IDENTIFY")


def test_client_refuses_misuse():
    client = ClientConnection()
    with pytest.raises(LocalProtocolError):
        client.send(Ping())  # the magic comes first
    client.send(Magic())
    with pytest.raises(LocalProtocolError, match="must IDENTIFY"):
        client.send(Register("t"))
    client.send(Identify(INFO))
    with pytest.raises(LocalProtocolError, match="IDENTIFY again"):
        client.send(Identify(INFO))


def test_a_hostile_body_size_is_refused_without_waiting():
    server = ServerConnection()
    (_, refused) = server.receive(b"  V1IDENTIFY\n\x7f\xff\xff\xff")
    assert refused.code == "E_BAD_BODY"


def test_a_bad_identify_answer_is_an_event_not_an_exception():
    """Issue 24 item 1: ``receive`` raised BadJSON, which ended the broker's peer task."""
    client = ClientConnection()
    client.send(Magic())
    client.send(Identify(INFO))
    (bad,) = client.receive(grammar.Response.build(b"{not json"))
    assert isinstance(bad, BadAnswer) and bad.command == Identify(INFO)
    assert bad.offset == 0 and "not JSON" in bad.reason
    assert client.peer_info is None and client.state.name == "CLOSED"
    with pytest.raises(LocalProtocolError):
        client.send(Ping())


ANSWERS = st.binary(max_size=40) | st.sampled_from(
    [b"OK", b"{", b'{"tcp_port":', b"[]", b"E_INVALID x", b"{" * 3000 + b"}" * 3000])
"""Answer payloads: random, and the shapes a decoder of JSON answers trips on."""


def _client_after(commands) -> ClientConnection:
    client = ClientConnection()
    for cmd in (Magic(), *commands):
        client.send(cmd)
    return client


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([(), (Identify(INFO),), (Identify(INFO), Register("t"), Ping())]),
       st.lists(st.binary(max_size=40) | st.builds(grammar.Response.build, ANSWERS), max_size=6))
def test_no_input_raises_from_the_client_codec(commands, chunks):
    client = _client_after(commands)
    for chunk in chunks:
        for event in client.receive(chunk):
            assert isinstance(event, Answer | BadAnswer | Error | Violation | Truncated
                              | ConnectionClosed)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.binary(max_size=40) | st.sampled_from([b"IDENTIFY\n", _identify(), b"PING\n"]),
                max_size=6))
def test_no_input_raises_from_the_server_codec(chunks):
    server = ServerConnection()
    server.receive(grammar.MAGIC_V1)
    for chunk in chunks:
        server.receive(chunk)
