"""tshark with the generated NSQ dissector vs ``nsqviz decode --json``, on one capture.

The same >= 100 MB mixed capture as :mod:`benchmarks.capture_decode` (its
``write_capture``: consumers of small and medium messages, publishers of large ones split
over many segments, a snappy and a deflate connection, Ethernet and loopback segment
sizes) is decoded, each run a fresh process on the same file, in the same run:

* ``nsqviz decode --json CAPTURE > /dev/null`` -- one JSON line per command and frame
  (compressed connections decompressed and decoded);
* ``tshark -X lua_script:nsq.lua -o tcp.desegment_tcp_streams:TRUE -r CAPTURE -T fields
  -e frame.number -e nsq.command -e nsq.frame_type -e nsq.topic -e nsq.msg.id -e
  nsq.msg.attempts ... > /dev/null`` -- Wireshark's reassembly and the Lua dissector,
  the fields of every PDU (compressed connections only marked, not decoded);
* ``tshark -X lua_script:nsq.lua ... -r CAPTURE > /dev/null`` -- one summary line per
  packet (the Info column the dissector writes);
* the baseline for both tsharks: tshark without the dissector (``-r CAPTURE``, TCP
  only), which is what Wireshark costs before NSQ is looked at.

Rates are MB of capture file per CPU second of the child (wall time beside). Which to
use: nsqviz for batch decoding and JSON for other programs; Wireshark for looking at a
capture with everything else Wireshark knows.

Then start-up, what a short capture costs: ``nsqviz decode --json`` and ``tshark -r`` of
the repository's 7 KB ``data/pubsub-nsqjs.pcapng``, alternately, ``--runs`` times each
(median CPU and wall seconds; the ratio is tshark's CPU over ours, >= 1 when nsqviz starts
at tshark's pace or faster).

nsqviz runs as an installed package does, from its compiled bytecode: its modules are
compiled first (:func:`compileall.compile_dir`, as ``pip install`` does) -- without the
``.pyc`` files (a fresh clone, with ``PYTHONDONTWRITEBYTECODE`` set) every run compiles
nsqviz's source again, ~0.3 s of CPU, more than the imports and a third of the large
capture's decode.
Run: ``.venv/bin/python -m benchmarks.wireshark_decode [--mb 100] [--keep DIR] [--runs 7]
[--start-up]``.
"""

from __future__ import annotations

import argparse
import compileall
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nsqviz
from benchmarks.capture_decode import write_capture
from nsqviz.wireshark.generate import tshark_args, write_dissectors

FIELDS = ("frame.number", "nsq.command", "nsq.frame_type", "nsq.topic", "nsq.channel",
          "nsq.msg.id", "nsq.msg.attempts", "nsq.body_size", "nsq.error.code",
          "nsq.violation", "nsq.compressed")


SHORT_CAPTURE = Path(__file__).resolve().parent.parent / "data" / "pubsub-nsqjs.pcapng"
"""The short capture of the start-up figure: 7 KB, an nsqjs client publishing and
consuming through nsqd."""


def _compile_nsqviz() -> None:
    """Write the bytecode of every nsqviz module, as installing nsqviz does (see the
    module's docstring)."""
    compileall.compile_dir(Path(nsqviz.__file__).parent, quiet=1)


def _timed(cmd: list[str], out: Path) -> tuple[float, float]:
    """Run ``cmd`` with stdout into ``out``; return the child's CPU and wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(out, "wb") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def _pdus(fields_output: Path) -> int:
    """NSQ commands and frames in tshark's -T fields output (the 2nd and 3rd columns
    hold one value per PDU, comma-separated)."""
    n = 0
    with open(fields_output, encoding="utf-8", errors="replace") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            n += sum(len(c.split(",")) for c in cols[1:3] if c)
    return n


def start_up(tshark: str, out: Path, runs: int) -> float:
    """Print the start-up figures (see the module's docstring); return the ratio."""
    ours = [sys.executable, "-m", "nsqviz.cli", "decode", "--json", str(SHORT_CAPTURE)]
    theirs = [tshark, "-r", str(SHORT_CAPTURE)]
    times: dict[str, list[tuple[float, float]]] = {"nsqviz": [], "tshark": []}
    for _ in range(runs):
        times["nsqviz"].append(_timed(ours, out))
        times["tshark"].append(_timed(theirs, out))
    cpu = {k: statistics.median(c for c, _ in v) for k, v in times.items()}
    wall = {k: statistics.median(w for _, w in v) for k, v in times.items()}
    kb = SHORT_CAPTURE.stat().st_size / 1e3
    print(f"start-up, {SHORT_CAPTURE.name} ({kb:.1f} KB), median of {runs}:", flush=True)
    print(f"{'nsqviz decode --json':34} CPU {cpu['nsqviz']:5.2f} s; wall {wall['nsqviz']:5.2f} s")
    print(f"{'tshark -r':34} CPU {cpu['tshark']:5.2f} s; wall {wall['tshark']:5.2f} s")
    ratio = cpu["tshark"] / cpu["nsqviz"]
    print(f"ratio start-up tshark -r / nsqviz decode (CPU): {ratio:.2f}x")
    return ratio


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="capture size in MB (default 100)")
    ap.add_argument("--keep", type=Path, help="write the capture here and keep it")
    ap.add_argument("--runs", type=int, default=7,
                    help="runs of each command for the start-up figure (default 7)")
    ap.add_argument("--start-up", action="store_true",
                    help="only the start-up figure (no large capture written)")
    args = ap.parse_args(argv)
    tshark = shutil.which("tshark")
    if tshark is None:
        print("tshark is not installed (scripts/sysdeps.sh installs it): skipped")
        return 0
    _compile_nsqviz()
    with tempfile.TemporaryDirectory() as tmp:
        if args.start_up:
            start_up(tshark, Path(tmp) / "out", args.runs)
            return 0
        path = (args.keep or Path(tmp)) / "mixed-nsq.pcap"
        lua_dir = Path(tmp) / "lua"
        write_dissectors(lua_dir, ["nsq"])
        t0 = time.perf_counter()
        info = write_capture(path, args.mb)
        mb = info["bytes"] / 1e6
        print(f"capture: {mb:.1f} MB, {info['packets']} packets, {info['flows']} flows,"
              f" {info['frames']} NSQ commands+frames (written in"
              f" {time.perf_counter() - t0:.1f} s)", flush=True)
        fields = [a for f in FIELDS for a in ("-e", f)]
        runs = [
            ("nsqviz decode --json", [sys.executable, "-m", "nsqviz.cli", "decode", "--json",
                                      str(path)]),
            ("tshark + nsq.lua, -T fields", [tshark, *tshark_args(lua_dir), "-r", str(path),
                                             "-T", "fields", *fields]),
            ("tshark + nsq.lua, summary lines", [tshark, *tshark_args(lua_dir), "-r",
                                                 str(path)]),
            ("tshark without the dissector", [tshark, "-o", "tcp.desegment_tcp_streams:TRUE",
                                              "-r", str(path)]),
        ]
        rates = {}
        out = Path(tmp) / "out"
        for name, cmd in runs:
            cpu, wall = _timed(cmd, out)
            rates[name] = mb / cpu
            print(f"{name:34} {mb / cpu:7.1f} MB/s (CPU {cpu:6.2f} s; wall {wall:6.2f} s)",
                  flush=True)
            if name == "nsqviz decode --json":
                with open(out, "rb") as f:
                    print(f"{'':34} {sum(1 for _ in f)} JSON lines")
            elif "fields" in name:
                print(f"{'':34} {_pdus(out)} NSQ commands and frames (compressed ones"
                      " marked, not decoded)")
        ours, theirs = rates["nsqviz decode --json"], rates["tshark + nsq.lua, -T fields"]
        print(f"ratio nsqviz decode / tshark + nsq.lua (-T fields): {ours / theirs:.2f}x")
        start_up(tshark, out, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
