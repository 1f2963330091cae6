"""Capture files -> the frames table, decoded inside the pcap data source.

Stage 1 reads each file in its own task and decodes it there
(``spark.read.format("pcap").option("output", "frames")``): the frames of every
connection that begins and ends in that file are final as they come out, with no
shuffle. Stage 2 handles the connections that cross a file boundary in a capture set:
the source's ``"crossing"`` output gives their packets, Spark brings each 4-tuple's
together (``repartition`` by the unordered 4-tuple, ``sortWithinPartitions`` by file
and packet -- capture order, as ``nsqviz decode`` reads the files) and a ``mapInArrow``
function decodes them (:func:`nsqviz.pipeline.decode.decode_sorted_batches`). The union
is, row for row, what ``nsqviz decode`` prints for the same files, plus ``flow`` rows.

Why a sorted ``mapInArrow`` rather than ``groupBy(...).applyInPandas`` for stage 2: a
grouped map materialises a whole group as one pandas DataFrame, so a connection that
streamed for hours must fit in a Python worker's memory. Here the JVM sorts (spilling
to disk when it must) and Python holds only the reassembly state of the connection it
is in. When nothing can cross (one file, or ``per_file``) stage 2 is not run at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from nsqviz.capture.driver import IDLE_SPLIT
from nsqviz.pipeline.decode import decode_sorted_batches
from nsqviz.pipeline.schemas import FRAME_SCHEMA
from nsqviz.pipeline.source import reader_options

__all__ = ["capture_frames"]


def _key_columns():
    """The unordered 4-tuple: the same for both directions of a connection."""
    a = F.concat_ws("|", F.col("src"), F.col("sport").cast("string"))
    b = F.concat_ws("|", F.col("dst"), F.col("dport").cast("string"))
    return F.least(a, b).alias("_ka"), F.greatest(a, b).alias("_kb")


def capture_frames(
    spark: SparkSession,
    files: list[str],
    *,
    partitions: int | None = None,
    idle_split: float | None = IDLE_SPLIT,
    ports: Mapping[str, Iterable[int]] | None = None,
    per_file: bool = False,
    progress_dir: str | None = None,
) -> DataFrame:
    """The frames table (:data:`FRAME_SCHEMA`) of capture ``files`` (absolute paths in
    capture-set order, as :func:`~nsqviz.pipeline.source.expand_paths` gives them).

    ``idle_split``, ``ports`` and ``per_file`` (the driver's ``continuation`` turned
    off) are the capture driver's options, as in ``nsqviz decode``: by default all files
    are one capture set, and a connection continues from file to file. ``partitions``
    (stage 2's shuffle) defaults to ``spark.sql.shuffle.partitions``. ``progress_dir``:
    where stage 1's tasks report how far they are (:func:`~nsqviz.pipeline.decode.
    read_progress`).
    """
    options = reader_options(continuation=not per_file, idle_split=idle_split, ports=ports)
    if progress_dir:
        options["progress"] = progress_dir

    def read(output: str) -> DataFrame:
        return (spark.read.format("pcap").option("paths", json.dumps(files))
                .options(**options).option("output", output).load())

    frames = read("frames")
    if per_file or len(files) < 2:
        return frames
    crossing = read("crossing")
    ka, kb = _key_columns()
    n = partitions or int(spark.conf.get("spark.sql.shuffle.partitions", "8"))  # type: ignore[arg-type]
    ordered = crossing.select(ka, kb, *crossing.columns).repartition(n, "_ka", "_kb") \
        .sortWithinPartitions("_ka", "_kb", "file_index", "packet")
    port_lists = {k: list(v) for k, v in (ports or {}).items()}

    def run(batches):
        return decode_sorted_batches(batches, files, idle_split=idle_split, ports=port_lists)

    return frames.unionByName(ordered.mapInArrow(run, FRAME_SCHEMA))
