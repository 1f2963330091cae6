"""Capture files -> the frames table, decoded inside the pcap data source, in two jobs.

Stage 1 reads each file in its own task and decodes it there
(``spark.read.format("pcap").option("output", "frames")``): the frames of every
connection that begins in that file are final as they come out, and each task leaves a
small handoff saying what crosses its file's boundaries (:mod:`nsqviz.pipeline.handoff`:
the decoder state of each connection still open at its end, the packet numbers of each
that began earlier). Stage 2 (``output="continued"``) finishes those connections, a
group of 4-tuples per task, reading their packets from the capture files and taking up
each handed-on state where stage 1 left it. The frames table is stage 1's rows plus
stage 2's, row for row what ``nsqviz decode`` prints for the same files, plus ``flow``
rows.

Stage 2 can only be planned once stage 1 has run, so this is two Spark jobs writing one
Parquet table, not one lazy DataFrame; each task writes its own Parquet file into it
(:mod:`nsqviz.pipeline.sink` says why). Nothing is shuffled: the only data that moves
between the stages is the handoffs (states and packet numbers, not payload), through
files beside the output. When nothing can cross (one file, or ``per_file``) or nothing
did, stage 2 is not run at all. Asked to (``tally``), every task also tallies the rows
it writes for the analyses (:mod:`nsqviz.pipeline.tally`), so no Spark job has to read
the table again before their tasks start.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

from nsqviz.capture.driver import IDLE_SPLIT
from nsqviz.pipeline import handoff, sink
from nsqviz.pipeline.source import reader_options

if TYPE_CHECKING:  # the analyses' definitions load when a tally is asked for
    from nsqviz.pipeline.tally import Tally

__all__ = ["FramesRun", "capture_frames", "write_frames"]


@dataclass
class FramesRun:
    """What :func:`write_frames` did: stage 2's partitions, the 4-tuples they finished
    and the payload bytes they decoded (0, 0, 0: no stage 2); and, when asked for, the
    tally of the frames table."""

    parts: int = 0
    keys: int = 0
    payload: int = 0
    tally: Tally | None = None


def write_frames(
    spark: SparkSession,
    files: list[str],
    out: str,
    *,
    partitions: int | None = None,
    idle_split: float | None = IDLE_SPLIT,
    ports: Mapping[str, Iterable[int]] | None = None,
    per_file: bool = False,
    work: str | None = None,
    progress_dir: str | None = None,
    on_stage_2: Callable[[FramesRun], None] | None = None,
    tally: bool = False,
) -> FramesRun:
    """Write the frames table (:data:`~nsqviz.pipeline.schemas.FRAME_SCHEMA`) of capture
    ``files`` (absolute paths in capture-set order, as :func:`~nsqviz.capture.paths.expand_paths`
    gives them) to the Parquet directory ``out`` (a path or URI).

    ``idle_split``, ``ports`` and ``per_file`` (the driver's ``continuation`` turned
    off) are the capture driver's options, as in ``nsqviz decode``: by default all files
    are one capture set, and a connection continues from file to file. ``partitions``:
    stage 2's tasks (default ``spark.sql.shuffle.partitions``). ``work``: a directory
    the executors and the driver share for the handoffs (default: beside a local
    ``out``, else a temporary directory -- enough for local mode); it is emptied
    afterwards. ``progress_dir``: where the tasks report how far they are
    (:func:`~nsqviz.pipeline.decode.read_progress`). ``on_stage_2`` is told before stage
    2 starts. ``tally``: every task tallies its rows (:class:`~nsqviz.pipeline.tally.
    Tally`), merged into the result's.
    """
    options = reader_options(continuation=not per_file, idle_split=idle_split, ports=ports)
    if progress_dir:
        options["progress"] = progress_dir
    if tally:
        options["tally"] = "true"
    tallies: list[bytes | None] = []

    def tallied(run: FramesRun) -> FramesRun:
        if tally:
            from nsqviz.pipeline.tally import Tally

            run.tally = Tally.merged(tallies)
        return run

    crossing = not per_file and len(files) > 1
    made = work is None
    if work is None:
        local = out[len("file://"):] if out.startswith("file://") else out
        work = (tempfile.mkdtemp(prefix="nsqviz-handoff-") if "://" in local
                else os.path.join(os.path.dirname(os.path.abspath(local)),
                                  f"_{os.path.basename(local)}-handoff"))
    handoffs = os.path.join(work, "handoff")
    try:
        if crossing:
            os.makedirs(handoffs, exist_ok=True)
            options["handoff"] = handoffs
        sink.clear(out)
        options["sink"] = out
        tallies.extend(r["tally"] for r in _read(spark, files, options, "frames").collect())
        if not crossing:
            sink.done(out)
            return tallied(FramesRun())
        # conf.get is typed str | None, but with a default it never gives None
        n = partitions or int(spark.conf.get("spark.sql.shuffle.partitions",  # type: ignore[arg-type]
                                             "8"))
        parts = handoff.plan(handoff.load(handoffs, len(files)), n)
        run = FramesRun(len(parts), sum(p.keys for p in parts),
                        sum(p.payload for p in parts))
        if not parts:
            sink.done(out)
            return tallied(run)
        if on_stage_2 is not None:
            on_stage_2(run)
        plan = os.path.join(work, "plan")
        with open(plan, "wb") as f:
            pickle.dump(parts, f, protocol=pickle.HIGHEST_PROTOCOL)
        options = {**options, "plan": plan}
        tallies.extend(r["tally"] for r in _read(spark, files, options, "continued")
                       .collect())
        sink.done(out)
        return tallied(run)
    finally:
        shutil.rmtree(work if made else handoffs, ignore_errors=True)
        if not made:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(work, "plan"))


def _read(spark: SparkSession, files: list[str], options: dict[str, str],
          output: str) -> DataFrame:
    return (spark.read.format("pcap").option("paths", json.dumps(files))
            .options(**options).option("output", output).load())


def capture_frames(spark: SparkSession, files: list[str], out: str,
                   **options: object) -> DataFrame:
    """:func:`write_frames` into ``out``, read back."""
    # ``options`` are write_frames' own keywords, passed on as they came
    write_frames(spark, files, out, **options)  # type: ignore[arg-type]
    return spark.read.parquet(out)
