"""The analyses give the same tables however the frames lie in the table's files.

Two simulated deployments share one rotated capture set: the same seed and start time
(so the same message ids, bodies and timestamps) on two nsqds at different addresses.
Keyed by message id and channel alone they collapse into one set of messages, and which
row wins a tie depends on how rows fall into partitions -- what made the standalone
cluster's messages and flow_control tables differ from local[2]'s.
"""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def twins(spark, tmp_path_factory):
    from nsqviz.pipeline.frames import write_frames
    from nsqviz.pipeline.synth import RotatingPcapWriter, simulate

    root = tmp_path_factory.mktemp("twins")
    with RotatingPcapWriter(root / "nsq.pcap", 30_000) as w:
        truths = [simulate(w, seed=3, n_messages=30, server=(ip, 4150), port_base=port)
                  for ip, port in (("10.0.0.9", 41000), ("10.0.1.9", 42000))]
    assert len(w.paths) >= 3
    out = str(root / "frames")
    write_frames(spark, w.paths, out)
    return truths, out


def _tables(frames, out):
    """The analyses of ``frames`` (a DataFrame), written as a Parquet table first."""
    from nsqviz.pipeline import analyses
    from nsqviz.pipeline.definitions import tables

    frames.write.parquet(str(out / "frames"))
    analyses.write(frames.sparkSession, str(out / "frames"), str(out))
    return {name: frames.sparkSession.read.parquet(str(out / name))
            for name in tables()}


def _rows(df) -> list[str]:
    return sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str)
                  for r in df.collect())


def test_tables_do_not_depend_on_partitioning(spark, twins, tmp_path):
    truths, path = twins
    frames = spark.read.parquet(path)
    one = {k: _rows(v) for k, v in _tables(frames.coalesce(1), tmp_path / "one").items()}
    # Another partitioning: each connection's rows spread over 5 files by frame number,
    # latest first.
    spread = frames.repartition(5, "seq").sortWithinPartitions(frames.ts.desc())
    other = {k: _rows(v) for k, v in _tables(spread, tmp_path / "spread").items()}
    for name in one:
        assert one[name] == other[name], name
    # The two deployments' messages stay apart: the broker is part of a message's key.
    messages = [json.loads(r) for r in one["messages"]]
    assert len(messages) == sum(len(t.messages) for t in truths)
    assert {m["server"] for m in messages} == {"10.0.0.9:4150", "10.0.1.9:4150"}
    assert all(m["publish_ts"] is not None for m in messages)
