"""What the decoding tasks tell the analyses (:mod:`nsqviz.pipeline.tally`) adds up: the
link rows and the whole-broker views' rows, tallied over any slices of the frames and
merged, are those of all the frames at once -- and a view whose rows would not add up
is refused."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def frames():
    """Every sample capture's frames (without ``fields``), one table."""
    import pyarrow as pa

    from nsqviz.analysis.capture import frames_of

    return pa.concat_tables([frames_of([str(p)], fields=False)
                             for p in sorted(DATA.glob("**/*.pcap"))])


def _rows(table) -> list:
    return sorted(table.to_pylist(), key=repr)


def test_slices_tallied_then_merged_give_the_whole(frames, monkeypatch):
    import duckdb

    from nsqviz.pipeline import tally as tally_module
    from nsqviz.pipeline.groups import LINKS, WHOLE_SERVER
    from nsqviz.pipeline.on_duckdb import analyse, duckdb_sql

    monkeypatch.setattr(tally_module, "FLUSH_ROWS", 3_000)  # several flushes per slice
    rng = random.Random(5)
    cuts = sorted(rng.sample(range(1, frames.num_rows), 6))
    parts = []
    for lo, hi in zip([0, *cuts], [*cuts, frames.num_rows], strict=True):
        part = tally_module.Tally()
        for batch in frames.slice(lo, hi - lo).to_batches(max_chunksize=700):
            part.add(batch)
        parts.append(part.dumps())
    merged = tally_module.Tally.merged([None, *parts])

    con = duckdb.connect()
    con.register("frames", frames)
    assert _rows(merged.links) == _rows(con.sql(duckdb_sql(LINKS)).to_arrow_table())
    whole = analyse(frames, WHOLE_SERVER)
    for name in WHOLE_SERVER:
        assert merged.whole[name].num_rows > 1, name
        assert _rows(merged.whole[name]) == _rows(whole[name]), name
    assert merged.frames == sum(k in ("command", "frame")
                                for k in frames["kind"].to_pylist())


def test_nothing_tallied_gives_the_definitions_over_no_rows():
    from nsqviz.pipeline.groups import WHOLE_SERVER
    from nsqviz.pipeline.tally import Tally

    empty = Tally.merged([])
    assert empty.links.to_pylist() == [
        {"conn_id": None, "host": None, "link": None, "frames": 0}]
    assert all(empty.whole[name].num_rows == 0 for name in WHOLE_SERVER)


def test_a_view_that_does_not_add_up_is_refused(monkeypatch):
    from nsqviz.pipeline import tally
    from nsqviz.sql import View

    views = {"frames_x": View("frames_x", "SELECT * FROM frames", materialise=False),
             "averaged": View("averaged", "SELECT split_part(flow, '->', 2) AS server, "
                              "avg(ts) AS ts FROM frames_x GROUP BY split_part(flow, '->', 2)"),
             "distinct": View("distinct", "SELECT count(DISTINCT conn_id) AS n FROM frames"),
             "paired": View("paired", "SELECT max(ts) AS ts FROM averaged")}
    monkeypatch.setattr(tally, "definitions", lambda: views)
    monkeypatch.setattr(tally, "reads", lambda name: {
        "averaged": {"frames_x"}, "distinct": {"frames"}, "paired": {"averaged"}}[name])
    tally.combining_sql.cache_clear()
    try:
        with pytest.raises(ValueError, match="averaged: column ts is not a sum"):
            tally.combining_sql("averaged")
        with pytest.raises(ValueError, match="distinct: column n"):
            tally.combining_sql("distinct")
        with pytest.raises(ValueError, match="paired: .* not averaged"):
            tally.combining_sql("paired")
    finally:
        tally.combining_sql.cache_clear()
