"""``nsqviz decode``: text and JSON output, --flow, --filter, --stats, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsqviz.capture.synth import NsqTalk, pubsub_session
from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.cli import main


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "two.pcap"
    with PcapWriter(path) as w:
        for i, port in enumerate((40001, 40002)):
            conv = TcpConversation(w, ("10.0.0.1", port), ("10.0.0.2", 4150), mss=400)
            conv.open(100.0 + i)
            talk = NsqTalk(conv, ts=100.0 + i)
            pubsub_session(talk, messages=6 + i, body_sizes=(900,), seed=i)
            conv.close(talk.ts + 0.001)
    return path


def _json_lines(capsys, *args) -> list[dict]:
    assert main(["decode", "--json", *args]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_json_lines_have_the_documented_fields(capture, capsys):
    rows = _json_lines(capsys, str(capture))
    assert rows and all(
        set(r) == {"ts", "flow", "dir", "kind", "name", "fields", "packets"} for r in rows
    )
    assert {r["kind"] for r in rows} == {"command", "frame", "tcp"}
    # each connection ends with the peers' FINs, as records of their connection
    fins = [(r["flow"], r["dir"], r["fields"]) for r in rows if r["kind"] == "tcp"]
    assert sorted(fins) == sorted(
        (flow, d, {"side": side}) for flow in {r["flow"] for r in rows}
        for d, side in (("c2s", "client"), ("s2c", "server")))
    assert {r["dir"] for r in rows} == {"c2s", "s2c"}
    assert {r["flow"] for r in rows} == {"10.0.0.1:40001->10.0.0.2:4150",
                                         "10.0.0.1:40002->10.0.0.2:4150"}
    msgs = [r for r in rows if r["name"] == "FrameTypeMessage"]
    assert len(msgs) == 6 + 7
    assert all(len(bytes.fromhex(m["fields"]["body"])) == 900 for m in msgs)
    assert all(len(m["packets"]) >= 2 for m in msgs)  # 934-byte frames over 400-byte segments
    ts = [r["ts"] for r in rows]
    assert ts == sorted(ts)


def test_filter_and_flow(capture, capsys):
    pubs = _json_lines(capsys, "--filter", "pub", "--filter", "MPUB", str(capture))
    assert [r["name"] for r in pubs] == ["PUB", "MPUB", "PUB", "MPUB"]
    by_index = _json_lines(capsys, "--flow", "1", "--filter", "FrameTypeMessage", str(capture))
    assert len(by_index) == 7 and {r["flow"] for r in by_index} == {
        "10.0.0.1:40002->10.0.0.2:4150"}
    by_end = _json_lines(capsys, "--flow", "10.0.0.1:40001", "--filter", "frame", str(capture))
    assert {r["flow"] for r in by_end} == {"10.0.0.1:40001->10.0.0.2:4150"}
    assert {r["kind"] for r in by_end} == {"frame"}


def test_text_output_is_one_line_per_record(capture, capsys):
    assert main(["decode", str(capture)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = _json_lines(capsys, str(capture))
    assert len(lines) == len(rows)
    first = lines[0].split()
    assert first[0] == "4" and first[2:5] == ["10.0.0.1:40001", "->", "10.0.0.2:4150"]
    assert lines[0].split("MAGIC", 1)[1].strip() == '"  V2"'  # the bytes the client sent
    sub = next(line for line in lines if " SUB " in line)
    assert "topic=events channel=archive" in sub


def test_the_magic_line_shows_the_bytes_sent(capsys):
    """nsqd's and nsqlookupd's magics differ in one byte: the line says which was sent."""
    path = Path(__file__).resolve().parents[2] / "data" / "lookupd" / "nsqd-register-real.pcap"
    assert main(["decode", str(path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.split("MAGIC", 1)[1].strip() == '"  V1"'


def test_stats_text_and_json(capture, capsys):
    assert main(["decode", "--stats", str(capture)]) == 0
    text = capsys.readouterr().out
    assert "2 TCP flows" in text and "frames per packet" in text and "packets per frame" in text
    stats = _json_lines(capsys, "--stats", str(capture))
    assert [s["flow_id"] for s in stats] == [0, 1]
    s0 = stats[0]
    assert s0["protocol"] == "nsq" and s0["records"]["frame"] == 4 + 6
    assert s0["packets_per_frame"]["max"] >= 3 and s0["gap_bytes"] == 0


def test_not_a_capture_is_a_clear_error(tmp_path, capsys):
    bogus = tmp_path / "x.pcap"
    bogus.write_bytes(b"not a capture at all")
    assert main(["decode", str(bogus)]) == 2
    assert "neither pcap" in capsys.readouterr().err
    assert main(["decode", str(tmp_path / "missing.pcap")]) == 2


@pytest.mark.parametrize("interface,choices", [
    ("lo0", "lo, any"), ("eht0", "eth0, any"), ("wlan0", "wlp2s0, any"),
    ("xyz", "eth0, lo, wlp2s0, any")])
def test_an_unknown_interface_names_the_nearest_ones(interface, choices, monkeypatch, capsys):
    """Before any capture tool is looked for: no tcpdump or privileges needed."""
    monkeypatch.setattr("socket.if_nameindex", lambda: [(1, "lo"), (2, "eth0"), (3, "wlp2s0")])
    assert main(["decode", "-i", interface]) == 2
    assert capsys.readouterr().err == \
        f"nsqviz decode: no interface {interface!r}: try {choices}\n"


def test_console_script_runs(capture):
    out = subprocess.run([sys.executable, "-m", "nsqviz.cli", "decode", "--filter", "SUB",
                          "--json", str(capture)], capture_output=True, text=True, check=True)
    assert [json.loads(line)["name"] for line in out.stdout.splitlines()] == ["SUB", "SUB"]


def test_json_lines_reach_a_file_that_takes_a_few_bytes_a_call(capture, tmp_path,
                                                               monkeypatch):
    """``--json`` lines go to standard output's file in gathered writes: where each call
    takes only part of them (a full pipe), the rest follows, in order, none lost."""
    import os

    from nsqviz.capture import cli as capture_cli
    from nsqviz.capture.decode import CaptureDecoder
    from nsqviz.records import json_line

    calls = []

    def few_bytes(fd: int, lines: list[bytes]) -> int:
        calls.append(len(lines))
        return os.write(fd, b"".join(lines)[:7])

    monkeypatch.setattr(capture_cli, "_writev", few_bytes)
    path = tmp_path / "out.jsonl"
    with open(path, "w") as out:
        monkeypatch.setattr(sys, "stdout", out)
        assert main(["decode", "--json", str(capture)]) == 0
    expected = b"".join(json_line(rec) for rec in CaptureDecoder(tcp_records=True).decode(
        [capture]))
    assert path.read_bytes() == expected
    assert len(calls) > len(expected) // 7 and max(calls) > 1


def _reference_line(rec) -> bytes:
    """What `decode --json` writes for ``rec``, by the standard library: compact, UTF-8,
    an unknown time as null, a newline after."""
    row = rec.as_json()
    if row["ts"] != row["ts"]:
        row["ts"] = None
    return json.dumps(row, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def test_fast_json_lines_equal_json_dumps(capture):
    from nsqviz.capture.decode import CaptureDecoder
    from nsqviz.records import json_line

    records = list(CaptureDecoder().decode([capture]))
    assert records
    for rec in records:
        assert json.loads(json_line(rec)) == json.loads(json.dumps(rec.as_json()))
        assert json_line(rec) == _reference_line(rec)


def test_fast_json_lines_equal_json_dumps_on_every_sample():
    from pathlib import Path

    from nsqviz.capture.decode import CaptureDecoder
    from nsqviz.records import json_line

    data = Path(__file__).resolve().parents[2] / "data"
    seen = set()
    for path in sorted(data.glob("*.pcap*")):
        for rec in CaptureDecoder(ports={"nsq": {45425}}).decode([path]):
            assert json_line(rec) == _reference_line(rec), rec
            seen.add(rec.kind)
    assert seen == {"command", "frame", "error", "gap", "tls"}


def test_json_lines_keep_what_the_fast_encoder_refuses():
    """An int past 64 bits, a lone surrogate (a name decoded with surrogateescape), a
    key that is not a string, a non-ASCII name and an unknown time: each line is still
    one JSON object holding the record's values, NaN written as null."""
    from nsqviz.records import DecodedRecord, json_line

    cases = [
        ({"big": 2**70, "x": "caf\u00e9"}, "PUB"),
        ({"name": "\udcff"}, "\u00e9"),
        ({1: "int key", "inf": float("inf")}, "FIN"),
    ]
    for fields, name in cases:
        rec = DecodedRecord(float("nan"), "a:1->b:2", "c2s", "command", name, fields, (1, 2))
        row = json.loads(json_line(rec))
        assert row["ts"] is None and row["name"] == name and row["packets"] == [1, 2]
        assert row["fields"] == json.loads(json.dumps(
            {k: (None if v == float("inf") else v) for k, v in fields.items()}))


def test_several_files_number_flows_on(capture, capsys):
    rows = _json_lines(capsys, "--each-file", "--stats", str(capture), str(capture))
    assert [s["flow_id"] for s in rows] == [0, 1, 2, 3]
    msgs = _json_lines(capsys, "--each-file", "--flow", "3", "--filter", "FrameTypeMessage",
                       str(capture), str(capture))
    assert len(msgs) == 7


def test_reads_standard_input_and_says_when_nothing_is_nsq(capture, tmp_path):
    out = subprocess.run([sys.executable, "-m", "nsqviz.cli", "decode", "--json", "-"],
                         input=capture.read_bytes(), capture_output=True, check=True)
    assert len(out.stdout.splitlines()) > 20
    other = tmp_path / "ssh.pcap"  # a protocol nsqviz does not know
    with PcapWriter(other) as w:
        conv = TcpConversation(w, ("10.0.0.1", 50001), ("10.0.0.2", 22))
        conv.open(1.0)
        conv.send("c2s", b"SSH-2.0-OpenSSH_9.2\r\n", 1.1)
    out = subprocess.run([sys.executable, "-m", "nsqviz.cli", "decode", str(other)],
                         capture_output=True, text=True, check=True)
    assert out.stdout == "" and "no known protocol in 1 TCP flows" in out.stderr


def test_width_wraps_lines_at_field_boundaries():
    from nsqviz.capture.cli import wrap_line

    line = "  9  0.1 a -> b  command IDENTIFY  " + '{"short_id":"vm","long_id":"vm","x":1}'
    wrapped = wrap_line(line + "  reason=the first frame", 50)
    rows = wrapped.splitlines()
    assert all(len(r) <= 50 for r in rows) and len(rows) > 1
    assert "".join(r.strip() if i else r for i, r in enumerate(rows)).replace(" ", "") == (
        line + "  reason=the first frame").replace(" ", "")
    for piece in ('"short_id":"vm"', '"long_id":"vm"', "reason="):  # never cut inside
        assert any(piece in r for r in rows), (piece, rows)
    assert wrap_line(line, None) == line and wrap_line(line, 500) == line
