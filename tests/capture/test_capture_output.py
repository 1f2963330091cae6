"""``nsqviz decode``'s output as complete as Wireshark's: ``-V`` prints every field
untruncated, JSON bodies decoded (``--json`` too, the raw bytes under their own key),
binary bodies escaped, one way to write packet lists, TCP FIN and RST as records of
their connection."""

from __future__ import annotations

import json
from pathlib import Path

from nsqviz.capture.writer import PcapWriter, TcpConversation
from nsqviz.cli import main
from nsqviz.records import escaped, packet_list

DATA = Path(__file__).resolve().parents[2] / "data"


def _decode(capsys, *args: str) -> str:
    assert main(["decode", *args]) == 0
    return capsys.readouterr().out


def _json(capsys, *args: str) -> list[dict]:
    return [json.loads(line) for line in _decode(capsys, "--json", *args).splitlines()]


def test_identify_and_its_json_answer_decoded_in_json_with_their_bytes(capsys):
    rows = _json(capsys, str(DATA / "pubsub-pynsq.pcap"))
    identify = next(r for r in rows if r["name"] == "IDENTIFY")
    raw = bytes.fromhex(identify["fields"]["body"])
    assert json.loads(raw) == identify["fields"]["data"]
    answer = next(r for r in rows if r["fields"].get("response_to") == identify["packets"][-1])
    assert answer["fields"]["json"] == json.loads(bytes.fromhex(answer["fields"]["data"]))
    assert answer["fields"]["json"]["msg_timeout"] == 2000


def test_verbose_prints_every_field_untruncated(capsys):
    out = _decode(capsys, "-V", "--width", "80", str(DATA / "pubsub-pynsq.pcap"))
    # the keys the one-line summary used to cut off, each on a line of its own
    assert "\n                  msg_timeout: 2000\n" in out
    assert "\n                  user_agent: pynsq/0.9.1\n" in out
    assert "body (307 bytes): {" in out
    line = next(x for x in _decode(capsys, str(DATA / "pubsub-pynsq.pcap")).splitlines()
                if "IDENTIFY" in x)
    assert line.endswith('"user_agent":"pynsq/0.9.1"}')  # no longer cut at 120 characters


def test_binary_bodies_are_escaped_never_replacement_characters(tmp_path, capsys):
    path = tmp_path / "binary.pcap"
    body = b"\x00\xff\xfebin\n\xe4\xb8\xad"
    with PcapWriter(path) as w:
        conv = TcpConversation(w, ("10.9.0.1", 40900), ("10.9.0.2", 4150))
        conv.open(1.0)
        conv.send("c2s", b"  V2PUB t\n" + len(body).to_bytes(4, "big") + body, 1.1)
        conv.close(1.2)
    for out in (_decode(capsys, str(path)), _decode(capsys, "-V", str(path))):
        assert "\ufffd" not in out
        assert "\\x00\\xff\\xfebin\\n中" in out
    assert escaped(body) == "\\x00\\xff\\xfebin\\n中"


def test_one_way_to_write_packet_lists(capsys):
    rows = _json(capsys, str(DATA / "large-messages-pynsq.pcap"))
    text = _decode(capsys, str(DATA / "large-messages-pynsq.pcap"))
    spread = [r for r in rows if len(r["packets"]) > 2]
    assert spread
    for r in spread:
        written = packet_list(r["packets"])
        assert written == ",".join(map(str, r["packets"]))
        assert any(line.split()[0] == written for line in text.splitlines())
    assert ".." not in text.replace("...", "")


def test_fin_and_rst_are_records_of_their_connection(capsys):
    rows = _json(capsys, str(DATA / "nsqd" / "errors.pcap"), "--port", "35785")
    tcp = [r for r in rows if r["kind"] == "tcp"]
    assert {r["name"] for r in tcp} == {"FIN", "RST"}
    # nsqd resets the HTTP client's connection: one RST record, sent by the server
    (rst,) = [r for r in tcp if r["name"] == "RST"]
    assert rst["dir"] == "s2c" and rst["fields"] == {
        "side": "server", "in_flight": 0, "unacked": 0, "when": "mid-session"}
    # (an HTTP request to nsqd's TCP port: nsqd's answer is no HTTP response)
    error = next(r for r in rows if r["kind"] == "error" and r["flow"] == rst["flow"])
    assert rst["packets"][0] > error["packets"][-1]
    for r in tcp:
        assert r["fields"]["side"] == ("client" if r["dir"] == "c2s" else "server")
    assert "tcp     RST" in _decode(capsys, "--port", "35785", str(DATA / "nsqd" / "errors.pcap"))


def test_a_refused_command_is_a_record_where_it_starts_before_the_answer(tmp_path, capsys):
    """A PUB too big for nsqd: nsqd answers E_BAD_MESSAGE after reading its size, while the
    client is still sending the body. The error record is stamped where the PUB starts,
    printed before nsqd's answer (which names it); the body's bytes after it are skipped
    to the next frame, said so once they end."""
    path = tmp_path / "too-big.pcap"
    error = b"E_BAD_MESSAGE PUB message too big 2000000 > 1048576"
    with PcapWriter(path) as w:
        conv = TcpConversation(w, ("10.9.0.1", 40900), ("10.9.0.2", 4150), mss=1000)
        conv.open(1.0)
        conv.send("c2s", b"  V2", 1.01)
        conv.send("c2s", b"PUB t\n" + (2_000_000).to_bytes(4, "big") + b"a" * 1500, 1.02)
        conv.send("s2c", (len(error) + 4).to_bytes(4, "big") + (1).to_bytes(4, "big") + error,
                  1.03)
        conv.send("c2s", b"b" * 800, 1.04)
        conv.close(1.05)
    rows = _json(capsys, str(path))
    names = [r["name"] for r in rows]
    assert names.index("E_BAD_MESSAGE") < names.index("FrameTypeError")
    refused = rows[names.index("E_BAD_MESSAGE")]
    answer = rows[names.index("FrameTypeError")]
    assert refused["packets"][0] < answer["packets"][0]
    assert answer["fields"]["response_to"] == refused["packets"][-1]
    (rest,) = [r for r in rows if r["name"] == "Skipped"]
    assert rest["fields"]["continued"] is True
    offset = refused["fields"]["offset"]
    assert rest["fields"]["offset"] + rest["fields"]["size"] == offset + 10 + 1500 + 800
