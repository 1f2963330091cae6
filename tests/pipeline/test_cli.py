"""``nsqviz pipeline`` as a user types it, and the package's file handling around it."""

from __future__ import annotations

import os

import pytest

from nsqviz.capture.paths import expand_paths
from nsqviz.cli import main


def test_cli_writes_every_table(spark, captures, tmp_path, capsys, monkeypatch):
    from nsqviz.pipeline import handoff

    out = tmp_path / "out"
    work = tmp_path / "shared-work"
    loaded = []
    load = handoff.load
    monkeypatch.setattr(handoff, "load", lambda d, n: loaded.append(d) or load(d, n))
    # A directory stands for all the rotated files in it.
    rotated_dir = os.path.dirname(captures["rotated"][0])
    assert main(["pipeline", rotated_dir, "--out", str(out), "--work", str(work)]) == 0
    text = capsys.readouterr().out
    # the tasks' handoffs went through --work, and nothing is left there or in --out
    assert loaded == [str(work / "handoff")]
    assert list(work.iterdir()) == []
    assert [p.name for p in out.iterdir() if p.name.startswith("_")] == []
    assert f"{len(captures['rotated'])} capture file(s)" in text
    for name in ("frames", "messages", "deliveries", "connections", "flow_control",
                 "heartbeats", "sticky_packets"):
        assert (out / name / "_SUCCESS").exists(), name
        assert name in text


def test_cli_missing_capture_is_a_clear_error(tmp_path, capsys):
    assert main(["pipeline", str(tmp_path / "nope*.pcap"), "--out", str(tmp_path)]) == 2
    assert "no capture file matches" in capsys.readouterr().err


def test_cli_without_java_says_how_to_get_it(tmp_path, capsys, monkeypatch, captures):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr("pyspark.sql.SparkSession.getActiveSession", staticmethod(lambda: None))
    assert main(["pipeline", captures["one"][0], "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "Java 17+" in err and "openjdk-17-jre-headless" in err


def test_rotated_names_sort_in_rotation_order(tmp_path):
    names = ["cap.pcap", "cap.pcap1", "cap.pcap2", "cap.pcap10", "cap.pcap9", "notes.txt"]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    got = [os.path.basename(p) for p in expand_paths(str(tmp_path))]
    assert got == ["cap.pcap", "cap.pcap1", "cap.pcap2", "cap.pcap9", "cap.pcap10"]


@pytest.mark.spark
def test_source_rows_are_the_tcp_packets(spark, captures):
    from nsqviz.capture.files import Record, read_capture
    from nsqviz.capture.layers import decode_record

    path = captures["one"][0]
    segs = [decode_record(r) for r in read_capture(path) if isinstance(r, Record)]
    df = spark.read.format("pcap").load(path)
    rows = df.orderBy("packet").collect()
    assert len(rows) == len(segs)
    for row, seg in zip(rows, segs, strict=True):
        assert (row.packet, row.src, row.sport, row.dst, row.dport, row.seq, row.ack,
                row.flags, bytes(row.payload)) == (seg.number, seg.src, seg.sport, seg.dst,
                                                   seg.dport, seg.seq, seg.ack, seg.flags,
                                                   seg.payload)
    multi = spark.read.format("pcap").load(captures["rotated"])
    assert multi.rdd.getNumPartitions() == len(captures["rotated"])
    assert multi.count() == len(segs)
