"""A step after a cleanup cell: one line that says the session is closed, no traceback."""

from __future__ import annotations

import pytest

from nsqviz.clients.session import Session, SessionClosed
from nsqviz.clients.session.tubemq import NotHeld, TubeSession
from nsqviz.servers.tubemq import EmbeddedSim
from nsqviz.widgets.stepper import Stepper


def test_an_nsq_step_after_close_says_the_session_is_closed():
    s = Session()
    c = s.connect("consumer")
    c.magic()
    s.close()
    for attempt in (c.nop, lambda: s.connect("again")):
        with pytest.raises(SessionClosed, match=r"this session is closed .* run the code that"):
            attempt()
    with pytest.raises(SessionClosed) as info:
        c.nop()
    assert info.value._render_traceback_() == [f"SessionClosed: {info.value}"]


def test_the_stepper_on_a_closed_session_says_so():
    s = Session()
    st = Stepper(s)
    st.do("magic")
    s.close()
    assert st.do("NOP") is None
    assert st.status.startswith("⚠ this session is closed")


def test_the_steppers_buttons_are_disabled_once_its_session_closes():
    pytest.importorskip("ipywidgets", reason="pip install ipywidgets (the notebook extra)")
    s = Session()
    st = Stepper(s)
    st.widget()
    buttons = st._ui["buttons"] if st._ui else []
    assert buttons and not any(b.disabled for b in buttons)
    s.close()  # the cleanup cell: no click needed for the buttons to change
    assert all(b.disabled for b in buttons)
    assert all(b.tooltip.startswith("this session is closed") for b in buttons)


def test_a_tubemq_step_after_stop_or_close_says_so():
    sim = EmbeddedSim(topics=("demo",)).start()
    try:
        session = TubeSession(sim=sim)
        a = session.consumer("A", client="consumer-A", group="g")
        a.register()
        with pytest.raises(NotHeld, match=r"A does not hold 1:demo:1 \(it holds: none\)"):
            a.fetch("1:demo:1")
    finally:
        sim.stop()
    with pytest.raises(SessionClosed, match=r"simulator is closed \(its stop\(\) ran\)"):
        a.heartbeat()
    with pytest.raises(SessionClosed):
        session.master_history()
    session.close()
    with pytest.raises(SessionClosed, match=r"this session is closed \(its close\(\) ran\)"):
        session.producer("p").register()
