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
