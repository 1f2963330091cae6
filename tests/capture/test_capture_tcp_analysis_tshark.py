"""Proof by tshark: the flow tracker's TCP analysis (:mod:`nsqviz.capture.tcp_analysis`)
flags the packets Wireshark's ``tcp.analysis.*`` flags -- zero windows, retransmissions
of each kind, out-of-order segments -- and sees the RSTs and snaplen cuts it sees, on
every sample capture in data/ and on a written capture that holds every case."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from nsqviz.capture.driver import CaptureDriver
from nsqviz.capture.tcp_analysis import (
    RETRANSMISSION_KINDS,
    Reset,
    Retransmission,
    Truncated,
    WindowOpen,
    ZeroWindow,
)
from tests._tcpcases import write_every_case

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
                out["cut"] |= {(e.flow.id, n) for n in e.cut_packets}
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


def test_every_case_as_tshark_names_it(tmp_path):
    path = tmp_path / "every-case.pcap"
    write_every_case(path)
    found = assert_same(path)
    assert all(found[name] for name in [*WIRESHARK, "reset"]), found
    kinds = {e.kind for step in CaptureDriver().run([path]) for e in step.events
             if isinstance(e, Retransmission)}
    assert kinds == {*RETRANSMISSION_KINDS, "out-of-order"}


def test_the_shortcut_concludes_what_the_analysis_does(tmp_path, monkeypatch):
    """Segments next in sequence skip the analysis (:attr:`FlowTracker.shortcut`): every
    sample capture gives the same events with and without the shortcut."""
    from nsqviz.capture.tcp import FlowTracker

    write_every_case(tmp_path / "every-case.pcap")
    for path in [*(DATA / c for c in CAPTURES), tmp_path / "every-case.pcap"]:
        def events(path=path):
            return [(type(e).__name__, e.flow.id,
                     [getattr(e, f.name) for f in fields(e) if f.name != "flow"])
                    for step in CaptureDriver().run([path]) for e in step.events
                    if is_dataclass(e)]  # all but the bytes (Data)

        fast = events()
        monkeypatch.setattr(FlowTracker, "shortcut", False)
        assert events() == fast, path.name
        monkeypatch.undo()
