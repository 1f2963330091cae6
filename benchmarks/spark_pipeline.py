"""Throughput, scaling and memory of the Spark pipeline against single-process decoding.

A capture set is generated (:mod:`benchmarks.spark_pipeline_data`: four simulated NSQ
deployments -- a producer, four consumers each -- replicated at the pcap level onto
other hosts and later times, eight copies overlapping at any moment, written as rotated
40 MB files like ``tcpdump -C 40``, so many connections are open at every file boundary
and cross it). Then, in the same run:

* the baseline: ``nsqviz decode --json FILES > /dev/null`` as a subprocess (one core);
* the pipeline with ``local[1]`` and ``local[2]``, each in a fresh process (its own JVM)
  after a warm-up run on one small file: *decode* is reading and decoding up to the
  frames table on disk (the work ``nsqviz decode`` does), *total* adds the analyses;
* with ``--cluster``: the same job through ``spark-submit`` on a standalone master and
  two 1-core workers on this machine;
* every run's tables are compared (row counts and an order-free hash of each table): the
  same results everywhere, or the benchmark says which table differs;
* the small sample run: ``data/`` (12 captures) in a session that is already up;
* peak memory: the JVM that runs the executors and the largest Python worker (RSS from
  ``/proc``, sampled every 0.5 s), per run; and notebook 10 executed end to end
  (``--notebook``), kernel + JVM + Python workers summed.

Targets (issue 13): local[2] >= 1.8x local[1]; per core >= 0.7x the baseline; small run
<= 15 s after the session is up; notebook 10 under 1.5 GB. Targets (issue 26): the
analyses cost less than decoding, and decode + analyses on local[2] >= 1.5x local[1]. Run:
``.venv/bin/python -m benchmarks.spark_pipeline`` (``--mb 60`` for a quick look,
``--mb 2048 --cluster --notebook`` for the full set).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from benchmarks.spark_pipeline_data import make_capture_set, replicate, seed_capture

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ----------------------------------------------------------------------------- memory


def _children() -> dict[int, list[int]]:
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
    return children


def _descendants(pid: int) -> list[int]:
    children, out, todo = _children(), [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _memory_kb(pid: int) -> tuple[str, int, int]:
    """(command line, RSS kB, PSS kB) of a process, or ("", 0, 0) if it is gone. PSS
    shares each page among the processes mapping it, so PSS sums to real memory where
    RSS counts a forked Python worker's pages once per process."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        return "", 0, 0
    return cmd, rss, pss


class MemorySampler(threading.Thread):
    """Peak memory (MB) of the processes under ``root`` (and ``root``), sampled from /proc:
    ``executor_jvm`` (RSS of the JVM running tasks: the driver in local mode, each
    executor on a cluster), ``worker`` (RSS of the largest Python worker), ``total_rss``
    and ``total_pss`` (all of them summed). It also keeps the CPU time of every process
    it has seen (:meth:`cpu`)."""

    def __init__(self, root: int | None = None, interval: float = 0.5):
        super().__init__(daemon=True)
        self.root = root or os.getpid()
        self.interval = interval
        self.stop_flag = threading.Event()
        self.peaks = {"executor_jvm": 0.0, "worker": 0.0, "total_rss": 0.0, "total_pss": 0.0}
        self.lock = threading.Lock()
        self.used: dict[int, tuple[bool, float]] = {}  # pid -> (a JVM?, CPU s last seen)

    def run(self) -> None:
        while not self.stop_flag.wait(self.interval):
            total_rss = total_pss = 0
            pids = [self.root, *_descendants(self.root)]
            self._cpu(pids)
            for pid in pids:
                cmd, rss, pss = _memory_kb(pid)
                total_rss += rss
                total_pss += pss
                mb = rss / 1024
                if "java" in cmd.split(" ", 1)[0]:
                    local = "SparkSubmit" in cmd and "spark.master=local" in cmd
                    if local or "CoarseGrainedExecutorBackend" in cmd:
                        self.peaks["executor_jvm"] = max(self.peaks["executor_jvm"], mb)
                elif "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
                    self.peaks["worker"] = max(self.peaks["worker"], mb)
            self.peaks["total_rss"] = max(self.peaks["total_rss"], total_rss / 1024)
            self.peaks["total_pss"] = max(self.peaks["total_pss"], total_pss / 1024)

    def _cpu(self, pids: list[int]) -> None:
        ticks = os.sysconf("SC_CLK_TCK")
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            # utime + stime: its own, not its reaped children's (PySpark's daemon ignores
            # SIGCHLD, so a worker it ends takes its CPU time with it -- sampled here
            # while it lived, every ``interval``)
            used = sum(int(v) for v in stat.rsplit(")", 1)[1].split()[11:13]) / ticks
            with self.lock:
                self.used[pid] = ("(java)" in stat, used)

    def cpu(self) -> dict[str, float]:
        """CPU seconds (user + system) so far of the JVMs and of the other processes
        (Python workers, the driver) under ``root``, those that ended included (as last
        sampled)."""
        self._cpu([self.root, *_descendants(self.root)])
        with self.lock:
            return {"jvm": sum(s for j, s in self.used.values() if j),
                    "python": sum(s for j, s in self.used.values() if not j)}

    def stop(self) -> dict[str, float]:
        self.stop_flag.set()
        self.join()
        return self.peaks


# ----------------------------------------------------------------------- measurements


def digest(out: str) -> dict[str, list]:
    """Per table: [rows, order-free hash of the rows] (frames: its identifying columns,
    without the bodies' hex), read batch by batch so a 2 GB run's tables need not fit
    in memory."""
    import pandas as pd
    import pyarrow.dataset as ds

    from nsqviz.pipeline.definitions import tables

    result = {}
    for name in ("frames", *tables()):
        dataset = ds.dataset(os.path.join(out, name), format="parquet")
        columns = (["conn_id", "seq", "kind", "name", "dir", "offset", "size"]
                   if name == "frames" else None)
        rows = total = 0
        for batch in dataset.to_batches(columns=columns):
            df = batch.to_pandas()
            for c in df.columns:
                if df[c].dtype == object:
                    df[c] = df[c].map(lambda v: json.dumps(v.tolist() if hasattr(v, "tolist")
                                                           else v, default=str))
            rows += len(df)
            if len(df):
                total += int(pd.util.hash_pandas_object(df, index=False).sum())
        result[name] = [rows, total & 0xFFFFFFFFFFFF]
    return result


def samples() -> list[str]:
    data = os.path.join(ROOT, "data")
    return sorted(os.path.join(data, n) for n in os.listdir(data)
                  if n.endswith((".pcap", ".pcapng")))


def task_spans(events: str) -> list[tuple[float, float]]:
    """(launch, finish) of every task in a Spark event log directory (epoch seconds)."""
    spans = []
    for path in sorted(glob.glob(os.path.join(events, "**", "events_*"), recursive=True)):
        with open(path) as f:
            for line in f:
                if '"SparkListenerTaskEnd"' in line:
                    info = json.loads(line)["Task Info"]
                    spans.append((info["Launch Time"] / 1e3, info["Finish Time"] / 1e3))
    return spans


def idle_cores(spans: list[tuple[float, float]], start: float, end: float,
               cores: int) -> dict[str, float]:
    """Over ``start``..``end``: seconds with no task running (the driver alone, or
    Spark between jobs) and with fewer tasks than ``cores`` running, and the core-seconds
    left idle -- the part of a run a second core cannot shorten."""
    edges = sorted([(max(a, start), 1) for a, b in spans if b > start and a < end]
                   + [(min(b, end), -1) for a, b in spans if b > start and a < end])
    out = {"no_task_s": 0.0, "short_s": 0.0, "idle_core_s": 0.0}
    running, at = 0, start
    for t, step in [*edges, (end, 0)]:
        if t > at:
            out["no_task_s"] += (t - at) * (running == 0)
            out["short_s"] += (t - at) * (running < cores)
            out["idle_core_s"] += (t - at) * max(0, cores - running)
            at = t
        running += step
    return out


def measure(master: str, files: list[str], warmup: str, out: str) -> dict:
    """Runs in a child process: warm up (two rotated files: both stages), one timed
    run, then the small sample run. Spark's event log gives when each task ran: the
    seconds of the timed run's decoding and analyses with a core idle
    (:func:`idle_cores`)."""
    from nsqviz.capture.paths import expand_paths
    from nsqviz.pipeline.job import run
    from nsqviz.pipeline.spark import get_session, input_bytes

    sampler = MemorySampler()
    sampler.start()
    started = time.perf_counter()
    events = os.path.join(out, "events")
    os.makedirs(events, exist_ok=True)
    spark = get_session(master, input_bytes=input_bytes(files), conf={
        "spark.eventLog.enabled": "true", "spark.eventLog.dir": "file://" + events,
        "spark.eventLog.compress": "false"})
    session_s = time.perf_counter() - started
    run(spark, expand_paths(warmup), os.path.join(out, "warmup"), count=False)
    from nsqviz.pipeline import frames

    marks = [sampler.cpu()]
    write_frames = frames.write_frames
    clock = [time.time()]

    def decoding(*args, **kwargs):  # the CPU used by the time the frames are on disk
        done = write_frames(*args, **kwargs)
        marks.append(sampler.cpu())
        clock.append(time.time())
        return done

    frames.write_frames = decoding  # what job.run calls
    try:
        result = run(spark, files, os.path.join(out, "run"), count=False)
    finally:
        frames.write_frames = write_frames
    marks.append(sampler.cpu())
    clock.append(time.time())
    cpu = {phase: {k: b[k] - a[k] for k in a} for phase, a, b in
           (("decode", marks[0], marks[1]), ("analyses", marks[1], marks[2]))}
    small_started = time.perf_counter()
    run(spark, samples(), os.path.join(out, "samples"), per_file=True, count=False)
    small_s = time.perf_counter() - small_started
    spark.stop()
    peaks = sampler.stop()
    spans, cores = task_spans(events), int(master[len('local['):-1])  # local[N]
    idle = {"decode": idle_cores(spans, clock[0], clock[1], cores),
            "analyses": idle_cores(spans, clock[1], clock[2], cores)}
    stage_2 = ({k: v for k, v in vars(result.stage_2).items() if k != "tally"}
               if result.stage_2 else {})
    return {"master": master, "decode_s": result.frames_seconds, "total_s": result.seconds,
            "session_s": session_s, "small_s": small_s, "peaks": peaks, "cpu_s": cpu,
            "stage_2": stage_2, "idle": idle,
            "digest": digest(os.path.join(out, "run")), "load": os.getloadavg()[0]}


def _child(master: str, files: list[str], warmup: str, out: str) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.spark_pipeline", "--child", master,
           "--warmup", warmup, "--out", out, *files]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{master} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cluster_run(files: list[str], work: str) -> dict:
    """The job through spark-submit on a standalone master + 2 one-core workers."""
    from nsqviz.pipeline.ship import build
    from nsqviz.pipeline.standalone import StandaloneCluster

    zpath, main = build(os.path.join(work, "dist"))
    out = os.path.join(work, "out")
    with StandaloneCluster(os.path.join(work, "cluster"), workers=2, cores=1,
                           memory="1g") as cluster:
        sampler = MemorySampler()
        sampler.start()
        started = time.perf_counter()
        proc = subprocess.run(cluster.submit(zpath, main, *files, "--out", out,
                                             executor_memory="768m"),
                              env=cluster.env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        peaks = sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"spark-submit failed:\n{proc.stderr[-3000:]}")
    return {"master": "standalone 2x1", "total_s": seconds, "peaks": peaks,
            "digest": digest(out), "load": os.getloadavg()[0]}


def notebook_memory(work: str) -> tuple[dict[str, float], float]:
    """(peaks as :class:`MemorySampler` gives them, seconds) for notebook 10 run by
    nbconvert: its kernel, the JVM and the Python workers (and nbconvert itself)."""
    nb = os.path.join(ROOT, "notebooks", "10-spark-pipeline.ipynb")
    out = os.path.join(work, "06-executed.ipynb")
    jupyter = os.path.join(os.path.dirname(sys.executable), "jupyter")
    started = time.perf_counter()
    proc = subprocess.Popen([jupyter, "nbconvert", "--to", "notebook", "--execute", nb,
                             "--output", out, "--ExecutePreprocessor.timeout=1200"],
                            cwd=os.path.dirname(nb), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    sampler = MemorySampler(root=proc.pid)
    sampler.start()
    _, err = proc.communicate()
    peaks = sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"notebook 10 failed:\n{err.decode()[-2000:]}")
    return peaks, time.perf_counter() - started


def two_stages_in_process(files: list[str]) -> float:
    """CPU seconds of both stages in this process, as Spark's tasks run them, without
    Spark (:func:`nsqviz.pipeline.decode.decode_set`): the pipeline's own Python work."""
    from nsqviz.pipeline.decode import decode_set

    started = time.process_time()
    for _ in decode_set(files):
        pass
    return time.process_time() - started


def baseline(files: list[str]) -> float:
    """Seconds for ``nsqviz decode --json FILES > /dev/null``."""
    nsqviz = os.path.join(os.path.dirname(sys.executable), "nsqviz")
    started = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        subprocess.run([nsqviz, "decode", "--json", *files], stdout=devnull, check=True)
    return time.perf_counter() - started


def _same(runs: list[dict]) -> str:
    first = runs[0]["digest"]
    diff = [f"{r['master']}: {name}" for r in runs[1:] for name in first
            if r["digest"][name] != first[name]]
    return "same tables in every run" if not diff else "DIFFERENT: " + ", ".join(diff)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, default=220, help="size of the generated capture set")
    p.add_argument("--keep", metavar="DIR", help="generate into DIR and keep it")
    p.add_argument("--cluster", action="store_true", help="also run on a standalone cluster")
    p.add_argument("--notebook", action="store_true", help="also measure notebook 10's RSS")
    p.add_argument("--no-baseline", action="store_true",
                   help="skip the single-process run (and the ratios against it)")
    p.add_argument("--child", metavar="MASTER", help=argparse.SUPPRESS)
    p.add_argument("--warmup", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.files, args.warmup, args.out)))
        return

    work = args.keep or tempfile.mkdtemp(prefix="nsqviz-bench-")
    caps = os.path.join(work, "captures")
    os.makedirs(caps, exist_ok=True)
    if args.notebook:
        peaks, secs = notebook_memory(work)
        print(f"notebook 10 end to end ({secs:.0f} s), kernel + JVM + Python workers + "
              f"nbconvert summed: peak PSS {peaks['total_pss']:.0f} MB, peak RSS "
              f"{peaks['total_rss']:.0f} MB (RSS counts forked workers' shared pages once "
              f"each); JVM {peaks['executor_jvm']:.0f} MB, largest worker "
              f"{peaks['worker']:.0f} MB; target < 1536 MB", flush=True)
    t = time.perf_counter()
    files = sorted((os.path.join(caps, n) for n in os.listdir(caps)), key=_natural)
    frames: int | str = "(kept set, not counted)"
    if not files:
        files, frames = make_capture_set(caps, args.mb)
    mb = sum(os.path.getsize(f) for f in files) / 1e6
    print(f"capture set: {len(files)} files, {mb:.1f} MB, {frames} frames "
          f"({time.perf_counter() - t:.1f} s to make or count); {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")
    warm = os.path.join(work, "warmup")
    os.makedirs(warm, exist_ok=True)
    warm_file = os.path.join(warm, "warm.pcap")
    seed_capture(warm_file, deployments=1, messages=200)
    warm_set = os.path.join(warm, "set")
    os.makedirs(warm_set, exist_ok=True)
    replicate(warm_file, warm_set, copies=2, lanes=2,
              file_bytes=os.path.getsize(warm_file))
    try:
        base_s = None if args.no_baseline else baseline(files)

        def vs(secs: float) -> str:
            return "-" if base_s is None else f"{base_s / secs:.2f}"

        print(f"{'run':<30}{'seconds':>9}{'MB/s':>8}{'vs base':>9}{'executor JVM MB':>17}"
              f"{'1 worker MB':>13}{'load':>6}")
        if base_s is not None:
            print(f"{'nsqviz decode --json (1 core)':<30}{base_s:>9.1f}{mb / base_s:>8.1f}"
                  f"{1.0:>9.2f}")
            inproc = two_stages_in_process(files)
            print(f"{'both stages, no Spark (CPU s)':<30}{inproc:>9.1f}{mb / inproc:>8.1f}"
                  f"{vs(inproc):>9}")
        runs = []
        for master in ("local[1]", "local[2]"):
            r = _child(master, files, warm_set, os.path.join(work, master[6]))
            runs.append(r)
            got = r["digest"]["frames"][0]
            for label, secs in (("decode", r["decode_s"]), ("decode+analyses", r["total_s"])):
                print(f"{master + ' ' + label:<30}{secs:>9.1f}{mb / secs:>8.1f}"
                      f"{vs(secs):>9}{r['peaks']['executor_jvm']:>17.0f}"
                      f"{r['peaks']['worker']:>13.0f}{r['load']:>6.1f}")
            print(f"  frames table rows {got}; session up in {r['session_s']:.1f} s; small "
                  f"sample run (data/, 12 files) {r['small_s']:.1f} s after that")
            s2 = r["stage_2"]
            cpu, spans = r["cpu_s"], {"decode": r["decode_s"],
                                      "analyses": r["total_s"] - r["decode_s"]}
            print("  CPU s (JVM + Python = cores busy): " + "; ".join(
                f"{phase} {c['jvm']:.1f} + {c['python']:.1f} = "
                f"{(c['jvm'] + c['python']) / spans[phase]:.2f}" for phase, c in cpu.items())
                  + f"; stage 2: {s2.get('keys', 0)} 4-tuples in {s2.get('parts', 0)} tasks, "
                  f"{s2.get('payload', 0) / 1e6:.1f} MB of payload")
            print("  a core idle (fewer tasks than cores) / no task at all, s: " + ", ".join(
                f"{phase} {i['short_s']:.1f} / {i['no_task_s']:.1f} ("
                f"{i['idle_core_s']:.1f} core-s idle)" for phase, i in r["idle"].items()))
        one, two = runs
        print(f"local[2] / local[1]: decode {one['decode_s'] / two['decode_s']:.2f}x, "
              f"target >= 1.8 (issue 13); decode+analyses "
              f"{one['total_s'] / two['total_s']:.2f}x, target >= 1.5 (issue 26)")
        print("analyses alone (decode+analyses - decode), against decoding: " + ", ".join(
            f"{m} {r['total_s'] - r['decode_s']:.1f} s = "
            f"{(r['total_s'] - r['decode_s']) / r['decode_s']:.2f}x"
            for m, r in (("local[1]", one), ("local[2]", two))) + "; target < 1 (issue 26)")
        if base_s is not None:
            print(f"per core vs single process (local[1] decode): "
                  f"{base_s / one['decode_s']:.2f}; (local[2] decode / 2: "
                  f"{base_s / two['decode_s'] / 2:.2f}); target >= 0.7")
        if args.cluster:
            c = cluster_run(files, os.path.join(work, "cluster"))
            runs.append(c)
            print(f"{'standalone 2 workers x 1 core':<30}{c['total_s']:>9.1f}"
                  f"{mb / c['total_s']:>8.1f}{vs(c['total_s']):>9}"
                  f"{c['peaks']['executor_jvm']:>17.0f}{c['peaks']['worker']:>13.0f}"
                  f"{c['load']:>6.1f}  (spark-submit wall time, JVM start included)")
        print(_same(runs))
        print("rows: " + ", ".join(f"{name} {rows}" for name, (rows, _) in
                                    runs[0]["digest"].items()))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _natural(name: str) -> list:
    from nsqviz.capture.paths import rotation_order as natural

    return natural(name)


if __name__ == "__main__":
    main()
