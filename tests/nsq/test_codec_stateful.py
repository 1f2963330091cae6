"""Model-based test: random sessions where the client and the server must agree.

A hypothesis state machine tries commands in any order. Whatever the client's codec
lets through (``send`` does not raise) the server's codec must accept without a fatal
error, and both sides must then track the same state: connection state, subscription,
RDY, messages in flight, nothing left awaiting an answer. What the client refuses
(``LocalProtocolError``) must leave its state untouched.

AUTH is left out on purpose: without feature negotiation a client cannot know whether
the server has auth enabled, so there the two may rightly disagree (tested elsewhere).
"""

from __future__ import annotations

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from nsqviz.nsq import events as ev
from nsqviz.nsq.states import State
from nsqviz.sansio import LocalProtocolError
from tests.nsq._vectors import names
from tests.nsq._wire import Wire, features, message, mid

SMALL_IDS = st.integers(0, 40).map(mid)

commands = st.one_of(
    st.just(ev.Magic()),
    st.builds(
        lambda neg, cid, comp: ev.Identify(
            {"feature_negotiation": neg, "client_id": cid, **({comp: True} if comp else {})}
        ),
        st.booleans(),
        st.text("abc", max_size=3),
        st.sampled_from([None, None, "snappy", "deflate"]),
    ),
    st.builds(ev.Sub, names(), names()),
    st.builds(ev.Pub, names(), st.binary(min_size=1, max_size=20)),
    st.builds(
        ev.Mpub,
        names(),
        st.lists(st.binary(min_size=1, max_size=8), min_size=1, max_size=3).map(tuple),
    ),
    st.builds(ev.Dpub, names(), st.integers(0, 3_600_000), st.binary(min_size=1, max_size=8)),
    st.builds(ev.Rdy, st.integers(0, 3000)),
    st.builds(ev.Fin, SMALL_IDS),
    st.builds(ev.Req, SMALL_IDS, st.integers(0, 1000)),
    st.builds(ev.Touch, SMALL_IDS),
    st.just(ev.Cls()),
    st.just(ev.Nop()),
)

ANSWERED = (ev.Identify, ev.Sub, ev.Pub, ev.Mpub, ev.Dpub, ev.Cls)


class Session(RuleBasedStateMachine):
    @initialize()
    def connect(self):
        self.w = Wire()
        self.next_id = 0

    @rule(cmd=commands)
    def client_tries(self, cmd):
        c, s = self.w.client, self.w.server
        before = c.snapshot()
        label = f"{type(cmd).__name__} in {c.state.value}"
        try:
            data = c.send(cmd)
        except LocalProtocolError:
            assert c.snapshot() == before
            event(f"refused {label}")
            return
        event(f"sent {label}")
        events = s.receive(data)
        assert not any(isinstance(e, ev.Violation) and e.fatal for e in events), (cmd, events)
        [got] = events
        if isinstance(got, ev.Violation):
            # only FIN/REQ/TOUCH of an id not in flight may be refused, and not fatally
            assert type(cmd) in (ev.Fin, ev.Req, ev.Touch)
            assert cmd.id not in s.in_flight
            [err] = self.w.s2c(ev.Error(got.error))
            assert not err.fatal
            return
        assert got == cmd
        if isinstance(cmd, ev.Identify):
            self.answer_identify(cmd.data)
        elif isinstance(cmd, ev.Cls):
            assert self.w.s2c(ev.Response(b"CLOSE_WAIT")) == [ev.Response(b"CLOSE_WAIT")]
        elif isinstance(cmd, ANSWERED):
            assert self.w.s2c(ev.Response(b"OK")) == [ev.Response(b"OK")]

    def answer_identify(self, asked: dict) -> None:
        """As nsqd: the features (or OK); if compression was negotiated, switch and send
        the extra compressed OK in the same write."""
        s = self.w.server
        if not asked.get("feature_negotiation"):
            assert self.w.s2c(ev.Response(b"OK")) == [ev.Response(b"OK")]
            return
        kind = "snappy" if asked.get("snappy") else "deflate" if asked.get("deflate") else None
        if kind is None:
            assert self.w.s2c(features()) == [features()]
            return
        level = 6 if kind == "deflate" else None
        reply = features(**{kind: True}, **({"deflate_level": 6} if level else {}))
        data = s.send(reply)
        s.start_compression(kind, level)
        data += s.send(ev.Response(b"OK"))
        got = self.w.raw_s2c(data)
        assert got == [reply, ev.CompressionStarted(kind, level), ev.Response(b"OK")]
        event(f"compressed with {kind}")

    # Rules that move the session along, so that random tries meet every state.

    @precondition(lambda self: self.w.client.state is State.INIT)
    @rule()
    def magic(self):
        self.client_tries(ev.Magic())

    @precondition(
        lambda self: self.w.client.state is State.CONNECTED and self.w.client.identify is None
    )
    @rule(comp=st.sampled_from([None, "snappy", "deflate"]))
    def identify(self, comp):
        self.client_tries(
            ev.Identify({"feature_negotiation": True, **({comp: True} if comp else {})})
        )

    @precondition(lambda self: self.w.client.subscription is None)
    @rule(topic=names(), channel=names())
    def subscribe(self, topic, channel):
        self.client_tries(ev.Sub(topic, channel))

    @precondition(lambda self: self.w.client.subscription is not None)
    @rule(count=st.integers(1, 20))
    def ready(self, count):
        self.client_tries(ev.Rdy(count))

    @precondition(lambda self: self.w.client.in_flight)
    @rule(data=st.data(), verb=st.sampled_from([ev.Fin, ev.Touch, ev.Req]))
    def answer_a_message(self, data, verb):
        mid_ = data.draw(st.sampled_from(sorted(self.w.client.in_flight)))
        self.client_tries(verb(mid_, 0) if verb is ev.Req else verb(mid_))

    @precondition(
        lambda self: (
            self.w.server.state is State.SUBSCRIBED
            and len(self.w.server.in_flight) < self.w.server.rdy
        )
    )
    @rule(body=st.binary(max_size=30))
    def server_delivers(self, body):
        m = message(self.next_id, body)
        self.next_id += 1
        assert self.w.s2c(m) == [m]

    @precondition(lambda self: self.w.server.state is not State.INIT)
    @rule()
    def heartbeat(self):
        [hb] = self.w.s2c(ev.Response(b"_heartbeat_"))
        assert hb.is_heartbeat

    @invariant()
    def both_sides_agree(self):
        c, s = self.w.client, self.w.server
        assert c.state is s.state
        assert c.subscription == s.subscription
        assert set(c.in_flight) == s.in_flight
        assert c.pending == []
        assert c.compression == s.compression
        if s.state is State.SUBSCRIBED:
            assert c.rdy == s.rdy


TestSession = Session.TestCase
TestSession.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
