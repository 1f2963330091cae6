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
Run: ``.venv/bin/python -m benchmarks.analyses_cli [--mb 100] [--keep DIR]
[--no-pipeline]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.capture_decode import _timed, write_capture

TARGET = 1.0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="capture size in MB (default 100)")
    ap.add_argument("--keep", type=Path, help="write the capture here and keep it")
    ap.add_argument("--no-pipeline", action="store_true", help="skip nsqviz pipeline")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = (args.keep or Path(tmp)) / "mixed-nsq.pcap"
        t0 = time.perf_counter()
        info = write_capture(path, args.mb)
        print(f"capture: {info['bytes'] / 1e6:.1f} MB, {info['packets']} packets, "
              f"{info['flows']} flows (written in {time.perf_counter() - t0:.1f} s)",
              flush=True)
        runs: dict[str, float] = {}
        walls: dict[str, float] = {}
        for name, extra in (("decode", ["--json"]), ("messages", ["--json"]),
                            ("connections", ["--json"]), ("stats", []),
                            ("doctor", ["--json"])):
            cpu, wall, _ = _timed([sys.executable, "-m", "nsqviz.cli", name, *extra,
                                   str(path)], ok=(0, 1) if name == "doctor" else (0,))
            runs[name], walls[name] = cpu, wall
            ratio = "" if name == "decode" else f"  = {cpu / runs['decode']:.2f}x decode"
            print(f"nsqviz {name:<11} {' '.join(extra):<7} CPU {cpu:7.2f} s  wall "
                  f"{wall:7.2f} s{ratio}", flush=True)
        for name in ("messages", "connections", "stats", "doctor"):
            ratio = runs[name] / runs["decode"]
            print(f"target {name} <= {TARGET}x decode: "
                  f"{'met' if ratio <= TARGET else 'NOT met'} ({ratio:.2f}x)")
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
