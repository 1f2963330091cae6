"""The analyses on Spark: :data:`nsqviz.pipeline.definitions.VIEWS`, each broker's
frames analysed apart, in parallel, by the engine ``nsqviz messages`` runs in-process.

Why not Spark SQL throughout: the definitions are a dozen window and aggregate queries,
and on Spark each one is several stages of shuffles and generated code. On the 215 MB
benchmark set (300 000 frames) they took longer than decoding the captures and did not
gain from a second core. But every view except those that combine brokers
(:data:`~nsqviz.pipeline.definitions.ACROSS_SERVERS`) reads one broker's frames at a
time, so Spark needs one shuffle: the frames partitioned by their server
(:data:`~nsqviz.pipeline.definitions.SERVER`), each partition holding some brokers
whole. Then each partition runs those views on DuckDB inside a Python task
(:func:`nsqviz.pipeline.on_duckdb.analyse`, the same SQL text). A partition hands back every
table as one Arrow IPC stream. The tables are read out
of those streams with the schemas DuckDB gives them on an empty frames table, and
Spark SQL runs the views that combine the brokers' rows.

One limit follows: a partition's frames (without ``fields``) must fit in one Python
worker's memory, about 300 bytes a frame. A set with many brokers spreads over more
partitions when ``spark.sql.shuffle.partitions`` is raised; one broker's frames are
always in one partition, so a million frames for one nsqd take about 300 MB. And a
partition's table travels as one Arrow stream in one row, which Spark caps at 2 GB.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from nsqviz.pipeline.definitions import ACROSS_SERVERS, SERVER, TABLES, VIEWS

__all__ = ["TABLES", "release", "tables"]

PER_SERVER = tuple(name for name in VIEWS if name not in ACROSS_SERVERS)
"""The views each broker's task computes (and hands back)."""

_GROUPS = "nsqviz_server_tables"  # the cached (table, Arrow IPC stream) rows


def tables(frames: Any) -> dict[str, Any]:
    """Every analysis of ``frames`` (a Spark DataFrame of the frames table) as a Spark
    DataFrame by table name. The brokers' results stay cached until :func:`release`."""
    from pyspark.sql import functions as F

    spark = frames.sparkSession
    parts, partition = _deal(frames, int(spark.conf.get("spark.sql.shuffle.partitions")))
    groups = (frames.repartition(parts, partition)
              .mapInArrow(_analyse_servers, "table string, ipc binary").cache())
    groups.createOrReplaceTempView(_GROUPS)
    out: dict[str, Any] = {}
    for name in PER_SERVER:
        df = groups.where(F.col("table") == name).select("ipc").mapInArrow(
            _reader(name), _spark_schema(name))
        df.createOrReplaceTempView(name)
        out[name] = df
    for name in ACROSS_SERVERS:
        df = spark.sql(VIEWS[name])
        df.createOrReplaceTempView(name)
        out[name] = df
    return {name: out[name] for name in TABLES}


def _deal(frames: Any, parts: int) -> tuple[int, Any]:
    """How to partition ``frames`` for the analyses: the number of partitions (at most
    ``parts``) and a column that sends each frame to its broker's partition.

    The brokers are dealt largest first to the partition with the fewest frames so far,
    so the tasks take about as long. A handful of partitions, not one per broker: each
    DuckDB run costs a few tenths of a second before any row, more than a small broker's
    rows. The count is explicit, which adaptive execution keeps (it would coalesce a
    small shuffle into one partition: one task, one core). ``repartition(n, c)`` sends
    a row to partition ``pmod(hash(c), n)``, so each partition is labelled with a number
    that Spark's own hash sends there."""
    from pyspark.sql import functions as F

    server = F.expr(SERVER)
    sizes = sorted(((r["count"], r["s"]) for r in
                    frames.groupBy(server.alias("s")).count().collect()),
                   key=lambda cs: (-cs[0], cs[1] or ""))
    n = max(1, min(parts, len(sizes)))
    load = [0] * n
    dealt: dict[str | None, int] = {}
    for count, name in sizes:
        k = min(range(n), key=load.__getitem__)
        load[k] += count
        dealt[name] = k
    label: dict[int, int] = {}
    for r in frames.sparkSession.range(64 * n).selectExpr(
            "id", f"pmod(hash(id), {n}) AS p").collect():
        label.setdefault(r["p"], r["id"])
    pairs = [x for name, k in dealt.items() if name is not None
             for x in (F.lit(name), F.lit(label[k]))]
    # a capture warning belongs to no connection (no server): any partition will do
    other = F.lit(label[dealt.get(None, 0)])
    column = F.coalesce(F.create_map(*pairs)[server], other) if pairs else other
    return n, column.cast("bigint")


def release(frames: Any) -> None:
    """Uncache the brokers' results :func:`tables` cached for ``frames``' session."""
    frames.sparkSession.catalog.uncacheTable(_GROUPS)


def _analyse_servers(batches: Iterator[Any]) -> Iterator[Any]:
    """A partition's frames (Arrow batches: some brokers', each broker's all) -> one row
    per view: its name and its rows as an Arrow IPC stream."""
    import pyarrow as pa

    from nsqviz.pipeline.on_duckdb import analyse

    received = list(batches)
    if not received:  # no frames at all
        return
    group = pa.Table.from_batches(received)
    names: list[str] = []
    streams: list[bytes] = []
    for name, table in analyse(group, PER_SERVER, ordered=False).items():
        if table.num_rows:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            names.append(name)
            streams.append(sink.getvalue().to_pybytes())
    yield pa.RecordBatch.from_arrays([pa.array(names, pa.string()),
                                      pa.array(streams, pa.binary())], ["table", "ipc"])


def _reader(name: str) -> Any:
    """The rows of view ``name`` out of the IPC streams of the brokers' results."""
    schema = arrow_schemas()[name]

    def read(batches: Any) -> Any:
        import pyarrow as pa

        for batch in batches:
            for stream in batch.column("ipc").to_pylist():
                yield from pa.ipc.open_stream(stream).read_all().cast(schema).to_batches()

    return read


@cache
def arrow_schemas() -> dict[str, Any]:
    """Each per-broker view's Arrow schema: what DuckDB gives on an empty frames table
    (the definitions type every column, so the schema does not depend on the rows)."""
    import pyarrow as pa

    from nsqviz.pipeline.on_duckdb import analyse
    from nsqviz.records import frame_schema

    empty = pa.Table.from_batches([], schema=frame_schema())
    return {name: table.schema for name, table in analyse(empty, PER_SERVER).items()}


def _spark_schema(name: str) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schemas()[name])
