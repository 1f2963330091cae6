"""Every sample capture in data/ decodes, with no error the broker did not also report."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from nsqviz.capture.decode import CaptureDecoder

DATA = Path(__file__).resolve().parents[2] / "data"
CAPTURES = sorted(p.name for p in DATA.glob("*.pcap*"))
CUT_ON_PURPOSE = {"midstream-pynsq.pcap", "snaplen120-small-messages.pcap"}


def _decode(name: str, **kw):
    decoder = CaptureDecoder(**kw)
    return list(decoder.decode([DATA / name])), decoder


def test_the_samples_are_there_and_small():
    assert len(CAPTURES) >= 10
    assert all((DATA / n).stat().st_size < 300_000 for n in CAPTURES)
    readme = (DATA / "README.md").read_text()
    assert all(f"`{n}`" in readme for n in CAPTURES)


@pytest.mark.parametrize("name", CAPTURES)
def test_sample_decodes_with_no_unexplained_errors(name):
    records, decoder = _decode(name)
    assert not decoder.warnings
    nsq = [s for s in decoder.stats if s.protocol == "nsq"]
    # every NSQ flow has nsqd's frames, and commands -- or a magic nsqd refused
    assert nsq and all((s.records.get("command") or s.records.get("error"))
                       and s.records.get("frame") for s in nsq)
    # An error we report on the client's side is explained when nsqd said the same.
    answered = Counter((r.flow, r.fields["code"]) for r in records
                       if r.name == "FrameTypeError")
    for r in records:
        if r.kind == "error" and r.protocol == "nsq":
            assert answered[r.flow, r.name] > 0, r
    if name not in CUT_ON_PURPOSE:
        assert not [r for r in records if r.kind == "gap"]
        assert all(s.flow.syn_seen for s in decoder.stats)


def test_pubsub_sample_has_every_common_command_and_frame():
    records, _ = _decode("pubsub-pynsq.pcap")
    names = Counter(r.name for r in records)
    for name in ("MAGIC", "IDENTIFY", "SUB", "RDY", "PUB", "MPUB", "DPUB", "FIN", "REQ",
                 "TOUCH", "NOP", "FrameTypeResponse", "FrameTypeMessage"):
        assert names[name] > 0, name
    redelivered = [r for r in records if r.name == "FrameTypeMessage"
                   and bytes.fromhex(r.fields["body"]) == b"req-me"]
    assert [r.fields["attempts"] for r in redelivered] == [1, 2]


def test_same_traffic_in_three_containers_decodes_the_same():
    def rows(name):
        return [(r.dir, r.name, r.fields.get("body")) for r in _decode(name)[0]]

    assert rows("pubsub-pynsq.pcap") == rows("pubsub-pynsq.pcapng")
    sll2 = _decode("pubsub-any-sll2.pcap")[0]
    assert Counter(r.name for r in sll2) == Counter(r.name for r in
                                                    _decode("pubsub-pynsq.pcap")[0])


@pytest.mark.parametrize("name,kind", [("snappy-pynsq.pcap", "snappy"),
                                       ("deflate-pynsq.pcap", "deflate")])
def test_compressed_samples_switch_and_keep_decoding(name, kind):
    records, _ = _decode(name)
    switches = [r for r in records if "compression_starts" in r.fields]
    assert len(switches) == 2 and {s.fields["compression_starts"]["kind"] for s in switches} == {
        kind}
    after = records.index(switches[0])
    assert sum(r.name == "FrameTypeMessage" for r in records[after:]) >= 9


def test_sticky_and_split_frames_in_the_samples():
    _, small = _decode("small-messages-pynsq.pcap")
    assert max(max(s.frames_per_packet) for s in small.stats) >= 50
    _, large = _decode("large-messages-pynsq.pcap")
    assert max(max(s.packets_per_frame) for s in large.stats) >= 2


def test_errors_sample_and_the_http_flow():
    """An HTTP request sent to the broker's TCP port (not 4150, so no port says NSQ): the
    broker answers in NSQ's framing, so the flow is NSQ's -- the request is the magic it
    refused, its E_BAD_PROTOCOL frame the answer."""
    records, decoder = _decode("errors.pcap")
    codes = [r.fields["code"] for r in records if r.name == "FrameTypeError"]
    assert codes == ["E_BAD_TOPIC", "E_FIN_FAILED", "E_REQ_FAILED", "E_INVALID",
                     "E_BAD_PROTOCOL"]
    assert [s.protocol for s in decoder.stats] == ["nsq"] * 4
    assert "the server answers in NSQ's framing" in decoder.stats[3].why
    http = [r for r in records if r.flow_id == 3 and r.kind != "tcp"]
    assert [r.name for r in http] == ["E_BAD_PROTOCOL", "FrameTypeError"]
    assert bytes.fromhex(http[0].fields["data"]).startswith(b"GET ")
    assert http[1].fields["response_to"] == http[0].packets[-1]


def test_cut_samples_say_where_and_why():
    records, decoder = _decode("snaplen120-small-messages.pcap")
    gaps = [r for r in records if r.name == "Gap"]
    assert gaps and all("snaplen" in g.fields["reason"] for g in gaps)
    records, decoder = _decode("midstream-pynsq.pcap")
    assert all(not s.flow.syn_seen for s in decoder.stats)
    assert [r.name for r in records if r.kind == "gap"].count("Resync") >= 2


def test_tls_sample_is_shown_encrypted_not_decoded_as_garbage():
    records, decoder = _decode("tls-pynsq.pcapng")
    assert [r.name for r in records if r.kind == "tls"].count("TLSUpgrade") == 2
    assert all(s.encrypted_bytes > 1000 for s in decoder.stats)
    upgrade = records.index(next(r for r in records if r.name == "TLSUpgrade"))
    assert records[upgrade - 1].name == "FrameTypeResponse"
    assert records[upgrade - 1].event.json()["tls_v1"] is True


def test_nsqjs_sample_closes_with_cls():
    records, _ = _decode("pubsub-nsqjs.pcapng")
    names = Counter(r.name for r in records)
    assert names["CLS"] == 2 and names["FrameTypeMessage"] == 7
    answers = [bytes.fromhex(r.fields["data"]) for r in records
               if r.name in ("FrameTypeResponse", "FrameTypeError") and r.dir == "s2c"]
    assert b"CLOSE_WAIT" in answers and b"E_INVALID cannot CLS in current state" in answers
