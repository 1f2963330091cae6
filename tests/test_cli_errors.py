"""Bad input to the ``nsqviz`` sub-commands that read captures (issue 24, items 2 and 5):
one line on stderr and a non-zero exit, never a traceback; and warnings that carry the
real file offset."""

from __future__ import annotations

import json
import os
import struct

import pytest

from nsqviz.capture.layers import ACK, LINKTYPE_RAW
from nsqviz.capture.writer import PcapWriter, TcpConversation, build_packet
from nsqviz.cli import main
from nsqviz.nsq.json_object import MAX_DEPTH
from nsqviz.stream.direction import Direction


def _bad_inputs(tmp_path):
    (tmp_path / "random.pcap").write_bytes(os.urandom(3000))
    (tmp_path / "empty.pcap").write_bytes(b"")
    with open(tmp_path / "sparse.pcap", "wb") as f:
        f.truncate(1 << 20)
    (tmp_path / "a-directory").mkdir()
    return ["random.pcap", "empty.pcap", "sparse.pcap", "a-directory", "missing.pcap"]


@pytest.mark.parametrize("command", ["decode", "conformance"])
def test_unreadable_inputs_are_one_line_and_exit_2(command, tmp_path, capsys):
    for name in _bad_inputs(tmp_path):
        assert main([command, str(tmp_path / name)]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith(f"nsqviz {command}: ") and err.count("\n") == 1, err
        assert "Traceback" not in err


def test_conformance_without_captures_or_live_is_a_usage_error(capsys):
    """Exit status 2, as every sub-command's bad arguments: 1 is conformance's "a rule
    failed"."""
    assert main(["conformance"]) == 2
    assert capsys.readouterr().err == "nsqviz conformance: give capture files or --live NSQD\n"


@pytest.fixture()
def deep_identify(tmp_path):
    """A capture whose client sends an IDENTIFY nested one level deeper than Go reads."""
    inner = MAX_DEPTH
    body = b'{"deep":' + b"[" * inner + b"]" * inner + b"}"
    path = tmp_path / "deep.pcap"
    with PcapWriter(path) as w:
        conv = TcpConversation(w, ("10.0.0.1", 40001), ("10.0.0.2", 4150), mss=1400)
        conv.open(100.0)
        conv.send(Direction.C2S, b"  V2IDENTIFY\n" + struct.pack(">i", len(body)) + body, 100.1)
        error = b"E_BAD_BODY IDENTIFY failed to decode JSON body"
        conv.send(Direction.S2C, struct.pack(">ii", 4 + len(error), 1) + error, 100.2)
        conv.close(100.3)
    return path


def test_decode_reports_deep_json_as_a_violation(deep_identify, capsys):
    assert main(["decode", "--json", str(deep_identify)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (violation,) = [r for r in records if r["kind"] == "error" and r["dir"] == "c2s"]
    assert violation["fields"]["code"] == "E_BAD_BODY" and violation["fields"]["offset"] == 4


def test_conformance_reads_a_capture_with_deep_json(deep_identify, capsys):
    assert main(["conformance", str(deep_identify)]) in (0, 1)
    assert "Traceback" not in capsys.readouterr().err


def test_packet_warnings_carry_their_file_offset(tmp_path, capsys):
    path = tmp_path / "fragment.pcap"
    good = build_packet("10.0.0.1", 1, "10.0.0.2", 4150, 5, 6, ACK, b"abc", linktype=LINKTYPE_RAW)
    frag = bytearray(good)
    struct.pack_into(">H", frag, 6, 0x2000)  # more fragments: a warning, not a segment
    with PcapWriter(path, linktype=LINKTYPE_RAW) as w:
        w.write(1.0, good)
        w.write(2.0, bytes(frag))
    assert main(["decode", "--json", str(path)]) == 0  # one packet: the file is sound
    warnings = [r for line in capsys.readouterr().out.splitlines()
                if (r := json.loads(line))["name"] == "PacketWarning"]
    # the second record starts after the 24-byte file header, one 16-byte record header
    # and the first packet
    assert [w["fields"]["file_offset"] for w in warnings] == [24 + 16 + len(good)]


def _damaged(tmp_path, how: str):
    """A sample capture cut inside a record, or with a record length no file can have."""
    from pathlib import Path

    data = (Path(__file__).parent.parent / "data" / "pubsub-pynsq.pcap").read_bytes()
    if how == "cut short":
        data = data[:len(data) // 2 + 7]
    else:
        raw, offset = bytearray(data), 24
        while offset < len(raw) // 2:  # the first record past the middle of the file
            offset += 16 + struct.unpack_from("<I", raw, offset + 8)[0]
        struct.pack_into("<I", raw, offset + 8, 0x7FFFFFFF)
        data = bytes(raw)
    path = tmp_path / f"{how.replace(' ', '-')}.pcap"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("how", ["cut short", "impossible length"])
@pytest.mark.parametrize("command", ["decode", "messages", "connections", "stats"])
def test_a_damaged_capture_is_shown_then_exit_2(command, how, tmp_path, capsys):
    """Issue 33 item 6: one exit status rule for a capture file damaged part way, in
    decode and the analyses alike (decode exited 0, the analyses 0 or 2 by whether
    anything could be read): what could be read is shown, the damage is said on stderr,
    and the status is 2 -- tshark's for the same file."""
    import shutil
    import subprocess

    path = _damaged(tmp_path, how)
    assert main([command, str(path)]) == 2
    out, err = capsys.readouterr()
    assert out.strip(), "what could be read is shown"
    assert "Traceback" not in err
    assert all(line.startswith(f"nsqviz {command}: ") for line in err.splitlines())
    assert "file ends inside the record" in err or "captured bytes, more than" in err
    tshark = shutil.which("tshark")
    if tshark:
        assert subprocess.run([tshark, "-r", str(path)], capture_output=True).returncode == 2
