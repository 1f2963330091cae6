"""The sans-IO codec driven without sockets: a client and a server talking in memory.

In the style of h11's tests: every step checks the events each side sees, and the
states both sides track, for a full session and for each kind of misuse.
"""

from __future__ import annotations

import json

import pytest

from nsqviz.nsq import events as ev
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.server_connection import ServerConnection
from nsqviz.nsq.states import State
from nsqviz.sansio import LocalProtocolError, ProtocolError
from tests.nsq._wire import Wire, features, kinds, message, mid, subscribed

# ---------------------------------------------------------------- a full session


def test_full_session_with_auth():
    w = Wire.with_config(auth_enabled=True)
    c, s = w.client, w.server
    assert c.state is s.state is State.INIT

    assert w.c2s(ev.Magic()) == [ev.Magic()]
    assert c.state is s.state is State.CONNECTED

    identify = {"client_id": "c1", "hostname": "h", "feature_negotiation": True}
    assert w.c2s(ev.Identify(identify)) == [ev.Identify(identify)]
    assert s.identify == identify
    reply = features(max_rdy_count=100, auth_required=True)
    assert w.s2c(reply) == [reply]
    assert c.features["max_rdy_count"] == 100 and c.max_rdy_count == 100
    assert c.auth_required and not c.authenticated

    # the server asked for AUTH: the client may not SUB or PUB before it
    for cmd in (ev.Sub("t", "c"), ev.Pub("t", b"x")):
        with pytest.raises(LocalProtocolError, match="AUTH"):
            c.send(cmd)

    assert w.c2s(ev.Auth(b"s3cret")) == [ev.Auth(b"s3cret")]
    s.authorized()  # the broker asked its auth service
    auth = b'{"identity":"me","identity_url":"https://x","permission_count":1}'
    assert w.s2c(ev.Response(auth)) == [ev.Response(auth)]
    assert c.authenticated and c.auth_info["identity"] == "me"

    assert w.c2s(ev.Sub("topic", "chan#ephemeral")) == [ev.Sub("topic", "chan#ephemeral")]
    assert s.state is State.SUBSCRIBED
    assert c.state is State.SUBSCRIBED  # on sending: a SUB that fails closes the connection
    assert w.s2c(ev.Response(b"OK")) == [ev.Response(b"OK")]
    assert c.state is State.SUBSCRIBED
    assert c.subscription == s.subscription == ("topic", "chan#ephemeral")

    assert w.c2s(ev.Rdy(3)) == [ev.Rdy(3)]
    assert c.rdy == s.rdy == 3

    msgs = [message(i) for i in range(3)]
    assert w.s2c(*msgs) == msgs
    assert set(c.in_flight) == set(s.in_flight) == {mid(0), mid(1), mid(2)}

    assert w.c2s(ev.Fin(mid(0))) == [ev.Fin(mid(0))]
    assert w.c2s(ev.Req(mid(1), 5000)) == [ev.Req(mid(1), 5000)]
    assert w.c2s(ev.Touch(mid(2))) == [ev.Touch(mid(2))]
    assert set(c.in_flight) == set(s.in_flight) == {mid(2)}  # TOUCH keeps it in flight

    # heartbeat: not an answer to anything; NOP answers it and gets no answer itself
    [hb] = w.s2c(ev.Response(b"_heartbeat_"))
    assert hb.is_heartbeat and c.pending == []
    assert w.c2s(ev.Nop()) == [ev.Nop()]

    assert w.c2s(ev.Cls()) == [ev.Cls()]
    assert c.state is s.state is State.CLOSING
    assert s.rdy == 0
    assert w.s2c(ev.Response(b"CLOSE_WAIT")) == [ev.Response(b"CLOSE_WAIT")]
    # in-flight messages may still be finished while closing
    assert w.c2s(ev.Fin(mid(2))) == [ev.Fin(mid(2))]
    assert not c.in_flight and not s.in_flight

    assert c.receive(b"") == [ev.ConnectionClosed()]
    assert s.receive(b"") == [ev.ConnectionClosed()]
    assert c.state is s.state is State.CLOSED


def test_session_without_feature_negotiation_gets_a_plain_ok():
    w = Wire()
    w.c2s(ev.Magic())
    w.c2s(ev.Identify({"client_id": "x"}))
    assert w.s2c(ev.Response(b"OK")) == [ev.Response(b"OK")]
    assert w.client.features is None
    assert w.client.max_rdy_count == 2500  # nsqd's default, assumed without negotiation
    # no feature negotiation: nothing says AUTH is required, so none is demanded
    assert w.c2s(ev.Pub("t", b"body")) == [ev.Pub("t", b"body")]
    assert w.s2c(ev.Response(b"OK")) == [ev.Response(b"OK")]


def test_publishing_session():
    w = Wire()
    w.c2s(ev.Magic())
    cmds = [ev.Pub("t", b"a"), ev.Mpub("t", (b"b", b"cc")), ev.Dpub("t", 1500, b"d")]
    for cmd in cmds:
        assert w.c2s(cmd) == [cmd]
        assert w.s2c(ev.Response(b"OK")) == [ev.Response(b"OK")]
    assert w.client.pending == []
    assert w.server.state is State.CONNECTED  # publishing does not subscribe


def test_responses_pair_with_pipelined_commands_in_order():
    w = Wire()
    w.c2s(ev.Magic())
    for i in range(3):
        w.c2s(ev.Pub("t", b"%d" % i))
    assert len(w.client.pending) == 3
    w.s2c(ev.Response(b"OK"), ev.Response(b"_heartbeat_"), ev.Response(b"OK"))
    assert len(w.client.pending) == 1  # the heartbeat answered nothing


def test_snapshot_is_plain_data():
    w = subscribed()
    w.s2c(message(7))
    snap = w.client.snapshot()
    assert snap["state"] == "SUBSCRIBED" and snap["rdy"] == 10
    assert snap["in_flight"] == [mid(7).decode()]
    assert json.loads(json.dumps(snap))["subscription"] == ["topic", "chan"]  # serialisable
    ssnap = w.server.snapshot()
    assert ssnap["subscription"] == ("topic", "chan") and ssnap["rdy"] == 10


# --------------------------------------------------------- misuse: our own sends


@pytest.mark.parametrize(
    "cmd",
    [ev.Sub("t", "c"), ev.Identify({}), ev.Pub("t", b"x"), ev.Rdy(1), ev.Nop(), ev.Cls()],
    ids=lambda c: type(c).__name__,
)
def test_nothing_before_the_magic(cmd):
    c = ClientConnection()
    with pytest.raises(LocalProtocolError, match="magic"):
        c.send(cmd)
    assert c.state is State.INIT  # a refused send changes nothing


def test_the_magic_only_once():
    c = ClientConnection()
    c.send(ev.Magic())
    with pytest.raises(LocalProtocolError, match="magic"):
        c.send(ev.Magic())


def test_a_second_sub_is_refused():
    w = subscribed()
    with pytest.raises(LocalProtocolError):
        w.client.send(ev.Sub("other", "chan"))
    assert w.client.subscription == ("topic", "chan")


def test_a_second_sub_is_refused_even_before_the_first_ok():
    c = ClientConnection()
    c.send(ev.Magic())
    c.send(ev.Sub("t", "c"))
    with pytest.raises(LocalProtocolError, match="cannot SUB in state SUBSCRIBED"):
        c.send(ev.Sub("t", "c2"))


@pytest.mark.parametrize(
    "cmd",
    [ev.Rdy(1), ev.Fin(mid(1)), ev.Req(mid(1), 0), ev.Touch(mid(1)), ev.Cls()],
    ids=lambda c: type(c).__name__,
)
def test_consumer_commands_before_sub(cmd):
    c = ClientConnection()
    c.send(ev.Magic())
    with pytest.raises(LocalProtocolError):
        c.send(cmd)


def test_identify_only_once_and_not_after_sub():
    c = ClientConnection()
    c.send(ev.Magic())
    c.send(ev.Identify({"client_id": "a"}))
    with pytest.raises(LocalProtocolError, match="IDENTIFY"):
        c.send(ev.Identify({"client_id": "b"}))
    w = subscribed()
    with pytest.raises(LocalProtocolError):
        w.client.send(ev.Identify({"client_id": "late"}))


def test_snappy_and_deflate_together_are_refused():
    c = ClientConnection()
    c.send(ev.Magic())
    with pytest.raises(LocalProtocolError, match="snappy and deflate"):
        c.send(ev.Identify({"snappy": True, "deflate": True}))


def test_auth_when_the_server_did_not_ask_is_refused():
    w = Wire()
    w.c2s(ev.Magic())
    w.c2s(ev.Identify({"feature_negotiation": True}))
    w.s2c(features(auth_required=False))
    with pytest.raises(LocalProtocolError, match="must not"):
        w.client.send(ev.Auth(b"secret"))


def test_rdy_beyond_max_rdy_count_is_refused():
    w = subscribed()
    assert w.client.max_rdy_count == 2500
    w.client.send(ev.Rdy(2500))
    with pytest.raises(LocalProtocolError, match="2501"):
        w.client.send(ev.Rdy(2501))


def test_rdy_and_cls_after_cls_are_refused():
    w = subscribed()
    w.c2s(ev.Cls())
    for cmd in (ev.Rdy(1), ev.Cls()):
        with pytest.raises(LocalProtocolError):
            w.client.send(cmd)


def test_nothing_after_the_connection_closed():
    w = subscribed()
    w.client.receive(b"")
    with pytest.raises(LocalProtocolError, match="closed"):
        w.client.send(ev.Nop())


def test_check_false_sends_what_the_protocol_forbids():
    """How a notebook shows what nsqd answers to a bad command."""
    w = Wire()
    w.c2s(ev.Magic())
    [v] = w.c2s(ev.Rdy(5), check=False)
    assert isinstance(v, ev.Violation)
    assert (v.code, v.text, v.fatal) == ("E_INVALID", "cannot RDY in current state", True)
    assert w.server.state is State.CLOSED


def test_local_protocol_error_is_a_protocol_error():
    assert issubclass(LocalProtocolError, ProtocolError)


# ------------------------------------------------------ misuse: the peer's bytes


def violation(events: list) -> ev.Violation:
    [v] = events
    assert isinstance(v, ev.Violation)
    return v


def test_server_refuses_commands_before_the_magic():
    s = ServerConnection()
    v = violation(s.receive(b"SUB t c\n"))
    assert (v.code, v.fatal, v.offset) == ("E_BAD_PROTOCOL", True, 0)
    assert v.error == b"E_BAD_PROTOCOL"
    assert s.state is State.CLOSED
    assert s.receive(b"NOP\n") == []  # nothing is read after a fatal violation


def test_server_refuses_a_second_sub():
    w = subscribed()
    v = violation(w.raw_c2s(b"SUB topic chan2\n"))
    assert (v.code, v.text, v.fatal) == ("E_INVALID", "cannot SUB in current state", True)
    assert w.server.state is State.CLOSED


@pytest.mark.parametrize(
    "line, verb",
    [(b"RDY 1\n", "RDY"), (b"FIN 0000000000000001\n", "FIN"), (b"CLS\n", "CLS")],
)
def test_server_refuses_consumer_commands_before_sub(line, verb):
    w = Wire()
    w.c2s(ev.Magic())
    v = violation(w.raw_c2s(line))
    assert (v.code, v.text, v.fatal) == ("E_INVALID", f"cannot {verb} in current state", True)
    assert v.offset == 4  # where the command starts in the stream


@pytest.mark.parametrize(
    "cmd, code",
    [
        (ev.Fin(mid(99)), "E_FIN_FAILED"),
        (ev.Req(mid(99), 0), "E_REQ_FAILED"),
        (ev.Touch(mid(99)), "E_TOUCH_FAILED"),
    ],
)
def test_id_not_in_flight_is_a_non_fatal_error(cmd, code):
    w = subscribed()
    w.s2c(message(1))
    v = violation(w.c2s(cmd))
    assert v.code == code and not v.fatal
    assert mid(99).decode() in v.text and "not in flight" in v.text
    # the connection goes on: the server reads the next command and its state is intact
    assert w.server.state is State.SUBSCRIBED
    assert w.c2s(ev.Fin(mid(1))) == [ev.Fin(mid(1))]
    assert w.c2s(ev.Nop()) == [ev.Nop()]
    # and the client, told E_FIN_FAILED, stays connected too
    [err] = w.s2c(ev.Error(v.error))
    assert err.code == code and not err.fatal
    assert w.client.state is State.SUBSCRIBED


def test_fin_twice_is_the_non_fatal_error_the_second_time():
    w = subscribed()
    w.s2c(message(1))
    assert w.c2s(ev.Fin(mid(1))) == [ev.Fin(mid(1))]
    v = violation(w.raw_c2s(b"FIN " + mid(1) + b"\n"))
    assert v.code == "E_FIN_FAILED" and not v.fatal


def test_a_fatal_error_frame_closes_the_client():
    w = subscribed()
    [err] = w.s2c(ev.Error(b"E_INVALID cannot SUB in current state"))
    assert err.fatal and err.code == "E_INVALID"
    assert w.client.state is State.CLOSED


@pytest.mark.parametrize(
    "line, code",
    [
        (b"SUB bad$topic chan\n", "E_BAD_TOPIC"),
        (b"SUB topic bad$chan\n", "E_BAD_CHANNEL"),
        (b"PUB t\n\x00\x00\x00\x00", "E_BAD_MESSAGE"),
        (b"IDENTIFY\n\x00\x00\x00\x03{x}", "E_BAD_BODY"),
        (b"HELLO\n", "E_INVALID"),
    ],
)
def test_bad_commands_get_nsqd_codes_and_close(line, code):
    w = Wire()
    w.c2s(ev.Magic())
    v = violation(w.raw_c2s(line))
    assert v.code == code and v.fatal
    assert v.error.startswith(code.encode())
    assert w.server.state is State.CLOSED


def test_rdy_beyond_the_servers_max_is_refused():
    w = subscribed(max_rdy_count=50)
    v = violation(w.c2s(ev.Rdy(51), check=False))
    assert v.code == "E_INVALID" and "51" in v.text and v.fatal


def test_auth_when_the_server_has_no_auth():
    w = Wire()
    w.c2s(ev.Magic())
    v = violation(w.c2s(ev.Auth(b"x")))
    assert v.code == "E_AUTH_DISABLED"


def test_server_with_auth_refuses_sub_before_auth():
    w = Wire.with_config(auth_enabled=True)
    w.c2s(ev.Magic())
    v = violation(w.raw_c2s(b"SUB t c\n"))
    assert v.code == "E_AUTH_FIRST" and v.fatal


def test_server_takes_commands_pipelined_behind_auth():
    """Issue 24 item 4: nsqd reads the command after AUTH once the auth service has
    answered, so AUTH and PUB in one write are two commands, not E_AUTH_FIRST; a second
    AUTH behind the first is already set."""
    w = Wire.with_config(auth_enabled=True)
    w.c2s(ev.Magic())
    got = w.raw_c2s(w.client.send(ev.Auth(b"x")) + b"PUB t\n\0\0\0\x01x")
    assert got == [ev.Auth(b"x"), ev.Pub("t", b"x")]
    assert not w.server.authenticated  # that is the auth service's to say
    v = violation(w.raw_c2s(b"AUTH\n\0\0\0\x01y"))
    assert (v.code, v.text) == ("E_INVALID", "AUTH already set")


def test_client_sees_garbage_from_the_server_as_a_fatal_violation():
    w = subscribed()
    v = violation(w.raw_s2c(b"HTTP/1.1 400 Bad Request\r\n\r\n"))
    assert v.fatal and v.offset == sum(len(d) for k, d in w.log[:-1] if k == "s2c")
    assert "1213486160" in v.text
    assert w.client.state is State.CLOSED


def test_client_reports_a_message_with_a_bad_id_with_its_offset():
    w = subscribed()
    before = sum(len(d) for k, d in w.log if k == "s2c")
    frame = ev.Message(1, 1, mid(1), b"x")
    data = bytearray(w.server.send(frame))
    data[18 + 15] = ord("Z")  # the id's last digit
    v = violation(w.raw_s2c(bytes(data)))
    assert v.fatal and v.offset == before + 18 and "hex" in v.text


def test_truncated_stream_at_eof():
    w = subscribed()
    ok = w.server.send(ev.Response(b"OK"))
    events = w.client.receive(ok[:9])
    assert events == []
    events = w.client.receive(b"")
    assert kinds(events) == ["Truncated", "ConnectionClosed"]
    assert events[0].data == ok[:9] and events[0].expected == len(ok)


def test_a_body_beyond_the_limit_is_refused_before_it_arrives():
    w = Wire()
    w.c2s(ev.Magic())
    # only the line and the size prefix: nsqd refuses without reading 2 MB
    v = violation(w.raw_c2s(b"PUB t\n" + (2_000_000).to_bytes(4, "big")))
    assert (v.code, v.text, v.fatal) == (
        "E_BAD_MESSAGE",
        "PUB message too big 2000000 > 1048576",
        True,
    )
    assert v.offset == 4


@pytest.mark.parametrize(
    "body, code, text",
    [
        # nsqd's readMPUB: a message too big, or of size <= 0, is E_BAD_MESSAGE
        (
            b"\x00\x00\x00\x02\x00\x00\x00\x02ok\x00\x00\x00\x0b" + b"x" * 11,
            "E_BAD_MESSAGE",
            "MPUB message too big 11 > 10",
        ),
        (
            b"\x00\x00\x00\x02\x00\x00\x00\x02ok\x00\x00\x00\x00",
            "E_BAD_MESSAGE",
            "MPUB invalid message",
        ),
        # ... and a count <= 0 is E_BAD_BODY
        (b"\x00\x00\x00\x00", "E_BAD_BODY", "MPUB invalid message count 0"),
    ],
)
def test_mpub_errors_have_nsqds_codes(body, code, text):
    w = Wire.with_config(max_msg_size=10)
    w.c2s(ev.Magic())
    v = violation(w.raw_c2s(b"MPUB t\n" + len(body).to_bytes(4, "big") + body))
    assert v.code == code and v.text.startswith(text) and v.fatal


def test_server_reports_a_command_cut_by_eof():
    w = Wire()
    w.c2s(ev.Magic())
    assert w.raw_c2s(b"PUB t\n\x00\x00\x00\x05hel") == []
    events = w.server.receive(b"")
    assert kinds(events) == ["Truncated", "ConnectionClosed"]
    assert (events[0].offset, events[0].data, events[0].expected) == (
        4,
        b"PUB t\n\x00\x00\x00\x05hel",
        15,
    )


def test_rdy_while_closing_is_accepted_and_ignored_like_nsqd():
    w = subscribed()
    w.c2s(ev.Cls())
    assert w.c2s(ev.Rdy(7), check=False) == [ev.Rdy(7)]
    assert w.server.rdy == 0 and w.server.state is State.CLOSING


def test_dpub_defer_beyond_max_req_timeout():
    w = Wire.with_config(max_req_timeout=1000)
    w.c2s(ev.Magic())
    assert w.c2s(ev.Dpub("t", 1000, b"x")) == [ev.Dpub("t", 1000, b"x")]
    v = violation(w.c2s(ev.Dpub("t", 1001, b"x")))
    assert (v.code, v.text) == ("E_INVALID", "DPUB timeout 1001 out of range 0-1000")
