"""Bad input for the generated dissectors: real conversations with bytes flipped, junk
put in front, segments of odd sizes. tshark must get through every packet with no Lua
error (a Lua error drops the rest of the segment's PDUs) and no runaway tree, and go on
reading the conversations. (A flipped size prefix can promise a PDU longer than what
follows: Wireshark then waits for it to the end of the capture, as any TCP dissector.)"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from nsqviz.capture.files import read_capture
from nsqviz.capture.layers import decode_record
from nsqviz.capture.synth import NsqTalk, pubsub_session
from nsqviz.capture.tcp import Data, FlowTracker
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.cli import main as nsqviz_main
from nsqviz.tubemq.tables import DEFAULT_BROKER_PORT
from nsqviz.wireshark.generate import tshark_args
from nsqviz.wireshark.tshark import find_tshark

pytestmark = pytest.mark.skipif(
    find_tshark() is None, reason="tshark is not installed (scripts/sysdeps.sh installs it)"
)

TUBEMQ_SAMPLE = Path(__file__).resolve().parents[2] / "data" / "tubemq" / "tubemq-errors.pcap"


@pytest.fixture(scope="module")
def lua_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wireshark")
    assert nsqviz_main(["wireshark", "--out", str(folder)]) == 0
    return folder


def _mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randrange(0, 4)):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    if rng.random() < 0.1:
        out[0:0] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    return bytes(out)


def _nsq_writes() -> list[tuple[str, bytes]]:
    talk = NsqTalk(None)
    pubsub_session(talk, messages=30, body_sizes=(3, 200, 3000))
    return [(d, data) for d, _offset, data in talk.written.writes]


def _tubemq_writes() -> list[tuple[str, bytes]]:
    tracker = FlowTracker(server_ports={8715, 8123, 8124, 8717})
    writes = []
    for rec in read_capture(TUBEMQ_SAMPLE):
        seg = decode_record(rec)
        if seg is None or not hasattr(seg, "payload"):
            continue
        writes += [(ev.direction, ev.data) for ev in tracker.feed(seg) if isinstance(ev, Data)]
    return writes


@pytest.mark.parametrize("protocol", ["nsq", "tubemq"])
def test_mutated_conversations_dissect_without_lua_errors(tmp_path, lua_dir, protocol):
    writes, port = ((_nsq_writes(), 4150) if protocol == "nsq"
                    else (_tubemq_writes(), DEFAULT_BROKER_PORT))
    rng = random.Random(17)
    path = tmp_path / f"mutated-{protocol}.pcap"
    with PcapWriter(path) as w:
        for k in range(6):
            conv = TcpConversation(w, ("10.4.0.1", 43000 + k), ("10.4.0.2", port),
                                   mss=rng.choice([100, 700, 1448]))
            conv.open(10.0 + k)
            for direction, data in writes:
                conv.send(direction, _mutate(data, rng), 10.0 + k)
            conv.close(10.5 + k)
    proc = subprocess.run(["tshark", *tshark_args(lua_dir), "-r", str(path), "-V"],
                          capture_output=True, text=True, errors="replace", timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Lua Error" not in proc.stdout and "Lua Error" not in proc.stderr
    assert "Dissector bug" not in proc.stderr
    # and the conversations are still read: a bad byte costs its PDU, not the rest
    shown = subprocess.run(["tshark", *tshark_args(lua_dir), "-r", str(path), "-Y", protocol,
                            "-T", "fields", "-e", "frame.number"], capture_output=True,
                           text=True, errors="replace", timeout=300, check=True).stdout
    assert len(shown.splitlines()) > 100
