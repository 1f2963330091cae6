"""The pipeline as one job: capture files -> frames -> the analyses, all as Parquet.

``run(spark, captures, out)`` is what ``nsqviz pipeline`` and the notebook call; this
module is also the program ``spark-submit`` runs on a cluster::

    python -m nsqviz.pipeline.ship dist/            # builds dist/nsqviz.zip
    spark-submit --master spark://HOST:7077 --py-files dist/nsqviz.zip \\
        dist/nsqviz_pipeline_main.py CAPTURES... --out DIR

The frames table is written first (it is one of the outputs) and read back once for
the analyses, which deal it to their tasks by groups of connections
(:mod:`nsqviz.pipeline.analyses`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nsqviz.capture.driver import IDLE_SPLIT
from nsqviz.capture.options import add_capture_set_options, capture_set_options
from nsqviz.pipeline.definitions import tables as analyses_tables
from nsqviz.pipeline.progress import Progress, console
from nsqviz.usage import usage_error

if TYPE_CHECKING:  # pyspark and the frames stage are imported when a run starts
    from pyspark.sql import SparkSession

    from nsqviz.capture.paths import Paths
    from nsqviz.pipeline.analyses import AnalysesRun
    from nsqviz.pipeline.frames import FramesRun

__all__ = ["PipelineResult", "main", "run"]



def _tables() -> tuple[str, ...]:
    """What a run writes: the frames, then every analysis."""
    return ("frames", *analyses_tables())


@dataclass
class PipelineResult:
    out: str
    files: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0  # the whole run
    frames_seconds: float = 0.0  # reading and decoding, up to frames on disk
    stage_2: FramesRun | None = None  # what crossed file boundaries
    analyses: AnalysesRun | None = None  # how the analyses' tasks were dealt

    def table(self, name: str) -> str:
        return os.path.join(self.out, name)


def run(spark: SparkSession, captures: Paths, out: str, *, partitions: int | None = None,
        ports: Mapping[str, Iterable[int]] | None = None,
        idle_split: float | None = IDLE_SPLIT, count: bool = True,
        per_file: bool = False, progress: Callable[[Any], None] | None = None,
        work: str | None = None) -> PipelineResult:
    """Decode ``captures`` (files, directories, globs) and write every table under ``out``.

    All files are one capture set (a connection may continue from file to file) unless
    ``per_file``: then each file is decoded on its own. ``ports`` (extra server ports
    per protocol name) and ``idle_split`` are the capture driver's options, as in
    ``nsqviz decode``. ``progress`` receives a :class:`~nsqviz.pipeline.progress.Snapshot`
    twice a second (:func:`~nsqviz.pipeline.progress.console`,
    :class:`~nsqviz.pipeline.progress.NotebookBar`). ``work``: a directory the driver and
    every executor reach, for the tasks' handoffs and progress reports (default: inside a
    local ``out``; for a URI ``out``, a local temporary directory, which serves local
    mode and a cluster on one host only).
    """
    from nsqviz.capture.paths import expand_paths
    from nsqviz.pipeline.spark import check_running

    check_running(spark)
    return _run_files(spark, expand_paths(captures), out, partitions=partitions, ports=ports,
                      idle_split=idle_split, count=count, per_file=per_file,
                      progress=progress, work=work)


def _run_files(spark: SparkSession, files: list[str], out: str, *, partitions: int | None,
               ports: Mapping[str, Iterable[int]] | None, idle_split: float | None,
               count: bool, per_file: bool, progress: Callable[[Any], None] | None,
               work: str | None) -> PipelineResult:
    """:func:`run` on ``files``, the capture set already named file by file."""
    started = time.perf_counter()
    sizes = [os.path.getsize(f) for f in files]
    result = PipelineResult(os.path.abspath(out) if "://" not in out else out, files)
    # The decoding tasks report how far they are in files there (on a cluster, the
    # output's file system is the one executors and driver share, as for the captures).
    reports = None
    if progress:
        reports = (os.path.join(work, "progress") if work is not None
                   else os.path.join(result.out, "_progress") if "://" not in out
                   else tempfile.mkdtemp(prefix="nsqviz-progress-"))
        os.makedirs(reports, exist_ok=True)
    tracker: Progress | contextlib.nullcontext[None] = (
        Progress(spark, sizes, progress, directory=reports) if progress
        else contextlib.nullcontext())
    try:
        with tracker:
            _run(spark, files, _uri(out), result, tracker, partitions=partitions,
                 ports=ports, idle_split=idle_split, per_file=per_file, count=count,
                 progress_dir=reports, work=work)
    finally:
        if reports is not None:
            shutil.rmtree(reports, ignore_errors=True)
    result.seconds = time.perf_counter() - started
    result.frames_seconds -= started
    return result


def _run(spark: SparkSession, files: list[str], uri: str, result: PipelineResult,
         tracker: Progress | contextlib.nullcontext[None], *, count: bool,
         **options: Any) -> None:
    from nsqviz.pipeline import analyses
    from nsqviz.pipeline.frames import write_frames

    def stage_2(run: FramesRun) -> None:
        if isinstance(tracker, Progress):
            tracker.next_phase("continuing", total_bytes=run.payload)

    result.stage_2 = write_frames(spark, files, f"{uri}/frames", on_stage_2=stage_2,
                                  tally=True, **options)
    result.frames_seconds = time.perf_counter()
    tally = result.stage_2.tally
    assert tally is not None  # asked for
    # The analyses' tasks read the frames they are dealt from the table's files
    # themselves, never `fields` (the hex of every body: most of the bytes); the
    # decoding tasks tallied what dealing them needs.
    if isinstance(tracker, Progress):
        tracker.next_phase("analyses", frames=tally.frames)
    result.analyses = analyses.write(spark, f"{uri}/frames", uri, tally=tally)
    if count:
        for name in _tables():
            result.counts[name] = _rows(spark, f"{uri}/{name}")


def _rows(spark: SparkSession, uri: str) -> int:
    """Rows of a Parquet table: from its files' footers when they are local (no Spark
    job), else counted by Spark."""
    if uri.startswith("file://"):
        import pyarrow.parquet as pq

        path = uri[len("file://"):]
        return sum(pq.ParquetFile(os.path.join(path, n)).metadata.num_rows
                   for n in os.listdir(path) if n.endswith(".parquet"))
    return int(spark.read.parquet(uri).count())


def _uri(out: str) -> str:
    return out if "://" in out else "file://" + os.path.abspath(out)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(
        prog="nsqviz pipeline", description="Decode captures on Spark into Parquet tables."
    )
    p.add_argument("captures", nargs="+", metavar="CAPTURE",
                   help="pcap/pcapng files, directories of them, or globs (rotated files "
                   "of one capture belong together)")
    p.add_argument("--out", required=True, metavar="DIR", help="where the tables are written")
    p.add_argument("--master", default=None,
                   help="Spark master (default: the spark-submit one, else local[*])")
    p.add_argument("--driver-memory", default=None,
                   help="driver JVM heap for local runs (default: 512m for inputs under 64"
                   " MB, else 1g)")
    p.add_argument("--partitions", type=int, default=None,
                   help="tasks that finish the connections crossing file boundaries "
                   "(default: spark.sql.shuffle.partitions, 2x cores)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress line on standard error")
    p.add_argument("--work", metavar="DIR", default=None,
                   help="a directory the driver and every executor reach, for what the "
                   "decoding tasks hand on and report (default: inside --out; needed on a "
                   "multi-host cluster when --out is a URI)")
    add_capture_set_options(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """``spark-submit`` entry point (and the body of ``nsqviz pipeline``)."""
    args = build_parser().parse_args(argv)
    return run_args(args)


def run_args(args: argparse.Namespace) -> int:
    from nsqviz.capture.paths import expand_paths
    from nsqviz.pipeline.spark import JavaMissing, get_session, input_bytes

    try:
        files = expand_paths(args.captures)  # once, and before paying for a JVM
    except FileNotFoundError as exc:
        return usage_error("pipeline", str(exc))
    try:
        spark = get_session(args.master, driver_memory=args.driver_memory,
                            input_bytes=input_bytes(files))
    except JavaMissing as exc:
        return usage_error("pipeline", str(exc))
    try:
        options = capture_set_options(args)
        result = _run_files(spark, files, args.out, partitions=args.partitions,
                            ports=options["ports"], idle_split=options["idle_split"],
                            count=True, per_file=not options["continuation"],
                            progress=None if args.quiet else console, work=args.work)
    except FileNotFoundError as exc:
        return usage_error("pipeline", str(exc))
    print(f"{len(result.files)} capture file(s) -> {result.out} in {result.seconds:.1f} s")
    for name in _tables():
        print(f"  {name:<15} {result.counts.get(name, 0):>10} rows  "
              f"{os.path.join(result.out, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
