"""What a display filter costs ``nsqviz decode --json``, beside the same decode without one.

The mixed capture of :mod:`benchmarks.capture_decode` (``--mb`` of it) is decoded, each
time as a fresh process on the same file, in the same run:

* ``nsqviz decode --json`` -- the baseline;
* ``-Y nsq`` -- a filter that lets every record through: the cost of filtering itself
  (every record's field values, grouped into packets, tested);
* ``-Y 'nsq.msg.attempts > 1 or nsq.error.code'`` -- a selective filter (little output).

Rates are by CPU time of the child process (robust when other jobs share the machine);
the ratios to the baseline are the figures to read. Run:
``python -m benchmarks.display_filter [--mb 20]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.capture_decode import _timed, write_capture

FILTERS = ["nsq", "nsq.msg.attempts > 1 or nsq.error.code"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=20, help="capture size in MB (default 20)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mixed-nsq.pcap"
        t0 = time.perf_counter()
        info = write_capture(path, args.mb)
        mb = info["bytes"] / 1e6
        print(f"capture: {mb:.1f} MB, {info['packets']} packets, {info['flows']} flows"
              f" (written in {time.perf_counter() - t0:.1f} s)", flush=True)
        decode = [sys.executable, "-m", "nsqviz.cli", "decode", "--json", str(path)]
        base, wall, _ = _timed(decode)
        print(f"{'no -Y':48} {mb / base:6.1f} MB/s (CPU {base:.2f} s; wall {wall:.2f} s)",
              flush=True)
        for expr in FILTERS:
            cpu, wall, _ = _timed([*decode, "-Y", expr])
            print(f"{'-Y ' + repr(expr):48} {mb / cpu:6.1f} MB/s (CPU {cpu:.2f} s; wall"
                  f" {wall:.2f} s)  {base / cpu:.2f}x the speed without -Y", flush=True)


if __name__ == "__main__":
    main()
