"""Proof by tshark: the flow tracker's TCP analysis (:mod:`nsqviz.capture.tcp_analysis`)
flags the packets Wireshark's ``tcp.analysis.*`` flags -- zero windows, retransmissions
of each kind, out-of-order segments -- and sees the RSTs and snaplen cuts it sees, on
every sample capture in data/ and on a written capture that holds every case."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from nsqviz.capture.driver import CaptureDriver
from nsqviz.capture.layers import ACK, FIN, PSH, RST, SYN
from nsqviz.capture.tcp_analysis import (
    RETRANSMISSION_KINDS,
    Reset,
    Retransmission,
    Truncated,
    WindowOpen,
    ZeroWindow,
)
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.stream.direction import Direction

pytestmark = pytest.mark.skipif(
    shutil.which("tshark") is None,
    reason="tshark is not installed (scripts/sysdeps.sh installs it)",
)

DATA = Path(__file__).resolve().parents[2] / "data"
CAPTURES = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*")
                  if p.suffix in (".pcap", ".pcapng"))

WIRESHARK = {
    "retransmission": "tcp.analysis.retransmission",
    "fast retransmission": "tcp.analysis.fast_retransmission",
    "spurious retransmission": "tcp.analysis.spurious_retransmission",
    "out-of-order": "tcp.analysis.out_of_order",
    "zero window": "tcp.analysis.zero_window",
    "window update": "tcp.analysis.window_update",
}
"""Each of nsqviz's findings as Wireshark flags it (beside RSTs and snaplen cuts). A
window update there is any bare ACK that changes the window; nsqviz's
(:class:`~nsqviz.capture.tcp_analysis.WindowOpen`) only the first after a zero window."""


def ours(path: Path) -> dict[str, set[tuple[int, int]]]:
    """(tcp.stream, packet) of each finding of the tracker's analysis."""
    out: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for step in CaptureDriver().run([path]):
        for e in step.events:
            kind = type(e)
            if kind is Retransmission:
                out[e.kind].add((e.flow.id, e.number))
                if e.kind in RETRANSMISSION_KINDS:
                    out["retransmission"].add((e.flow.id, e.number))
            elif kind is ZeroWindow:
                out["zero window"].add((e.flow.id, e.number))
            elif kind is WindowOpen:
                out["window update"].add((e.flow.id, e.number))
            elif kind is Reset:
                out["reset"].add((e.flow.id, e.number))
            elif kind is Truncated:
                out["cut"] |= {(e.flow.id, n) for n in e.packets}
    return out


def theirs(path: Path) -> dict[str, set[tuple[int, int]]]:
    """The same from tshark, in one pass."""
    fields = ["tcp.stream", "frame.number", "tcp.flags.reset", "tcp.len", "frame.cap_len",
              "frame.len", *WIRESHARK.values()]
    proc = subprocess.run(
        ["tshark", "-r", str(path), "-Y", "tcp.analysis.flags or tcp.flags.reset == 1 or "
         "frame.cap_len < frame.len", "-T", "fields", "-E", "separator=,", "-E",
         "occurrence=f", *(x for f in fields for x in ("-e", f))],
        capture_output=True, text=True, timeout=120, check=True)
    out: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for line in proc.stdout.splitlines():
        stream, number, reset, size, cap_len, length, *flags = line.split(",")
        if not stream:
            continue  # not TCP
        packet = (int(stream), int(number))
        if reset == "1":
            out["reset"].add(packet)
        if size not in ("", "0") and int(cap_len) < int(length):
            out["cut"].add(packet)
        for name, flag in zip(WIRESHARK, flags, strict=True):
            if flag:
                out[name].add(packet)
    return out


def assert_same(path: Path) -> dict[str, int]:
    mine, wireshark = ours(path), theirs(path)
    zero = mine["zero window"]
    wireshark["window update"] = {  # those that follow a zero window of their stream
        p for p in wireshark["window update"] if any(z[0] == p[0] and z < p for z in zero)}
    wrong = [f"{name}: only nsqviz {sorted(mine[name] - wireshark[name])[:8]}, only tshark"
             f" {sorted(wireshark[name] - mine[name])[:8]}"
             for name in [*WIRESHARK, "reset", "cut"] if mine[name] != wireshark[name]]
    assert not wrong, f"{path.name}: " + "; ".join(wrong)
    return {name: len(found) for name, found in wireshark.items()}


@pytest.mark.parametrize("capture", CAPTURES)
def test_the_analysis_flags_what_tshark_flags(capture):
    assert_same(DATA / capture)


def test_the_nsqd_tcp_samples_hold_what_they_are_for():
    """The real captures made for the analysis (data/make_tcp_captures.py) show it."""
    assert assert_same(DATA / "nsqd" / "tcp" / "zero-window.pcap")["zero window"] >= 2
    found = assert_same(DATA / "nsqd" / "tcp" / "reset-too-big.pcap")
    assert found["reset"] == 1 and found["zero window"] >= 1


C, S = ("10.3.0.1", 40300), ("10.3.0.2", 4150)


def write_every_case(path: Path) -> None:
    """One connection with each kind of finding, made packet by packet, its handshake
    1 ms long (what tells out-of-order from retransmitted); a second one mid-stream."""
    c2s, s2c = Direction.C2S, Direction.S2C
    with PcapWriter(path) as w:
        conv = TcpConversation(w, C, S, isn=(1000, 9000))
        c, s = 1001, 9001  # the first sequence numbers after each SYN

        def data(ts, rel, size, flags=ACK | PSH):
            conv.packet(c2s, ts, c + rel, s, flags, b"x" * size)

        def ack(ts, rel, window=65535, flags=ACK):
            conv.packet(s2c, ts, s, c + rel, flags, window=window)

        conv.packet(c2s, 1.0, 1000, 0, SYN)
        conv.packet(s2c, 1.0005, 9000, c, SYN | ACK)
        conv.packet(c2s, 1.001, c, s, ACK)
        data(2.0, 0, 100)
        data(2.001, 100, 100)
        data(2.5, 0, 100)  # retransmission: not acknowledged yet
        ack(2.6, 200)
        data(2.7, 100, 100)  # spurious: acknowledged already
        data(3.0, 300, 100)  # leaves a hole at 200 ...
        data(3.0002, 200, 100)  # ... filled within the round trip: out-of-order
        ack(3.1, 400)
        data(4.0, 400, 100)
        data(4.0001, 500, 100)
        for i in range(3):  # the receiver asks for 400 again and again
            ack(4.001 + i * 0.0001, 400)
        data(4.005, 400, 100)  # fast retransmission
        ack(4.01, 600)
        conv.packet(c2s, 5.0, c + 599, s, ACK)  # keep-alive: none of them
        conv.packet(c2s, 5.1, c + 599, s, ACK, b"k")
        ack(6.0, 600, window=0)  # the receiver stops reading
        data(6.2, 600, 1)  # a zero-window probe
        ack(6.2001, 600, window=0)
        conv.packet(c2s, 6.5, c + 599, s, ACK)  # a probe as Linux sends it
        ack(6.5001, 600, window=0)
        ack(7.0, 600, window=4096)  # it reads again
        data(7.001, 600, 100)
        conv.packet(c2s, 8.0, c + 700, s, FIN | ACK)
        conv.packet(c2s, 8.5, c + 700, s, FIN | ACK)  # the FIN again
        ack(9.0, 701, window=4096, flags=RST | ACK)

        mid = TcpConversation(w, ("10.3.0.3", 40301), S, isn=(5000, 7000))
        for ts, rel in ((10.0, 0), (10.001, 100), (10.002, 300), (10.0025, 200),
                        (10.5, 100)):
            mid.packet(c2s, ts, 5001 + rel, 7001, ACK | PSH, b"y" * 100)
        mid.packet(s2c, 10.6, 7001, 5401, ACK, window=0)
        mid.packet(s2c, 11.6, 7001, 5401, ACK | FIN, window=0)


def test_every_case_as_tshark_names_it(tmp_path):
    path = tmp_path / "every-case.pcap"
    write_every_case(path)
    found = assert_same(path)
    assert all(found[name] for name in [*WIRESHARK, "reset"]), found
    kinds = {e.kind for step in CaptureDriver().run([path]) for e in step.events
             if isinstance(e, Retransmission)}
    assert kinds == {*RETRANSMISSION_KINDS, "out-of-order"}
