"""Units cut short by the capture's snaplen decode as far as they were captured: on a real
``tcpdump -s 96`` capture of the real nsqd (``data/nsqd/snaplen/``) and on the
``editcap -s 120`` sample; only the bytes never captured are a gap."""

from __future__ import annotations

import json
from pathlib import Path

from nsqviz.capture.decode import CaptureDecoder
from nsqviz.nsq.cut import cut_unit
from nsqviz.records import summary

DATA = Path(__file__).resolve().parents[2] / "data"
S96 = DATA / "nsqd" / "snaplen" / "pubsub-s96.pcap"


def _records(path: Path) -> list:
    return list(CaptureDecoder().decode([path]))


def test_real_nsqd_s96_capture_shows_its_pubs_with_topic_and_sizes():
    records = _records(S96)
    pubs = [r for r in records if r.name == "PUB"]
    assert [r.fields["topic"] for r in pubs] == ["cut"] * 4
    assert [r.fields["body_size"] for r in pubs] == [47, 67, 87, 107]  # the script's lines
    for r in pubs:
        cut = r.fields["cut"]
        # the line, the size and the start of the body: 30 bytes of TCP payload were kept
        assert cut == {"captured": 30, "length": len("PUB cut\n") + 4 + r.fields["body_size"]}
        assert bytes.fromhex(r.fields["body"]).startswith(b"line-")
        assert f"topic=cut body={r.fields['body_size']}B" in summary(r)
        assert f"[30 of {cut['length']} bytes captured]" in summary(r)
    (mpub,) = [r for r in records if r.name == "MPUB"]
    assert mpub.fields["topic"] == "cut" and mpub.fields["messages"] == 3
    (dpub,) = [r for r in records if r.name == "DPUB"]
    assert dpub.fields["defer_time"] == 200 and dpub.fields["body_size"] == 59
    # nsqd's OK to each names the cut command it answers
    asked = {r.packets[-1] for r in pubs + [mpub, dpub]}
    oks = [r for r in records if r.name == "FrameTypeResponse"
           and bytes.fromhex(r.fields["data"]) == b"OK"]
    assert asked <= {r.fields["response_to"] for r in oks}


def test_cut_message_frames_keep_their_header_and_the_gap_is_only_the_rest():
    records = _records(S96)
    cut = [r for r in records if r.name == "FrameTypeMessage" and "cut" in r.fields]
    assert cut and all(r.fields["attempts"] == 1 and r.fields["body_size"] > 0 for r in cut)
    assert all(r.fields["id"] for r in cut)
    for r in (r for r in records if "cut" in r.fields):
        gap = next(g for g in records if g.name == "Gap" and g.flow == r.flow
                   and g.dir == r.dir and g.packets == r.packets[-1:])
        # the gap starts where the captured bytes of the unit end
        assert gap.fields["offset"] == r.offset + r.fields["cut"]["captured"]
        assert "snaplen" in gap.fields["reason"] and "lost_partial_frame" not in gap.fields


def test_records_stay_in_packet_order_around_cut_units():
    for path in (S96, DATA / "snaplen120-small-messages.pcap"):
        firsts = [r.packets[0] for r in _records(path) if r.kind != "gap"]
        flows = {}
        for r in _records(path):
            flows.setdefault((r.flow, r.dir), []).append(r.packets[-1])
        assert all(p == sorted(p) for p in flows.values()), path
        assert firsts


def test_cut_unit_reads_only_what_was_captured():
    assert cut_unit("c2s", b"PUB t\n\x00\x00\x00\x09ab", 19) == (
        "PUB", {"topic": "t", "body_size": 9, "body": "6162",
                "cut": {"captured": 12, "length": 19}})
    # its size prefix cut off: the length is unknown
    assert cut_unit("c2s", b"DPUB t 50\n\x00", None) == (
        "DPUB", {"topic": "t", "defer_time": 50, "cut": {"captured": 11, "length": None}})
    assert cut_unit("c2s", b"PUB t", None) is None  # no end of line: not even the verb is sure
    assert cut_unit("c2s", b"FIN 0123", None) is None
    header = (30 + 5).to_bytes(4, "big") + (2).to_bytes(4, "big")
    name, fields = cut_unit("s2c", header + (7).to_bytes(8, "big") + b"\x00", 39)
    assert name == "FrameTypeMessage" and fields["timestamp"] == 7 and "attempts" not in fields
    assert fields["body_size"] == 5 and fields["cut"] == {"captured": 17, "length": 39}
    assert cut_unit("s2c", header[:6], 39) is None


def test_the_typed_columns_of_cut_units_hold_what_their_head_decoded():
    """``cap.frames``: a PUB, MPUB or DPUB the snaplen cut has its topic (and defer time)
    in the typed columns, not only in ``fields``; a cut message frame its attempts and
    timestamp -- but no message id when the snaplen kept only part of it, and no body
    sha1 or answer text, which need the whole unit."""
    import nsqviz

    frames = nsqviz.open(str(S96)).frames
    cut = frames[frames.fields.str.contains('"cut":')]
    pubs = cut[cut.name.isin(["PUB", "MPUB", "DPUB"])]
    assert len(pubs) == 6 and set(pubs.topic) == {"cut"}
    assert list(pubs[pubs.name == "DPUB"].delay_ms) == [200]
    messages = cut[cut.name == "FrameTypeMessage"]
    assert len(messages) and (messages.attempts == 1).all() and messages.msg_ts.notna().all()
    partial = [len(json.loads(f)["id"]) < 16 for f in messages.fields]
    assert any(partial) and list(messages.msg_id.isna()) == partial
    assert cut.bodies.isna().all() and cut.data.isna().all()
