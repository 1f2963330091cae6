"""What the broker refuses, as nsqd does: IDENTIFY values out of range, a bad magic, a
message over the size limit, malformed commands and a RDY out of range -- each answered
with nsqd's error and, where nsqd closes, closed the way nsqd closes (FIN or RST)."""

from __future__ import annotations

import time

import pytest

from nsqviz.nsq.events import Error, Identify, Rdy, Response
from tests.servers.nsqd._client import RawClient, subscriber


@pytest.mark.parametrize(
    "field,value,text",
    [
        ("heartbeat_interval", 999, "IDENTIFY heartbeat interval (999) is invalid"),
        ("heartbeat_interval", 60001, "IDENTIFY heartbeat interval (60001) is invalid"),
        ("output_buffer_size", 63, "IDENTIFY output buffer size (63) is invalid"),
        ("output_buffer_size", 65537, "IDENTIFY output buffer size (65537) is invalid"),
        ("output_buffer_timeout", 30001, "IDENTIFY output buffer timeout (30001) is invalid"),
        ("sample_rate", 100, "IDENTIFY sample rate (100) is invalid"),
        ("msg_timeout", 999, "IDENTIFY msg timeout (999) is invalid"),
        ("msg_timeout", 900001, "IDENTIFY msg timeout (900001) is invalid"),
        ("heartbeat_interval", "1000", "IDENTIFY failed to decode JSON body"),
    ],
)
def test_identify_range_checks_are_fatal(broker, field, value, text):
    c = RawClient(broker.tcp_address)
    c.send(Identify({field: value}))
    c.expect_error("E_BAD_BODY", text, fatal=True)


def _deep_identify(levels: int) -> bytes:
    """IDENTIFY whose body nests ``levels`` deep in all (the object is one level)."""
    inner = levels - 1
    body = b'{"client_id":"deep","x":' + b"[" * inner + b"]" * inner + b"}"
    return b"IDENTIFY\n" + len(body).to_bytes(4, "big") + body


@pytest.mark.parametrize("levels,answer", [
    (10000, b"OK"), (10001, b"E_BAD_BODY IDENTIFY failed to decode JSON body")])
def test_deep_identify_answered_like_nsqd(broker, real_nsqd, levels, answer):
    """Issue 24 item 2: Go's decoder reads 10000 levels and refuses more; ours raised
    RecursionError past about 1000 (E_INVALID internal error)."""
    for server in (real_nsqd, broker):
        c = RawClient(server.tcp_address)
        c.send_raw(_deep_identify(levels))
        ev = c.next()
        if answer == b"OK":
            assert isinstance(ev, Response) and ev.data == b"OK", (server, ev)
        else:
            assert isinstance(ev, Error) and ev.data == answer, (server, ev)
            c.expect_closed()
        c.close()


def test_bad_magic_gets_e_bad_protocol_and_close(broker):
    c = RawClient(broker.tcp_address, magic=False)
    c.send_raw(b"  V1")
    c.expect_error("E_BAD_PROTOCOL", "", fatal=True)


def _close_kind(address: str, sent: bytes) -> tuple[bytes, str]:
    """The first answer to ``sent`` (as one write) and how the server then closed."""
    import socket

    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(sent)
        time.sleep(0.3)  # the error and the close are both in
        got = b""
        try:
            while chunk := sock.recv(1 << 20):
                got += chunk
        except ConnectionResetError:
            return got, "RST"
    return got, "FIN"


@pytest.mark.parametrize("sent,close", [(b"  V1", "FIN"), (b"GET / HTTP/1.0\r\n\r\n", "RST")])
def test_bad_magic_closes_as_nsqd_does(broker, sent, close):
    """Issue 24 item 7c: nsqd reads the 4-byte magic alone; bytes after a bad one are
    unread when it closes, so its kernel sends an RST (after the error)."""
    assert _close_kind(broker.tcp_address, sent) == (
        b"\0\0\0\x12\0\0\0\x01E_BAD_PROTOCOL", close)


@pytest.mark.parametrize("size", [2_000, 200_000])
def test_too_big_message_closes_as_nsqd_does(tmp_path, size):
    """Issue 24 item 7c: a message over --max-msg-size is refused from its size; nsqd
    closes with an RST only when bytes of it are still unread (beyond what its reader
    has buffered), and so does the broker."""
    from nsqviz.servers.nsqd import EmbeddedBroker
    from nsqviz.servers.peers import RealNsqd
    from tests.conftest import peer

    sent = b"  V2PUB t\n" + size.to_bytes(4, "big") + b"x" * size
    with RealNsqd(peer("nsqd"), data_path=str(tmp_path / "n"), max_msg_size=1000) as real, \
            EmbeddedBroker(max_msg_size=1000) as ours:
        theirs, mine = _close_kind(real.tcp_address, sent), _close_kind(ours.tcp_address, sent)
    assert mine == theirs
    assert theirs[1] == ("FIN" if size < 16384 else "RST")


@pytest.mark.parametrize("size", [15_000, 17_000, 1_100_000])
def test_mpub_msg_too_big_closes_as_nsqd_does(tmp_path, size):
    """Issue 33 item 6 (the golden probe ``mpub_msg_too_big``): an MPUB whose second
    message is over --max-msg-size. nsqd stops reading at that message's size and
    closes: with an RST when more than its 16 KiB read buffer of the command is still
    unread (1 MB of it, with the default limit), as the broker now does; it answered
    those with a FIN, having read the whole body."""
    import struct

    from nsqviz.servers.nsqd import EmbeddedBroker
    from nsqviz.servers.peers import RealNsqd
    from tests.conftest import peer

    limit = {} if size > 1 << 20 else {"max_msg_size": 1000}
    msgs = [b"a", b"x" * size]
    body = struct.pack(">i", len(msgs)) + b"".join(struct.pack(">i", len(m)) + m for m in msgs)
    sent = b"  V2MPUB t\n" + struct.pack(">i", len(body)) + body
    with RealNsqd(peer("nsqd"), data_path=str(tmp_path / "n"), **limit) as real, \
            EmbeddedBroker(**limit) as ours:
        theirs, mine = _close_kind(real.tcp_address, sent), _close_kind(ours.tcp_address, sent)
    assert theirs[0].endswith(b"E_BAD_MESSAGE MPUB message too big %d > %d"
                              % (size, limit.get("max_msg_size", 1 << 20)))
    assert mine == theirs
    assert theirs[1] == ("FIN" if size < 16384 else "RST")


def test_http_request_on_tcp_port_is_refused_at_once(broker):
    """'GET ' is not the magic: refused without waiting for a 1.2 GB 'size'."""
    c = RawClient(broker.tcp_address, magic=False)
    t0 = time.monotonic()
    c.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    c.expect_error("E_BAD_PROTOCOL", fatal=True)
    assert time.monotonic() - t0 < 2


def test_huge_body_size_refused_without_allocating(broker):
    c = RawClient(broker.tcp_address)
    # "HTTP" read as a size: 1,213,486,160 bytes; refused from the 4 bytes alone
    c.send_raw(b"PUB t\nHTTP")
    c.expect_error("E_BAD_MESSAGE", "PUB message too big 1213486160 > 1048576", fatal=True)


@pytest.mark.parametrize(
    "raw,code,text",
    [
        (b"FOO\n", "E_INVALID", "invalid command FOO"),
        (b"SUB t\n", "E_INVALID", "SUB insufficient number of parameters"),
        (b"SUB t! c\n", "E_BAD_TOPIC", 'SUB topic name "t!" is not valid'),
        (b"SUB t c!\n", "E_BAD_CHANNEL", 'SUB channel name "c!" is not valid'),
        (b"PUB\n", "E_INVALID", "PUB insufficient number of parameters"),
        (b"PUB a/b\n\x00\x00\x00\x01x", "E_BAD_TOPIC", 'PUB topic name "a/b" is not valid'),
        (b"PUB t\n\x00\x00\x00\x00", "E_BAD_MESSAGE", "PUB invalid message body size 0"),
        (b"RDY 1\n", "E_INVALID", "cannot RDY in current state"),
        (b"FIN 0123456789abcdef\n", "E_INVALID", "cannot FIN in current state"),
        (b"REQ 0123456789abcdef 0\n", "E_INVALID", "cannot REQ in current state"),
        (b"TOUCH 0123456789abcdef\n", "E_INVALID", "cannot TOUCH in current state"),
        (b"CLS\n", "E_INVALID", "cannot CLS in current state"),
        (b"AUTH\n\x00\x00\x00\x01x", "E_AUTH_DISABLED", "AUTH disabled"),
        (b"DPUB t 3600001\n\x00\x00\x00\x01x", "E_INVALID",
         "DPUB timeout 3600001 out of range 0-3600000"),
        (b"MPUB t\n\x00\x00\x00\x00", "E_BAD_BODY", "MPUB invalid body size 0"),
        (b"IDENTIFY\n\x00\x00\x00\x02{]", "E_BAD_BODY", "IDENTIFY failed to decode JSON body"),
    ],
)
def test_malformed_commands_fatal(broker, raw, code, text):
    c = RawClient(broker.tcp_address)
    c.send_raw(raw)
    c.expect_error(code, text, fatal=True)


def test_rdy_out_of_range_is_fatal(broker):
    c = subscriber(broker.tcp_address, "t", "c")
    c.send(Rdy(2501), check=False)
    c.expect_error("E_INVALID", "RDY count 2501 out of range 0-2500", fatal=True)
