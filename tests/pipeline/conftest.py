"""One local Spark session and one set of generated captures for all pipeline tests.

Starting a JVM costs seconds and the first query of each shape costs more, so the
session is shared (session scope) and each pipeline run happens once, in a fixture, with
the tests only reading its Parquet output.
"""

from __future__ import annotations

import pytest

from nsqviz.pipeline.spark import JavaMissing, check_java

SEED = 7


@pytest.fixture(scope="session")
def spark():
    try:
        check_java()
    except JavaMissing as exc:
        pytest.skip(str(exc))
    from nsqviz.pipeline.spark import get_session

    # no web UI: nothing here reads it, and it would take the first free port from 4040 up
    session = get_session("local[2]", driver_memory="2g", shuffle_partitions=4,
                          conf={"spark.ui.enabled": "false"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def captures(tmp_path_factory):
    """The same simulated traffic as one file and as rotated files (tcpdump -C style)."""
    from nsqviz.pipeline.synth import write_capture_set

    root = tmp_path_factory.mktemp("captures")
    (root / "one").mkdir()
    (root / "rotated").mkdir()
    truth = write_capture_set(root / "one", name="nsq.pcap", seed=SEED, n_messages=80)
    rotated = write_capture_set(root / "rotated", name="nsq.pcap", seed=SEED, n_messages=80,
                                max_bytes=24_000)
    assert len(rotated.paths) >= 4
    return {"truth": truth, "one": truth.paths, "rotated": rotated.paths, "root": root}


@pytest.fixture(scope="session")
def run_one(spark, captures, tmp_path_factory):
    from nsqviz.pipeline.job import run

    return run(spark, captures["one"], str(tmp_path_factory.mktemp("out-one")))


@pytest.fixture(scope="session")
def run_rotated(spark, captures, tmp_path_factory):
    from nsqviz.pipeline.job import run

    return run(spark, captures["rotated"], str(tmp_path_factory.mktemp("out-rotated")))


def table(result, name: str):
    import pandas as pd

    return pd.read_parquet(result.table(name))
