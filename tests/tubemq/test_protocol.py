"""TubeMQ through the protocol interface: ``nsqviz decode`` (text and --json), the
replay and its hex view, on synthetic captures (TubeMQ and NSQ side by side) and on the
real sample captures in data/."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.capture.replay import Replay
from nsqviz.capture.synth import NsqTalk, pubsub_session, tubemq_producer
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.nsq.events import Command as NsqCommand
from nsqviz.tubemq import METHODS, Request, Response, encode
from nsqviz.tubemq.protocol import TUBEMQ
from nsqviz.widgets.replay import ReplayView

DATA = Path(__file__).resolve().parents[2] / "data" / "tubemq"
T0 = 1_700_000_000.0


def mixed_capture(mss: int = 1448) -> tuple[bytes, list, object]:
    """One NSQ connection and a TubeMQ producer's Master and Broker connections."""
    f = io.BytesIO()
    w = PcapWriter(f)
    nsq = TcpConversation(w, ("10.0.0.1", 40000), ("10.0.0.9", 4150), mss=mss)
    master = TcpConversation(w, ("10.0.0.1", 40001), ("10.0.0.2", 8715), mss=mss)
    broker = TcpConversation(w, ("10.0.0.1", 40002), ("10.0.0.3", 8123), mss=mss)
    for c in (nsq, master, broker):
        c.open(T0 - 1)
    talk = NsqTalk(nsq)
    pubsub_session(talk, messages=5)
    sent = tubemq_producer(master, broker, ts=T0 + 10)
    for c in (nsq, master, broker):
        c.close(T0 + 20)
    return f.getvalue(), sent, talk.written


def test_tubemq_and_nsq_side_by_side_decode_both():
    raw, sent, nsq_written = mixed_capture()
    d = CaptureDecoder()
    recs = list(d.decode([io.BytesIO(raw)]))
    by_proto = {s.flow.server[1]: s.protocol for s in d.stats}
    assert by_proto == {4150: "nsq", 8715: "tubemq", 8123: "tubemq"}
    tube = [r for r in recs if r.protocol == "tubemq" and r.kind in ("command", "frame")]
    assert [r.event for r in tube if r.kind == "command"] == [e for e in sent
                                                              if type(e) is Request]
    assert [r.event for r in tube if r.kind == "frame"] == [e for e in sent
                                                            if type(e) is Response]
    assert all(r.event.request is not None for r in tube if r.kind == "frame")
    nsq = [r.event for r in recs if r.protocol == "nsq" and r.kind == "command"]
    assert nsq == [c for c in nsq_written.commands if isinstance(c, NsqCommand)]
    assert not [r for r in recs if r.kind in ("error", "gap")]
    # the large message: one frame, several blocks, several TCP segments
    big = max(tube, key=lambda r: r.size or 0)
    assert big.name == "SendMessageRequestP2B" and len(big.packets) >= 10


def test_json_names_every_method_and_shows_every_protobuf_field(tmp_path):
    raw, _, _ = mixed_capture()
    path = tmp_path / "mixed.pcap"
    path.write_bytes(raw)
    out = subprocess.run([sys.executable, "-m", "nsqviz.cli", "decode", "--json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    tube = [r for r in rows if r["flow"] and (":8715" in r["flow"] or ":8123" in r["flow"])
            and r["kind"] in ("command", "frame")]
    assert {r["fields"]["method"] for r in tube} == {
        "producerRegisterP2M", "producerHeartbeatP2M", "sendMessageP2B",
        "producerCloseClientP2M"}
    reg = next(r for r in tube if r["name"] == "RegisterResponseM2P")["fields"]
    assert reg["RpcConnHeader"] == {"flag": 1}
    assert reg["ResponseHeader"] == {"status": "SUCCESS", "protocolVer": 3}
    assert reg["message"]["brokerInfos"] == [{"text": "1:10.0.0.2: ", "brokerId": 1,
                                              "host": "10.0.0.2", "port": 8123,
                                              "defaultPort": True}]
    send = next(r for r in tube if r["name"] == "SendMessageRequestP2B")["fields"]
    assert send["RequestHeader"] == {"serviceType": 3, "protocolVer": 3}
    assert set(send["message"]) >= {"clientId", "topicName", "partitionId", "data", "flag",
                                    "checkSum", "sentAddr", "dataDecoded"}


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("tubemq-*.pcap")))
def test_real_captures_name_every_method(name):
    recs = list(CaptureDecoder().decode([DATA / name]))
    units = [r for r in recs if r.kind in ("command", "frame")]
    assert units and all(r.protocol == "tubemq" for r in units)
    known = {m.name for m in METHODS.values()}
    assert all(r.fields.get("method") in known for r in units)


def test_detection_and_orientation():
    data = encode(tubemq_producer(None, None, messages=1)[0])
    assert TUBEMQ.client_hello(data)
    assert TUBEMQ.detect("c2s", data, from_start=True, server_port=False).score == 3
    assert TUBEMQ.detect("s2c", b"\x00\x00\x00\x05", from_start=False,
                         server_port=False).score == 0
    assert TUBEMQ.detect("c2s", b"  V2", from_start=True, server_port=False).score == 0


def test_replay_and_hex_view_colour_protobuf_fields(tmp_path):
    raw, _, _ = mixed_capture()
    path = tmp_path / "mixed.pcap"
    path.write_bytes(raw)
    replay = Replay.load(path)
    view = ReplayView(replay)
    rec = next(r for r in replay.records if r.name == "SendMessageRequestP2B")
    hexview = view.hexview(rec)
    names = [leaf.dotted for leaf in hexview.layout.leaves()]
    assert names[:3] == ["token", "serialNo", "listSize"]
    assert "blocks[0].data.body.request.topicName" in names
    assert "SendMessageRequestP2B" in view.html()


def test_typed_columns_name_the_call_its_client_partitions_and_message_ids():
    sent = tubemq_producer(None, None, messages=1)
    register, registered, beat, beaten, send, sent_ok = sent[:6]
    client = register.message.clientId
    assert TUBEMQ.typed(register) == {"rpc_serial": 1, "rpc_method": "producerRegisterP2M",
                                      "rpc_service": 1, "client_id": client,
                                      "topics": ["demo"]}
    assert TUBEMQ.typed(registered) == {"rpc_serial": 1, "rpc_method": "producerRegisterP2M",
                                        "rpc_status": "SUCCESS", "err_code": 200}
    # the Master's topicInfos "demo#1:2:1#..." as the partitions the producer may send to
    assert TUBEMQ.typed(beaten)["partitions"] == ["1:demo:0", "1:demo:1"]
    assert TUBEMQ.typed(send) == {"rpc_serial": 1, "rpc_method": "sendMessageP2B",
                                  "rpc_service": 3, "client_id": client, "topic": "demo",
                                  "partition_id": 0}
    assert TUBEMQ.typed(sent_ok) == {"rpc_serial": 1, "rpc_method": "sendMessageP2B",
                                     "rpc_status": "SUCCESS", "err_code": 200,
                                     "msg_ids": [sent_ok.message.messageId],
                                     "append_offset": sent_ok.message.appendOffset}
