"""Bounded memory of the Spark analyses on one broker's large capture set (issue 32, item 5).

A one-broker set is generated (:mod:`benchmarks.spark_pipeline_data` with ``server``:
four simulated scenarios on one nsqd, each copy of them its own clients and topics, on
that same nsqd), then, in the same run, each in a fresh process on ``local[2]`` with
every Python worker capped (``spark.executor.pyspark.memory``: PySpark sets the worker's
``RLIMIT_AS``, its *virtual* address space, which local mode honours too -- measured on
PySpark 4.3: the workers log "Setting mem limits to ..."):

* a *sample* (a few copies): the pipeline's tables against the in-process ones
  (:func:`nsqviz.pipeline.on_duckdb.analyse` over :func:`nsqviz.analysis.capture.
  frames_of`), every table as a multiset of rows;
* the whole set: the pipeline must finish under the cap; printed are the frames, the
  frames table's size in memory (Arrow, without ``fields``), the groups and tasks, the
  frames of the largest task, the peak RSS of the largest Python worker, and each
  per-copy table's rows against the sample's times the copies.

Per broker, one task would hold the whole frames table: more than the cap. Run:
``.venv/bin/python -m benchmarks.spark_memory --mb 2048 --cap 3g --keep /tmp/DIR``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks.spark_pipeline import ROOT, MemorySampler
from benchmarks.spark_pipeline_data import replicate, seed_capture

SERVER = "10.0.0.9"  # the simulator's nsqd


def make_sets(work: str, mb: float, sample_copies: int) -> tuple[list[str], list[str], int]:
    """The whole set and the sample, in ``work``; and the copies in the whole set."""
    seed = os.path.join(work, "seed.pcap")
    seed_capture(seed, one_broker=True, body_size=200)
    copies = sample_copies * max(1, round(mb * 1e6 / os.path.getsize(seed) / sample_copies))
    out = []
    for name, n in (("sample", sample_copies), ("set", copies)):
        directory = os.path.join(work, name)
        os.makedirs(directory, exist_ok=True)
        out.append(replicate(seed, directory, copies=n, server=SERVER))
    return out[0], out[1], copies


def child(files: list[str], out: str, cap: str, frames_per_task: int) -> dict:
    """In a fresh process: the pipeline on ``local[2]``, workers capped."""
    from nsqviz.pipeline.analyses import FRAMES_PER_TASK_SETTING
    from nsqviz.pipeline.job import run
    from nsqviz.pipeline.spark import get_session, input_bytes

    sampler = MemorySampler()
    sampler.start()
    spark = get_session("local[2]", input_bytes=input_bytes(files), conf={
        "spark.executor.pyspark.memory": cap, "spark.ui.enabled": "false",
        FRAMES_PER_TASK_SETTING: str(frames_per_task)})
    result = run(spark, files, out)
    spark.stop()
    peaks = sampler.stop()
    assert result.analyses is not None
    return {"seconds": result.seconds, "decode_s": result.frames_seconds,
            "groups": result.analyses.groups, "task_frames": result.analyses.task_frames,
            "counts": result.counts, "peaks": peaks, "load": os.getloadavg()[0]}


def _child(files: list[str], out: str, cap: str, frames_per_task: int) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.spark_memory", "--child", "--out", out,
           "--cap", cap, "--frames-per-task", str(frames_per_task), *files]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _canonical(value: object) -> object:
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def differences(files: list[str], out: str) -> list[str]:
    """The tables whose rows differ between the pipeline's output and in-process."""
    from collections import Counter

    import pyarrow.dataset as ds

    from nsqviz.analysis.capture import frames_of
    from nsqviz.pipeline.definitions import tables
    from nsqviz.pipeline.on_duckdb import analyse

    whole = analyse(frames_of(files, fields=False))
    differ = []
    for name in tables():
        got = ds.dataset(os.path.join(out, name), format="parquet").to_table()
        rows = [Counter(json.dumps(_canonical(r), sort_keys=True, default=str)
                        for r in t.to_pylist()) for t in (whole[name], got)]
        if rows[0] != rows[1]:
            differ.append(name)
    return differ


def frames_table_mb(out: str) -> float:
    """The frames table without ``fields``, from the Parquet footers' uncompressed sizes
    (encoded: less than the same rows in Arrow, which :func:`arrow_mb` gives)."""
    import pyarrow.parquet as pq

    path = os.path.join(out, "frames")
    total = 0
    for name in os.listdir(path):
        if not name.endswith(".parquet"):
            continue
        meta = pq.ParquetFile(os.path.join(path, name)).metadata
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            total += sum(group.column(c).total_uncompressed_size
                         for c in range(group.num_columns)
                         if group.column(c).path_in_schema.split(".")[0] != "fields")
    return total / 1e6


def arrow_mb(out: str) -> float:
    """The frames table without ``fields`` in memory (Arrow), file by file."""
    import pyarrow.parquet as pq

    path = os.path.join(out, "frames")
    total = 0
    for name in os.listdir(path):
        if name.endswith(".parquet"):
            f = pq.ParquetFile(os.path.join(path, name))
            columns = [c for c in f.schema_arrow.names if c != "fields"]
            for g in range(f.num_row_groups):
                total += f.read_row_group(g, columns=columns).nbytes
    return total / 1e6


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*")
    p.add_argument("--mb", type=float, default=2048, help="size of the set (MB)")
    p.add_argument("--cap", default="3g", help="spark.executor.pyspark.memory")
    p.add_argument("--frames-per-task", type=int, default=None,
                   help="frames an analyses' task holds (default: as many as fit in --cap, "
                   "nsqviz.pipeline.analyses.frames_for_cap)")
    p.add_argument("--sample-copies", type=int, default=2)
    p.add_argument("--keep", help="generate (or reuse) the sets in this directory")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.frames_per_task is None:
        from nsqviz.pipeline.analyses import frames_for_cap

        args.frames_per_task = frames_for_cap(args.cap)
    if args.child:
        print(json.dumps(child(args.files, args.out, args.cap, args.frames_per_task)))
        return
    work = args.keep or tempfile.mkdtemp(prefix="nsqviz-spark-memory-")
    os.makedirs(work, exist_ok=True)
    try:
        _measure(args, work)
    finally:
        if not args.keep:  # the set is gigabytes: never left behind
            shutil.rmtree(work, ignore_errors=True)


def _measure(args: argparse.Namespace, work: str) -> None:
    started = time.perf_counter()
    sample, whole, copies = make_sets(work, args.mb, args.sample_copies)
    mb = sum(os.path.getsize(f) for f in whole) / 1e6
    print(f"one broker: {len(whole)} files, {mb:.0f} MB, {copies} copies "
          f"(made in {time.perf_counter() - started:.0f} s)")
    small = _child(sample, os.path.join(work, "out-sample"), args.cap, max(
        1, args.frames_per_task * args.sample_copies // copies))
    differ = differences(sample, os.path.join(work, "out-sample"))
    print(f"sample ({args.sample_copies} copies, {small['groups']} groups, "
          f"{len(small['task_frames'])} tasks): tables "
          + ("the same as in-process" if not differ else f"DIFFER: {', '.join(differ)}"))
    big = _child(whole, os.path.join(work, "out-set"), args.cap, args.frames_per_task)
    table_mb = frames_table_mb(os.path.join(work, "out-set"))
    frames = sum(big["task_frames"])
    print(f"set: {frames} frames, frames table {table_mb:.0f} MB (Parquet uncompressed, no"
          f" fields), {arrow_mb(os.path.join(work, 'out-set')):.0f} MB as Arrow; "
          f"{big['groups']} groups in {len(big['task_frames'])} tasks, the largest"
          f" {big['task_frames'][0]} frames ({big['task_frames'][0] / frames:.1%}); Python "
          f"workers capped at {args.cap} (RLIMIT_AS), largest peak RSS "
          f"{big['peaks']['worker']:.0f} MB; JVM {big['peaks']['executor_jvm']:.0f} MB; "
          f"{big['seconds']:.0f} s ({big['decode_s']:.0f} s decoding), load "
          f"{big['load']:.1f}")
    per_copy = [name for name, rows in small["counts"].items()
                if rows and big["counts"].get(name) == rows * copies // args.sample_copies]
    print(f"tables with the sample's rows x {copies // args.sample_copies}: "
          f"{', '.join(sorted(per_copy))}")


if __name__ == "__main__":
    main()
