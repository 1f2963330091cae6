"""Packets -> frames on Spark: group by connection, order, reassemble, decode.

The packets of one TCP connection can sit in several rotated files and in several input
partitions, so they are first brought together: ``repartition`` by the connection's
unordered 4-tuple, then ``sortWithinPartitions`` by (4-tuple, file, packet) -- capture
order, as ``nsqviz decode`` reads the files. A ``mapInArrow`` function then walks each
partition's Arrow batches in that order and runs, per 4-tuple, the capture driver and
decoder (:mod:`nsqviz.pipeline.decode`) -- the same code ``nsqviz decode`` runs.

Why a sorted ``mapInArrow`` rather than ``groupBy(...).applyInPandas``: a grouped map
materialises a whole group as one pandas DataFrame, so a connection that streamed for
hours must fit in a Python worker's memory. Here the JVM sorts (spilling to disk when it
must) and Python holds only the reassembly state of the connection it is in, so
executor memory stays flat however large connections or inputs grow. Port reuse (a new
SYN on a finished 4-tuple) and long silences split a 4-tuple into several connections
inside the capture driver, not in Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from nsqviz.capture.driver import IDLE_SPLIT
from nsqviz.pipeline.decode import decode_sorted_batches
from nsqviz.pipeline.schemas import FRAME_SCHEMA

__all__ = ["packets_to_frames", "warning_rows"]


def _key_columns():
    """The unordered 4-tuple: the same for both directions of a connection."""
    a = F.concat_ws("|", F.col("src"), F.col("sport").cast("string"))
    b = F.concat_ws("|", F.col("dst"), F.col("dport").cast("string"))
    return F.least(a, b).alias("_ka"), F.greatest(a, b).alias("_kb")


def packets_to_frames(
    packets: DataFrame,
    *,
    partitions: int | None = None,
    idle_split: float | None = IDLE_SPLIT,
    ports: Mapping[str, Iterable[int]] | None = None,
    per_file: bool = False,
) -> DataFrame:
    """The frames table (:data:`FRAME_SCHEMA`) of a packets DataFrame from the pcap source.

    ``partitions`` defaults to ``spark.sql.shuffle.partitions``. ``idle_split``,
    ``ports`` and ``per_file`` (not ``continuation``) are the capture driver's options:
    by default all files are one capture set (rotated files of one capture point), so a
    connection continues from file to file; ``per_file`` decodes each file as a capture
    of its own -- for unrelated captures, or copies of the same traffic.
    """
    tcp = packets.where(F.col("warning").isNull())
    ka, kb = _key_columns()
    if per_file:
        ka = F.concat_ws("/", F.col("file_index").cast("string"), ka).alias("_ka")
    keyed = tcp.select(ka, kb, *[c for c in tcp.columns if c != "warning"])
    n = partitions or int(
        packets.sparkSession.conf.get("spark.sql.shuffle.partitions", "8")  # type: ignore[arg-type]
    )
    ordered = keyed.repartition(n, "_ka", "_kb").sortWithinPartitions(
        "_ka", "_kb", "file_index", "packet"
    )
    port_lists = {k: list(v) for k, v in (ports or {}).items()}

    def run(batches):
        return decode_sorted_batches(batches, idle_split=idle_split, ports=port_lists,
                                     per_file=per_file)

    frames = ordered.mapInArrow(run, FRAME_SCHEMA)
    return frames.unionByName(warning_rows(packets))


def warning_rows(packets: DataFrame) -> DataFrame:
    """Damaged capture records as ``kind = "error"`` rows of the frames table."""
    w = packets.where(F.col("warning").isNotNull())
    cols = []
    for field in FRAME_SCHEMA:
        name = field.name
        if name == "file":
            value = F.col("file")
        elif name == "kind":
            value = F.lit("error")
        elif name == "name":
            value = F.lit("CaptureWarning")
        elif name == "reason":
            value = F.col("warning")
        elif name == "fields":
            value = F.to_json(F.struct(F.col("warning").alias("reason")))
        elif name == "packets":
            value = F.when(F.col("packet").isNotNull(), F.array(F.col("packet"))).otherwise(
                F.array().cast("array<bigint>")
            )
        elif name == "packet_files":
            value = F.when(F.col("packet").isNotNull(), F.array(F.col("file"))).otherwise(
                F.array().cast("array<string>")
            )
        else:
            value = F.lit(None)
        cols.append(value.cast(field.dataType).alias(name))
    return w.select(*cols)
