"""How a finding reads: a rule's templates filled from its figures, and the findings table's
columns made from a rule's rows -- the one function every output uses."""

from __future__ import annotations

import pyarrow as pa
import pytest

from nsqviz.doctor.rule import Rule, Severity, Threshold
from nsqviz.doctor.words import canonical_figures, schema, word, worded

LIMIT = Threshold("LIMIT", 5, "attempts", "because")
RULE = Rule(
    "nsq.example", "an example", Severity.WARNING, "SELECT 1",
    summary="{n:/message/messages} waited {s:.3f} s{?closed} until it closed{/}",
    explanation="past {LIMIT} and {missing:.2f}", change="do {what}", thresholds=(LIMIT,))


def test_counts_take_their_noun_and_a_choice_is_kept_or_dropped():
    assert word(RULE, {"n": 1, "s": 2.5, "closed": True}).summary == \
        "1 message waited 2.500 s until it closed"
    assert word(RULE, {"n": 3, "s": 0.25, "closed": False}).summary == \
        "3 messages waited 0.250 s"


def test_a_threshold_is_a_figure_and_a_figure_an_engine_left_out_reads_as_a_question():
    words = word(RULE, {"n": 2, "s": 1.0})
    assert words.explanation == "past 5 and ?"
    assert words.change == "do ?"
    assert words.thresholds == ["LIMIT = 5 attempts: because"]


def test_figures_are_one_form_whichever_engine_wrote_them():
    assert canonical_figures('{"a":1,"b":null}') == canonical_figures('{"a":1}') == {"a": 1}
    assert canonical_figures(None) == {}


def test_a_rule_id_is_a_protocol_or_layer_and_a_name():
    for bad in ("msg-timeout", "nsq.Msg", "nsq.msg_timeout", "nsq.", "nsq.msg--x"):
        with pytest.raises(ValueError):
            Rule(bad, "", Severity.INFO, "", "", "", "")
    assert Rule("tcp.zero-window", "", Severity.INFO, "", "", "", "").view == \
        "rule_tcp_zero_window"


def test_worded_rows_name_what_their_evidence_names():
    item = pa.struct([("ts", pa.float64()), ("file", pa.string()), ("packet", pa.int64()),
                      ("conn_id", pa.string()), ("msg_id", pa.string()),
                      ("what", pa.string())])
    conn = "10.0.0.1:5000->10.0.0.2:4150@100.000000"
    other = "10.0.0.3:6000->10.0.0.2:4150@99.000000"
    evidence = [
        {"ts": 100.5, "file": "a.pcap", "packet": 7, "conn_id": conn, "msg_id": "m1",
         "what": "delivered"},
        {"ts": 100.6, "file": "a.pcap", "packet": 7, "conn_id": conn, "msg_id": "m2",
         "what": "delivered"},
        {"ts": 101.0, "file": "a.pcap1", "packet": 2, "conn_id": other, "msg_id": "m1",
         "what": "delivered again"},
        {"ts": 101.5, "file": None, "packet": None, "conn_id": conn, "msg_id": None,
         "what": "due"},
    ]
    rows = pa.table({"rule": ["nsq.example"], "severity": ["warning"],
                     "server": ["10.0.0.2:4150"], "conn_id": [conn], "ts": [100.5],
                     "evidence": pa.array([evidence], pa.list_(item)),
                     "figures": ['{"n":2,"s":1.5,"closed":null}']})
    (out,) = worded(rows, {"nsq.example": RULE}).to_pylist()
    assert out["connection"] == "10.0.0.1:5000->10.0.0.2:4150"
    assert out["connections"] == ["10.0.0.1:5000->10.0.0.2:4150",
                                  "10.0.0.3:6000->10.0.0.2:4150"]
    assert (out["packets"], out["packet_files"]) == ([7, 2], ["a.pcap", "a.pcap1"])
    assert out["msg_ids"] == ["m1", "m2"] and out["end_ts"] == 101.5
    assert out["summary"] == "2 messages waited 1.500 s" and out["figures"] == \
        '{"n":2,"s":1.5}'
    assert worded(rows.slice(0, 0), {}).schema == schema()
