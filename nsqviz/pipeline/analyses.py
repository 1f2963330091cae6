"""The analyses on Spark: :func:`nsqviz.pipeline.definitions.definitions`, the frames
analysed in groups of connections, in parallel, by the engine ``nsqviz messages`` runs
in-process, written as Parquet by the tasks that computed them; then, on Spark SQL, the
views that need more than a group.

Why not Spark SQL throughout: the definitions are a dozen window and aggregate queries,
and on Spark each one is several stages of shuffles and generated code. On the 215 MB
benchmark set (300 000 frames) they took longer than decoding the captures and did not
gain from a second core. But most views read one group of connections at a time
(:mod:`nsqviz.pipeline.groups`: the connections of a server host linked by a topic, a
client or a client address -- a connection's rows, a message's publish and deliveries,
a channel's consumers, a client's reconnections are each in one group), so Spark needs
one shuffle: the frames partitioned by group, groups dealt to as many tasks as keep
each to about ``frames_per_task`` frames. Each task runs those views (:func:`in_tasks`)
on DuckDB inside a Python task (:func:`nsqviz.pipeline.on_duckdb.analyse`, the same SQL
text) and writes each table's rows with pyarrow as one Parquet file of that table
(:class:`~nsqviz.pipeline.sink.PartWriter`, as the decoding tasks write the frames).
Handing the rows back to Spark to write cost more than the analyses: on the same set,
ten write jobs of 5 s in all (Arrow to JVM rows to Parquet), which a second core did not
shorten.

Before the tasks, the driver needs two things of the whole frames table: the links
between connections, to form the groups and deal them, and the rows of the few views
that need a whole broker and give a row or so per broker (:data:`~nsqviz.pipeline.
groups.WHOLE_SERVER`: where its channels' depth ends, where its messages came from),
which each task is handed. Both add up from parts of the frames, so the decoding tasks
tally them as they write the frames (:mod:`nsqviz.pipeline.tally`), and no Spark job
reads the table between decoding and the analyses (given a frames table made earlier,
one parallel pass tallies it). After the tasks, Spark SQL runs the views that combine
brokers (:func:`~nsqviz.pipeline.definitions.across_servers`) and those that read them
(:func:`on_spark`), reading what the tasks wrote; a Python view among them
(:attr:`nsqviz.sql.View.python` -- the doctor's ``findings`` with their words) runs
through ``mapInArrow``, batch by batch. Every table read back is read with the schema
it was written with (inferring it is a Spark job per table). Spark SQL keeps its own
memory (it spills), so a Python worker holds one task's groups: its memory is bounded
by ``frames_per_task`` and the largest group (one topic of a broker with its clients),
not by a broker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from nsqviz.pipeline import sink
from nsqviz.pipeline.definitions import definitions, reads, tables, views
from nsqviz.pipeline.groups import FRAMES_PER_TASK, WHOLE_SERVER, components, deal
from nsqviz.pipeline.tally import Tally, tally_batches
from nsqviz.sql import View, python_rows

__all__ = ["WHOLE_SERVER", "AnalysesRun", "in_tasks", "on_spark", "write"]

FRAMES_PER_TASK_SETTING = "spark.nsqviz.analyses.framesPerTask"
"""The Spark setting that overrides :data:`~nsqviz.pipeline.groups.FRAMES_PER_TASK`."""


@cache
def on_spark() -> tuple[str, ...]:
    """The views Spark SQL runs after the tasks, in order: those that combine brokers,
    and every view that reads one of them."""
    out: list[str] = []
    for name, view in definitions().items():
        if view.across_servers or reads(name) & set(out):
            out.append(name)
    return tuple(out)


def in_tasks() -> tuple[str, ...]:
    """The views each task computes over its groups of connections (it is given the
    :data:`WHOLE_SERVER` views it reads)."""
    return tuple(name for name in views()
                 if name not in on_spark() and name not in WHOLE_SERVER)


def _spark_reads() -> set[str]:
    """The views of the tasks that Spark SQL's views read."""
    return ({other for name in on_spark() for other in reads(name)}
            - set(on_spark()) - set(WHOLE_SERVER))


def _written() -> tuple[str, ...]:
    """The views the tasks write: the tables, and the steps Spark SQL's views read (under
    ``_steps/`` in the output, removed at the end) -- but not a view that only filters the
    frames, which Spark SQL defines itself."""
    return tuple(name for name in in_tasks() if name in tables() or (
        name in _spark_reads() and definitions()[name].materialise))


@dataclass(frozen=True)
class AnalysesRun:
    """How the frames were dealt: the groups of connections, the tasks, and the frames
    each task held (what bounds a Python worker's memory)."""

    groups: int
    task_frames: tuple[int, ...]


def write(frames: Any, out: str, *, frames_per_task: int | None = None,
          tally: Tally | None = None) -> AnalysesRun:
    """Write every analysis of ``frames`` (a Spark DataFrame of the frames table) as a
    Parquet table ``out/<name>``. ``out`` is a local path or a URI that pyarrow's file
    systems know and every executor reaches, as for the frames table.
    ``frames_per_task``: about how many frames one task holds (default: the Spark
    setting ``spark.nsqviz.analyses.framesPerTask``, else
    :data:`~nsqviz.pipeline.groups.FRAMES_PER_TASK`). ``tally``: the frames'
    :class:`~nsqviz.pipeline.tally.Tally`, as the decoding tasks gave it (default: one
    pass over ``frames`` makes it)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    spark = frames.sparkSession
    if frames_per_task is None:
        frames_per_task = int(spark.conf.get(FRAMES_PER_TASK_SETTING, str(FRAMES_PER_TASK)))
    if tally is None:
        tally = Tally.merged(r["tally"] for r in frames.mapInArrow(
            tally_batches, "tally binary").collect())
    paths = {name: (f"{out}/{name}" if name in tables() else f"{out}/_steps/{name}")
             for name in _written()}
    for path in paths.values():
        sink.clear(path)
    frames.createOrReplaceTempView("frames")
    given = _whole_servers(tally, out)
    parts, groups, partitioned = _deal(frames, int(spark.conf.get(
        "spark.sql.shuffle.partitions")), frames_per_task, tally.links)
    written: set[str] = set()
    task_frames = []
    for row in partitioned.mapInArrow(_analyse_groups(paths, given),
                                      "table string, part string, rows long").collect():
        if row["table"] is None:
            task_frames.append(row["rows"])
        else:
            written.add(row["table"])
    for name, path in paths.items():
        if name not in written:  # no group had a row: an empty file gives the schema
            sink.PartWriter(path, "part-empty", arrow_schemas()[name]).close()
        sink.done(path)
    try:
        for name in _spark_reads():
            df = (spark.read.schema(from_arrow_schema(arrow_schemas()[name]))
                  .parquet(paths[name]) if name in paths
                  else spark.sql(views()[name]))  # a filter of the frames
            df.createOrReplaceTempView(name)
        _on_spark(spark, out, from_arrow_schema)
    finally:
        sink.remove(f"{out}/_steps")
    return AnalysesRun(groups, tuple(sorted(task_frames, reverse=True)))


def _whole_servers(tally: Tally, out: str) -> dict[str, bytes]:
    """Write the :data:`WHOLE_SERVER` views that are tables (their rows, as ``tally``
    added them up); return the rows of those the tasks read, as Arrow IPC streams (a row
    or so per broker)."""
    import pyarrow as pa

    wanted = {other for name in in_tasks() for other in reads(name)}
    given = {}
    for name in WHOLE_SERVER:
        rows = tally.whole[name].cast(arrow_schemas()[name])
        if name in tables():
            path = f"{out}/{name}"
            sink.clear(path)
            writer = sink.PartWriter(path, "part-00000", rows.schema)
            for batch in rows.to_batches():
                writer.write(batch)
            writer.close()
            sink.done(path)
        if name in wanted:
            buffer = pa.BufferOutputStream()
            with pa.ipc.new_stream(buffer, rows.schema) as stream:
                stream.write_table(rows)
            given[name] = buffer.getvalue().to_pybytes()
    return given


def _on_spark(spark: Any, out: str, from_arrow_schema: Callable[[Any], Any]) -> None:
    """Run :func:`on_spark`'s views in order, each a temporary view the later ones read.
    A step more than one later view reads is written and read back (Spark would plan
    and compute it again for each), and so is a table a later view reads; the tables no
    later view reads are written at the end, all at once -- a Spark job each, small ones
    over the tasks' few rows, which on their own would leave a core idle while one waits
    on the other. A Python view runs in as many tasks as there are cores, not one per
    file it reads."""
    from concurrent.futures import ThreadPoolExecutor

    readers = {name: sum(name in reads(other) for other in on_spark())
               for name in on_spark()}
    last: list[tuple[Any, str]] = []
    for name in on_spark():
        df = spark.sql(views()[name])
        view = definitions()[name]
        if view.python:
            df = df.coalesce(spark.sparkContext.defaultParallelism).mapInArrow(
                _python_batches(view), from_arrow_schema(arrow_schemas()[name]))
        path = (f"{out}/{name}" if name in tables()
                else f"{out}/_steps/{name}" if readers[name] > 1 else None)
        if path is not None and not readers[name]:
            last.append((df, path))
        elif path is not None:
            df.write.mode("overwrite").parquet(path)
            df = spark.read.schema(df.schema).parquet(path)
        df.createOrReplaceTempView(name)
    with ThreadPoolExecutor(max(1, len(last))) as pool:
        for done in [pool.submit(df.write.mode("overwrite").parquet, path)
                     for df, path in last]:
            done.result()


def _python_batches(view: View) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A view's Python function (:attr:`nsqviz.sql.View.python`) over Spark's batches."""
    if not view.across_servers:
        raise ValueError(f"{view.name}: a Python view on Spark SQL must compute each row "
                         "from its input row alone (across_servers)")

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            yield from python_rows(view, pa.Table.from_batches([batch])).to_batches()

    return task


def _deal(frames: Any, parts: int, frames_per_task: int, links: Any
          ) -> tuple[int, int, Any]:
    """``frames`` partitioned for the analyses' tasks: the number of tasks (at least
    ``parts`` when there are groups enough), of groups of connections, and the frames
    repartitioned so that each task gets its groups (:func:`nsqviz.pipeline.groups.deal`
    over the ``links`` rows of :data:`~nsqviz.pipeline.groups.LINKS`, an Arrow table).

    The count is explicit, which adaptive execution keeps (it would coalesce a small
    shuffle into one partition: one task, one core). ``repartition(n, c)`` sends a row
    to partition ``pmod(hash(c), n)``, so each task is labelled with a number that
    Spark's own hash sends there; each connection gets its task's label through a
    broadcast join (a table of connections, far smaller than their frames, handed to
    Spark as Arrow: a list of rows would be a Python job to convert)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    spark = frames.sparkSession
    rows = links.to_pylist()
    group = components((r["conn_id"], r["host"], r["link"]) for r in rows
                       if r["conn_id"] is not None)
    sizes: dict[str | None, int] = {}
    for r in rows:
        if r["conn_id"] is None:
            if r["frames"]:
                sizes[None] = r["frames"]
        elif r["link"].startswith("address "):  # every frame of a connection names it
            key = group[r["conn_id"]]
            sizes[key] = sizes.get(key, 0) + r["frames"]
    n, dealt = deal(sizes, frames_per_task, parts)
    label: dict[int, int] = {}
    for r in spark.range(64 * n).selectExpr("id", f"pmod(hash(id), {n}) AS p").collect():
        label.setdefault(r["p"], r["id"])
    conns = sorted(group.items())
    tasks = spark.createDataFrame(pa.table({
        "conn_id": pa.array([conn for conn, _ in conns], pa.string()),
        "nsqviz_task": pa.array([label[dealt[g]] for _, g in conns], pa.int64())}))
    # a capture warning belongs to no connection: its own group
    other = F.lit(label[dealt.get(None, 0)]).cast("bigint")
    column = F.coalesce(F.col("nsqviz_task"), other)
    joined = frames.join(F.broadcast(tasks), "conn_id", "left")
    partitioned = joined.repartition(n, column).select(*frames.columns)
    return n, len(sizes), partitioned


def _analyse_groups(paths: dict[str, str], given: dict[str, bytes]
                    ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The task that analyses a partition's frames (Arrow batches: some groups', each
    group's all) and writes each view in ``paths`` that has rows as one Parquet file
    there, named after the partition (a retried task replaces its failed attempt's
    file), given the rows of ``given`` (Arrow IPC streams of :data:`WHOLE_SERVER`
    views). It yields one row per file -- the view, the file and its rows -- and one with
    no view: the frames it held."""
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
        del received
        yield pa.RecordBatch.from_arrays(
            [pa.array([None], pa.string()), pa.array([f"part-{index:05d}"]),
             pa.array([group.num_rows], pa.int64())], ["table", "part", "rows"])
        # DuckDB keeps to the task's cores, as PySpark keeps OpenMP to them
        # (OMP_NUM_THREADS): an executor runs a task per core at once.
        known = {name: pa.ipc.open_stream(rows).read_all() for name, rows in given.items()}
        for name, table in analyse(group, list(paths), ordered=False, threads=cpus,
                                   given=known).items():
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
