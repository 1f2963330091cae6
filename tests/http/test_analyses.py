"""The HTTP APIs' analyses on the real captures (data/http/), in-process (DuckDB; the Spark
engine runs the same definitions, tests/pipeline/test_engines.py): each request with its
answer (``http_exchanges``), the lookups and what they named, the HTTP publishes linked
to their deliveries over TCP (``messages``), each HTTP connection's role and counts
(``connections``), the error answers (``errors``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqviz.analysis.capture import Capture
from nsqviz.http.protocol import HTTP

DATA = Path(__file__).resolve().parents[2] / "data" / "http"


@pytest.fixture(scope="module")
def lookups() -> Capture:
    return Capture(str(DATA / "lookups-real.pcap"))


@pytest.fixture(scope="module")
def publish() -> Capture:
    return Capture(str(DATA / "curl-pub-real.pcap"))


def test_each_request_with_its_answer(lookups):
    assert {v.name for v in HTTP.analyses.views} == {"http_exchanges", "http_published",
                                                     "http_connections"}
    ex = lookups.table("http_exchanges").sort_values("ts")
    assert len(ex) == 14 and ex.status.notna().all()
    rows = list(zip(ex.request, ex.topic.fillna(""), ex.status, ex.error.fillna(""),
                    strict=True))
    assert ("GET /lookup", "orders", 200, "") in rows
    assert ("GET /lookup", "missing", 404, "TOPIC_NOT_FOUND") in rows
    assert (ex.latency_s >= 0).all() and (ex.answer_packet > ex.packet).all()
    lookup = ex[(ex.request == "GET /lookup") & (ex.status == 200)]
    assert [list(p) for p in lookup.producers] == [["127.0.0.1:4150"]]


def test_connections_say_who_looked_up_and_who_published(lookups, publish):
    conns = lookups.connections.set_index("flow")
    http = conns[conns.http_requests > 0]
    # curl's 12 requests, one per connection; nsqd's two GET /channels on one kept alive
    assert sorted(http.http_requests) == [1] * 12 + [2]
    assert sorted(http[http.role == "lookup"].http_lookups) == [1, 1]
    assert set(http.role) == {"lookup", "http"}
    conns = publish.connections
    producers = conns[conns.role == "producer"]
    # /pub, /mpub (3 lines), /mpub binary (2), /pub?defer, chunked /pub; the /dpub 404
    # published nothing and is no producer
    assert sorted(producers.messages_published) == [1, 1, 1, 2, 3]
    assert (conns.role == "lookup").sum() == 2  # nsq_tail's /lookup, and curl's


def test_http_publishes_link_to_their_deliveries_over_tcp(publish):
    msgs = publish.table("messages").sort_values("publish_ts")
    assert len(msgs) == 8 and msgs.publish_cmd.notna().all()
    assert list(msgs.publish_cmd) == ["POST /pub", *["POST /mpub"] * 5,
                                      "POST /pub (defer 300 ms)", "POST /pub"]
    assert set(msgs.server) == {"127.0.0.1:4150"}  # delivered by nsqd's TCP port ...
    assert all(p.endswith("127.0.0.1:4151@" + p.split("@")[1]) for p in msgs.publisher)
    # ... published on its HTTP port, each delivered after its publish
    assert (msgs.first_delivery_ts >= msgs.publish_ts).all()
    deferred = msgs[msgs.publish_cmd.str.contains("defer")]
    assert (deferred.first_delivery_ts - deferred.publish_ts >= 0.3).all()


def test_error_answers_name_the_request(lookups, publish):
    errors = lookups.table("errors")
    assert list(zip(errors.code, errors.command, strict=True)) == \
        [("TOPIC_NOT_FOUND", "GET /lookup")]
    errors = publish.table("errors")
    assert list(zip(errors.code, errors.command, strict=True)) == [("NOT_FOUND", "POST")]


def test_connections_and_stats_show_each_request_and_its_answer(capsys):
    """``nsqviz connections``: each lookup and what it named, each publish and what nsqd
    said, on its connection; ``nsqviz stats``: requests by endpoint and status."""
    import json

    from nsqviz.cli import main as nsqviz_main

    assert nsqviz_main(["connections", str(DATA / "lookups-real.pcap")]) == 0
    out = capsys.readouterr().out
    assert "lookup  +" in out
    assert "  request    GET /lookup topic=orders -> 200 nsqd 127.0.0.1:4150 (packets 91, 93" \
        in out
    assert "  request    GET /lookup topic=missing -> 404 TOPIC_NOT_FOUND (packets 101, 103" \
        in out
    assert nsqviz_main(["connections", "--json", str(DATA / "curl-pub-real.pcap")]) == 0
    conns = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    producers = [c for c in conns if c["role"] == "producer"]
    assert sorted(c["messages_published"] for c in producers) == [1, 1, 1, 2, 3]
    (dpub,) = [c for c in conns if c.get("requests") and c["requests"][0]["path"] == "/dpub"]
    assert (dpub["requests"][0]["status"], dpub["requests"][0]["error"]) == (404, "NOT_FOUND")
    assert nsqviz_main(["stats", str(DATA / "curl-pub-real.pcap")]) == 0
    out = capsys.readouterr().out
    section = out.split("HTTP requests by endpoint and status\n", 1)[1]
    assert [line.split() for line in section.splitlines() if line.startswith("  POST /pub ")] \
        == [["POST", "/pub", "200", "3"]]
