"""A capture written by nsqviz, read back by tshark: same packets, same TCP bytes per flow."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict

import pytest

from nsqviz.capture.files import read_capture
from nsqviz.capture.layers import LINKTYPE_LINUX_SLL2, Segment, decode_record
from nsqviz.capture.synth import NsqTalk, pubsub_session
from nsqviz.capture.tcp import Data, FlowTracker
from nsqviz.capture.writer import PcapngWriter, PcapWriter, TcpConversation

pytestmark = pytest.mark.skipif(
    shutil.which("tshark") is None,
    reason="tshark is not installed (scripts/sysdeps.sh installs it)",
)


def _tshark(*args: str) -> str:
    return subprocess.run(["tshark", *args], check=True, capture_output=True, text=True,
                          timeout=120).stdout


def _write_mixed(path, *, ng: bool) -> None:
    """Three NSQ flows (one reordered with duplicates) and a snappy one, IPv4 and IPv6."""
    if ng:
        w = PcapngWriter(path)
        ifaces = [w.add_interface(), w.add_interface(LINKTYPE_LINUX_SLL2, tsresol=9)]
    else:
        w = PcapWriter(path, nanosecond=True)
        ifaces = [0, 0]
    specs = [
        (("10.0.0.1", 40001), ("10.0.0.2", 4150), None, 1448, ifaces[0]),
        (("2001:db8::1", 40002), ("2001:db8::2", 4150), "snappy", 700, ifaces[1]),
        (("10.0.0.3", 40003), ("10.0.0.2", 4150), "deflate", 65483, ifaces[0]),
    ]
    for i, (client, server, compression, mss, iface) in enumerate(specs):
        conv = TcpConversation(w, client, server, mss=mss, interface=iface,
                               isn=(0xFFFFF000 + i, 77 + i))
        conv.open(10.0 + i)
        talk = NsqTalk(conv, ts=10.0 + i)
        pubsub_session(talk, messages=30, compression=compression,
                       body_sizes=(20, 1500, 9000), seed=i)
        conv.close(talk.ts + 0.001)
    # a reordered flow with duplicate segments
    talk = NsqTalk(None)
    pubsub_session(talk, messages=10, body_sizes=(333,))
    conv = TcpConversation(w, ("10.0.0.9", 40009), ("10.0.0.2", 4150), interface=ifaces[0])
    conv.open(20.0)
    for direction, start, data in talk.written.writes:
        pieces = [(start + o, data[o : o + 120]) for o in range(0, len(data), 120)]
        pieces.reverse()
        for off, chunk in pieces + pieces[:1]:
            conv.segment(direction, off, chunk, 20.5)
    w.close()


@pytest.mark.parametrize("ng", [False, True], ids=["pcap-nsec", "pcapng"])
def test_tshark_agrees_on_packets_and_payload_bytes_per_flow(tmp_path, ng):
    path = tmp_path / ("mixed.pcapng" if ng else "mixed.pcap")
    _write_mixed(path, ng=ng)

    ours_packets = 0
    ours_bytes: dict[frozenset, int] = defaultdict(int)
    for rec in read_capture(path):
        ours_packets += 1
        seg = decode_record(rec)
        assert isinstance(seg, Segment)
        key = frozenset({(seg.src, seg.sport), (seg.dst, seg.dport)})
        ours_bytes[key] += len(seg.payload)

    out = _tshark("-r", str(path), "-T", "fields", "-E", "separator=|", "-e", "ip.src",
                  "-e", "ipv6.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e", "ipv6.dst",
                  "-e", "tcp.dstport", "-e", "tcp.len")
    lines = [line for line in out.splitlines() if line]
    theirs_bytes: dict[frozenset, int] = defaultdict(int)
    for line in lines:
        s4, s6, sport, d4, d6, dport, length = line.split("|")
        key = frozenset({(s4 or s6, int(sport)), (d4 or d6, int(dport))})
        theirs_bytes[key] += int(length)
    assert len(lines) == ours_packets
    assert dict(theirs_bytes) == dict(ours_bytes)


def _follow(path, stream: int) -> tuple[bytes, bytes]:
    """tshark's reassembled bytes of one TCP stream, client side and server side."""
    out = _tshark("-r", str(path), "-q", "-z", f"follow,tcp,raw,{stream}")
    body = out.split("Node 1:", 1)[1].split("\n", 1)[1]
    client, server = bytearray(), bytearray()
    for line in body.splitlines():
        if line.startswith("===") or not line.strip():
            continue
        (server if line.startswith("\t") else client).extend(bytes.fromhex(line.strip()))
    return bytes(client), bytes(server)


def test_tshark_follow_agrees_with_our_reassembly(tmp_path):
    path = tmp_path / "mixed.pcap"
    _write_mixed(path, ng=False)
    tracker = FlowTracker()
    streams: dict[tuple[int, str], bytearray] = defaultdict(bytearray)
    for rec in read_capture(path):
        for ev in tracker.feed(decode_record(rec)):
            if isinstance(ev, Data):
                streams[ev.flow.id, ev.direction].extend(ev.data)
    tracker.finish()
    assert len(tracker.flows) == 4
    for flow in tracker.flows:
        client, server = _follow(path, flow.id)
        assert client == bytes(streams[flow.id, "c2s"])
        assert server == bytes(streams[flow.id, "s2c"])


def test_tshark_validates_our_checksums(tmp_path):
    path = tmp_path / "mixed.pcap"
    _write_mixed(path, ng=False)
    out = _tshark("-r", str(path), "-o", "tcp.check_checksum:TRUE", "-o",
                  "ip.check_checksum:TRUE", "-T", "fields", "-e", "ip.checksum.status",
                  "-e", "tcp.checksum.status")
    statuses = {tuple(line.split("\t")) for line in out.splitlines() if line}
    assert statuses == {("1", "1"), ("", "1")}  # 1 = good; IPv6 has no header checksum
