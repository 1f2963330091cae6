"""Throughput of ``nsqviz decode --json`` on a large capture, beside a scapy baseline.

A capture of at least 100 MB of mixed NSQ traffic is written into a temporary directory
with :mod:`nsqviz.capture.writer` (Ethernet/IPv4/TCP, real checksums): conversations
built by the project's codec (:mod:`nsqviz.capture.synth`) -- consumers receiving
batches of small and medium messages (many frames per segment), publishers of large
messages (one frame over many segments), a snappy and a deflate connection -- each
replayed on many connections with different ports and segment sizes (mostly Ethernet's
1,448 bytes, some 65,000 like loopback).

Measured in the same run, each as a fresh process on the same file:

* ``nsqviz decode --json CAPTURE > /dev/null`` -- reading, TCP reassembly, NSQ decoding
  through the codec, one JSON line per frame;
* ``frames_table(CAPTURE)`` (:mod:`nsqviz.capture.columns`): the frames table the
  analyses read, by the columnar path -- reading, reassembly, NSQ units gathered into
  Arrow columns with no Python object per frame;
* the baseline: scapy reads the same file (``PcapReader``, its full Ether/IP/TCP
  dissection) and reassembles each direction's byte stream by sequence number -- less
  work than ours (no NSQ decoding, no output), so the ratio flatters scapy.

Rates are by CPU time of the child process (one core; robust when other jobs share the
machine), wall time printed beside. Targets (issue 5): >= 30 MB/s and >= 10x scapy;
(issue 32) the columnar frames table >= 10x scapy.
Run: ``.venv/bin/python -m benchmarks.capture_decode [--mb 100] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nsqviz.capture.synth import NsqTalk, pubsub_session
from nsqviz.capture.writer import PcapWriter, TcpConversation

# (name, session arguments, segment size). Most flows use Ethernet's MSS, as a capture
# from production would; the rest 65,000 bytes, near loopback's 65,483 (not that exactly:
# scapy's PcapReader cuts frames to 65,535 bytes, which would break its reassembly).
MIX = [
    ("consumer-small", dict(messages=3000, body_sizes=(32, 100, 200), batch=100), 1448),
    ("consumer-medium", dict(messages=1500, body_sizes=(512, 2048, 8192), batch=50), 1448),
    ("consumer-large", dict(messages=40, body_sizes=(64 * 1024, 256 * 1024), batch=4), 1448),
    ("consumer-loopback", dict(messages=1500, body_sizes=(100, 1024, 16384), batch=50),
     65000),
    ("snappy", dict(messages=800, body_sizes=(256, 2048), batch=50, compression="snappy"),
     1448),
    ("deflate", dict(messages=800, body_sizes=(256, 2048), batch=50, compression="deflate"),
     65000),
]


def write_capture(path: Path, megabytes: int) -> dict:
    """Write the mixed capture; returns what was written (bytes, frames, flows)."""
    scripts = []
    for i, (name, kw, mss) in enumerate(MIX):
        talk = NsqTalk(None)
        pubsub_session(talk, seed=i, **kw)
        w = talk.written
        scripts.append((name, w.writes, mss, len(w.commands) + len(w.frames)))
    target = megabytes * 1_000_000
    written = frames = flows = 0
    with PcapWriter(path) as pcap:
        ts = 1_700_000_000.0
        while written < target:
            for _name, writes, mss, count in scripts:
                port = 20000 + flows % 40000
                conv = TcpConversation(pcap, (f"10.1.{flows // 250 % 250}.{flows % 250 + 1}",
                                              port), ("10.0.0.1", 4150), mss=mss)
                conv.open(ts)
                for direction, _offset, data in writes:
                    ts += 0.0001
                    conv.send(direction, data, ts)
                conv.close(ts)
                flows += 1
                frames += count
            written = pcap.f.tell()
    return {"bytes": os.path.getsize(path), "frames": frames, "flows": flows,
            "packets": pcap.count}


_SCAPY_BASELINE = r"""
import sys
from scapy.all import PcapReader, TCP, IP
streams = {}
total = 0
for pkt in PcapReader(sys.argv[1]):
    tcp = pkt.getlayer(TCP)
    if tcp is None:
        continue
    ip = pkt.getlayer(IP)
    key = (ip.src, tcp.sport, ip.dst, tcp.dport)
    payload = bytes(tcp.payload)
    st = streams.get(key)
    if st is None:
        st = streams[key] = [tcp.seq + (1 if tcp.flags & 0x02 else 0), {}, 0]
    if payload:
        st[1][tcp.seq] = payload
        while st[0] in st[1]:
            data = st[1].pop(st[0])
            st[0] = (st[0] + len(data)) & 0xFFFFFFFF
            st[2] += len(data)
            total += len(data)
print(total)
"""


_COLUMNAR = r"""
import sys
from nsqviz.capture.columns import frames_table
frames_table([sys.argv[1]])
"""
"""The columnar path (:mod:`nsqviz.capture.columns`): the frames table the analyses read."""


def _timed(cmd: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, str]:
    """Run ``cmd`` (stdout to /dev/null unless captured); return CPU s, wall s, stdout.
    ``ok``: the exit statuses that are no failure (``nsqviz doctor`` exits 1 on an error
    finding)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.PIPE if "-c" in cmd else subprocess.DEVNULL,
                          text=True)
    if done.returncode not in ok:
        raise subprocess.CalledProcessError(done.returncode, cmd)
    out = done.stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, out or ""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="capture size in MB (default 100)")
    ap.add_argument("--keep", type=Path, help="write the capture here and keep it")
    ap.add_argument("--no-scapy", action="store_true", help="skip the baseline")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = (args.keep or Path(tmp)) / "mixed-nsq.pcap"
        t0 = time.perf_counter()
        info = write_capture(path, args.mb)
        print(f"capture: {info['bytes'] / 1e6:.1f} MB, {info['packets']} packets,"
              f" {info['flows']} flows, {info['frames']} NSQ commands+frames"
              f" (written in {time.perf_counter() - t0:.1f} s)", flush=True)
        stats = subprocess.run([sys.executable, "-m", "nsqviz.cli", "decode", "--stats",
                                "--json", str(path)], capture_output=True, text=True,
                               check=True).stdout
        records = sum(sum(json.loads(line)["records"].values()) for line in stats.splitlines())
        errors = sum(json.loads(line)["records"].get("error", 0) for line in stats.splitlines())
        print(f"nsqviz decoded {records} records, {errors} errors", flush=True)

        mb = info["bytes"] / 1e6
        cpu, wall, _ = _timed([sys.executable, "-m", "nsqviz.cli", "decode", "--json",
                               str(path)])
        print(f"nsqviz decode --json > /dev/null: {mb / cpu:6.1f} MB/s, {records / cpu:9.0f}"
              f" frames/s (CPU {cpu:.2f} s; wall {wall:.2f} s = {mb / wall:.1f} MB/s)",
              flush=True)
        c_cpu, c_wall, _ = _timed([sys.executable, "-c", _COLUMNAR, str(path)])
        print(f"nsqviz columnar frames table:     {mb / c_cpu:6.1f} MB/s (CPU {c_cpu:.2f} s;"
              f" wall {c_wall:.2f} s)", flush=True)
        if args.no_scapy:
            return
        s_cpu, s_wall, out = _timed([sys.executable, "-c", _SCAPY_BASELINE, str(path)])
        print(f"scapy PcapReader + reassembly:    {mb / s_cpu:6.1f} MB/s (CPU {s_cpu:.2f} s;"
              f" wall {s_wall:.2f} s; {int(out.strip()) / 1e6:.1f} MB of payload)", flush=True)
        ratio = s_cpu / cpu
        print(f"ratio nsqviz/scapy: {ratio:.1f}x   targets: >= 30 MB/s"
              f" [{'met' if mb / cpu >= 30 else 'NOT met'}], >= 10x scapy"
              f" [{'met' if ratio >= 10 else 'NOT met'}]")
        ratio = s_cpu / c_cpu
        print(f"ratio columnar frames table/scapy: {ratio:.1f}x   target: >= 10x scapy"
              f" [{'met' if ratio >= 10 else 'NOT met'}]")


if __name__ == "__main__":
    main()
