"""Proof by tshark: the generated NSQ dissector, run by the real tshark over every sample
capture in data/, shows the same commands and frames, with the same field values, the
same packet numbers (all segments of a reassembled PDU) and the same violations as
``nsqviz decode --json``.

The differences allowed, and checked to be only these:

* **compressed and TLS streams**: nsqviz decompresses snappy and deflate streams (the
  codec holds the compressor state); Wireshark's Lua cannot, and TLS is encrypted for
  both. After the IDENTIFY response that negotiated the switch, nsqviz's records of
  that connection are not compared; instead every packet that carried them must show
  Wireshark's ``nsq.compressed`` (with the right algorithm) or ``nsq.tls`` marking.
  The switch itself is compared (``compression_starts`` on the response; the
  ``TLSUpgrade`` record); nsqviz's closing ``Encrypted`` byte count has no PDU in
  Wireshark.
* **bytes missing from the capture** (the snaplen sample): nsqviz reports each hole as
  a ``Gap`` record and the way it found the next frame as a ``Resync`` record, and the
  unit the snaplen cut as that unit decoded as far as it was captured (``cut``);
  Wireshark shows the PDU the snaplen cut, as far as it was captured, with ``nsq.cut``
  in the packet that was cut. Both must agree on every unit, cut ones included (but
  for a unit over several packets whose last one the snaplen cut: Wireshark's TCP does
  not reassemble a cut segment, nsqviz shows the unit), and Wireshark must mark a cut in
  every packet nsqviz names as cut short.
* **violations**: the code, nsqd's text and fatality are compared; nsqviz's stream
  ``offset`` and ``field_offset``, its ``field`` and ``reason`` (where the fault is, in
  the grammar's words) and ``data`` hex are not (Wireshark shows the bytes themselves). Bytes the
  framing rule cannot cut into a PDU are reported by both where they start (nsqviz
  with the packets they spanned so far); the rest, up to the next boundary, is
  Wireshark's "undecodable (continued)" and nsqviz's ``continued`` ``Skipped`` record,
  not compared: the first packet is, and records are compared in order of first packet.
* **a connection claimed by its server's answer alone** (its client sent no magic, its
  server port is not 4150: an HTTP request to the broker's TCP port): nsqviz gives it to
  NSQ because the server answers in NSQ's framing; a heuristic dissector sees only the
  client's first bytes, so Wireshark shows none of it as NSQ. Left out, and checked to
  have no NSQ PDU in Wireshark.
* TCP ``FIN``/``RST`` records are nsqviz's (Wireshark's TCP layer shows the flags).
* ``ts`` is not compared (tshark's JSON has it per packet, not per PDU).
* ``refused`` (nsqviz's observer judging a well-formed command against nsqd's state
  table and its flight) is not compared: the dissector does not track either. Which
  command each response and error answers (``response_to``) is compared.
* flows of another protocol (the lookupds' HTTP in the guide captures, errors.pcap's HTTP
  request to nsqd's TCP port) are that protocol's, not compared here (tests/http holds
  the HTTP APIs to tshark).
"""

from __future__ import annotations

import re
import subprocess
from io import StringIO
from pathlib import Path

import pytest

from nsqviz.capture import cli as decode_cli
from nsqviz.capture.decode import CaptureDecoder, decode_capture
from nsqviz.capture.synth import NsqTalk, pubsub_session
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.cli import build_parser
from nsqviz.cli import main as nsqviz_main
from nsqviz.nsq.dissector.tshark_records import as_record
from nsqviz.nsq.protocol import NSQ
from nsqviz.wireshark.generate import tshark_args
from nsqviz.wireshark.tshark import find_tshark, tshark_pdus

pytestmark = pytest.mark.skipif(
    find_tshark() is None, reason="tshark is not installed (scripts/sysdeps.sh installs it)"
)

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLES = sorted(p.name for p in DATA.iterdir() if p.suffix in (".pcap", ".pcapng"))
"""The NSQ samples (the TubeMQ ones, in data/tubemq/, are held to the TubeMQ codec in
test_tshark_tubemq.py)."""


@pytest.fixture(scope="module")
def lua_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wireshark")
    assert nsqviz_main(["wireshark", "--out", str(folder)]) == 0
    return folder


def _decode_json(path: Path) -> list[dict]:
    import json

    out = StringIO()
    args = build_parser("decode").parse_args(["decode", "--json", str(path)])
    assert decode_cli.run(args, out) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    for row in rows:
        row.pop("ts")
    return rows


def _switch_points(ours: list[dict]) -> dict[str, tuple[int, str]]:
    """flow -> (packet of the response after which the stream switched, to what)."""
    points = {}
    for i, r in enumerate(ours):
        if r["kind"] == "frame" and "compression_starts" in r["fields"]:
            points[r["flow"]] = (r["packets"][-1], r["fields"]["compression_starts"]["kind"])
        if r["name"] == "TLSUpgrade":
            points[r["flow"]] = (r["packets"][-1], "tls")
            assert ours[i - 1]["kind"] == "frame", "TLSUpgrade follows the IDENTIFY response"
    return points


def _cut_packets(ours: list[dict]) -> set[int]:
    cut = set()
    for r in ours:
        if r["name"] == "Gap":
            m = re.match(r"packet (\d+) was cut short", r["fields"]["reason"])
            assert m, r
            cut.add(int(m.group(1)))
    return cut


def _claimed_by_the_answer_alone(path: Path) -> set[str]:
    """The flows nsqviz gives to NSQ only because their server answers in NSQ's framing."""
    decoder = CaptureDecoder()
    for _ in decoder.decode([path]):
        pass
    return {s.flow.label for s in decoder.stats if s.protocol == "nsq"
            and s.why.startswith("the server answers") and s.flow.server[1] not in NSQ.server_ports}


def _clip(record: dict) -> str:
    return re.sub(r"([0-9a-f]{40})[0-9a-f]+", r"\1...", str(record))


def assert_tshark_agrees(path: Path, lua_dir: Path) -> list[dict]:
    """Compare tshark with the generated dissectors and ``nsqviz decode --json`` on one
    capture, allowing only the differences listed in this module's docstring; returns
    nsqviz's rows."""
    other = {r.flow for r in decode_capture(path) if r.protocol not in (None, "nsq")}
    ours = [r for r in _decode_json(path) if r["flow"] not in other]
    pdus = tshark_pdus(path, lua_dir)
    theirs = [r for r in (as_record(p) for p in pdus) if r is not None]
    answered = _claimed_by_the_answer_alone(path)
    assert not [r for r in theirs if r["flow"] in answered]
    ours = [r for r in ours if r["flow"] not in answered]

    switches = _switch_points(ours)
    marks = {}  # (flow, dir, packet) -> marking, for compressed/TLS/cut PDUs
    for p in pdus:
        rec_dir = p.first("nsq.dir")
        client, server = (p.src, p.dst) if rec_dir == "c2s" else (p.dst, p.src)
        flow = f"{client}->{server}"
        for name in ("nsq.compressed", "nsq.tls", "nsq.cut"):
            if p.first(name) is not None:
                marks[(flow, rec_dir, p.frame)] = "tls" if name == "nsq.tls" else (
                    p.first(name) if name == "nsq.compressed" else "cut")

    expected = []
    unseen: set[tuple[str, int]] = set()  # (flow, packet) of units Wireshark cannot show
    for r in ours:
        if r["kind"] == "tcp":
            continue
        switch = switches.get(r["flow"])
        after_switch = switch is not None and r["packets"][0] > switch[0]
        if r["name"] == "Encrypted":
            assert any(k[0] == r["flow"] and v == "tls" for k, v in marks.items()), r
            continue
        if after_switch:
            # every packet that carried it is marked, with the right algorithm
            for packet in r["packets"]:
                assert marks.get((r["flow"], r["dir"], packet)) == switch[1], (r, switch)
            continue
        if r["kind"] == "gap" and (r["name"] in ("Gap", "Resync") or r["fields"].get("continued")):
            continue  # Wireshark marks continued undecodable bytes nsq.skipped, not a PDU
        if "cut" in r["fields"] and len(r["packets"]) > 1:
            unseen.add((r["flow"], r["packets"][-1]))
            continue  # Wireshark's TCP cannot reassemble segments the snaplen cut
        if (r["flow"], r["fields"].get("response_to")) in unseen:  # nor pair an answer to it
            r = {**r, "fields": {k: v for k, v in r["fields"].items() if k != "response_to"}}

        if r["name"] == "TLSUpgrade":
            r = {**r, "fields": {}}
        if "refused" in r["fields"]:
            r = {**r, "fields": {k: v for k, v in r["fields"].items() if k != "refused"}}
        expected.append(r)
    # TLS: Wireshark says so on the response that negotiated it
    got = list(theirs)
    for flow, (packet, kind) in switches.items():
        if kind == "tls":
            i = next(i for i, r in enumerate(got) if r["flow"] == flow
                     and r["packets"][-1] == packet and r["kind"] == "frame")
            got.insert(i + 1, {"flow": flow, "dir": "s2c", "kind": "tls", "name": "TLSUpgrade",
                               "fields": {}, "packets": [packet]})
    shown = ("code", "text", "fatal")  # of a violation, what the dissector shows
    for r in expected:
        if r["kind"] == "error":
            r["fields"] = {k: r["fields"][k] for k in shown}
        elif "violation" in r["fields"]:
            r["fields"]["violation"] = {k: r["fields"]["violation"][k] for k in shown}
    # Bytes that cannot be cut into a PDU: both show the violation where they start,
    # Wireshark in that packet, nsqviz naming the packets they spanned so far.
    for r in got:
        if r.pop("unframed", False):
            match = next(e for e in expected if e["kind"] == "error" and e["flow"] == r["flow"]
                         and e["dir"] == r["dir"] and e["packets"][0] == r["packets"][0])
            match["packets"] = r["packets"]
    got.sort(key=lambda r: r["packets"][0])  # stable: stream order within a direction
    expected.sort(key=lambda r: r["packets"][0])

    for i, (a, b) in enumerate(zip(got, expected, strict=False)):
        assert a == b, f"record {i}: tshark\n  {_clip(a)}\nnsqviz decode\n  {_clip(b)}"
    assert len(got) == len(expected), (got[len(expected):][:3], expected[len(got):][:3])

    cut = _cut_packets(ours)
    marked_cut = {k[2] for k, v in marks.items() if v == "cut"}
    assert cut <= marked_cut, f"packets cut short that Wireshark did not mark: {cut - marked_cut}"
    return ours


@pytest.mark.parametrize("sample", SAMPLES)
def test_tshark_decodes_every_sample_like_nsqviz(sample, lua_dir):
    ours = assert_tshark_agrees(DATA / sample, lua_dir)
    assert any(r["kind"] in ("command", "frame") for r in ours)


def test_tshark_shows_what_the_snaplen_kept_of_the_real_nsqd_like_nsqviz(lua_dir):
    """``tcpdump -s 96`` of the real nsqd: both decode every PUB, MPUB, DPUB, IDENTIFY
    and message frame the snaplen cut as far as it was captured, with the same fields."""
    ours = assert_tshark_agrees(DATA / "nsqd" / "snaplen" / "pubsub-s96.pcap", lua_dir)
    cut = {r["name"] for r in ours if "cut" in r["fields"]}
    assert {"PUB", "MPUB", "DPUB", "IDENTIFY", "FrameTypeMessage"} <= cut


def test_tshark_shows_a_magic_nsqd_refused_like_nsqviz(lua_dir):
    """The real nsqd on its port 4150 sent nsqlookupd's magic: both show NSQ's
    connection -- the magic nsqd refused (E_BAD_PROTOCOL), nsqd's error frame (in three
    segments), and nothing decodable after it (the PING nsqd never read)."""
    path = DATA / "nsqd" / "refused" / "wrong-magic.pcap"
    ours = assert_tshark_agrees(path, lua_dir)
    assert [(r["kind"], r["name"], r["packets"]) for r in ours if r["kind"] != "tcp"] == [
        ("error", "E_BAD_PROTOCOL", [4]), ("frame", "FrameTypeError", [6, 8, 10]),
        ("gap", "Skipped", [13])]
    # the same in two passes, as the GUI dissects (a first pass without a tree)
    done = subprocess.run(["tshark", "-2", *tshark_args(lua_dir), "-r", str(path), "-Y",
                           "nsq.violation", "-T", "fields", "-e", "frame.number"],
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["4"]


@pytest.mark.parametrize("mss", [3, 61])
def test_tshark_reassembles_split_and_glued_pdus_like_nsqviz(tmp_path, lua_dir, mss):
    """Every PDU split over several segments (down to three bytes a segment), several in
    one write: Wireshark's desegmentation and nsqviz's reassembly name the same
    packets for every frame, in both directions."""
    path = tmp_path / f"split-{mss}.pcap"
    with PcapWriter(path) as w:
        conv = TcpConversation(w, ("10.1.0.1", 40100), ("10.1.0.2", 4150), mss=mss,
                               isn=(0xFFFFFF00, 7))
        conv.open(100.0)
        talk = NsqTalk(conv, ts=100.0)
        pubsub_session(talk, messages=12, body_sizes=(3, 40, 300), batch=4, seed=mss)
        conv.close(talk.ts + 0.001)
    ours = assert_tshark_agrees(path, lua_dir)
    spans = [len(r["packets"]) for r in ours if r["kind"] == "frame"]
    assert max(spans) > 1


def _size(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


# Malformed input, as literal bytes: the grammar refuses to build it.
BAD_COMMANDS = [
    b"SUB bad*topic ch\n", b"SUB t bad*ch\n", b"SUB t\x01\tq\"\\ ch\n", b"RDY x\n", b"RDY\n",
    b"RDY 1 2\n",
    b"FIN 123\n", b"FIN 0123456789abcdeg\n", b"REQ 0123456789abcdef x\n", b"TOUCH\n",
    b"CLS x\n", b"NOP\n", b"BOGUS\n", b"AUTH x\n" + _size(1) + b"s",
    b"IDENTIFY\n" + _size(5) + b"nojsn", b"IDENTIFY\n" + _size(2) + b"[]",
    b"MPUB t\n" + _size(4) + _size(0),
    b"MPUB t\n" + _size(9) + _size(1) + _size(0) + b"x",
    b"MPUB t\n" + _size(11) + _size(1) + _size(1) + b"x" + b"zz",
    b"MPUB t\n" + _size(9) + _size(1) + _size(7) + b"x",
    b"DPUB t x\n" + _size(1) + b"a", b"PUB bad*t\n" + _size(1) + b"a",
    b"PUB t\n" + _size(0), b"PUB t\n" + _size(2) + b"ok",
    b"SUB t c\n",
]
BAD_FRAMES = [
    _size(6) + _size(0) + b"OK",
    _size(12) + _size(7) + b"whatever",
    _size(6) + _size(0) + b"OK",
    _size(4 + 26) + _size(2) + bytes(10) + b"0123456789abcdeZ",
    _size(4 + 20) + _size(2) + bytes(20),
    _size(2) + b"xx",
    _size(6) + _size(0) + b"OK",
]


def test_tshark_reports_the_violations_nsqviz_reports(tmp_path, lua_dir):
    """Malformed commands and frames: the same nsqd error code, text and fatality, the
    same resynchronisation after bytes that cannot be framed."""
    path = tmp_path / "violations.pcap"
    with PcapWriter(path) as w:
        conv = TcpConversation(w, ("10.2.0.1", 40200), ("10.2.0.2", 4150))
        conv.open(200.0)
        ts = 200.0
        conv.send("c2s", b"  V2", ts)
        for data in BAD_COMMANDS:
            ts += 0.001
            conv.send("c2s", data, ts)
        for data in BAD_FRAMES:
            ts += 0.001
            conv.send("s2c", data, ts)
        conv.close(ts + 0.001)
    ours = assert_tshark_agrees(path, lua_dir)
    codes = {r["name"] for r in ours if r["kind"] == "error"}
    # a well-framed command with a bad name or id is that command, its violation attached
    kept = {r["fields"]["violation"]["code"] for r in ours
            if r["kind"] == "command" and "violation" in r["fields"]}
    assert {"E_INVALID", "E_BAD_BODY", "E_BAD_MESSAGE", "Undecodable"} <= codes
    assert {"E_BAD_TOPIC", "E_BAD_CHANNEL", "E_FIN_FAILED"} <= kept
