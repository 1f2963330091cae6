"""The replay data model and view: lanes, boxes on packets, cursor, hex view, widget."""

from __future__ import annotations

from pathlib import Path

from nsqviz.capture.replay import Replay
from nsqviz.widgets.replay import ReplayView

DATA = Path(__file__).resolve().parents[2] / "data"


def test_replay_timeline_matches_the_capture():
    rp = Replay.load(DATA / "pubsub-pynsq.pcap")
    assert [p.number for p in rp.packets] == list(range(1, len(rp.packets) + 1))
    assert {p.flow_id for p in rp.packets} == {0, 1}
    assert {p.dir for p in rp.packets} == {"c2s", "s2c"}
    payload = sum(p.payload for p in rp.packets)
    assert payload == sum(sum(s.payload_bytes.values()) for s in rp.flows)
    for rec in rp.records:  # every record's packets belong to its flow and direction
        marks = {p.number: p for p in rp.packets}
        assert all(marks[n].flow_id == rec.flow_id and marks[n].dir == rec.dir
                   for n in rec.packets)


def test_view_is_deterministic_and_fades_the_future():
    rp = Replay.load(DATA / "pubsub-pynsq.pcap")
    a, b = ReplayView(rp, upto=40).html(), ReplayView(rp, upto=40).html()
    assert a == b
    assert "packet 40 of 86" in a
    assert a.count("opacity:0.15") == sum(1 for r in rp.records if r.packets[-1] > 40)
    done = ReplayView(rp).html()
    assert "opacity:0.15" not in done and done.endswith(ReplayView(rp)._repr_html_().strip())


def test_sticky_packets_share_one_slot():
    rp = Replay.load(DATA / "small-messages-pynsq.pcap")
    view = ReplayView(rp)
    busiest = max((p for p in rp.packets), key=lambda p: len(view.records_at(p.number)))
    glued = view.records_at(busiest.number)
    assert len(glued) >= 50 and {r.name for r in glued} == {"FrameTypeMessage"}
    assert f"completed by packet {busiest.number}" in ReplayView(rp, upto=busiest.number).html()


def test_hex_view_and_widget():
    rp = Replay.load(DATA / "large-messages-pynsq.pcap")
    view = ReplayView(rp)
    big = next(r for r in rp.records if r.name == "FrameTypeMessage")
    hv = view.hexview(big)
    assert hv is not None and "data.body" in hv.text()
    widget = view.widget()
    play_slider, lanes, picker, detail = widget.children
    slider = play_slider.children[1]
    slider.value = big.packets[-1]
    assert "FrameTypeMessage" in str(picker.options)
    assert "data.body" in detail.value
