"""The rule the Spark pipeline relies on (:mod:`nsqviz.pipeline.analyses`): every view
its tasks run reads one group of connections at a time (:mod:`nsqviz.pipeline.groups`),
so analysing each group apart and then running the rest over what they gave gives the
tables analysing all frames at once gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqviz.pipeline.definitions import across_servers, reads, steps, tables, views

DATA = Path(__file__).resolve().parents[2] / "data"


def test_views_that_combine_brokers_read_other_views_only():
    for name in across_servers():
        assert "frames" not in reads(name), name
    for name in views():
        if name not in across_servers():
            assert not reads(name) & set(across_servers()), name
    assert set(tables()) | set(steps()) == set(views())


@pytest.fixture(scope="module")
def frames():
    """Every NSQ and TubeMQ sample's frames, captures kept apart, as one Arrow table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from nsqviz.analysis.capture import frames_of

    parts = []
    for src in sorted(DATA.glob("**/*.pcap")):
        t = frames_of([str(src)], fields=False)
        label = str(src.relative_to(DATA))
        for column in ("flow", "conn_id"):
            i = t.schema.get_field_index(column)
            t = t.set_column(i, column, pc.binary_join_element_wise(
                pa.scalar(label + "/"), pc.replace_substring(t[column], "->", f"->{label}/"),
                ""))
        parts.append(t)
    return pa.concat_tables(parts)


def test_groups_apart_then_combined_give_the_whole_tables(frames):
    """As the pipeline deals the frames to its tasks: by groups of connections of one
    host (every port of a broker together: an HTTP publish on 4151 is delivered on 4150),
    given a whole broker's few rows (:data:`~nsqviz.pipeline.analyses.WHOLE_SERVER`),
    then the views that combine brokers (:func:`~nsqviz.pipeline.analyses.on_spark`) over
    what the groups gave."""
    import duckdb
    import pyarrow as pa
    import pyarrow.compute as pc

    from nsqviz.pipeline.analyses import WHOLE_SERVER, in_tasks, on_spark
    from nsqviz.pipeline.definitions import definitions
    from nsqviz.pipeline.groups import LINKS, components
    from nsqviz.pipeline.on_duckdb import analyse, duckdb_sql
    from nsqviz.sql import python_rows

    whole = analyse(frames)
    con = duckdb.connect()
    con.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
    con.register("frames", frames)
    group = components((c, h, link) for c, h, link, _ in
                       con.sql(duckdb_sql(LINKS)).fetchall() if c is not None)
    key = pa.array([group.get(c) if c is not None else None
                    for c in frames["conn_id"].to_pylist()], pa.string())
    assert len(set(group.values())) > 20
    # a whole broker's few rows first, over all the frames, handed to every group
    combined = analyse(frames, WHOLE_SERVER, ordered=False)
    apart: dict[str, list[pa.Table]] = {name: [] for name in in_tasks()}
    for g in set(key.to_pylist()):
        mine = frames.filter(pc.is_null(key) if g is None else
                             pc.fill_null(pc.equal(key, g), False))
        for name, table in analyse(mine, in_tasks(), ordered=False,
                                   given=combined).items():
            apart[name].append(table)
    for name in WHOLE_SERVER:
        con.register(name, combined[name])
    for name in in_tasks():
        combined[name] = pa.concat_tables(apart[name])
        con.register(name, combined[name])
    for name in on_spark():
        rows = con.sql(duckdb_sql(views()[name])).to_arrow_table()
        if definitions()[name].python:  # the doctor's words: Python over the rows
            rows = python_rows(definitions()[name], rows)
        con.register("rows", rows)
        combined[name] = con.sql("SELECT * FROM rows ORDER BY ALL").to_arrow_table()
        con.unregister("rows")
        con.register(name, combined[name])
    for name in tables():
        got = con.sql(f"SELECT * FROM {name} ORDER BY ALL").to_arrow_table() \
            if name in in_tasks() or name in WHOLE_SERVER else combined[name]
        assert got.num_rows == whole[name].num_rows, name
        assert got.to_pylist() == whole[name].to_pylist(), name


def test_only_an_nsq_connection_has_a_message_timeout():
    """nsqd's IDENTIFY to nsqlookupd negotiates no msg_timeout: its connection gets none,
    where an NSQ consumer's gets the one it asked for (or nsqd's default)."""
    from nsqviz.analysis.capture import Capture

    lookup = Capture(str(DATA / "lookupd" / "nsqd-register-real.pcap")).connections
    assert len(lookup) == 1 and lookup.identify.notna().all()
    assert lookup.msg_timeout_ms.isna().all()
    nsq = Capture(str(DATA / "nsqd" / "debugging" / "debugging.pcap")).connections
    assert (nsq.msg_timeout_ms.dropna() == 1000).all() and nsq.msg_timeout_ms.notna().any()
