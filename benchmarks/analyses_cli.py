"""``nsqviz messages``, ``nsqviz connections``, ``nsqviz stats`` and ``nsqviz doctor`` beside
``nsqviz decode --json`` on the same large capture, in the same run.

The capture is :mod:`benchmarks.capture_decode`'s (at least 100 MB of mixed NSQ traffic:
batches of small messages, large messages over many segments, snappy and deflate). Each
command runs as a fresh process with its output to /dev/null; CPU time of the child is
the measure (robust when other jobs share the machine), wall time beside it. Then
``nsqviz pipeline --master local[2]`` on the same capture (a fresh JVM, as a user runs
it), by wall time. Targets (issue 32): each analysis command and ``nsqviz doctor`` costs at
most 1.0x ``nsqviz decode --json`` alone (they read the columnar frames table,
:mod:`nsqviz.capture.columns`), and each analysis command finishes before the pipeline
does.
Each command's peak memory (the child's maximum resident set) is printed beside, as a
multiple of the capture's size: the target (issue 32) is at most 3x, on a capture of
a million small messages (``--small``: one consumer connection's batches of 4-16 byte
bodies, each FINed, REQ'd or TOUCHed, copied onto 100 connections -- ~70 MB).
Run: ``.venv/bin/python -m benchmarks.analyses_cli [--mb 100 | --small [--messages N]]
[--keep DIR] [--no-pipeline]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.capture_decode import _timed, write_capture

TARGET = 1.0
MEMORY_TARGET = 3.0  # peak memory, as a multiple of the capture's size
CONNECTIONS = 100  # of the --small capture


def write_small(path: Path, messages: int) -> dict:
    """The ``--small`` capture: ``messages`` small messages over :data:`CONNECTIONS`
    copies of one consumer conversation (:func:`nsqviz.capture.synth.pubsub_session`);
    returns what was written, as :func:`~benchmarks.capture_decode.write_capture` does."""
    from nsqviz.capture.synth import NsqTalk, pubsub_session
    from nsqviz.capture.writer import PcapWriter, TcpConversation

    talk = NsqTalk(None)
    pubsub_session(talk, seed=1, messages=max(messages // CONNECTIONS, 1),
                   body_sizes=(4, 8, 16), batch=100)
    writes = talk.written.writes
    with PcapWriter(path) as pcap:
        ts = 1_700_000_000.0
        for k in range(CONNECTIONS):
            conv = TcpConversation(pcap, (f"10.1.{k // 250}.{k % 250 + 1}", 20000 + k),
                                   ("10.0.0.1", 4150), mss=1448)
            conv.open(ts)
            for direction, _offset, data in writes:
                ts += 0.0001
                conv.send(direction, data, ts)
            conv.close(ts)
    return {"bytes": os.path.getsize(path), "flows": CONNECTIONS, "packets": pcap.count}


def _run(cmd: list[str], ok: tuple[int, ...]) -> tuple[float, float, int]:
    """Run ``cmd`` (its output to /dev/null); return its CPU s, wall s and peak resident
    memory in bytes (its own, from wait4: not another child's)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in ok:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss * 1024


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="capture size in MB (default 100)")
    ap.add_argument("--keep", type=Path, help="write the capture here and keep it")
    ap.add_argument("--small", action="store_true",
                    help="a capture of many small messages instead (see --messages)")
    ap.add_argument("--messages", type=int, default=1_000_000,
                    help="with --small: how many (default 1,000,000)")
    ap.add_argument("--no-pipeline", action="store_true", help="skip nsqviz pipeline")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = (args.keep or Path(tmp)) / ("small-nsq.pcap" if args.small
                                           else "mixed-nsq.pcap")
        t0 = time.perf_counter()
        info = (write_small(path, args.messages) if args.small
                else write_capture(path, args.mb))
        print(f"capture: {info['bytes'] / 1e6:.1f} MB, {info['packets']} packets, "
              f"{info['flows']} flows (written in {time.perf_counter() - t0:.1f} s)",
              flush=True)
        runs: dict[str, float] = {}
        walls: dict[str, float] = {}
        peaks: dict[str, float] = {}
        for name, extra in (("decode", ["--json"]), ("messages", ["--json"]),
                            ("connections", ["--json"]), ("stats", []),
                            ("doctor", ["--json"])):
            cpu, wall, peak = _run([sys.executable, "-m", "nsqviz.cli", name, *extra,
                                    str(path)], ok=(0, 1) if name == "doctor" else (0,))
            runs[name], walls[name] = cpu, wall
            peaks[name] = peak / info["bytes"]
            ratio = "" if name == "decode" else f"  = {cpu / runs['decode']:.2f}x decode"
            print(f"nsqviz {name:<11} {' '.join(extra):<7} CPU {cpu:7.2f} s  wall "
                  f"{wall:7.2f} s  peak {peak / 1e6:7.0f} MB = {peaks[name]:.2f}x the "
                  f"capture{ratio}", flush=True)
        for name in ("messages", "connections", "stats", "doctor"):
            ratio = runs[name] / runs["decode"]
            print(f"target {name} <= {TARGET}x decode: "
                  f"{'met' if ratio <= TARGET else 'NOT met'} ({ratio:.2f}x); peak memory "
                  f"<= {MEMORY_TARGET}x the capture: "
                  f"{'met' if peaks[name] <= MEMORY_TARGET else 'NOT met'} "
                  f"({peaks[name]:.2f}x)")
        if args.no_pipeline:
            return
        _, wall, _ = _timed([sys.executable, "-m", "nsqviz.cli", "pipeline", str(path),
                             "--out", str(Path(tmp) / "tables"), "--master", "local[2]",
                             "--quiet"])
        print(f"nsqviz pipeline --master local[2]  wall {wall:7.2f} s", flush=True)
        for name in ("messages", "connections"):
            print(f"target {name} finishes before the pipeline: "
                  f"{'met' if walls[name] < wall else 'NOT met'} ({walls[name]:.2f} s "
                  f"against {wall:.2f} s)")


if __name__ == "__main__":
    main()
