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


def test_a_box_opens_its_records_bytes():
    """Each record completed by the shown packet is a box (a label) whose pane holds
    that record's hex view; later records stay plain faded boxes. (The click itself is
    checked in Chromium: tests/notebooks/test_static_render.py, tests/explorer.)"""
    import re

    rp = Replay.load(DATA / "pubsub-pynsq.pcap")
    view = ReplayView(rp, upto=33)
    page = view.html()
    done = [r for r in rp.records if r.packets[-1] <= 33]
    boxes = re.findall(r'<label class="nv-box nv-box-(\d+) "[^>]*title="([^"]*)"', page)
    assert len(boxes) == len(done) == len(set(k for k, _ in boxes))
    panes = re.findall(r'<div class="nv-pane nv-pane-(\d+)" [^>]*>(.*?)(?=<div class="nv-pane |'
                       r'<div style="margin-top:6px">)', page, re.S)
    assert sorted(k for k, _ in panes) == sorted(k for k, _ in boxes)
    opened = dict(panes)
    for (k, title), rec in zip(sorted(boxes, key=lambda b: int(b[0])), done, strict=True):
        assert title.startswith(f"{rec.name} ({rec.dir}")
        assert f"{rec.name} · {rec.dir} · packets" in opened[k]  # its own hex view
        assert 'class="nv-b ' in opened[k] and 'class="nv-tree"' in opened[k]
    assert "<label" not in ReplayView(Replay.load(DATA / "small-messages-pynsq.pcap")).html()
