"""nsqd's and nsqlookupd's HTTP APIs in captures, through the protocol interface alone: the
real nsqd and nsqlookupd v1.3.0 (data/http/, made by data/make_http_captures.py) decode
in ``nsqviz decode`` with each request named from the endpoint table and each answer
paired with its request -- lookups and what they name, publishes and the messages they
carry (lines, binary, deferred, chunked), pipelining, HEAD, refusals; the views draw
them. The observer is also driven without a capture: any cut of the bytes, a
mid-connection start, a gap, the end inside a message."""

from __future__ import annotations

import contextlib
from io import StringIO
from pathlib import Path

import pytest

from nsqviz import palette, protocols
from nsqviz.capture.decode import decode_capture
from nsqviz.capture.replay import Replay
from nsqviz.cli import main as nsqviz_main
from nsqviz.http import api
from nsqviz.http.protocol import HTTP
from nsqviz.protocols import detection
from nsqviz.stream.direction import Direction
from nsqviz.widgets.replay import ReplayView
from nsqviz.widgets.sequence import from_records

DATA = Path(__file__).resolve().parents[2] / "data" / "http"
LOOKUPS = DATA / "lookups-real.pcap"
PUBLISH = DATA / "curl-pub-real.pcap"
EDGES = DATA / "edge-cases-real.pcap"
SAMPLES = sorted(DATA.glob("*.pcap"))


def _http(path: Path) -> list:
    return [r for r in decode_capture(path) if r.protocol == "http" and r.kind != "tcp"]


def _exchanges(records) -> list[tuple]:
    """Each request with its answer: (name, uri, status, what the answer says it answers),
    paired by the packet the answer names (``response_to``), requests in packet order (a
    connection's records wait for its server's first bytes)."""
    answers = {r.fields["response_to"]: r for r in records
               if r.kind == "frame" and "response_to" in r.fields}
    out = []
    for r in sorted(records, key=lambda r: r.packets[0]):  # in the order they were sent
        if r.kind == "command":
            a = answers.get(r.packets[-1])
            out.append((r.name, r.fields["uri"], a and a.fields["status"],
                        a and a.fields.get("answers")))
    return out


def _decode(*args: str) -> str:
    out = StringIO()
    with contextlib.redirect_stdout(out):
        assert nsqviz_main(["decode", *args]) == 0
    return out.getvalue()


def test_http_is_registered_through_builtin():
    assert protocols.by_name("http") is HTTP
    assert "nsqviz.http.protocol:HTTP" in protocols.BUILTIN


def test_the_endpoints_are_named_from_one_table():
    names = {e.name for e in api.ENDPOINTS}
    for path in ("/pub", "/mpub"):
        assert f"POST {path}" in names
    for path in ("/lookup", "/nodes", "/channels", "/stats", "/ping", "/topics", "/info"):
        assert f"GET {path}" in names
    for what in ("topic", "channel"):
        for verb in ("create", "delete"):
            assert f"POST /{what}/{verb}" in names
    # nsqd v1.3.0 has no /dpub (its deferred publish is /pub?defer=): named by its method
    assert not any(e.path == "/dpub" for e in api.ENDPOINTS)
    # every record of the samples is named from the table, or by its method
    for sample in SAMPLES:
        for r in _http(sample):
            if r.kind == "command":
                assert r.name in names or r.name in api.METHODS, r.name
    assert set(HTTP.names()) >= names


def test_lookups_and_their_answers():
    records = _http(LOOKUPS)
    assert not [r for r in records if r.kind not in ("command", "frame")]
    assert _exchanges(records) == [
        ("POST /topic/create", "/topic/create?topic=orders", 200, "POST /topic/create"),
        ("GET /channels", "/channels?topic=orders", 200, "GET /channels"),  # nsqd asks
        ("POST /channel/create", "/channel/create?topic=orders&channel=audit", 200,
         "POST /channel/create"),
        ("POST /topic/create", "/topic/create?topic=clicks", 200, "POST /topic/create"),
        ("GET /channels", "/channels?topic=clicks", 200, "GET /channels"),
        ("GET /lookup", "/lookup?topic=orders", 200, "GET /lookup"),
        ("GET /lookup", "/lookup?topic=missing", 404, "GET /lookup"),
        ("GET /topics", "/topics", 200, "GET /topics"),
        ("GET /channels", "/channels?topic=orders", 200, "GET /channels"),
        ("GET /nodes", "/nodes", 200, "GET /nodes"),
        ("GET /ping", "/ping", 200, "GET /ping"),
        ("GET /info", "/info", 200, "GET /info"),
        ("GET /info", "/info", 200, "GET /info"),
        ("POST /topic/delete", "/topic/delete?topic=clicks", 200, "POST /topic/delete"),
    ]
    lookups = [r for r in records if r.fields.get("answers") == "GET /lookup"]
    assert [r.fields["producers"] for r in lookups] == [["127.0.0.1:4150"], []]
    assert lookups[0].fields["json"]["channels"] == ["audit"]
    assert lookups[1].fields["json"] == {"message": "TOPIC_NOT_FOUND"}
    (nsqd_info,) = [r for r in records if r.fields.get("response_for") ==
                    "http://127.0.0.1:4151/info"]
    assert nsqd_info.fields["json"]["tcp_port"] == 4150


def test_publishes_carry_their_messages():
    records = _http(PUBLISH)
    publishes = [(r.fields["uri"], [bytes.fromhex(m) for m in r.fields.get("messages", ())],
                  r.fields.get("defer_ms"), r.fields.get("chunked", False))
                 for r in records if r.kind == "command" and r.fields["method"] == "POST"
                 and r.fields["uri"].startswith(("/pub", "/mpub", "/dpub"))]
    assert publishes == [
        ("/pub?topic=orders", [b"hello over http"], None, False),
        ("/mpub?topic=orders", [b"one", b"two", b"three"], None, False),
        ("/mpub?topic=orders&binary=true", [b"bin-1", b"bin\n2"], None, False),
        ("/pub?topic=orders&defer=300", [b"deferred 300 ms"], 300, False),
        ("/dpub?topic=orders&defer=300", [], None, False),  # no such endpoint: 404
        ("/pub?topic=orders", [b"sent in chunks"], None, True),
    ]
    statuses = [r.fields["status"] for r in records if r.kind == "frame"
                and r.fields.get("response_for", "").startswith("http://127.0.0.1:4151/")]
    assert statuses == [200, 200, 200, 200, 200, 404, 200]
    (dpub,) = [r for r in records if r.kind == "command" and "/dpub" in r.fields["uri"]]
    assert dpub.name == "POST"


def test_edge_cases_of_the_real_server():
    records = _http(EDGES)
    nsqd = [r for r in records if "4151" in r.flow]
    pub1, pub2 = [r for r in nsqd if r.name == "POST /pub"][:2]
    # two requests pipelined in one segment, answered in order
    assert pub1.packets == pub2.packets and (pub1.fields["number"], pub2.fields["number"]) \
        == (1, 2)
    answers = [r for r in nsqd if r.kind == "frame" and r.flow == pub1.flow]
    assert [(a.fields["number"], a.fields["response_to"]) for a in answers] == \
        [(1, pub1.packets[-1]), (2, pub1.packets[-1])]
    assert [bytes.fromhex(r.fields["messages"][0]) for r in (pub1, pub2)] == \
        [b"first", b"second"]
    # a chunked body in three chunks: its lines, the chunk framing taken off
    (mpub,) = [r for r in nsqd if r.name == "POST /mpub" and r.fields.get("chunked")]
    assert [bytes.fromhex(m) for m in mpub.fields["messages"]] == [b"c-1", b"c-2"]
    # HEAD: its answer carries no body
    (head,) = [r for r in nsqd if r.name == "HEAD"]
    (answer,) = [r for r in nsqd if r.fields.get("response_to") == head.packets[-1]]
    assert (answer.fields["status"], answer.fields["body_size"]) == (405, 0)
    # an empty /pub: nsqd's MSG_EMPTY
    empty = [r for r in nsqd if r.name == "POST /pub" and r.fields["body_size"] == 0]
    (answer,) = [r for r in nsqd if r.fields.get("response_to") == empty[0].packets[-1]]
    assert answer.fields["json"] == {"message": "MSG_EMPTY"}
    # a binary MPUB body nsqd's grammar refuses: the refusal rides on the request
    (binary,) = [r for r in nsqd if "binary=true" in r.fields.get("uri", "")]
    v = binary.fields["violation"]
    assert (v["code"], v["field"], v["fatal"]) == ("BAD_MESSAGE", "message size", False)
    (answer,) = [r for r in nsqd if r.fields.get("response_to") == binary.packets[-1]]
    assert (answer.fields["status"], answer.fields["json"]) == (413, {"message": "BAD_MESSAGE"})
    # a request line Go cannot read: an error record in HTTP's words, and nsqd's 400
    (bad,) = [r for r in records if r.kind == "error"]
    assert (bad.name, bad.fields["field"], bad.fields["offset"]) == ("400", "request-line", 0)
    assert "illegal request line" in bad.fields["reason"]
    (answer,) = [r for r in nsqd if r.fields.get("response_to") == bad.packets[-1]]
    assert answer.fields["status"] == 400 and "answers" not in answer.fields


def test_text_output_reads_as_tshark_info():
    out = _decode(str(PUBLISH))
    assert "POST /pub?topic=orders HTTP/1.1  (application/x-www-form-urlencoded)" in out
    assert "HTTP/1.1 200 OK  (text/plain)  [response to 94]" in out
    assert "GET /lookup?topic=orders HTTP/1.1" in out


def test_views_draw_it():
    diagram = from_records(list(decode_capture(PUBLISH))).text()
    assert "POST /pub?topic=orders" in diagram and "GET /lookup?topic=orders" in diagram
    html = ReplayView(Replay.load(str(LOOKUPS))).html()
    assert palette.name_colour("GET /lookup") != palette.OTHER
    assert palette.name_colour("GET /lookup") in html


def test_every_message_has_a_hex_view_laid_out_by_its_grammar():
    view = ReplayView(Replay.load(str(PUBLISH)))
    units = [r for r in view.replay.records if r.protocol == "http"
             and r.kind in ("command", "frame")]
    assert units
    for rec in units:
        hexview = view.hexview(rec)
        assert hexview is not None, rec.name


# ------------------------------------------------------------------ the observer alone

EXCHANGE = (
    b"POST /mpub?topic=t HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"4\r\na\nb\n\r\n1\r\nc\r\n0\r\n\r\n"
    b"GET /lookup?topic=t HTTP/1.1\r\nHost: h\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK"
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 73\r\n\r\n"
    b'{"channels":[],"producers":[{"broadcast_address":"n1","tcp_port":4150}]}\n',
)


def _run(cut: int) -> list[tuple]:
    """The exchange fed ``cut`` bytes at a time, requests first."""
    obs = HTTP.observer(midstream=False)
    out = []
    for direction, data in zip((Direction.C2S, Direction.S2C), EXCHANGE, strict=True):
        for i in range(0, len(data), cut):
            out += obs.feed(direction, data[i:i + cut], i + 1)
        out += obs.end(direction, len(data) + 1)
    return [(i.kind, i.name, {k: v for k, v in i.fields.items() if k != "response_to"})
            for i in out if i.kind != "annotation"]


@pytest.mark.parametrize("cut", [1, 3, 7, 64])
def test_any_cut_of_the_bytes_decodes_alike(cut):
    whole = _run(1 << 20)
    assert [(k, n) for k, n, _ in whole] == [
        ("command", "POST /mpub"), ("command", "GET /lookup"), ("frame", "Response"),
        ("frame", "Response")]
    assert whole[0][2]["messages"] == [b"a".hex(), b"b".hex(), b"c".hex()]
    assert whole[3][2]["producers"] == ["n1:4150"]
    assert _run(cut) == whole


def test_midstream_start_finds_the_next_message():
    obs = HTTP.observer(midstream=True)
    items = obs.feed(Direction.C2S, b"dy of an earlier request\r\nGET /ping HTTP/1.1\r\n"
                     b"Host: h\r\n\r\n", 1)
    assert [(i.kind, i.name) for i in items] == [("error", "Undecodable"),
                                                 ("command", "GET /ping")]


PUB_HEAD = b"POST /pub?topic=t HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n"


def test_a_gap_with_a_known_length_resumes_at_the_next_message():
    obs = HTTP.observer(midstream=False)
    obs.feed(Direction.C2S, PUB_HEAD + b"abc", 1)
    lost = obs.gap(Direction.C2S)
    assert lost.length == len(PUB_HEAD) + 10
    assert lost.unit is not None and lost.unit.name == "POST /pub"
    assert lost.unit.fields["cut"]["captured"] == len(lost.partial)
    items = obs.feed(Direction.C2S, b"GET /ping HTTP/1.1\r\nHost: h\r\n\r\n", 3)
    assert [(i.kind, i.name) for i in items] == [("command", "GET /ping")]


def test_end_of_stream_inside_a_message_is_truncated():
    obs = HTTP.observer(midstream=False)
    obs.feed(Direction.C2S, PUB_HEAD + b"abc", 1)
    assert [i.kind for i in obs.end(Direction.C2S, 2)] == ["truncated"]


@pytest.mark.parametrize("data, direction, score", [
    (b"GET /lookup?topic=t HTTP/1.1\r\n", "c2s", 3),
    (b"HTTP/1.1 200 OK\r\n", "s2c", 1),
    (b"  V2", "c2s", 0),
])
def test_detection(data, direction, score):
    assert HTTP.detect(direction, data, from_start=direction == "c2s",
                       server_port=False).score == score


def test_the_server_s_first_answer_decides():
    """Go's server answers in HTTP even what it cannot read as a request: an NSQ client's
    magic sent to nsqd's HTTP port gets a 400, so the connection is HTTP's."""
    assert HTTP.server_hello(b"HTTP/1.1 400 Bad Request\r\n") is True
    assert HTTP.server_hello(b"HTTP/1") is None  # too few bytes yet
    assert HTTP.server_hello(b"\x00\x00\x00\x06") is False
    proto, why = detection.detect(protocols.registered(), Direction.C2S, b"  V2", from_start=True,
                                  ports={}, server_port=50000,
                                  answer=b"HTTP/1.1 400 Bad Request\r\n")
    assert proto is HTTP and "HTTP's framing" in why


def test_a_message_cut_by_a_gap_keeps_what_its_head_says():
    obs = HTTP.observer(midstream=False)
    obs.feed(Direction.C2S, PUB_HEAD + b"abc", 1)
    unit = obs.gap(Direction.C2S).unit
    assert unit is not None
    assert HTTP.typed_unit(unit.kind, unit.name, unit.fields) == {
        "http_method": "POST", "http_path": "/pub", "http_request": 1, "topic": "t"}
