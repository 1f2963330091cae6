"""The codec's bulk paths (message runs to a client, FIN runs from one) must give the
events the frame-by-frame path gives. With provenance on, the codec never takes a bulk
path, so the two settings are compared on the same bytes under any chunking."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.nsq import fastpath
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.events import Fin, Message, Nop, Rdy, Req, Response
from nsqviz.nsq.server_connection import ServerConnection
from nsqviz.nsq.states import State

IDS = [b"%016x" % i for i in range(40)]


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


def _strip(events):
    return [
        (
            type(e).__name__,
            getattr(e, "id", None),
            getattr(e, "code", None),
            getattr(e, "offset", None),
        )
        for e in events
    ]


commands = st.lists(
    st.one_of(
        st.sampled_from(IDS).map(Fin),
        st.sampled_from(IDS).map(lambda i: Req(i, 0)),
        st.just(Nop()),
        st.integers(0, 100).map(Rdy),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(commands, st.lists(st.integers(0, 10_000), max_size=8), st.sets(st.sampled_from(IDS)))
def test_server_fin_runs_equal_frame_by_frame(cmds, cuts, flying):
    wire = b"".join(fastpath.encode_command(c) for c in cmds)
    results = []
    for provenance in (True, False):
        server = ServerConnection(provenance=provenance, midstream=True)
        server.state = State.SUBSCRIBED
        server.in_flight = set(flying)
        events = []
        for chunk in _chunks(wire, cuts):
            events += server.receive(chunk)
        results.append((_strip(events), server.in_flight))
    assert results[0] == results[1]
    assert sum(name == "Fin" for name, *_ in results[0][0]) <= len(flying)


frames = st.lists(
    st.one_of(
        st.builds(
            Message,
            st.integers(0, 2**62),
            st.integers(1, 9),
            st.sampled_from(IDS),
            st.binary(max_size=40),
        ),
        st.sampled_from([Response(b"_heartbeat_"), Response(b"OK")]),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(frames, st.lists(st.integers(0, 10_000), max_size=8))
def test_client_message_runs_equal_frame_by_frame(items, cuts):
    wire = b"".join(fastpath.encode_frame(f) for f in items)
    results = []
    for provenance in (True, False):
        client = ClientConnection(provenance=provenance)
        client.state = State.SUBSCRIBED
        events = []
        for chunk in _chunks(wire, cuts):
            events += client.receive(chunk)
        results.append((events, client.in_flight))
    assert results[0] == results[1]
    assert results[0][0] == items


lines = st.lists(st.one_of(
    st.sampled_from([b"FIN %s\n" % i for i in IDS[:3]] + [b"RDY 1\n", b"NOP\n", b"NOP\r\n",
                                                          b"PUB t\n", b"MPUB t\n"]),
    st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"") + b"\n"),
    st.integers(1, 40).map(lambda n: b"X" * n + b"\n"),
), max_size=40)


@settings(max_examples=300, deadline=None)
@given(lines, st.binary(max_size=5).map(lambda b: b.replace(b"\n", b"")),
       st.integers(4, 40))
def test_command_scan_cuts_line_by_line(body, tail, max_line):
    """The framing's scan (runs of lines of one length in bulk) ends where a scan line
    by line would: at each newline, stopping at a line that may carry a body, a line
    longer than the limit, or the incomplete tail."""
    from nsqviz.nsq.commands import BODY_VERBS
    from nsqviz.nsq.framing import CommandFraming
    from nsqviz.nsq.lexer import verb_of

    buf = b"".join(body) + tail
    expected, pos = [], 0
    while (nl := buf.find(b"\n", pos, pos + max_line + 1)) >= 0:
        if verb_of(buf, pos, nl) in BODY_VERBS:
            break
        pos = nl + 1
        expected.append(pos)
    got: list[int] = []
    stop = CommandFraming(expect_magic=False, max_line=max_line).scan(buf, 0, got)
    assert (got, stop) == (expected, pos)


raw_lines = st.lists(st.sampled_from(
    [b"FIN %s\n" % i for i in IDS[:4]]
    + [b"FIN 0123456789ABCDEF\n", b"FIN 0123456789abcdeZ\n", b"RDY 1234567890123456\n",
       b"FIN 0123456789abcdef0\n", b"FIN 0123456789abcde\n", b"NOP\n", b"RDY 3\n"]),
    max_size=60)


@settings(max_examples=200, deadline=None)
@given(raw_lines, st.lists(st.integers(0, 10_000), max_size=8), st.sets(st.sampled_from(IDS)))
def test_server_fin_runs_with_bad_lines_equal_frame_by_frame(lines, cuts, flying):
    """Lines 21 bytes long that are not good FINs (a bad id, another verb) among FINs:
    the bulk path takes the FINs before them and leaves them to the frame-by-frame path."""
    wire = b"".join(lines)
    results = []
    for provenance in (True, False):
        server = ServerConnection(provenance=provenance, midstream=True)
        server.state = State.SUBSCRIBED
        server.in_flight = set(flying) | {b"0123456789ABCDEF"}
        events = []
        for chunk in _chunks(wire, cuts):
            events += server.receive(chunk)
            if server.state is State.CLOSED:
                break
        results.append((_strip(events), server.in_flight))
    assert results[0] == results[1]
