"""The capture layer's TCP views (:mod:`nsqviz.capture.tcp_views`) on real captures: what
each says, packet by packet, and that ``connections`` names the side that reset a
connection by its RST's direction."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from nsqviz.analysis.capture import Capture
from nsqviz.capture.files import Record, read_capture
from nsqviz.capture.layers import ACK, PSH
from nsqviz.capture.writer import PcapWriter, TcpConversation

DATA = Path(__file__).resolve().parents[2] / "data"
TCP = DATA / "nsqd" / "tcp"


def times(path: Path) -> dict[int, float]:
    return {r.number: r.ts for r in read_capture(path) if isinstance(r, Record)}


def rows(path: Path | str, table: str, **options) -> list[dict]:
    return Capture(str(path), **options).table(table).to_dict("records")


def test_a_consumer_that_stops_reading_is_one_zero_window_period():
    path = TCP / "zero-window.pcap"
    (zw,) = rows(path, "zero_windows")
    ts = times(path)
    assert (zw["stopped_reading"], zw["waiting"], zw["from_packet"], zw["to_packet"],
            zw["until"]) == ("client", "server", 24, 30, "reopened")
    assert list(zw["packets"]) == [24, 26, 29] and zw["zero_window_packets"] == 3
    assert zw["probes"] == 3  # nsqd's kernel's keep-alive probes, 25, 27 and 28
    assert zw["duration_s"] == pytest.approx(ts[30] - ts[24])
    assert (zw["from_ts"], zw["to_ts"]) == (ts[24], ts[30])
    # every byte nsqd had sent was acknowledged; one message frame was cut by the window
    assert (zw["bytes_in_flight"], zw["frames_in_flight"]) == (0, 1)


def test_nsqd_resets_after_a_too_big_pub_with_the_body_unread():
    path = TCP / "reset-too-big.pcap"
    (reset,) = rows(path, "resets")
    ts = times(path)
    assert (reset["packet"], reset["sender"], reset["at"], reset["after_frame"],
            reset["after_frame_packet"], reset["after_frame_from"]) == \
        (14, "server", "mid-session", "FrameTypeError", 12, "server")
    assert reset["stopped_reading_since"] == ts[11]  # nsqd's window closed at packet 11
    (zw,) = rows(path, "zero_windows")  # it never reopened: the RST ended it
    assert (zw["stopped_reading"], zw["from_packet"], zw["until"]) == ("server", 11, "rst")
    assert math.isnan(zw["to_packet"])


@pytest.mark.parametrize("path, packet", [(TCP / "reset-too-big.pcap", 14),
                                          (DATA / "nsqd" / "errors.pcap", 50)])
def test_connections_name_the_side_whose_packet_the_rst_is(path, packet):
    """nsqd's RST (from its port to the client's) was reported as the client's: both
    directions end at the RST, and the client's end came first."""
    conns = [c for c in rows(path, "connections") if c["ended_by"] == "rst"]
    assert [(c["end_packet"], c["ended_from"]) for c in conns] == [(packet, "s2c")]
    (reset,) = rows(path, "resets")
    assert (reset["packet"], reset["dir"], reset["sender"]) == (packet, "s2c", "server")


def test_retransmissions_per_connection_and_sender():
    found = rows(DATA / "tubemq" / "tubemq-large-message-go.pcap", "retransmissions")
    assert sorted((r["sender"], list(r["packets"]), r["retransmissions"], r["bytes"])
                  for r in found) == [("client", [82], 1, 99), ("client", [83], 1, 99)]


@pytest.mark.parametrize("name", ["nsqd/snaplen/pubsub-s96.pcap",
                                  "snaplen120-small-messages.pcap"])
def test_truncated_lists_every_packet_the_snaplen_cut(name):
    path = DATA / name
    cut = {r.number for r in read_capture(path)
           if isinstance(r, Record) and r.orig_len > len(r.data)}
    found = rows(path, "truncated")
    assert sorted(p for r in found for p in r["packets"]) == sorted(cut)
    assert sum(r["packets_cut"] for r in found) == len(cut)
    gaps = rows(path, "gaps")  # every byte missing is the snaplen's
    assert sum(g["bytes"] for g in gaps) == sum(g["snaplen_bytes"] for g in gaps) \
        == sum(r["bytes_cut"] for r in found)
    assert not any(g["lost_bytes"] or len(g["lost_packets"]) for g in gaps)


def test_midstream_says_why_the_start_is_missing(tmp_path):
    found = rows(DATA / "midstream-pynsq.pcap", "midstream")
    assert sorted((r["first_packet"], r["why"], r["protocol"]) for r in found) == [
        (1, "capture started after it", "nsq"), (8, "capture started after it", "nsq")]
    # a connection silent for longer than the idle split goes on as a new one
    path = tmp_path / "idle.pcap"
    with PcapWriter(path) as w:
        conv = TcpConversation(w, ("10.4.0.1", 40400), ("10.4.0.2", 4150))
        conv.open(1.0)
        conv.send("c2s", b"  V2NOP\n", 1.1)
        conv.send("c2s", b"NOP\n", 2000.0)
    (after,) = rows(path, "midstream")
    assert (after["first_packet"], after["why"]) == (5, "idle split")
    assert not rows(path, "midstream", idle_split=None)


def test_gaps_name_the_packet_past_each_hole_and_what_was_lost(tmp_path):
    path = tmp_path / "lost.pcap"
    with PcapWriter(path) as w:
        conv = TcpConversation(w, ("10.4.0.3", 40401), ("10.4.0.2", 4150))
        conv.open(1.0)
        conv.send("c2s", b"  V2", 1.1)
        conv.segment("c2s", 4, b"NOP\n", 1.2)
        # "NOP\nNOP\n" at 8 is never captured; the server acknowledges it all
        conv.segment("c2s", 16, b"NOP\n", 1.3)
        conv.packet("s2c", 1.4, 5001, 1001 + 20, ACK | PSH)
    (gap,) = rows(path, "gaps")
    assert (gap["sender"], gap["holes"], gap["bytes"], gap["lost_bytes"],
            list(gap["lost_packets"])) == ("client", 1, 8, 8, [6])
