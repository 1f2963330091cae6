"""A protocol is chosen per connection from what each side sends: a server refuses a
hello it does not speak in its own protocol's framing, so the server's first answer
outranks the client's hello (and the port). On the real nsqd (data/nsqd/refused/
wrong-magic.pcap) and on synthetic connections on ports no protocol owns."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqviz import protocols
from nsqviz.capture import decode as decode_module
from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.layers import ACK, FIN
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.lookupd.protocol import LOOKUPD
from nsqviz.nsq.protocol import NSQ
from nsqviz.protocols import detection
from nsqviz.stream.direction import Direction
from nsqviz.tubemq.protocol import TUBEMQ

DATA = Path(__file__).resolve().parents[2] / "data"
T0 = 1_700_000_000.0
C2S, S2C = Direction.C2S, Direction.S2C
NSQD_REFUSAL = b"\x00\x00\x00\x12\x00\x00\x00\x01E_BAD_PROTOCOL"  # nsqd's error frame
LOOKUPD_REFUSAL = b"\x00\x00\x00\x0eE_BAD_PROTOCOL"  # nsqlookupd's answer


def _decode(path: Path, **options) -> tuple[list, CaptureDecoder]:
    decoder = CaptureDecoder(tcp_records=True, **options)
    return list(decoder.decode([path])), decoder


def test_a_magic_the_real_nsqd_refused_stays_in_nsqds_protocol():
    """The real nsqd on its port 4150, sent nsqlookupd's magic and a PING: it answers
    E_BAD_PROTOCOL as an NSQ error frame (three writes) and closes. The connection is
    NSQ's: the magic is what nsqd refused, the frame its answer -- not a lookupd
    ``Response`` whose data is the frame's type and text."""
    records, decoder = _decode(DATA / "nsqd" / "refused" / "wrong-magic.pcap")
    (stats,) = decoder.stats
    assert stats.protocol == "nsq"
    assert stats.why == ("the server answers in NSQ's framing (client did not send the NSQ "
                         "magic)")
    assert {r.protocol for r in records} == {"nsq"}
    units = [(r.kind, r.name, r.packets) for r in records if r.kind != "tcp"]
    assert units == [("error", "E_BAD_PROTOCOL", (4,)),
                     ("frame", "FrameTypeError", (6, 8, 10)),
                     ("gap", "Skipped", (13,))]  # the PING nsqd never read
    magic, answer = records[0], records[1]
    assert bytes.fromhex(magic.fields["data"]) == b"  V1" and magic.dir == C2S
    assert (answer.fields["code"], answer.fields["response_to"]) == ("E_BAD_PROTOCOL", 4)
    assert [(r.name, r.fields["side"]) for r in records if r.kind == "tcp"] == [
        ("FIN", "server"), ("RST", "server")]


def _capture(tmp_path: Path, *steps, mss: int = 1448, name: str = "c.pcap") -> Path:
    """One connection from 127.0.0.1:50000 to port 40000 (no protocol's): ``steps`` are
    (direction, bytes) sent in turn, or ``"fin"`` for the client's FIN alone."""
    path = tmp_path / name
    with PcapWriter(str(path)) as w:
        conv = TcpConversation(w, ("127.0.0.1", 50000), ("127.0.0.1", 40000), mss=mss)
        conv.open(T0)
        ts = T0
        for step in steps:
            ts += 0.01
            if step == "fin":  # a half-close: the client is done, its server may answer
                conv.packet(C2S, ts, 1000 + 1 + conv.sent[C2S], conv._ack(C2S), FIN | ACK)
                conv._fin[C2S] = 1
            else:
                conv.send(step[0], step[1], ts)
        ts += 0.01
        if not conv._fin[C2S]:
            conv.close(ts)
        else:
            conv.packet(S2C, ts, 5000 + 1 + conv.sent[S2C], conv._ack(S2C), FIN | ACK)
    return path


@pytest.mark.parametrize("steps, protocol, why", [
    # nsqlookupd's magic to nsqd: nsqd's refusal decides
    ([(C2S, b"  V1PING\n"), (S2C, NSQD_REFUSAL)], "nsq", "the server answers in NSQ's"),
    # an NSQ client's magic to nsqlookupd: nsqlookupd's refusal decides
    ([(C2S, b"  V2IDENTIFY\n"), (S2C, LOOKUPD_REFUSAL)], "lookupd", "the server answers in"),
    # an HTTP request to nsqd's TCP port
    ([(C2S, b"GET / HTTP/1.1\r\n\r\n"), (S2C, NSQD_REFUSAL)], "nsq", "the server answers in"),
    # each side its own protocol's: the hello says it
    ([(C2S, b"  V2PING\n"), (S2C, NSQD_REFUSAL)], "nsq", "magic"),
    ([(C2S, b"  V1PING\n"), (S2C, b"\x00\x00\x00\x02OK")], "lookupd", "magic"),
    # a server that never answers: the hello alone
    ([(C2S, b"  V1PING\n")], "lookupd", "magic"),
    # a server whose answer is no protocol's: the hello alone
    ([(C2S, b"  V1PING\n"), (S2C, b"SSH-2.0-OpenSSH_9.2\r\n")], "lookupd", "magic"),
    # nsqlookupd's magic to an HTTP server (nsqd's HTTP port): Go's 400 decides
    ([(C2S, b"  V1PING\n"), (S2C, b"HTTP/1.1 400 Bad Request\r\n\r\n")], "http",
     "the server answers in HTTP's"),
    # the client half-closes before its server answers: the answer still decides
    ([(C2S, b"  V1PING\n"), "fin", (S2C, NSQD_REFUSAL)], "nsq", "the server answers in"),
    # HTTP on a port no protocol owns: its request line and its answer
    ([(C2S, b"GET / HTTP/1.1\r\n\r\n"), (S2C, b"HTTP/1.1 200 OK\r\n\r\n")], "http",
     "request line"),
    # neither side is any protocol's
    ([(C2S, b"SSH-2.0-OpenSSH_9.2\r\n"), (S2C, b"SSH-2.0-OpenSSH_9.2\r\n")], "", ""),
])
def test_the_servers_answer_decides_then_the_hello(tmp_path, steps, protocol, why):
    _, decoder = _decode(_capture(tmp_path, *steps))
    (stats,) = decoder.stats
    assert stats.protocol == protocol
    assert stats.why.startswith(why)


def test_hellos_and_answers_split_into_one_byte_segments(tmp_path):
    """The server's answer comes a byte at a time: the protocols wait for as many bytes
    as they need to tell (nsqd's frame type), the client's magic too."""
    path = _capture(tmp_path, (C2S, b"  V1PING\n"), (S2C, NSQD_REFUSAL), mss=1)
    records, decoder = _decode(path)
    assert decoder.stats[0].protocol == "nsq"
    assert [r.name for r in records if r.kind in ("error", "frame")] == [
        "E_BAD_PROTOCOL", "FrameTypeError"]
    path = _capture(tmp_path, (C2S, b"  V1PING\n"), (S2C, b"\x00\x00\x00\x02OK"), mss=1,
                    name="lookupd.pcap")
    records, decoder = _decode(path)
    assert decoder.stats[0].protocol == "lookupd"
    assert [r.name for r in records if r.kind in ("command", "frame")] == [
        "MAGIC", "PING", "Response"]


def test_records_wait_for_the_answer_and_keep_their_order(tmp_path):
    """The client's records come out with the packet of the server's first bytes (5),
    in stream order, nothing lost."""
    path = _capture(tmp_path, (C2S, b"  V2PUB t\n\x00\x00\x00\x02hi"), (S2C,
                    b"\x00\x00\x00\x06\x00\x00\x00\x00OK"))
    decoder = CaptureDecoder()
    out = []
    for step in decoder.driver.run([path]):
        records = decoder.step(step)
        if records:
            out.append((step.record.number, [(r.name, r.packets) for r in records]))
    assert out == [(5, [("MAGIC", (4,)), ("PUB", (4,)), ("FrameTypeResponse", (5,))])]


def test_a_client_that_never_hears_back_is_decided_at_the_hold_limit(tmp_path, monkeypatch):
    """A client that sends more than HOLD_LIMIT before any answer: its hello alone
    decides, and its records come out from there on (memory stays bounded)."""
    monkeypatch.setattr(decode_module, "HOLD_LIMIT", 64)
    body = b"x" * 100
    path = _capture(tmp_path, (C2S, b"  V2PUB t\n" + len(body).to_bytes(4, "big") + body),
                    (C2S, b"NOP\n"), mss=40)
    decoder = CaptureDecoder()
    firsts = []
    for step in decoder.driver.run([path]):
        records = decoder.step(step)
        if records:
            firsts.append((step.record.number, [r.name for r in records]))
    # decided on the packet that went past 64 held bytes (the second), long before the
    # client's FIN
    (number, names), *rest = firsts
    assert names == ["MAGIC"] and number == 5
    assert [n for _, ns in rest for n in ns] == ["PUB", "NOP"]


@pytest.mark.parametrize("proto, answer, verdict", [
    (NSQ, NSQD_REFUSAL, True), (NSQ, b"\x00\x00\x00\x06\x00\x00\x00\x00OK", True),
    (NSQ, b"\x00\x00\x00\x12\x00\x00\x00\x01", None),  # the frame type, not its data yet
    (NSQ, b"\x00\x00", None), (NSQ, LOOKUPD_REFUSAL, False), (NSQ, b"HTTP/1.1", False),
    (NSQ, b"\x00\x00\x00\x06\x00\x00\x00\x07OK", False),  # no such frame type
    (LOOKUPD, LOOKUPD_REFUSAL, True), (LOOKUPD, b"\x00\x00\x00\x02OK", True),
    (LOOKUPD, b'\x00\x00\x00\x02{"', True), (LOOKUPD, b"\x00\x00\x00\x02O", None),
    (LOOKUPD, NSQD_REFUSAL, False), (LOOKUPD, b"HTTP/1.1", False),
    (TUBEMQ, b"\xff\x7f", None), (TUBEMQ, NSQD_REFUSAL, False),
])
def test_what_each_protocol_recognises_of_its_servers_answer(proto, answer, verdict):
    assert proto.server_hello(answer) is verdict


def test_the_answer_outranks_the_hello_and_the_port():
    ports = {p.name: p.server_ports for p in protocols.registered()}
    proto, why = detection.detect(protocols.registered(), "c2s", b"  V1PING\n",
                                  from_start=True, ports=ports, server_port=4160,
                                  answer=NSQD_REFUSAL)
    assert proto is NSQ and why.startswith("the server answers in NSQ's framing")
    proto, why = detection.detect(protocols.registered(), "c2s", b"  V1PING\n",
                                  from_start=True, ports=ports, server_port=4150)
    assert proto is LOOKUPD and why == "magic"  # no answer: the hello outranks the port
