"""The stepping session against the real embedded broker: bytes, events, state, saving."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest

from nsqviz.clients.session import Session
from nsqviz.nsq import events as ev
from nsqviz.nsq import grammar as g
from nsqviz.sansio import LocalProtocolError
from nsqviz.servers.authd import AuthService, Grant, self_signed_certificate
from nsqviz.widgets.steps import step_html
from nsqviz.widgets.style import _STYLE
from tests.explorer._late import taken_back


@pytest.fixture
def session(broker):
    with Session(broker.tcp_address, grace=0.05) as s:
        yield s


def _subscribed(session, *, topic="orders", channel="audit", **identify):
    c = session.connect("consumer")
    c.magic()
    c.identify(feature_negotiation=True, **identify)
    c.sub(topic, channel)
    return c


def test_each_step_records_bytes_both_ways_and_state(session):
    c = session.connect("consumer")
    step = c.magic()
    assert step.sent == b"  V2" and step.events == []
    assert (step.before["state"], step.after["state"]) == ("INIT", "CONNECTED")

    step = c.identify(feature_negotiation=True, client_id="t1")
    assert g.parse_command(step.sent).command.body.value == {"feature_negotiation": True,
                                                             "client_id": "t1"}
    (resp,) = step.frames
    assert isinstance(resp, ev.Response) and resp.json()["max_rdy_count"] == 2500
    # the bytes recorded are the bytes the frame was decoded from
    assert b"".join(d for _, d in step.received) == resp.raw.data
    assert step.after["features"]["version"] and not step.before["identified"]

    step = c.sub("orders", "audit")
    assert step.sent == b"SUB orders audit\n"
    assert [f.data for f in step.frames] == [b"OK"]
    assert step.after["state"] == "SUBSCRIBED"
    assert step.elapsed > 0 and step.t > 0


def test_full_consumer_lifecycle_with_publisher(session):
    c = _subscribed(session, heartbeat_interval=1000)
    p = session.connect("publisher")
    p.magic()
    assert [f.data for f in p.pub("orders", "hello").frames] == [b"OK"]

    c.rdy(1)
    (first,) = c.wait()
    assert first.body == b"hello" and first.attempts == 1
    assert c.in_flight == [first.id]

    assert c.touch().events == []  # no answer when it works
    c.req(first.id, 0)
    (again,) = c.wait()
    assert (again.id, again.attempts) == (first.id, 2)
    c.fin(again.id)
    assert c.in_flight == []
    assert [f.data for f in p.mpub("orders", ["m1", "m2"]).frames] == [b"OK"]
    c.rdy(2)
    assert sorted(m.body for m in c.wait(count=2)) == [b"m1", b"m2"]
    assert len(c.in_flight) == 2

    beats = c.wait(lambda e: isinstance(e, ev.Response) and e.is_heartbeat, timeout=5)
    assert beats and beats[0].data == b"_heartbeat_"
    assert c.nop().events == []

    step = c.cls()
    assert [f.data for f in step.frames] == [b"CLOSE_WAIT"]
    assert step.after["state"] == "CLOSING"
    arrivals = session.arrivals("consumer")
    assert any(isinstance(e, ev.Message) for a in arrivals for e in a.events)
    assert all(a.t > 0 for a in arrivals)


def test_codec_refuses_misuse_and_check_false_shows_nsqd_answer(session):
    c = session.connect("consumer")
    with pytest.raises(LocalProtocolError):
        c.sub("orders", "audit")
    refused = session.steps("consumer")[-1]
    assert refused.refused and refused.sent == b""
    c.magic()
    c.sub("orders", "audit")
    step = c.sub("orders", "audit", check=False)
    (err,) = [e for e in step.events if isinstance(e, ev.Error)]
    assert err.code == "E_INVALID"
    c.wait(lambda e: isinstance(e, ev.ConnectionClosed), timeout=5)
    assert c.closed and c.state == "CLOSED"


@pytest.mark.parametrize("kind", ["snappy", "deflate"])
def test_compression_negotiated(session, kind):
    c = session.connect("consumer")
    c.magic()
    step = c.identify(feature_negotiation=True, **{kind: True})
    started = [e for e in step.events if isinstance(e, ev.CompressionStarted)]
    assert started and started[0].kind == kind
    assert [f.data for f in step.frames][-1] == b"OK"  # the compressed OK
    step = c.sub("orders", "audit")
    assert step.wire_out != step.sent  # compressed on the wire
    assert [f.data for f in step.frames] == [b"OK"]


def test_transcript_json(session, tmp_path):
    c = _subscribed(session)
    c.rdy(0)
    path = tmp_path / "t.json"
    session.save_json(path)
    doc = json.loads(path.read_text())
    assert doc["format"] == "nsqviz-session/2"
    kinds = [e["command"]["type"] for e in doc["entries"] if e["kind"] == "step"]
    assert kinds == ["Magic", "Identify", "Sub", "Rdy"]
    sub = doc["entries"][2]
    assert bytes.fromhex(sub["sent"]) == b"SUB orders audit\n"
    answer = sub["events"][0]
    assert answer["type"] == "Response" and bytes.fromhex(answer["data"]) == b"OK"
    assert sub["before"]["state"] == "CONNECTED" and sub["after"]["state"] == "SUBSCRIBED"


def test_pcap_carries_the_exact_bytes(session, tmp_path):
    """Read back with the project's own pcap reader and, where installed, with tshark."""
    c = _subscribed(session)
    p = session.connect("publisher")
    p.magic()
    p.pub("orders", "x" * 10)
    c.rdy(1)
    c.wait()
    path = tmp_path / "s.pcap"
    assert session.save_pcap(path) > 10
    sent = b"".join(s.wire_out for s in session.steps("consumer"))
    got = b"".join(d for s in session.steps("consumer") for _, d in s.received)
    got += b"".join(a.received for a in session.arrivals("consumer"))

    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.layers import Segment, decode_record

    port = c.local[1]
    c2s, s2c = b"", b""
    for rec in read_capture(path):
        seg = decode_record(rec) if isinstance(rec, Record) else None
        if not isinstance(seg, Segment) or not seg.payload:
            continue
        if seg.sport == port:
            c2s += seg.payload
        elif seg.dport == port:
            s2c += seg.payload
    assert (c2s, s2c) == (sent, got)

    tshark = shutil.which("tshark")
    if tshark is None:
        pytest.skip("tshark not installed: the differential check against Wireshark is skipped")
    out = subprocess.run(
        [tshark, "-r", str(path), "-Y", f"tcp.srcport=={port} && tcp.len>0", "-T", "fields",
         "-e", "tcp.payload"], capture_output=True, text=True, check=True,
    ).stdout
    assert bytes.fromhex("".join(out.split())) == sent


def test_auth_against_a_real_http_auth_service(tmp_path):
    from nsqviz.servers.nsqd import EmbeddedBroker

    with AuthService({"s3cret": Grant("alice", topic="^orders$")}) as auth, EmbeddedBroker(
        data_path=str(tmp_path / "d"), auth_http_address=[auth.address]
    ) as broker, Session(broker.tcp_address, grace=0.05) as s:
        c = s.connect("consumer")
        c.magic()
        step = c.identify(feature_negotiation=True)
        assert step.after["auth_required"] is True
        with pytest.raises(LocalProtocolError):
            c.pub("orders", "too early")
        step = c.auth("s3cret")
        assert step.frames[0].json()["identity"] == "alice"
        assert step.after["authenticated"] is True
        assert [f.data for f in c.pub("orders", "ok").frames] == [b"OK"]
        assert auth.requests[0]["secret"] == "s3cret"

        bad = s.connect("publisher")
        bad.magic()
        bad.identify(feature_negotiation=True)
        step = bad.auth("wrong")
        assert [e.code for e in step.events if isinstance(e, ev.Error)] == ["E_AUTH_FAILED"]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl command not installed")
def test_tls_upgrade(tmp_path):
    from nsqviz.servers.nsqd import EmbeddedBroker

    cert, key = self_signed_certificate(tmp_path)
    with EmbeddedBroker(data_path=str(tmp_path / "d"), tls_cert=str(cert),
                        tls_key=str(key)) as broker, Session(broker.tcp_address) as s:
        c = s.connect("consumer")
        c.magic()
        step = c.identify(feature_negotiation=True, tls_v1=True)
        assert any(isinstance(e, ev.TLSUpgrade) for e in step.events)
        assert [f.data for f in step.frames][-1] == b"OK"  # the OK inside TLS
        assert step.after["tls"] is True
        assert [f.data for f in c.sub("orders", "audit").frames] == [b"OK"]


def test_step_displays_without_times_or_ports_in_text(session):
    c = session.connect("consumer")
    c.magic()
    step = c.sub("orders", "audit", check=False)  # SUB before IDENTIFY is fine for nsqd
    assert repr(step) == "<Step consumer: SUB orders audit -> OK; CONNECTED -> SUBSCRIBED>"
    html = step_html(step)
    assert "nsqviz-hex" in html and "state: CONNECTED → <b>SUBSCRIBED</b>" in html
    assert html.count('class="nsqviz nsqviz-hex"') == 2  # the command and the OK frame


def test_sending_on_a_connection_nsqd_closed_is_reported(session):
    c = session.connect("consumer")
    c.magic()
    c.rdy(1, check=False)  # RDY before SUB: nsqd answers E_INVALID and closes
    c.wait(lambda e: isinstance(e, ev.ConnectionClosed), timeout=5)
    with pytest.raises(LocalProtocolError, match="closed"):
        c.nop()
    with pytest.raises(OSError):
        for _ in range(3):  # the first write after a close may still be accepted locally
            c.nop(check=False)
    assert session.steps("consumer")[-1].refused.startswith("socket error")


def test_saved_pcap_replays_to_the_same_events(session, tmp_path):
    """The pcap the session writes decodes, through the capture pipeline, to what it saw."""
    from nsqviz.capture.decode import decode_capture

    c = _subscribed(session)
    p = session.connect("publisher")
    p.magic()
    p.mpub("orders", ["a", "b"])
    c.rdy(2)
    got = c.wait(count=2)
    c.fin(got[0].id)
    c.req(got[1].id, 0)
    path = tmp_path / "replay.pcap"
    session.save_pcap(path)

    port = str(c.local[1])
    replayed = [r.event for r in decode_capture(path, ports={"nsq": [session.address[1]]})
                if r.flow and port in r.flow.split("->")[0] and r.kind in ("command", "frame")]
    seen = []
    for entry in session.entries:
        if entry.connection != "consumer":
            continue
        if getattr(entry, "command", None) is not None:
            seen.append(entry.command)
        seen.extend(e for e in entry.events if isinstance(e, ev.Response | ev.Error | ev.Message))
    assert len(seen) >= 10  # magic, IDENTIFY, JSON, SUB, OK, RDY, 2 MSG, FIN, REQ
    assert replayed == seen  # events compare by value (their raw provenance aside)


def test_the_session_imports_no_view():
    """Views depend on the session, never the other way round (no import cycle)."""
    code = ("import sys, nsqviz.clients.session; "
            "print(sorted(m for m in sys.modules if m.startswith('nsqviz.widgets')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_ipython_shows_a_step_as_the_widgets_card(session):
    from IPython.core.interactiveshell import InteractiveShell

    import nsqviz

    shell = InteractiveShell.instance()
    try:
        nsqviz._show_steps_as_html()
        c = session.connect("consumer")
        step = c.magic()
        shown, _ = shell.display_formatter.format(step)
        # the card itself; its <style> blocks are shown once per process (style.once), so
        # whether they ride along depends on what this process displayed before
        assert _STYLE.sub("", shown["text/html"]).strip() == _STYLE.sub("", step_html(step)).strip()
        assert shown["text/plain"] == repr(step)
    finally:
        InteractiveShell.clear_instance()


def _touch_and_fin_too_late(session, c, http_address, msg_timeout):
    """Publish a message to topic ``late``, take it on ``c`` (subscribed to it), hold it
    until the broker took it back, then TOUCH and FIN it: the publisher and both steps."""
    p = session.connect("pub")
    p.magic()
    p.pub("late", b"slow")
    c.rdy(1)
    slow = c.wait()[0]
    c.rdy(0)
    taken_back(session, c, slow, http_address, "late", msg_timeout)
    return p, c.touch(slow.id, check=False), c.fin(slow.id, check=False)


def test_a_late_touch_or_fin_waits_for_the_refusal_nsqd_is_known_to_send(broker):
    """A FIN or TOUCH after msg_timeout ran out is refused (E_TOUCH_FAILED, E_FIN_FAILED)
    once nsqd's queue scan has taken the message back -- maybe later than the grace period
    of a command that succeeds silently. The step waits for that refusal, so it is this
    step's answer and not the next one's; a FIN in time still waits only the grace."""
    with Session(broker.tcp_address, grace=0.0) as session:
        c = _subscribed(session, topic="late", channel="c", msg_timeout=1000)
        p, touch, fin = _touch_and_fin_too_late(session, c, broker.http_address, 1.0)
        assert [e.code for e in touch.events if isinstance(e, ev.Error)] == ["E_TOUCH_FAILED"]
        assert [e.code for e in fin.events if isinstance(e, ev.Error)] == ["E_FIN_FAILED"]
        assert c.state == "SUBSCRIBED"
        quick = session.connect("quick")
        quick.magic()
        quick.identify(feature_negotiation=True, msg_timeout=1000)
        quick.sub("quick", "c")
        p.pub("quick", b"done at once")
        quick.rdy(1)
        on_time = quick.fin(quick.wait()[0].id)
        assert not on_time.events and on_time.elapsed < 0.5


def test_a_late_touch_waits_for_the_refusal_past_the_servers_own_msg_timeout():
    """Without IDENTIFY's msg_timeout the server's --msg-timeout applies: a session that
    started the server knows it, and a TOUCH and FIN past it wait for their refusals
    (notebook 04's lab 6 on a loaded machine: the real nsqd's E_TOUCH_FAILED came after
    the 0.15-s grace and was shown as the FIN's answer). Grace 0 here: any refusal not
    waited for would be missed."""
    with Session(nsqd="embedded", msg_timeout=0.5, grace=0.0) as session:
        assert session.msg_timeout == 0.5
        c = session.connect("late")
        c.magic()
        c.sub("late", "c")
        _, touch, fin = _touch_and_fin_too_late(session, c, session.broker.http_address, 0.5)
        assert [e.code for e in touch.events if isinstance(e, ev.Error)] == ["E_TOUCH_FAILED"]
        assert [e.code for e in fin.events if isinstance(e, ev.Error)] == ["E_FIN_FAILED"]
        assert "IDENTIFY negotiated none here" in touch.why


def test_a_session_knows_the_msg_timeout_only_of_a_server_it_started(broker):
    with Session(broker.tcp_address) as at_address:
        assert at_address.msg_timeout is None
    with Session(nsqd="embedded", msg_timeout=1.5) as own:
        assert own.msg_timeout == 1.5


def test_a_touch_within_the_msg_timeout_identify_asked_for_waits_only_the_grace():
    """IDENTIFY without feature_negotiation gets a plain OK, yet nsqd applies the
    msg_timeout it asked for: a TOUCH past the server's --msg-timeout (1 s) but within
    the asked 3 s is no refusal to wait for (notebook 04's lab 5: waiting 5 s for one let
    the message time out on a loaded machine). Were it waited for, the step would take
    the session's 20-s timeout."""
    with Session(nsqd="embedded", msg_timeout=1.0, timeout=20.0, grace=0.0) as session:
        c = session.connect("toucher")
        c.magic()
        c.identify(msg_timeout=3000)
        c.sub("asked", "c")
        p = session.connect("pub")
        p.magic()
        p.pub("asked", b"long job")
        c.rdy(1)
        (m,) = c.wait()
        time.sleep(1.2)  # held past the server's msg_timeout, within the asked one
        touch = c.touch(m.id)
        assert touch.events == [] and touch.elapsed < 10
        assert c.fin(m.id).events == []
