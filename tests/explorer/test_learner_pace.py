"""The session and the stepper at a learner's pace: heartbeats answered, closes said aloud."""

from __future__ import annotations

import time

from nsqviz.clients.session.nsq import Session
from nsqviz.widgets.stepper import Stepper
from nsqviz.widgets.steps import sequence
from tests.explorer._late import taken_back


def test_session_answers_heartbeats_and_survives_a_pause():
    with Session() as s:
        c = s.connect("consumer")
        c.magic()
        c.identify(heartbeat_interval=1000)
        time.sleep(2.6)  # past nsqd's read deadline of two intervals
        assert not c.closed and c.state == "CONNECTED"
        answers = [st for st in s.steps("consumer") if st.note == "answers _heartbeat_"]
        assert answers and all(type(st.command).__name__ == "Nop" for st in answers)
        assert "NOP (answers _heartbeat_)" in sequence(s).text()
        assert c.nop().events == []


def test_sequence_times_count_from_the_first_command():
    with Session() as s:
        time.sleep(0.3)
        s.connect("consumer").magic()
        assert sequence(s).arrows[0].t == "0.0 ms"


def test_stepper_says_loudly_that_it_reopened_a_closed_connection():
    with Session() as s:
        st = Stepper(s)
        st.do("magic")
        st.do("RDY", rdy=1, check=False)  # RDY before SUB: E_INVALID, fatal
        deadline = time.monotonic() + 5
        while not s.connections["consumer"].closed and time.monotonic() < deadline:
            time.sleep(0.02)
        assert s.connections["consumer"].closed
        st.do("NOP")
        assert st.status.startswith("⚠ connection 'consumer' had been closed (nsqd answered E_")
        assert "sent the magic" in st.status and "NOP → no answer" in st.status
        assert s.connections["consumer"].state == "CONNECTED"
        st.do("NOP")
        assert not st.status.startswith("⚠")


def test_a_fin_after_msg_timeout_says_why():
    with Session(msg_timeout=1.0) as s:  # seconds, as nsqd's --msg-timeout=1s
        c = s.connect("consumer")
        c.magic()
        c.identify(feature_negotiation=True, msg_timeout=1000)
        c.sub("pace-late", "learner")
        c.rdy(1)
        pub = s.connect("publisher")
        pub.magic()
        pub.pub("pace-late", "read slowly")
        (m,) = c.wait()
        c.rdy(0)  # nothing comes back to this connection: the id stays taken back
        taken_back(s, c, m, s.broker.http_address, "pace-late", 1.0)
        step = c.fin(m.id)
        assert [e.code for e in step.frames] == ["E_FIN_FAILED"]
        assert step.why.startswith("its msg_timeout (1 s) ran out before this command")
        assert "why: its msg_timeout (1 s) ran out" in repr(step)
        assert "never delivered" in c.fin("00000000000000ff").why
        assert "already finished" in c.fin(m.id).why


def test_without_a_negotiated_msg_timeout_the_why_says_so():
    with Session(msg_timeout=1.0) as s:
        c = s.connect("consumer")
        c.magic()
        c.sub("pace-quiet", "learner")
        c.rdy(1)
        pub = s.connect("publisher")
        pub.magic()
        pub.pub("pace-quiet", "read slowly")
        (m,) = c.wait()
        c.rdy(0)
        taken_back(s, c, m, s.broker.http_address, "pace-quiet", 1.0)
        why = c.touch(m.id).why
        assert why.startswith("held for ") and "past the server's msg_timeout" in why, why
