"""The codec as a capture reader sees it: the Observer, provenance, and hostile bytes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.nsq import events as ev
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.observer import Observer
from nsqviz.nsq.server_connection import ServerConnection
from nsqviz.nsq.states import State
from tests.nsq._wire import Wire, features, kinds, message, mid
from tests.stream.test_reassembly import split


def logged_session(kind: str | None) -> tuple[Wire, list, list]:
    """A session between two endpoints; returns the wire (with its byte log), the
    commands the server accepted and the frames the client received."""
    w = Wire()
    server_seen, client_seen = [], []

    def c2s(cmd):
        server_seen.extend(w.c2s(cmd))

    c2s(ev.Magic())
    c2s(ev.Identify({"feature_negotiation": True, **({kind: True} if kind else {})}))
    if kind:
        data = w.server.send(features(**{kind: True}))
        w.server.start_compression(kind, 6 if kind == "deflate" else None)
        client_seen.extend(w.raw_s2c(data + w.server.send(ev.Response(b"OK"))))
    else:
        client_seen.extend(w.s2c(features()))
    c2s(ev.Sub("topic", "chan"))
    client_seen.extend(w.s2c(ev.Response(b"OK")))
    c2s(ev.Rdy(2))
    client_seen.extend(w.s2c(message(0), message(1, b"z" * 100)))
    c2s(ev.Fin(mid(0)))
    c2s(ev.Req(mid(1), 10))
    c2s(ev.Fin(mid(77)))  # not in flight
    [v] = [e for e in server_seen if isinstance(e, ev.Violation)]
    client_seen.extend(w.s2c(ev.Error(v.error)))
    c2s(ev.Cls())
    client_seen.extend(w.s2c(ev.Response(b"CLOSE_WAIT")))
    return w, server_seen, client_seen


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from([None, "snappy", "deflate"]), provenance=st.booleans(), data=st.data())
def test_observer_sees_what_both_endpoints_saw_at_any_chunking(kind, provenance, data):
    w, server_seen, client_seen = logged_session(kind)
    obs = Observer(provenance=provenance)
    commands, frames = [], []
    for direction, block in w.log:
        cuts = data.draw(st.lists(st.integers(0, len(block)), max_size=5))
        for chunk in split(block, cuts):
            if not chunk:
                continue
            if direction == "c2s":
                commands += obs.c2s(chunk)
            else:
                frames += obs.s2c(chunk)
    # the FIN of an id not in flight is a FIN to an observer, followed by its verdict --
    # nsqd's very answer, as the server endpoint gave it
    expected: list[ev.Event] = []
    for e in server_seen:
        if isinstance(e, ev.Violation):
            expected += [ev.Fin(mid(77)), ev.Refused(e.code, e.text, e.fatal, ev.Fin(mid(77)))]
        else:
            expected.append(e)
    assert commands == expected
    assert frames == client_seen
    if provenance:  # each event knows the bytes it was decoded from
        assert all(e.raw is not None and e.raw.data for e in commands + frames if hasattr(e, "raw"))
    assert obs.client.compression == obs.server.compression == kind
    assert obs.server.state is State.CLOSING


def test_observer_stops_decoding_at_tls():
    w = Wire()
    obs = Observer()
    assert obs.c2s(w.client.send(ev.Magic())) == [ev.Magic()]
    ident = ev.Identify({"feature_negotiation": True, "tls_v1": True})
    assert obs.c2s(w.client.send(ident)) == [ident]
    reply = w.server.send(features(tls_v1=True))
    assert kinds(obs.s2c(reply + b"\x16\x03\x01")) == ["Response", "TLSUpgrade"]
    assert obs.encrypted
    assert obs.c2s(b"\x16\x03\x01\x02\x00encrypted") == []
    assert obs.s2c(b"\x17\x03\x03 more") == []


def test_provenance_tiles_every_event_over_the_segments_it_came_from():
    s = ServerConnection()
    frames = [
        s.send(ev.Response(b"OK")),
        s.send(message(1), check=False),
        s.send(ev.Response(b"_heartbeat_")),
        s.send(message(2, b"q" * 70), check=False),
    ]
    stream = b"".join(frames)
    chunks = split(stream, [3, 3, 25, 26, 60, 100])
    c = ClientConnection(provenance=True)
    events = []
    for seg, chunk in enumerate(chunks):
        events += c.receive(chunk, segment=1000 + seg) if chunk else []
    assert kinds(events) == ["Response", "Message", "Response", "Message"]
    starts, pos = {}, 0
    for seg, chunk in enumerate(chunks):
        starts[1000 + seg] = pos
        pos += len(chunk)
    offset = 0
    for event, wire in zip(events, frames, strict=True):
        raw = event.raw
        assert raw.data == wire and raw.offset == offset
        at = offset
        for src in raw.sources:
            assert starts[src.segment] + src.start == at
            at += src.end - src.start
        assert at == offset + len(wire)
        offset += len(wire)


def test_events_are_equal_with_or_without_provenance():
    s = ServerConnection()
    stream = s.send(message(1), check=False) + s.send(ev.Response(b"OK"))
    with_raw = ClientConnection(provenance=True).receive(stream)
    without = ClientConnection().receive(stream)
    assert with_raw == without  # raw is excluded from equality
    assert with_raw[0].raw is not None and without[0].raw is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=6))
def test_hostile_bytes_never_crash_the_client(chunks):
    c = ClientConnection()
    c.send(ev.Magic())
    seen = []
    for chunk in chunks:
        if chunk:
            seen += c.receive(chunk)
    for e in seen:
        assert isinstance(e, ev.Response | ev.Error | ev.Message | ev.Violation)
    fatal = [e for e in seen if isinstance(e, ev.Violation) and e.fatal]
    assert len(fatal) <= 1  # nothing is read after a fatal violation
    if fatal:
        assert seen[-1] is fatal[0] and c.state is State.CLOSED
    end = c.receive(b"")
    assert end[-1] == ev.ConnectionClosed() and c.state is State.CLOSED


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=6), st.booleans())
def test_hostile_bytes_never_crash_the_server(chunks, magic_first):
    s = ServerConnection()
    seen = []
    if magic_first:
        seen += s.receive(b"  V2")
    for chunk in chunks:
        if chunk:
            seen += s.receive(chunk)
    fatal = [e for e in seen if isinstance(e, ev.Violation) and e.fatal]
    assert len(fatal) <= 1  # nothing is read after a fatal violation
    if fatal:
        assert seen[-1] is fatal[0] and s.state is State.CLOSED
        assert fatal[0].offset is not None and fatal[0].code
    end = s.receive(b"")
    assert end[-1] == ev.ConnectionClosed()


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 9), st.integers(0, 15), st.lists(st.integers(0, 3000), max_size=5))
def test_a_bad_message_inside_a_run_is_refused_alike_with_or_without_provenance(bad, digit, cuts):
    """The client's bulk path (provenance off) and its frame-by-frame path (on) agree on
    where a run of messages breaks: the frames before it, then one fatal violation."""
    s = ServerConnection()
    frames = [bytearray(s.send(message(i, b"m" * i), check=False)) for i in range(10)]
    frames[bad][18 + digit] = ord("g")  # one id digit that is not hex
    stream = b"".join(frames)
    results = []
    for provenance in (False, True):
        c = ClientConnection(provenance=provenance)
        out = []
        for chunk in split(stream, cuts):
            if chunk:
                out += c.receive(chunk)
        results.append(out)
        assert out[:bad] == [message(i, b"m" * i) for i in range(bad)]
        [v] = out[bad:]
        assert isinstance(v, ev.Violation) and v.fatal
        assert v.offset == sum(map(len, frames[:bad])) + 18
        assert c.state is State.CLOSED and set(c.in_flight) == {mid(i) for i in range(bad)}
    assert results[0] == results[1]
