"""The Spark frames table with nsqlookupd's "  V1" beside NSQ: the real nsqd registering
with the real nsqlookupd (data/lookupd/) gives the same records in the frames table as in
``nsqviz decode``, with the lookup protocol's typed columns and no error record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsqviz.capture.decode import decode_capture
from tests.pipeline.conftest import table

pytestmark = pytest.mark.spark

REAL = Path(__file__).resolve().parents[2] / "data" / "lookupd" / "nsqd-register-real.pcap"


@pytest.fixture(scope="module")
def run_lookupd(spark, tmp_path_factory):
    from nsqviz.pipeline.job import run

    return run(spark, [str(REAL)], str(tmp_path_factory.mktemp("lookupd")))


def test_frames_table_holds_the_lookup_records(run_lookupd):
    frames = table(run_lookupd, "frames").sort_values(["conn_id", "seq"])
    # a flow's start is no protocol's yet: every other row is the lookup protocol's
    assert set(frames[frames.kind != "flow"].protocol) == {"lookupd"}, \
        frames[["kind", "name", "protocol"]].to_string()
    assert not frames.kind.isin(["error", "gap"]).any()
    units = frames[frames.kind.isin(["command", "frame"])]
    ours = [(r.kind, r.name, r.fields, tuple(r.packets)) for r in decode_capture(REAL)
            if r.kind in ("command", "frame")]
    got = [(k, n, json.loads(f), tuple(p)) for k, n, f, p in
           zip(units.kind, units.name, units.fields, units.packets, strict=True)]
    assert got == ours
    register = units[units.name == "REGISTER"]
    assert list(zip(register.topic, register.channel.fillna(""), strict=True)) == [
        ("orders", ""), ("orders", "audit"), ("orders", "billing"), ("clicks", "")]
    assert set(units[units.kind == "frame"].data.str[:2]) == {"{\"", "OK"}
