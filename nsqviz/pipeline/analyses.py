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
a channel's consumers, a client's reconnections are each in one group), so the groups
are dealt to as many tasks as keep each to about ``frames_per_task`` frames, and each
task reads its groups' rows from the frames table's Parquet files itself (pyarrow,
:func:`nsqviz.pipeline.sink.read`: only the files that hold its connections, only its
connections' rows, never the bodies' ``fields``), runs those views (:func:`in_tasks`)
on DuckDB (:func:`nsqviz.pipeline.on_duckdb.analyse`, the same SQL text) and writes
each table's rows with pyarrow as one Parquet file of that table
(:class:`~nsqviz.pipeline.sink.PartWriter`, as the decoding tasks write the frames).
Spark only starts the tasks: a job over ``range(tasks)``, one number per task. Before,
Spark read the frames, shuffled them by group and handed each task's rows to its
Python worker as Arrow -- JVM work the size of the table, which on ``local[1]`` ran
beside the Python worker on the machine's other cores, so a second core gained little.
Handing the tables' rows back to Spark to write cost more than the analyses too: ten
write jobs of 5 s in all (Arrow to JVM rows to Parquet), which a second core did not
shorten.

Before the tasks, the driver needs three things of the whole frames table: the links
between connections, to form the groups and deal them, and the rows of the few views
that need a whole broker and give a row or so per broker (:data:`~nsqviz.pipeline.
groups.WHOLE_SERVER`: where its channels' depth ends, where its messages came from),
which each task is handed; and which of the table's files hold each connection. All
add up from parts of the frames, so the decoding tasks tally them as they write the
frames (:mod:`nsqviz.pipeline.tally`), and nothing reads the table between decoding and
the analyses (given a frames table made earlier, a task per file tallies it). After the
tasks, Spark SQL runs the views that combine brokers
(:func:`~nsqviz.pipeline.definitions.across_servers`) and those that read them
(:func:`on_spark`), reading what the tasks wrote; a Python view among them
(:attr:`nsqviz.sql.View.python` -- the doctor's ``findings`` with their words) runs
through ``mapInArrow``, batch by batch. Every table read back is read with the schema
it was written with (inferring it is a Spark job per table). Spark SQL keeps its own
memory (it spills), so a Python worker holds one task's groups (and a batch of the
file it reads): its memory is bounded by ``frames_per_task`` and the largest group (one
topic of a broker with its clients), not by a broker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from nsqviz.pipeline import sink
from nsqviz.pipeline.definitions import definitions, reads, tables, views
from nsqviz.pipeline.groups import FRAMES_PER_TASK, WHOLE_SERVER, components, deal
from nsqviz.pipeline.tally import Tally
from nsqviz.sql import View, python_rows

__all__ = ["WHOLE_SERVER", "AnalysesRun", "frames_for_cap", "frames_per_task_for", "in_tasks",
           "on_spark", "write"]

FRAMES_PER_TASK_SETTING = "spark.nsqviz.analyses.framesPerTask"
"""The Spark setting that overrides :data:`~nsqviz.pipeline.groups.FRAMES_PER_TASK`."""

WORKER_BYTES = 1536 * 2**20
FRAME_BYTES = 4_000
"""A Python worker's address space once pyarrow and DuckDB are loaded, and what each
frame of its task adds while DuckDB runs the views -- what PySpark's cap on a worker
(``spark.executor.pyspark.memory``, its ``RLIMIT_AS``) counts. Measured in-process
under that limit (DuckDB 2.0, one thread): 1.4 GB before any frame; 512,400 frames of
many small groups peaked at 3.07 GB virtual (1.4 GB resident) and needed all of a 3 GB
cap (at 2.5 GB DuckDB failed to allocate a block; a DuckDB ``memory_limit`` under the
cap failed sooner, in the Arrow buffers of a result)."""


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


def write(spark: Any, frames: str, out: str, *, frames_per_task: int | None = None,
          tally: Tally | None = None) -> AnalysesRun:
    """Write every analysis of the frames table ``frames`` (a Parquet directory, as
    :func:`nsqviz.pipeline.frames.write_frames` writes it) as a Parquet table
    ``out/<name>``. Both are local paths or URIs that pyarrow's file systems know and
    every executor reaches. ``frames_per_task``: about how many frames one task holds
    (default: :func:`frames_per_task_for` the session). ``tally``: the frames'
    :class:`~nsqviz.pipeline.tally.Tally`, as the decoding tasks gave it (default: a
    task per file of ``frames`` makes it)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from nsqviz.pipeline.schemas import FRAME_SCHEMA

    if frames_per_task is None:
        frames_per_task = frames_per_task_for(spark)
    if tally is None:
        tally = _tally(spark, frames)
    paths = {name: (f"{out}/{name}" if name in tables() else f"{out}/_steps/{name}")
             for name in _written()}
    for path in paths.values():
        sink.clear(path)
    # Spark SQL's views read the frames only through a filter of them, if at all; the
    # schema is known: no Spark job to infer it.
    spark.read.schema(FRAME_SCHEMA).parquet(frames).drop("fields").createOrReplaceTempView(
        "frames")
    given = _whole_servers(tally, out)
    tasks, groups = _deal(int(spark.conf.get("spark.sql.shuffle.partitions")),
                          frames_per_task, tally)
    written: set[str] = set()
    task_frames = []
    # A task per partition of `range`: its only input is its number, and it reads its
    # frames itself (sink.read).
    for row in spark.range(0, len(tasks), 1, len(tasks)).mapInArrow(
            _analyse_groups(frames, tasks, paths, given),
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


def frames_per_task_for(spark: Any) -> int:
    """The frames one task holds: the Spark setting ``spark.nsqviz.analyses.framesPerTask``
    if set, else :func:`frames_for_cap` of the cap on a Python worker
    (``spark.executor.pyspark.memory``)."""
    setting = spark.conf.get(FRAMES_PER_TASK_SETTING, None)
    if setting:
        return int(setting)
    return frames_for_cap(spark.conf.get("spark.executor.pyspark.memory", None))


def frames_for_cap(cap: str | None) -> int:
    """:data:`~nsqviz.pipeline.groups.FRAMES_PER_TASK` -- or fewer, as many as fit in
    ``cap`` (a Spark memory size, ``3g``) by :data:`FRAME_BYTES`, when there is one."""
    if not cap:
        return FRAMES_PER_TASK
    room = _mebibytes(cap) * 2**20 - WORKER_BYTES
    return max(10_000, min(FRAMES_PER_TASK, room // FRAME_BYTES))


def _mebibytes(size: str) -> int:
    """A Spark memory size (``3g``, ``512m``, ``2048``: MiB without a unit) in MiB."""
    import re

    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)i?b?\s*", size.lower())
    if m is None:
        raise ValueError(f"spark.executor.pyspark.memory: {size!r} is not a size like 3g")
    return int(int(m.group(1)) * 1024 ** ("kmgt".index(m.group(2) or "m") - 1))


def _tally(spark: Any, frames: str) -> Tally:
    """The :class:`~nsqviz.pipeline.tally.Tally` of a frames table made earlier: a task
    per file tallies it."""
    names = sink.files(frames)

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            for i in batch["id"].to_pylist():
                tally = Tally()
                for rows in sink.read(frames, [names[i]], drop=("fields",)):
                    tally.add(rows)
                tally.held_in(names[i])
                yield pa.RecordBatch.from_arrays([pa.array([tally.dumps()], pa.binary())],
                                                 ["tally"])

    n = max(1, len(names))
    return Tally.merged(r["tally"] for r in spark.range(0, len(names), 1, n).mapInArrow(
        task, "tally binary").collect())


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


@dataclass(frozen=True)
class _Task:
    """What one analyses' task reads: its connections' rows (``conns``, an Arrow array
    of ``conn_id`` s, a null among them for the frames of no connection) in the frames
    table's ``files`` that hold any."""

    files: list[str]
    conns: Any


def _deal(parts: int, frames_per_task: int, tally: Tally) -> tuple[list[_Task], int]:
    """The analyses' tasks -- at least ``parts`` when there are groups enough
    (:func:`nsqviz.pipeline.groups.deal` over the ``tally`` 's link rows, of
    :data:`~nsqviz.pipeline.groups.LINKS`) -- and the number of groups of connections.
    Each task is told the files of the frames table that hold its connections (the
    tally says which file holds which); a capture warning belongs to no connection: its
    own group."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = tally.links.to_pylist()
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
    conns: list[list[str | None]] = [[] for _ in range(n)]
    for conn, g in sorted(group.items()):
        conns[dealt[g]].append(conn)
    if None in dealt:
        conns[dealt[None]].append(None)
    tasks = []
    for mine in conns:
        wanted = pa.array(mine, pa.string())
        tasks.append(_Task([name for name, held in sorted(tally.files.items())
                            if pc.any(pc.is_in(held, value_set=wanted)).as_py()], wanted))
    return tasks, len(sizes)


def _analyse_groups(frames: str, tasks: list[_Task], paths: dict[str, str],
                    given: dict[str, bytes]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The task that analyses one of ``tasks``' groups -- its number is the one row it is
    given -- reading their rows from the frames table ``frames`` itself, and writes each
    view in ``paths`` that has rows as one Parquet file there, named after the task (a
    retried task replaces its failed attempt's file), given the rows of ``given`` (Arrow
    IPC streams of :data:`WHOLE_SERVER` views). It yields one row per file -- the view,
    the file and its rows -- and one with no view: the frames it held."""
    schemas = {name: arrow_schemas()[name] for name in paths}

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        from nsqviz.pipeline.on_duckdb import analyse
        from nsqviz.records import frame_schema

        (index,) = pa.concat_arrays([b["id"] for b in batches]).to_pylist()
        mine = tasks[index]
        context = TaskContext.get()
        cpus = context.cpus() if context else 1
        schema = frame_schema()
        group = pa.Table.from_batches(
            list(sink.read(frames, mine.files, drop=("fields",), keep=("conn_id", mine.conns))),
            schema.remove(schema.get_field_index("fields")))
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
                for part in table.cast(schemas[name]).to_batches():
                    writer.write(part)
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
