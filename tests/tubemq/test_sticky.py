"""The sticky-packet views with TubeMQ frames: a frame whose content spans several
8192-byte blocks arrives in several segments and is reassembled by walking its blocks."""

from __future__ import annotations

from nsqviz.clients.session.sticky import loopback, tubemq_block_marks, tubemq_frames
from nsqviz.widgets.sticky import StickyPlayground, StickyView


def test_multi_block_frame_over_many_segments():
    play = StickyPlayground(sizes=[100, 20000, 50], mss=1448, protocol="tubemq")
    run = play.run()
    assert run.intact
    big = run.reassembled[1]
    assert len(big.sources) > 10  # one frame, many segments
    assert len(run.marks[1]) == 3  # ... and three blocks
    text = StickyView(run).text()
    assert "F1: 20083 B · 3 blocks" in text
    html = StickyView(run).html()
    assert html.count('title="F1 block[') == 3


def test_block_marks_are_where_the_lengths_are():
    [frame] = tubemq_frames([20000])
    marks = tubemq_block_marks(frame)
    assert marks[0] == 12 and marks[1] == 12 + 4 + 8192
    assert frame[marks[1] : marks[1] + 4] == (8192).to_bytes(4, "big")


def test_real_loopback_with_tubemq_frames():
    frames = tubemq_frames([10, 30000, 10])
    run = loopback(frames, recv_size=4096, tubemq=True)
    assert run.intact and len(run.segments) > 5
