"""The sans-IO TubeMQ codec: golden frames, pairing and latency, the session states,
every error case as a Violation with offset/field/reason, and LocalProtocolError."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.tubemq import (
    MESSAGES,
    ClientConnection,
    ConnectionClosed,
    ExceptionResponse,
    LocalProtocolError,
    Observer,
    Request,
    Response,
    ServerConnection,
    State,
    Truncated,
    Violation,
    make_request,
)
from nsqviz.tubemq.grammar import BEGIN_TOKEN, Content, build_content, frame_bytes
from nsqviz.tubemq.messages import _detailed_request, _fast_request, encode, make_response
from nsqviz.tubemq.metadata import checksum
from tests.tubemq._vectors import (
    CLOSE_REQUEST_HEX,
    CLOSE_RESPONSE_HEX,
    be32,
    close_request,
    close_response,
)

M = MESSAGES


def codes(events) -> list[str]:
    return [e.code for e in events if type(e) is Violation]


def register_p2m():
    return M["RegisterRequestP2M"](clientId="p1", brokerCheckSum=-1, hostName="10.0.0.1")


def registered_pair():
    client, server = ClientConnection(), ServerConnection()
    _, data = client.request(1, register_p2m(), now=0.0)
    [req] = server.receive(data)
    _, answer = server.respond(req, M["RegisterResponseM2P"](
        success=True, errCode=200, errMsg="OK!", brokerCheckSum=7))
    client.receive(answer, now=0.1)
    return client, server


# ------------------------------------------------------------------------ golden


def test_golden_close_exchange():
    client = ClientConnection(first_serial=42)
    client.state = State.REGISTERED
    req, data = client.request(3, close_request(), now=10.0)
    assert data.hex() == CLOSE_REQUEST_HEX
    server = ServerConnection()
    server.state = State.REGISTERED
    [got] = server.receive(data, now=10.001)
    assert got == req and got.name == "CloseRequestP2M" and got.message.clientId == "p1"
    assert got.header.protocolVer == 3 and got.body.timeout == 10000
    answer, data = server.respond(got, close_response())
    assert data.hex() == CLOSE_RESPONSE_HEX
    [rsp] = client.receive(data, now=10.25)
    assert type(rsp) is Response and rsp.name == "CloseResponseM2P"
    assert rsp.request == req and rsp.latency == pytest.approx(0.25)
    assert client.state is State.CLOSED and server.state is State.CLOSED
    assert client.pending == {} and server.pending == {}


def test_register_then_heartbeat_then_411_goes_back_to_init():
    client, server = registered_pair()
    assert client.state is server.state is State.REGISTERED
    req, data = client.request(2, M["HeartRequestP2M"](clientId="p1", brokerCheckSum=7,
                                                       hostName="h"))
    [got] = server.receive(data)
    _, answer = server.respond(got, M["HeartResponseM2P"](
        success=False, errCode=411, errMsg="unknown", brokerCheckSum=7))
    client.receive(answer)
    assert client.state is server.state is State.INIT


def test_exception_answer_is_paired():
    client, server = ClientConnection(), ServerConnection()
    _, data = client.request(1, register_p2m(), now=1.0)
    [got] = server.receive(data)
    _, answer = server.fail(got, "org.apache.inlong.tubemq.corerpc.exception.StandbyException",
                            "10.0.0.1:8715 is not master now.")
    [ex] = client.receive(answer, now=1.5)
    assert type(ex) is ExceptionResponse and ex.status == 1 and ex.method == 1
    assert ex.body.exceptionName.endswith("StandbyException") and ex.latency == 0.5
    assert client.state is State.INIT


def test_eof_inside_a_frame():
    client = ClientConnection()
    events = client.receive(bytes.fromhex(CLOSE_RESPONSE_HEX)[:20])
    events += client.receive(b"")
    assert [type(e) for e in events] == [Truncated, ConnectionClosed]
    assert events[0].offset == 0 and events[0].expected == 39  # its one block length is in


# --------------------------------------------------------------- peer errors


def test_response_without_request():
    [rsp, v] = ClientConnection().receive(bytes.fromhex(CLOSE_RESPONSE_HEX))
    assert type(rsp) is Response and rsp.request is None
    assert (v.code, v.field, v.offset, v.field_offset) == ("ResponseWithoutRequest",
                                                           "serialNo", 0, 4)
    assert v.event is rsp


def test_duplicate_serial():
    data = encode(make_request(5, 1, register_p2m()))
    events = ServerConnection().receive(data + data)
    assert codes(events) == ["DuplicateSerial"]
    v = events[-1]
    assert (v.field, v.offset, v.field_offset) == ("serialNo", len(data), len(data) + 4)


@pytest.mark.parametrize(
    ("service", "method", "code"),
    [(7, 1, "UnknownService"), (4, 1, "UnknownService"), (1, 10, "UnknownMethod"),
     (2, 1, "WrongService"), (3, 11, "NoDecoder")],
)
def test_unknown_service_or_method(service, method, code):
    req = make_request(1, method, None, service=service)
    events = ServerConnection().receive(encode(req))
    assert type(events[0]) is Request
    assert code in codes(events)


def test_send_message_under_service_2_and_3_is_accepted():
    msg = M["SendMessageRequestP2B"](clientId="p", topicName="t", partitionId=0, data=b"x",
                                     flag=0, checkSum=-1, sentAddr=2130706433)
    for service in (2, 3):
        assert codes(ServerConnection().receive(encode(make_request(1, 13, msg,
                                                                    service=service)))) == []


def test_bad_token_active_is_fatal_and_final():
    server = ServerConnection()
    good = encode(make_request(1, 1, register_p2m()))
    events = server.receive(b"GET / HTTP/1.1\r\n" + good)
    [v] = events
    assert (v.code, v.field, v.offset, v.field_offset, v.fatal, v.resynced) == (
        "BadToken", "MsgToken", 0, 0, True, False)
    assert "Java decoder closes" in v.reason
    assert codes(server.receive(good)) == ["BadToken"]  # nothing is read any more


def test_bad_token_observer_resyncs_on_the_next_token():
    good = encode(make_request(1, 1, register_p2m()))
    events = Observer().c2s(b"GET / HTTP/1.1\r\n" + good)
    assert [type(e) for e in events] == [Violation, Request]
    assert events[0].resynced is True and "a guess" in events[0].reason


@pytest.mark.parametrize(
    ("tail", "code", "field", "offset"),
    [(be32(4000), "BadListSize", "listSize", 8),
     (be32(1) + be32(9000), "BadBlockLength", "block[0].length", 12)],
)
def test_limits(tail, code, field, offset):
    data = BEGIN_TOKEN + be32(1) + tail
    [v] = ClientConnection().receive(data)
    assert (v.code, v.field, v.offset, v.field_offset) == (code, field, 0, offset)


def test_protobuf_that_does_not_parse_names_the_message_and_offset():
    req = make_request(1, 1, None)
    req.body.request = b"\x0a\xff"  # a string whose length runs past the end
    events = ServerConnection().receive(encode(req))
    [v] = [e for e in events if type(e) is Violation]
    assert v.code == "ProtobufError" and "RegisterRequestP2M" in v.field
    assert v.offset == 0 and v.field_offset == 12 + 4 + 1 + 2 + 1 + 4 + 1  # RequestBody's


def test_missing_required_fields_are_named():
    events = ServerConnection().receive(encode(make_request(1, 1, M["RegisterRequestP2M"]())))
    [v] = [e for e in events if type(e) is Violation]
    assert v.code == "ProtobufError" and "clientId" in v.reason and "hostName" in v.reason


def test_bad_content_offset_counts_block_lengths():
    body = b"\x08" * 9000
    content = build_content(Content(b"\x08\x00", b"\x08\x01", body))
    content = content[:-1]  # the body message is one byte short
    data = frame_bytes(3, content)
    [v] = ServerConnection().receive(data)
    assert v.code == "Incomplete"
    # content offset len(content) is in block 1: past 2 block lengths and the header
    assert v.offset == 0 and v.field_offset == 12 + 4 + 4 + len(content)


def test_crc_mismatch_on_send_and_on_fetch():
    msg = M["SendMessageRequestP2B"](clientId="p", topicName="t", partitionId=0,
                                     data=b"hello", flag=0, checkSum=1, sentAddr=1)
    req = make_request(9, 13, msg)
    events = ServerConnection().receive(encode(req))
    assert codes(events) == ["CrcMismatch"]
    assert events[1].field == "SendMessageRequestP2B.checkSum"
    msg.checkSum = checksum(b"hello")
    assert codes(ServerConnection().receive(encode(make_request(9, 13, msg)))) == []
    fetch = make_request(4, 17, M["GetMessageRequestC2B"](clientId="c", partitionId=0,
                                                         groupName="g", topicName="t"))
    tm = M["TransferedMessage"](messageId=1, checkSum=checksum(b"ok") ^ 1, payLoadData=b"ok",
                                flag=0)
    answer = make_response(fetch, M["GetMessageResponseB2C"](success=True, errCode=200,
                                                              messages=[tm]))
    client = ClientConnection()
    client.state = State.REGISTERED
    client.send(fetch)
    events = client.receive(encode(answer))
    assert codes(events) == ["CrcMismatch"]
    assert events[1].field == "GetMessageResponseB2C.messages[0].checkSum"


def test_method_mismatch():
    client = ClientConnection()
    req, _ = client.request(1, register_p2m())
    wrong = make_response(make_request(req.serialNo, 4, None), M["RegisterResponseM2C"](
        success=True, errCode=200, errMsg="OK!"))
    assert "MethodMismatch" in codes(client.receive(encode(wrong)))


def test_heartbeat_before_register_is_reported_by_the_server():
    req = make_request(1, 2, M["HeartRequestP2M"](clientId="p", brokerCheckSum=-1,
                                                  hostName="h"))
    assert codes(ServerConnection().receive(encode(req))) == ["NotAllowedInState"]


# -------------------------------------------------------------- local misuse


def test_local_protocol_errors():
    client, server = ClientConnection(), ServerConnection()
    hb = M["HeartRequestP2M"](clientId="p", brokerCheckSum=-1, hostName="h")
    with pytest.raises(LocalProtocolError, match="state INIT"):
        client.request(2, hb)
    with pytest.raises(LocalProtocolError, match="not defined"):
        client.send(make_request(1, 10, None))
    with pytest.raises(LocalProtocolError, match="lacks required field"):
        client.request(1, M["RegisterRequestP2M"](clientId="p"))
    with pytest.raises(LocalProtocolError, match="not accepted under service 2"):
        client.send(make_request(1, 1, register_p2m(), service=2))
    req, _ = client.request(1, register_p2m())
    with pytest.raises(LocalProtocolError, match="still awaits"):
        client.send(req)
    with pytest.raises(LocalProtocolError, match="no request with serialNo"):
        server.respond(req, M["RegisterResponseM2P"](success=True, errCode=200, errMsg="",
                                                     brokerCheckSum=1))
    # check=False sends it anyway (to show what a server answers)
    assert client.request(2, hb, check=False)[1].startswith(BEGIN_TOKEN)


def test_serials_skip_pending_ones():
    client = ClientConnection()
    client.pending[1] = (make_request(1, 1, None), None)
    assert client.next_serial() == 2


# ----------------------------------------------------------------- observer


def test_observer_pairs_and_measures_latency_and_any_chunking_is_the_same():
    req = make_request(42, 3, close_request())
    c2s = encode(req) + encode(make_request(43, 1, register_p2m()))
    s2c = bytes.fromhex(CLOSE_RESPONSE_HEX)

    def run(step):
        o = Observer(midstream=True)
        out = []
        for i in range(0, len(c2s), step):
            out += o.c2s(c2s[i : i + step], segment=i, now=1.0)
        for i in range(0, len(s2c), step):
            out += o.s2c(s2c[i : i + step], segment=1000 + i, now=1.2)
        return out

    whole = run(10**6)
    assert [type(e) for e in whole] == [Request, Request, Response]
    assert whole[2].request == req and whole[2].latency == pytest.approx(0.2)
    for step in (1, 5, 17):
        events = run(step)
        assert events == whole
        assert [e.raw.offset for e in events] == [e.raw.offset for e in whole]


def test_midstream_observer_does_not_judge_what_it_could_not_see():
    assert Observer(midstream=True).s2c(bytes.fromhex(CLOSE_RESPONSE_HEX))[1:] == []
    assert codes(Observer().s2c(bytes.fromhex(CLOSE_RESPONSE_HEX))) == ["ResponseWithoutRequest"]


# ------------------------------------------------------- fast path == detailed


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_fast_request_path_agrees_with_the_detailed_one(data):
    """Whatever the fast path accepts, the detailed path accepts alike with no violation;
    a content the detailed path has anything to say about is left to it."""
    size = data.draw(st.sampled_from([0, 5, 200, 20000]))
    msg = M["SendMessageRequestP2B"](clientId="p", topicName="t", partitionId=0,
                                     data=bytes(size), flag=0,
                                     checkSum=data.draw(st.sampled_from([-1, 0])), sentAddr=1)
    method = data.draw(st.sampled_from([13, 1, 10, 11]))
    req = make_request(7, method, msg, service=data.draw(st.sampled_from([None, 1, 2, 3, 9])))
    content = bytearray(build_content(Content(req.connHeader.SerializeToString(),
                                              req.header.SerializeToString(),
                                              req.body.SerializeToString())))
    for _ in range(data.draw(st.integers(0, 2))):
        i = data.draw(st.integers(0, min(len(content) - 1, 40)))
        content[i] = data.draw(st.integers(0, 255))
    content = bytes(content)
    fast = _fast_request(7, content, None)
    slow, violations = _detailed_request(7, content, None, lambda c: c)
    if fast is not None:
        assert violations == [] and slow == fast


def test_violations_point_at_the_answer_as_returned():
    client = ClientConnection()
    req, _ = client.request(1, register_p2m())
    wrong = make_response(make_request(req.serialNo, 4, None), M["RegisterResponseM2C"](
        success=True, errCode=200, errMsg="OK!"))
    answer, violation = client.receive(encode(wrong))
    assert violation.event is answer and answer.request is req


def test_gap_gives_the_lost_frames_length_once_its_block_lengths_arrived():
    frame = encode(make_request(1, 13, M["SendMessageRequestP2B"](
        clientId="p", topicName="t", partitionId=0, data=bytes(20000), flag=0, checkSum=-1,
        sentAddr=1)))
    server = ServerConnection()
    assert server.receive(frame[:100]) == []
    partial, length = server.gap()
    assert partial == frame[:100] and length is None  # block lengths 1 and 2 not seen yet
    whole_heads = frame[: 12 + 4 + 8192 + 4 + 8192 + 4 + 10]
    server = ServerConnection()
    server.receive(whole_heads)
    partial, length = server.gap()
    assert length == len(frame)
    # after the gap the connection reads the next frame afresh
    assert [type(e) for e in server.receive(frame)] == [Request]
