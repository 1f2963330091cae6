"""A task of the analyses holds groups of connections, not a broker: on one nsqd with
six topics, each with its own clients, and a bound of a sixth of the frames per task,
no task holds half the broker's frames -- and the tables are the in-process ones."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark]

TOPICS = 6


@pytest.fixture(scope="module")
def one_broker(spark, tmp_path_factory):
    from nsqviz.analysis.capture import frames_of
    from nsqviz.pipeline.job import run
    from nsqviz.pipeline.synth import RotatingPcapWriter, simulate

    root = tmp_path_factory.mktemp("one-broker")
    with RotatingPcapWriter(root / "nsq.pcap", 60_000) as w:
        for k in range(TOPICS):  # one nsqd (the default server), six scenarios apart
            simulate(w, seed=20 + k, n_messages=25, port_base=41000 + 10 * k, worker=k,
                     t0=1_700_000_000.0 + 0.3 * k, topic=f"topic{k}", clients=f"t{k}-")
    setting = "spark.nsqviz.analyses.framesPerTask"
    frames = frames_of(w.paths, fields=False).num_rows
    spark.conf.set(setting, str(frames // TOPICS))
    try:
        result = run(spark, w.paths, str(root / "out"))
    finally:
        spark.conf.unset(setting)
    return w.paths, result, frames


def test_no_task_holds_the_broker(one_broker):
    paths, result, frames = one_broker
    run = result.analyses
    assert run is not None
    assert run.groups >= TOPICS
    assert sum(run.task_frames) == frames
    # per broker, one task would hold every frame
    assert max(run.task_frames) < frames / 2, run.task_frames


def test_the_tables_are_the_in_process_ones(spark, one_broker):
    from nsqviz.analysis.capture import frames_of
    from nsqviz.pipeline.definitions import tables
    from nsqviz.pipeline.on_duckdb import analyse
    from tests.pipeline.test_engines import _same

    paths, result, _ = one_broker
    written = {name: spark.read.parquet(result.table(name)) for name in tables()}
    whole = analyse(frames_of(paths, fields=False))
    present = [name for name in tables() if whole[name].num_rows]
    assert {"messages", "deliveries", "channel_depth", "findings"} <= set(present)
    _same(whole, written, "pipeline", present)
    for name in set(tables()) - set(present):  # TubeMQ's, HTTP's: none here either
        assert written[name].count() == 0, name


def test_a_capped_worker_is_dealt_what_fits_in_its_cap():
    from nsqviz.pipeline.analyses import FRAME_BYTES, WORKER_BYTES, frames_for_cap
    from nsqviz.pipeline.groups import FRAMES_PER_TASK

    assert frames_for_cap(None) == FRAMES_PER_TASK
    assert frames_for_cap("3g") == (3 * 2**30 - WORKER_BYTES) // FRAME_BYTES < FRAMES_PER_TASK
    assert frames_for_cap("3072") == frames_for_cap("3g")  # Spark's unit: MiB
    assert frames_for_cap("64g") == FRAMES_PER_TASK
    with pytest.raises(ValueError, match="like 3g"):
        frames_for_cap("three")
