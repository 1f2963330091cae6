"""The analyses on Spark: :func:`nsqviz.pipeline.definitions.definitions`, each broker's
frames analysed apart, in parallel, by the engine ``nsqviz messages`` runs in-process,
written as Parquet by the tasks that computed them.

Why not Spark SQL throughout: the definitions are a dozen window and aggregate queries,
and on Spark each one is several stages of shuffles and generated code. On the 215 MB
benchmark set (300 000 frames) they took longer than decoding the captures and did not
gain from a second core. But every view except those that combine brokers
(:func:`~nsqviz.pipeline.definitions.across_servers`) reads one broker's frames at a
time, so Spark needs one shuffle: the frames partitioned by their server's host
(:data:`~nsqviz.pipeline.definitions.HOST`), each partition holding some hosts whole,
every port of a broker with them (a message published to one port of a broker and
delivered from another is analysed in one task). Then each partition runs those views on
DuckDB inside a Python task (:func:`nsqviz.pipeline.on_duckdb.analyse`, the same SQL
text) and writes each table's rows with pyarrow as one Parquet file of that table
(:class:`~nsqviz.pipeline.sink.PartWriter`, as the decoding tasks write the frames).
Handing the rows back to Spark to write cost more than the analyses: on the same set,
ten write jobs of 5 s in all (Arrow to JVM rows to Parquet), which a second core did not
shorten. Spark SQL then runs the views that combine the brokers' rows, reading them back
from those files (and a Python view among them, :attr:`nsqviz.sql.View.python` -- the
doctor's ``findings`` with their words -- through ``mapInArrow``, batch by batch).

One limit follows: a partition's frames (without ``fields``) must fit in one Python
worker's memory, about 300 bytes a frame. A set with many brokers spreads over more
partitions when ``spark.sql.shuffle.partitions`` is raised; one broker's frames are
always in one partition, so a million frames for one nsqd take about 300 MB.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

from nsqviz.pipeline import sink
from nsqviz.pipeline.definitions import (
    HOST,
    across_servers,
    definitions,
    reads,
    tables,
    views,
)
from nsqviz.sql import View, python_rows

__all__ = ["per_server", "write"]


def per_server() -> tuple[str, ...]:
    """The views each broker's task computes."""
    return tuple(name for name in views() if name not in across_servers())


def _written() -> tuple[str, ...]:
    """The per-broker views the tasks write: the tables, and the steps the combining views
    read (under ``_steps/`` in the output, removed at the end)."""
    return tuple(name for name in per_server() if name in tables()
                 or any(name in reads(other) for other in across_servers()))


def write(frames: Any, out: str) -> None:
    """Write every analysis of ``frames`` (a Spark DataFrame of the frames table) as a
    Parquet table ``out/<name>``. ``out`` is a local path or a URI that pyarrow's file
    systems know and every executor reaches, as for the frames table."""
    from pyspark.sql.pandas.types import from_arrow_schema

    spark = frames.sparkSession
    paths = {name: (f"{out}/{name}" if name in tables() else f"{out}/_steps/{name}")
             for name in _written()}
    for path in paths.values():
        sink.clear(path)
    parts, partition = _deal(frames, int(spark.conf.get("spark.sql.shuffle.partitions")))
    written = {row["table"] for row in frames.repartition(parts, partition).mapInArrow(
        _analyse_servers(paths), "table string, part string, rows long").collect()}
    for name, path in paths.items():
        if name not in written:  # no broker had a row: an empty file gives the schema
            sink.PartWriter(path, "part-empty", arrow_schemas()[name]).close()
        sink.done(path)
    for name in {view for across in across_servers() for view in reads(across)} & set(paths):
        spark.read.parquet(paths[name]).createOrReplaceTempView(name)
    try:
        for name in across_servers():  # in order: one may read those before it
            df = spark.sql(views()[name])
            view = definitions()[name]
            if view.python:
                df = df.mapInArrow(_python_batches(view),
                                   from_arrow_schema(arrow_schemas()[name]))
            df.createOrReplaceTempView(name)
            if name in tables():
                df.write.mode("overwrite").parquet(f"{out}/{name}")
    finally:
        sink.remove(f"{out}/_steps")


def _python_batches(view: View) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A view's Python function (:attr:`nsqviz.sql.View.python`) over Spark's batches."""
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            yield from python_rows(view, pa.Table.from_batches([batch])).to_batches()

    return task


def _deal(frames: Any, parts: int) -> tuple[int, Any]:
    """How to partition ``frames`` for the analyses: the number of partitions (at most
    ``parts``) and a column that sends each frame to its host's partition.

    The hosts are dealt largest first to the partition with the fewest frames so far,
    so the tasks take about as long. A handful of partitions, not one per broker: each
    DuckDB run costs a few tenths of a second before any row, more than a small broker's
    rows. The count is explicit, which adaptive execution keeps (it would coalesce a
    small shuffle into one partition: one task, one core). ``repartition(n, c)`` sends
    a row to partition ``pmod(hash(c), n)``, so each partition is labelled with a number
    that Spark's own hash sends there."""
    from pyspark.sql import functions as F

    server = F.expr(HOST)
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


def _analyse_servers(paths: dict[str, str]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The task that analyses a partition's frames (Arrow batches: some brokers', each
    broker's all) and writes each view in ``paths`` that has rows as one Parquet file
    there, named after the partition (a retried task replaces its failed attempt's
    file). It yields one row per file: the view, the file and its rows."""
    schemas = {name: arrow_schemas()[name] for name in paths}

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        from nsqviz.pipeline.on_duckdb import analyse

        received = list(batches)
        if not received:  # no frames at all
            return
        context = TaskContext.get()
        index, cpus = (context.partitionId(), context.cpus()) if context else (0, 1)
        group = pa.Table.from_batches(received)
        # DuckDB keeps to the task's cores, as PySpark keeps OpenMP to them
        # (OMP_NUM_THREADS): an executor runs a task per core at once.
        for name, table in analyse(group, list(paths), ordered=False,
                                   threads=cpus).items():
            if not table.num_rows:
                continue
            writer = sink.PartWriter(paths[name], f"part-{index:05d}", schemas[name])
            try:
                for batch in table.cast(schemas[name]).to_batches():
                    writer.write(batch)
            except BaseException:
                writer.abort()
                raise
            summary = writer.close()
            yield pa.RecordBatch.from_arrays(
                [pa.array([name]), *summary.columns], ["table", "part", "rows"])

    return task


@cache
def arrow_schemas() -> dict[str, Any]:
    """Each view's Arrow schema: what DuckDB gives on an empty frames table (the
    definitions type every column, so the schema does not depend on the rows)."""
    import pyarrow as pa

    from nsqviz.pipeline.on_duckdb import analyse
    from nsqviz.records import frame_schema

    empty = pa.Table.from_batches([], schema=frame_schema())
    return {name: table.schema for name, table in analyse(empty, views()).items()}
