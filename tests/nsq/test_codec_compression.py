"""Where the stream changes form: snappy, deflate, TLS -- and at any chunking.

The spec: after an IDENTIFY response that negotiated snappy or deflate, the client must
expect an *additional*, compressed ``OK``; both directions are compressed from there on.
After one that negotiated ``tls_v1`` the client starts the TLS handshake at once, and the
server answers ``OK`` inside TLS. The compressed bytes are checked with the compression
libraries directly, not only between our own two halves.
"""

from __future__ import annotations

import zlib

import pytest
import snappy
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.nsq import events as ev
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.server_connection import ServerConnection
from nsqviz.nsq.states import State
from nsqviz.sansio import LocalProtocolError
from tests.nsq._wire import Wire, features, kinds, message, mid

OK_FRAME = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"  # from the spec's frame layout
SNAPPY_STREAM_ID = b"\xff\x06\x00\x00sNaPpY"  # the framing format's stream identifier


def independent_decompress(kind: str, data: bytes) -> bytes:
    if kind == "snappy":
        return snappy.StreamDecompressor().decompress(data)
    return zlib.decompressobj(-15).decompress(data)


def negotiate(kind: str, level: int | None = None):
    """Magic + IDENTIFY asking for ``kind``; returns the wire and the server's reply bytes:
    the (uncompressed) JSON response, then the compressed OK."""
    w = Wire()
    w.c2s(ev.Magic())
    ask = {"feature_negotiation": True, kind: True}
    if level:
        ask["deflate_level"] = level
    w.c2s(ev.Identify(ask))
    extra = {"deflate_level": level} if level else {}
    reply = w.server.send(features(**{kind: True}, **extra))
    w.server.start_compression(kind, level)
    compressed_ok = w.server.send(ev.Response(b"OK"))
    return w, reply, compressed_ok


COMPRESSIONS = [("snappy", None), ("deflate", 3)]


@pytest.mark.parametrize("kind, level", COMPRESSIONS)
def test_the_additional_ok_is_compressed(kind, level):
    w, reply, compressed_ok = negotiate(kind, level)
    assert reply.endswith(b"}") and b'"' + kind.encode() + b'":true' in reply  # plain JSON
    assert compressed_ok != OK_FRAME
    assert independent_decompress(kind, compressed_ok) == OK_FRAME
    if kind == "snappy":
        assert compressed_ok.startswith(SNAPPY_STREAM_ID)


@pytest.mark.parametrize("kind, level", COMPRESSIONS)
def test_switch_when_response_and_compressed_ok_arrive_apart(kind, level):
    w, reply, compressed_ok = negotiate(kind, level)
    c = w.client
    first = c.receive(reply)
    assert kinds(first) == ["Response", "CompressionStarted"]
    assert first[1] == ev.CompressionStarted(kind, level)
    assert c.compression == kind
    assert c.receive(compressed_ok) == [ev.Response(b"OK")]
    assert c.pending == []  # the extra OK was expected, and is consumed


@pytest.mark.parametrize("kind, level", COMPRESSIONS)
def test_switch_when_response_and_compressed_ok_arrive_in_the_same_chunk(kind, level):
    w, reply, compressed_ok = negotiate(kind, level)
    events = w.client.receive(reply + compressed_ok)
    assert kinds(events) == ["Response", "CompressionStarted", "Response"]
    assert events[2] == ev.Response(b"OK")
    assert w.client.pending == []


@pytest.mark.parametrize("kind, level", COMPRESSIONS)
def test_switch_split_at_every_byte(kind, level):
    w, reply, compressed_ok = negotiate(kind, level)
    # compressed messages follow the OK in the same stream
    stream = (
        reply
        + compressed_ok
        + w.server.send(message(1), check=False)
        + w.server.send(message(2, b"x" * 300), check=False)
    )

    def run(chunks):
        c = ClientConnection()
        c.send(ev.Magic())
        c.send(ev.Identify({"feature_negotiation": True, kind: True}))
        out = []
        for chunk in chunks:
            out += c.receive(chunk)
        return out

    whole = run([stream])
    assert kinds(whole) == ["Response", "CompressionStarted", "Response", "Message", "Message"]
    assert whole[3:] == [message(1), message(2, b"x" * 300)]
    for k in range(1, len(stream)):
        assert run([stream[:k], stream[k:]]) == whole, k
    assert run([stream[i : i + 1] for i in range(len(stream))]) == whole


@pytest.mark.parametrize("kind, level", COMPRESSIONS)
def test_client_sends_compressed_and_the_server_reads_it(kind, level):
    w, reply, compressed_ok = negotiate(kind, level)
    w.client.receive(reply + compressed_ok)
    data = w.client.send(ev.Sub("topic", "chan"))
    assert data != b"SUB topic chan\n"
    assert independent_decompress(kind, data) == b"SUB topic chan\n"
    assert w.server.receive(data) == [ev.Sub("topic", "chan")]
    # a stream of compressed commands, fed to the server one byte at a time
    cmds = [ev.Rdy(5), ev.Nop(), ev.Pub("topic", b"p" * 100)]
    data = b"".join(w.client.send(c, check=False) for c in cmds)
    out = []
    for i in range(len(data)):
        out += w.server.receive(data[i : i + 1])
    assert out == cmds


def test_a_broken_compressed_stream_is_a_fatal_violation():
    w, reply, compressed_ok = negotiate("deflate", 3)
    w.client.receive(reply + compressed_ok)
    [v] = w.client.receive(b"\xff\xff\xff\xff not deflate")
    assert isinstance(v, ev.Violation) and v.fatal and "deflate" in v.text
    assert w.client.state is State.CLOSED


# ------------------------------------------------------------------------- TLS


def tls_wire(**ask):
    w = Wire()
    w.c2s(ev.Magic())
    w.c2s(ev.Identify({"feature_negotiation": True, "tls_v1": True, **ask}))
    return w


def test_tls_upgrade_is_an_event_at_the_switch_point():
    w = tls_wire()
    reply = w.server.send(features(tls_v1=True))
    events = w.client.receive(reply)
    assert kinds(events) == ["Response", "TLSUpgrade"]
    assert events[1] == ev.TLSUpgrade(b"")
    with pytest.raises(LocalProtocolError, match="TLS"):
        w.client.send(ev.Sub("t", "c"))
    w.client.tls_established()
    w.server.tls_started()
    # the server's OK, read through TLS by the caller, completes the upgrade
    assert w.s2c(ev.Response(b"OK")) == [ev.Response(b"OK")]
    assert w.client.pending == [] and w.client.tls and w.server.tls
    assert w.c2s(ev.Sub("t", "c")) == [ev.Sub("t", "c")]


def test_tls_handshake_bytes_in_the_same_chunk_are_handed_over():
    w = tls_wire()
    reply = w.server.send(features(tls_v1=True))
    hello = b"\x16\x03\x01\x00\x2a" + bytes(42)  # the start of a TLS record
    for k in range(1, len(reply)):
        c = ClientConnection()
        c.send(ev.Magic())
        c.send(ev.Identify({"feature_negotiation": True, "tls_v1": True}))
        assert c.receive(reply[:k]) == []
        assert c.receive(reply[k:] + hello) == [
            ev.Response(reply[8:]),
            ev.TLSUpgrade(hello),
        ]


def test_tls_then_snappy_expects_the_compressed_ok_after_the_tls_ok():
    w = tls_wire(snappy=True)
    reply = w.server.send(features(tls_v1=True, snappy=True))
    assert kinds(w.client.receive(reply)) == ["Response", "TLSUpgrade"]
    w.client.tls_established()
    w.server.tls_started()
    tls_ok = w.server.send(ev.Response(b"OK"))
    w.server.start_compression("snappy")
    compressed_ok = w.server.send(ev.Response(b"OK"))
    events = w.client.receive(tls_ok + compressed_ok)
    assert events == [ev.Response(b"OK"), ev.CompressionStarted("snappy"), ev.Response(b"OK")]
    assert w.client.pending == [] and w.client.compression == "snappy"


def test_server_requiring_tls_refuses_commands_before_it():
    w = Wire.with_config(tls_required=True)
    w.c2s(ev.Magic())
    [v] = w.raw_c2s(b"SUB t c\n")
    assert v.code == "E_INVALID" and "TLS" in v.text and v.fatal


def test_server_requiring_tls_accepts_commands_after_it():
    w = Wire.with_config(tls_required=True)
    w.c2s(ev.Magic())
    w.c2s(ev.Identify({"feature_negotiation": True, "tls_v1": True}))
    w.server.tls_started()
    assert w.raw_c2s(b"SUB t c\n") == [ev.Sub("t", "c")]


# ------------------------------------------------------- any chunking of a session


def record_session(kind: str | None):
    """Run a whole session through a Wire and return, for each side, the script of what
    it did (sends, server actions, received byte blocks) and the events it saw."""
    w = Wire()
    c, s = w.client, w.server
    client_script: list = []  # ("send", cmd) | ("recv", bytes)
    server_script: list = []  # ("recv", bytes) | ("compress", kind, level) | ("send", frame)
    client_events: list = []
    server_events: list = []

    def c2s(cmd):
        data = c.send(cmd)
        client_script.append(("send", cmd))
        server_script.append(("recv", data))
        server_events.extend(s.receive(data))

    def s2c(*frames):
        data = b""
        for f in frames:
            data += s.send(f, check=False)  # message 3 follows CLS, as a race in nsqd allows
            server_script.append(("send", f))
        client_script.append(("recv", data))
        client_events.extend(c.receive(data))

    c2s(ev.Magic())
    ask = {"feature_negotiation": True, "client_id": "chunky"}
    if kind:
        ask[kind] = True
    c2s(ev.Identify(ask))
    reply = features(**({kind: True} if kind else {}))
    if kind:
        # the JSON response and the compressed OK leave in one write
        data = s.send(reply)
        s.start_compression(kind, 6 if kind == "deflate" else None)
        server_script += [("send", reply), ("compress", kind, 6 if kind == "deflate" else None)]
        data += s.send(ev.Response(b"OK"))
        server_script.append(("send", ev.Response(b"OK")))
        client_script.append(("recv", data))
        client_events.extend(c.receive(data))
    else:
        s2c(reply)
    c2s(ev.Sub("topic", "chan"))
    s2c(ev.Response(b"OK"))
    c2s(ev.Rdy(5))
    s2c(message(0), message(1, b"y" * 500), ev.Response(b"_heartbeat_"), message(2))
    c2s(ev.Nop())
    c2s(ev.Fin(mid(0)))
    c2s(ev.Req(mid(1), 100))
    c2s(ev.Touch(mid(2)))
    c2s(ev.Fin(mid(42)))  # not in flight: the server's non-fatal E_FIN_FAILED
    [violation] = [e for e in server_events if isinstance(e, ev.Violation)]
    s2c(ev.Error(violation.error))
    c2s(ev.Cls())
    s2c(message(3), ev.Response(b"CLOSE_WAIT"))
    return client_script, server_script, client_events, server_events


def glue_and_chunk(script, data_draw):
    """Glue consecutive received blocks, then cut them anywhere."""
    out: list = []
    for step in script:
        if step[0] == "recv" and out and out[-1][0] == "recv":
            out[-1] = ("recv", out[-1][1] + step[1])
        else:
            out.append(step)
    chunked: list = []
    for step in out:
        if step[0] != "recv":
            chunked.append(step)
            continue
        data = step[1]
        cuts = sorted(data_draw(st.lists(st.integers(0, len(data)), max_size=8)))
        bounds = [0, *cuts, len(data)]
        chunked += [("recv", data[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    return chunked


def replay_client(script) -> tuple[list, ClientConnection]:
    c = ClientConnection()
    out: list = []
    for step in script:
        if step[0] == "send":
            c.send(step[1])
        elif step[1]:  # b"" would mean EOF
            out += c.receive(step[1])
    return out, c


def replay_server(script) -> tuple[list, ServerConnection]:
    s = ServerConnection()
    out: list = []
    for step in script:
        if step[0] == "send":
            s.send(step[1], check=False)
        elif step[0] == "compress":
            s.start_compression(step[1], step[2])
        elif step[1]:
            out += s.receive(step[1])
    return out, s


@pytest.mark.parametrize("kind", [None, "snappy", "deflate"])
def test_reference_session_events(kind):
    client_script, server_script, client_events, server_events = record_session(kind)
    expected_client = ["Response"] + (["CompressionStarted", "Response"] if kind else [])
    expected_client += ["Response", "Message", "Message", "Response", "Message", "Error"]
    expected_client += ["Message", "Response"]
    assert kinds(client_events) == expected_client
    assert kinds(server_events) == [
        "Magic", "Identify", "Sub", "Rdy", "Nop", "Fin", "Req", "Touch", "Violation", "Cls",
    ]  # fmt: skip
    # the scripts reproduce the session exactly when replayed in the original blocks
    assert replay_client(client_script)[0] == client_events
    assert replay_server(server_script)[0] == server_events


@pytest.mark.parametrize("kind", [None, "snappy", "deflate"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_chunking_of_a_session_gives_the_same_events(kind, data):
    client_script, server_script, client_events, server_events = record_session(kind)
    got, c = replay_client(glue_and_chunk(client_script, data.draw))
    assert got == client_events
    assert c.state is State.CLOSING and c.compression == kind
    assert set(c.in_flight) == {mid(2), mid(3)}
    got, s = replay_server(glue_and_chunk(server_script, data.draw))
    assert got == server_events
    assert s.state is State.CLOSING and s.compression == kind


@pytest.mark.parametrize("kind", [None, "snappy", "deflate"])
def test_a_session_fed_one_byte_at_a_time(kind):
    client_script, server_script, client_events, server_events = record_session(kind)

    def bytewise(script):
        out = []
        for step in script:
            if step[0] == "recv":
                out += [("recv", step[1][i : i + 1]) for i in range(len(step[1]))]
            else:
                out.append(step)
        return out

    assert replay_client(bytewise(client_script))[0] == client_events
    assert replay_server(bytewise(server_script))[0] == server_events
