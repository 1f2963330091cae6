"""Throughput of the Spark pipeline against single-process ``nsqviz decode``, same files.

A capture set of >= 200 MB is generated (``nsqviz.pipeline.synth``: ten simulated NSQ
deployments -- a producer, four consumers each -- one after the other, written as
rotated 40 MB files like ``tcpdump -C 40``). Then, in the same run:

* the baseline: ``nsqviz decode --json FILES > /dev/null`` as a subprocess (one core);
* the pipeline with ``local[1]`` and ``local[2]``, each in a fresh process (its own
  JVM), after a warm-up run on one small file in that process: the *decode* figure is
  reading + grouping by connection + decoding, up to the frames table on disk (the work
  ``nsqviz decode`` does); the *total* adds the five analyses;
* peak memory as the input grows (1/4, 1/2, all files, ``local[2]``).

Memory is measured from ``/proc``: a sampler thread in the measuring process polls
(every 0.1 s) its descendant processes -- the JVM (driver and, in local mode, the
executor) and the Python workers Spark forks -- and the figures are the peak RSS
(``VmHWM``) of the JVM and the largest peak RSS of any one Python worker, plus the
largest sum of worker RSS seen at one time.

Targets (issue 6): local[2] >= 1.6x local[1]; per-core Spark >= 0.7x the baseline; peak
executor memory flat as input grows. Run: ``.venv/bin/python -m benchmarks.spark_pipeline``
(``--mb 60`` for a quick look).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

FILE_BYTES = 40_000_000


def generate(directory: str, target_mb: float) -> tuple[list[str], int]:
    """Rotated capture files of about ``target_mb`` MB; returns (paths, frames)."""
    from nsqviz.pipeline.synth import RotatingPcapWriter, simulate

    per_run = min(5000, max(200, int(target_mb * 200)))  # 5000 messages: ~24 MB
    runs = max(1, round(target_mb / 24))
    frames = 0
    with RotatingPcapWriter(os.path.join(directory, "nsq.pcap"), FILE_BYTES) as w:
        for k in range(runs):
            truth = simulate(
                w,
                seed=100 + k,
                n_messages=per_run,
                body_size=1000,
                t0=1_700_000_000.0 + 400.0 * k,
                port_base=41000 + 10 * k,
            )
            frames += truth.frames
    return w.paths, frames


# ----------------------------------------------------------------------------- memory


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _status(pid: int) -> tuple[str, int, int]:
    """(name, VmRSS kB, VmHWM kB) of a process, or ("", 0, 0) if it is gone."""
    name, rss, hwm = "", 0, 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Name:"):
                    name = line.split()[1]
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    return name, rss, hwm


class MemorySampler(threading.Thread):
    """Peak RSS of this process's JVM and Python workers, sampled from /proc."""

    def __init__(self, interval: float = 0.1):
        super().__init__(daemon=True)
        self.interval = interval
        self.stop_flag = threading.Event()
        self.reset()

    def reset(self) -> None:
        self.jvm_peak = 0
        self.worker_peak = 0
        self.workers_sum_peak = 0

    def run(self) -> None:
        me = os.getpid()
        while not self.stop_flag.wait(self.interval):
            total = 0
            for pid in _descendants(me):
                name, rss, hwm = _status(pid)
                if name == "java":
                    self.jvm_peak = max(self.jvm_peak, rss)
                elif name.startswith("python"):
                    self.worker_peak = max(self.worker_peak, hwm)
                    total += rss
            self.workers_sum_peak = max(self.workers_sum_peak, total)


# ----------------------------------------------------------------------- measurements


def measure(master: str, files: list[str], warmup: str, out: str) -> dict:
    """Runs in a child process: warm up, then one timed pipeline run."""
    from nsqviz.pipeline.job import run
    from nsqviz.pipeline.spark import get_session

    sampler = MemorySampler()
    sampler.start()
    spark = get_session(master, driver_memory="4g")
    run(spark, [warmup], os.path.join(out, "warmup"), count=False)
    sampler.reset()
    load_before = os.getloadavg()[0]
    result = run(spark, files, os.path.join(out, "run"), count=False)
    load_after = os.getloadavg()[0]
    frames = spark.read.parquet(os.path.join(out, "run", "frames"))
    n_frames = frames.where("kind in ('command', 'frame')").count()
    errors = frames.where("kind in ('error', 'gap')").count()
    time.sleep(0.3)
    spark.stop()
    sampler.stop_flag.set()
    return {
        "master": master,
        "decode_s": result.frames_seconds,
        "total_s": result.seconds,
        "frames": n_frames,
        "errors": errors,
        "jvm_peak_mb": sampler.jvm_peak / 1024,
        "worker_peak_mb": sampler.worker_peak / 1024,
        "workers_sum_peak_mb": sampler.workers_sum_peak / 1024,
        "load": (load_before, load_after),
    }


def _child(master: str, files: list[str], warmup: str, out: str) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.spark_pipeline",
        "--child",
        master,
        "--warmup",
        warmup,
        "--out",
        out,
        *files,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{master} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def baseline(files: list[str]) -> tuple[float, tuple[float, float]]:
    """Seconds for ``nsqviz decode --json FILES > /dev/null``, and the load around it."""
    nsqviz = os.path.join(os.path.dirname(sys.executable), "nsqviz")
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        subprocess.run([nsqviz, "decode", "--json", *files], stdout=devnull, check=True)
    return time.perf_counter() - started, (load, os.getloadavg()[0])


def _best(runs: list[dict]) -> dict:
    return min(runs, key=lambda r: r["decode_s"])


def _load(pair) -> str:
    return f"{pair[0]:.1f}/{pair[1]:.1f}"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, default=220, help="size of the generated capture set")
    p.add_argument("--keep", metavar="DIR", help="generate into DIR and keep it")
    p.add_argument("--repeat", type=int, default=1, help="runs per figure; the best is shown")
    p.add_argument("--child", metavar="MASTER", help=argparse.SUPPRESS)
    p.add_argument("--warmup", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.files, args.warmup, args.out)))
        return

    work = args.keep or tempfile.mkdtemp(prefix="nsqviz-bench-")
    os.makedirs(work, exist_ok=True)
    caps = os.path.join(work, "captures")
    os.makedirs(caps, exist_ok=True)
    t = time.perf_counter()
    files, frames = generate(caps, args.mb)
    mb = sum(os.path.getsize(f) for f in files) / 1e6
    print(f"capture set: {len(files)} files, {mb:.1f} MB, {frames} frames "
          f"(generated in {time.perf_counter() - t:.1f} s)")
    warm = os.path.join(work, "warmup")
    os.makedirs(warm, exist_ok=True)
    warm_files, _ = generate(warm, 1)

    base_s, base_load = min(baseline(files) for _ in range(args.repeat))
    print(f"best of {args.repeat}; 'load' is the 1-minute load average before/after the run on "
          f"this {os.cpu_count()}-core machine: other work running slows every figure")
    print(f"{'run':<28}{'seconds':>9}{'MB/s':>9}{'frames/s':>11}{'vs base':>9}{'load':>11}")
    print(f"{'nsqviz decode --json (1 core)':<28}{base_s:>9.1f}{mb / base_s:>9.1f}"
          f"{frames / base_s:>11.0f}{1.0:>9.2f}{_load(base_load):>11}")
    results = {}
    try:
        for master in ("local[1]", "local[2]"):
            out = os.path.join(work, master.replace("[", "").replace("]", ""))
            runs = [_child(master, files, warm_files[0], out) for _ in range(args.repeat)]
            r = results[master] = _best(runs)
            if r["frames"] != frames:
                print(f"  ! {master} decoded {r['frames']} frames, expected {frames}")
            for label, secs in (("decode", r["decode_s"]), ("decode+analyses", r["total_s"])):
                name = f"{master} {label}"
                print(f"{name:<28}{secs:>9.1f}{mb / secs:>9.1f}{frames / secs:>11.0f}"
                      f"{base_s / secs:>9.2f}{_load(r['load']):>11}")
        one, two = results["local[1]"], results["local[2]"]
        print(f"local[2] / local[1] speed-up (decode): {one['decode_s'] / two['decode_s']:.2f}x"
              f"  (decode+analyses: {one['total_s'] / two['total_s']:.2f}x)")
        print(f"per-core Spark / baseline (local[1] decode): {base_s / one['decode_s']:.2f}")

        print("peak memory as input grows (local[2]; RSS from /proc):")
        print(f"{'files':>6}{'MB':>8}{'JVM peak MB':>13}{'1 worker peak MB':>18}"
              f"{'all workers MB':>16}")
        n = len(files)
        for part in sorted({max(1, n // 4), max(1, n // 2), n}):
            sub = files[:part]
            if part == n:
                r = two
            else:
                r = _child("local[2]", sub, warm_files[0], os.path.join(work, f"mem{part}"))
            sub_mb = sum(os.path.getsize(f) for f in sub) / 1e6
            print(f"{part:>6}{sub_mb:>8.0f}{r['jvm_peak_mb']:>13.0f}{r['worker_peak_mb']:>18.0f}"
                  f"{r['workers_sum_peak_mb']:>16.0f}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
