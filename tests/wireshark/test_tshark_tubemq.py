"""Proof by tshark for TubeMQ: the generated dissector, run by the real tshark over the
TubeMQ sample captures in data/tubemq/ and over synthetic ones, finds the same
frames as nsqviz's TubeMQ codec (its capture ``Observer`` fed by nsqviz's TCP
reassembly): the same serialNo, request or answer, method, service, status and
exception, on the same packets (every segment of a frame spread over several), paired
request to answer, and the same violations.

Differences allowed, and checked to be only these: bytes that are no frame are compared
by the packet where they start (Wireshark reports them there, the codec when it finds
the next MsgToken); the codec's deeper checks are not
mirrored in Lua -- the session state (``NotAllowedInState``), the payload CRCs
(``CrcMismatch``) and the inner request/response messages' own protobuf errors
(``ProtobufError`` on ``RequestBody.request (...)``/``RspResponseBody.data (...)``,
which Wireshark's protobuf dissector marks itself).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqviz.capture.files import read_capture
from nsqviz.capture.layers import decode_record
from nsqviz.capture.tcp import Data, FlowEnd, FlowTracker
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.cli import main as nsqviz_main
from nsqviz.tubemq.codec import ClientConnection, Observer, ServerConnection
from nsqviz.tubemq.events import ExceptionResponse, Request, Response, Violation
from nsqviz.tubemq.metadata import checksum
from nsqviz.tubemq.protos import MESSAGES
from nsqviz.tubemq.tables import DEFAULT_MASTER_PORT
from nsqviz.wireshark.tshark import find_tshark, tshark_pdus

pytestmark = pytest.mark.skipif(
    find_tshark() is None, reason="tshark is not installed (scripts/sysdeps.sh installs it)"
)

DATA = Path(__file__).resolve().parents[2] / "data" / "tubemq"
SAMPLES = sorted(p.name for p in DATA.glob("*.pcap*"))
PORTS = {8715, 8123, 8124, 8717}  # where data/make_tubemq_captures.py's servers listen
NOT_MIRRORED = {"NotAllowedInState", "CrcMismatch"}


@pytest.fixture(scope="module")
def lua_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wireshark")
    assert nsqviz_main(["wireshark", "--out", str(folder)]) == 0
    return folder


def _mirrored(v: Violation) -> bool:
    inner = v.code == "ProtobufError" and "(" in v.field
    return v.code not in NOT_MIRRORED and not inner


def codec_frames(path: Path) -> list[dict]:
    """What nsqviz's TubeMQ codec finds in a capture, one row per frame (or undecodable
    bytes), in the order the codec reports them."""
    tracker = FlowTracker(server_ports=PORTS)
    observers: dict[int, Observer] = {}
    rows: list[dict] = []
    by_event: dict[int, dict] = {}

    def add(flow, direction, events) -> None:
        for e in events:
            kind = type(e)
            if kind is Violation:
                if not _mirrored(e):
                    continue
                row = by_event.get(id(e.event))
                if row is None:  # bytes that are not a frame
                    packets = sorted({s.segment for s in e.raw.sources})
                    rows.append({"flow": flow.label, "dir": direction, "kind": "violation",
                                 "packets": packets, "violations": [e.code]})
                else:
                    row["violations"].append(e.code)
            elif kind in (Request, Response, ExceptionResponse):
                row = {"flow": flow.label, "dir": direction, "serial": e.serialNo,
                       "packets": sorted({s.segment for s in e.raw.sources}),
                       "violations": []}
                if kind is Request:
                    row.update(kind="request", method=e.method, service=e.header.serviceType)
                elif kind is Response:
                    row.update(kind="response", method=e.method, status=e.header.status)
                else:
                    row.update(kind="exception", status=e.header.status,
                               exception=e.body.exceptionName)
                rows.append(row)
                by_event[id(e)] = row

    for rec in read_capture(path):
        seg = decode_record(rec)
        if seg is None or not hasattr(seg, "payload"):
            continue
        for ev in tracker.feed(seg):
            if isinstance(ev, Data):
                obs = observers.setdefault(ev.flow.id, Observer())
                feed = obs.c2s if ev.direction == "c2s" else obs.s2c
                add(ev.flow, ev.direction, feed(ev.data, segment=ev.number, now=ev.ts))
            elif isinstance(ev, FlowEnd) and ev.flow.id in observers:
                obs = observers[ev.flow.id]
                feed = obs.c2s if ev.direction == "c2s" else obs.s2c
                add(ev.flow, ev.direction, feed(b""))
    return rows


def tshark_frames(path: Path, lua_dir: Path) -> list[dict]:
    """The same rows, from tshark's JSON of the generated dissector."""
    rows = []
    for p in tshark_pdus(path, lua_dir, protocol="tubemq"):
        f = p.first
        direction = f("tubemq.dir")
        client, server = (p.src, p.dst) if direction == "c2s" else (p.dst, p.src)
        row = {"flow": f"{client}->{server}", "dir": direction, "packets": list(p.packets),
               "violations": list(p.fields.get("tubemq.violation", []))}
        if f("tubemq.serial") is None:
            if not row["violations"]:
                continue  # the rest of undecodable bytes, reported where they start
            row["kind"] = "violation"
        else:
            row["serial"] = int(f("tubemq.serial"))
            if direction == "c2s":
                row.update(kind="request", method=int(f("tubemq.method")),
                           service=int(f("tubemq.service")))
            elif f("tubemq.exception") is not None:
                row.update(kind="exception", status=int(f("tubemq.status")),
                           exception=f("tubemq.exception"))
            else:
                row.update(kind="response", method=int(f("tubemq.method")),
                           status=int(f("tubemq.status")))
            # the pairing: an answer names its request's packet, and the other way round
            if direction == "s2c" and "ResponseWithoutRequest" not in row["violations"]:
                assert f("tubemq.request_in") is not None, row
        rows.append(row)
    return rows


def assert_same_frames(path: Path, lua_dir: Path) -> list[dict]:
    ours, theirs = codec_frames(path), tshark_frames(path, lua_dir)
    for rows in (ours, theirs):
        for r in rows:
            r["violations"].sort()
            if r["kind"] == "violation":
                # bytes that are no frame: Wireshark says so in the packet where they
                # start, the codec once it finds the next MsgToken (naming every packet)
                r["packets"] = r["packets"][:1]
        rows.sort(key=lambda r: r["packets"][0])  # stable: stream order within a direction
    for i, (a, b) in enumerate(zip(theirs, ours, strict=False)):
        assert a == b, f"frame {i}: tshark {a}\n codec {b}"
    assert len(theirs) == len(ours)
    return ours


def test_the_tubemq_samples_are_there():
    assert len(SAMPLES) >= 5, SAMPLES


@pytest.mark.parametrize("sample", SAMPLES)
def test_tshark_decodes_every_tubemq_sample_like_the_codec(sample, lua_dir):
    rows = assert_same_frames(DATA / sample, lua_dir)
    assert any(r["kind"] == "request" for r in rows)


def _message(name: str, **fields):
    return MESSAGES[name](**fields)


def _session(conv: TcpConversation, ts: float) -> None:
    """Register, a 20 KB message (3 blocks), five requests in one write and their
    answers in one write, an ERROR answer, bytes that are no frame, close."""
    client, server = ClientConnection(), ServerConnection()

    def call(method, message, answer, *, glue=1, fail=None):
        nonlocal ts
        reqs, wire = [], b""
        for _ in range(glue):
            req, data = client.request(method, message)
            reqs.append(req)
            wire += data
        ts += 0.001
        conv.send("c2s", wire, ts)
        for r in server.receive(wire):
            assert isinstance(r, Request)
        out = b""
        for req in reqs:
            if fail:
                out += server.fail(req, fail, "boom")[1]
            else:
                out += server.respond(req, answer)[1]
        client.receive(out)
        ts += 0.001
        conv.send("s2c", out, ts)

    ok = {"success": True, "errCode": 200, "errMsg": "OK!"}
    call(1, _message("RegisterRequestP2M", clientId="p1", brokerCheckSum=-1, hostName="h"),
         _message("RegisterResponseM2P", brokerCheckSum=1, **ok))
    data = bytes(range(256)) * 80
    send = _message("SendMessageRequestP2B", clientId="p1", topicName="demo", partitionId=0,
                    data=data, flag=0, checkSum=checksum(data), sentAddr=1)
    call(13, send, _message("SendMessageResponseB2P", **ok))
    small = _message("SendMessageRequestP2B", clientId="p1", topicName="demo", partitionId=0,
                     data=b"hi", flag=0, checkSum=-1, sentAddr=1)
    call(13, small, _message("SendMessageResponseB2P", **ok), glue=5)
    call(13, small, None, fail="org.apache.inlong.tubemq.corebase.exception.StandbyException")
    ts += 0.001
    conv.send("c2s", b"HELLO, not a frame", ts)
    call(3, _message("CloseRequestP2M", clientId="p1"), _message("CloseResponseM2P", **ok))


@pytest.mark.parametrize("mss", [5, 1448])
def test_tshark_reassembles_tubemq_frames_like_the_codec(tmp_path, lua_dir, mss):
    path = tmp_path / f"tubemq-{mss}.pcap"
    with PcapWriter(path) as w:
        conv = TcpConversation(w, ("10.3.0.1", 40300), ("10.3.0.2", DEFAULT_MASTER_PORT),
                               mss=mss)
        conv.open(300.0)
        _session(conv, 300.0)
        conv.close(301.0)
    rows = assert_same_frames(path, lua_dir)
    kinds = [r["kind"] for r in rows]
    assert kinds.count("request") == 9 and kinds.count("exception") == 1
    assert [r["violations"] for r in rows if r["kind"] == "violation"] == [["BadToken"]]
    if mss < 8192:
        assert max(len(r["packets"]) for r in rows) > 1
