"""The real nsqd and ``nsqviz broker`` side by side under the NSQ repository's load tools.

Both servers run as processes with the same flags, one after the other in the same run,
under the same load: ``bench_writer`` (200-byte messages in MPUBs of 200) and
``bench_reader`` (RDY 2500, FIN each message), each for ``--runfor``. For each queue
configuration (nsqd's default ``--mem-queue-size`` 10,000, so most of a backlog goes to
disk, and 10,000,000, all in memory) three phases:

1. **writer alone** -- the topic has no channel yet, so everything is backlog (the topic
   is created over HTTP before the writer starts: see :func:`prepare_topic`);
2. **reader alone** -- a reader drains that backlog (its SUB creates the channel: the
   time to answer that SUB is printed on its own, measured by a probe connection just
   before the reader starts);
3. **both together** -- a writer and a reader at once, on the drained channel.

Printed per phase: msgs/s for each server (the tools' own ``ops/s``) and the ratio
ours/nsqd; the tools' wall time (it should equal ``--runfor``: a reader that cannot
stop on time is a bug); each server's CPU seconds per million messages, the CPU it got
(% of one core: on a loaded machine our one thread gets a share of one core where
nsqd's threads get shares of both, which msgs/s then follows) and peak RSS;
and, after the writer phase, the server's memory per queued message (RSS growth over
the backlog). The baseline is the real nsqd, measured in the same run. Then issue 32's
two targets per phase -- msgs/s at least 0.7x nsqd's, CPU per message at most 1.3x --
as the median of the repetitions' ratios (each repetition runs nsqd, then ours, back to
back), each repetition's ratio beside it, and the load average the runs started at:
on a shared machine the CPU per message is the steadier of the two.

Run: ``.venv/bin/python -m benchmarks.broker_load [--runfor 10] [--repeat 3]``
(medians over the repetitions); ``--profile FILE`` runs our broker under cProfile,
``--uvloop`` on uvloop's event loop (when installed).
Needs ``nsqd``, ``bench_writer`` and ``bench_reader`` (see :mod:`nsqviz.servers.peers`).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from nsqviz.nsq import events as ev
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.servers.peers import NsqdProcess, PeerNotFound, RealNsqd, require

TOPIC = "sub_bench"  # the tools' default topic and channel
CHANNEL = "ch"
QUEUES = (10_000, 10_000_000)
PHASES = ("writer", "reader", "both")
TARGETS = {"msgs/s": 0.7, "cpu s/M msgs": 1.3}
"""Issue 32's targets, ours/nsqd: at least this throughput, at most this CPU per message."""


_ON_UVLOOP = "import sys, uvloop; uvloop.install(); from nsqviz.cli import main; sys.exit(main())"
"""``nsqviz broker`` with uvloop's event loop policy installed first."""


def _proc_status(pid: int, key: str) -> float:
    """A ``/proc/PID/status`` figure in kB (``VmHWM`` peak RSS, ``VmRSS`` current)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return float(line.split()[1])
    except OSError:
        pass
    return float("nan")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ops(output: str) -> float:
    match = re.search(r"([\d.]+) ?ops/s", output)
    if not match:
        raise RuntimeError(f"no ops/s in the tool's output: {output!r}")
    return float(match.group(1))


def _tool(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen, started: float, runfor: float) -> tuple[float, float]:
    """(msgs/s the tool reports, its wall time)."""
    out, _ = proc.communicate(timeout=runfor * 20 + 120)
    wall = time.monotonic() - started
    if proc.returncode:
        raise RuntimeError(f"{proc.args[0]} failed: {out}")
    return _ops(out), wall


def prepare_topic(http_address: str, topic: str) -> None:
    """Create ``topic`` over HTTP and wait until the server has written its metadata
    (``/stats`` is answered after it: nsqd's stats take the lock its fsync of
    ``nsqd.dat`` holds, and our broker's one thread answers once its own fsync is done),
    so that a load starting next does not have the fsync of a new topic -- tens to
    hundreds of ms on a busy disk, during which both servers hold publishing up -- in its
    timed window."""
    topic_request(http_address, "create", topic)
    urllib.request.urlopen(f"http://{http_address}/stats?format=json&topic={topic}",
                           timeout=60).read()


def topic_request(http_address: str, action: str, topic: str) -> None:
    """``POST /topic/<action>?topic=...`` (create, delete)."""
    req = urllib.request.Request(f"http://{http_address}/topic/{action}?topic={topic}",
                                 method="POST", data=b"")
    urllib.request.urlopen(req, timeout=60).read()


def sub_latency(address: str) -> float:
    """Seconds from a SUB on the backlog's topic until its OK (the channel is created)."""
    host, port = address.rsplit(":", 1)
    conn = ClientConnection()
    with socket.create_connection((host, int(port)), timeout=300) as sock:
        sock.sendall(conn.send(ev.Magic()))
        t0 = time.monotonic()
        sock.sendall(conn.send(ev.Sub(TOPIC, CHANNEL)))
        while True:
            data = sock.recv(1 << 16)
            if not data:
                raise RuntimeError("the server closed the SUB probe")
            if any(isinstance(e, ev.Response) and e.is_ok for e in conn.receive(data)):
                return time.monotonic() - t0


def run_server(server: NsqdProcess, tools: dict[str, str], runfor: float) -> dict:
    """The three phases against one running server; figures per phase."""
    address = server.tcp_address
    common = [f"--nsqd-tcp-address={address}", f"--topic={TOPIC}", "--size=200"]
    writer = [tools["bench_writer"], *common, "--batch-size=200", f"--runfor={runfor}s"]
    reader = [tools["bench_reader"], *common, f"--channel={CHANNEL}", "--rdy=2500",
              f"--runfor={runfor}s"]
    pid = server.pid
    result: dict = {"load average": os.getloadavg()[0]}
    prepare_topic(server.http_address, TOPIC)  # no channel: the writer's is all backlog
    rss0 = _proc_status(pid, "VmRSS")
    for phase in PHASES:
        cpu0 = _cpu_seconds(pid)
        if phase == "reader":
            result["sub_latency"] = sub_latency(address)
        started = time.monotonic()
        procs = {"in": _tool(writer)} if phase != "reader" else {}
        if phase != "writer":
            procs["out"] = _tool(reader)
        figures = {way: _finish(p, started, runfor) for way, p in procs.items()}
        cpu = _cpu_seconds(pid) - cpu0
        msgs = sum(rate * runfor for rate, _ in figures.values())
        result[phase] = {
            **{f"{way} msgs/s": rate for way, (rate, _) in figures.items()},
            **{f"{way} wall s": wall for way, (_, wall) in figures.items()},
            "cpu s/M msgs": cpu / msgs * 1e6 if msgs else float("nan"),
            "cpu % of a core": cpu / runfor * 100,
            "peak RSS MB": _proc_status(pid, "VmHWM") / 1024,
        }
        if phase == "writer":
            queued = figures["in"][0] * runfor
            grown = (_proc_status(pid, "VmRSS") - rss0) * 1024
            result[phase]["bytes/queued msg"] = grown / queued if queued else float("nan")
    return result


def _median(runs: list[dict]) -> dict:
    if len(runs) == 1:
        return runs[0]
    out: dict = {}
    for key, value in runs[0].items():
        if isinstance(value, dict):
            out[key] = _median([r[key] for r in runs])
        else:
            out[key] = statistics.median(r[key] for r in runs)
    return out


def _fmt(value: float, key: str) -> str:
    if "msgs/s" in key:
        return f"{value / 1000:,.0f}k"
    if "bytes" in key or "%" in key:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def report(mem_queue_size: int, real: dict, ours: dict, runfor: float) -> None:
    print(f"\n--mem-queue-size={mem_queue_size:,}  (nsqd -> ours, ratio ours/nsqd)")
    print(f"  SUB on the backlog answered after: nsqd {real['sub_latency'] * 1000:,.1f} ms, "
          f"ours {ours['sub_latency'] * 1000:,.1f} ms")
    for phase in PHASES:
        cells = []
        for key in real[phase]:
            a, b = real[phase][key], ours[phase][key]
            ratio = b / a if a else float("nan")
            if "wall" in key:
                cells.append(f"{key} {a:.1f} -> {b:.1f} (runfor {runfor:g})")
            else:
                cells.append(f"{key} {_fmt(a, key)} -> {_fmt(b, key)} ({ratio:.2f})")
        print(f"  {phase:<7} " + "; ".join(cells))


def verdicts(real_runs: list[dict], our_runs: list[dict]) -> None:
    """Issue 32's targets per phase: the median of the repetitions' ratios, each
    repetition's beside it."""
    print(f"  targets (ours/nsqd, median of {len(our_runs)} [each run]): msgs/s >= "
          f"{TARGETS['msgs/s']}, CPU per message <= {TARGETS['cpu s/M msgs']}; load average "
          f"at the runs' start {min(r['load average'] for r in real_runs + our_runs):.1f}-"
          f"{max(r['load average'] for r in real_runs + our_runs):.1f}")
    for phase in PHASES:
        cells = []
        for key in real_runs[0][phase]:
            if key.endswith("msgs/s"):
                name, target, higher = key.split()[0], TARGETS["msgs/s"], True  # in, out
            elif key == "cpu s/M msgs":
                name, target, higher = "CPU/msg", TARGETS[key], False
            else:
                continue
            ratios = [o[phase][key] / r[phase][key] if r[phase][key] else float("nan")
                      for r, o in zip(real_runs, our_runs, strict=True)]
            median = statistics.median(ratios)
            met = median >= target if higher else median <= target
            each = " ".join(f"{x:.2f}" for x in ratios)
            cells.append(f"{name} {median:.2f} [{each}] {'met' if met else 'NOT MET'}")
        print(f"    {phase:<7} " + "; ".join(cells))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runfor", type=float, default=10.0, help="seconds each tool runs")
    ap.add_argument("--repeat", type=int, default=1, help="repetitions (medians printed)")
    ap.add_argument("--queues", type=int, nargs="*", default=list(QUEUES),
                    help="--mem-queue-size values to run")
    ap.add_argument("--profile", help="run our broker under cProfile, stats to this file")
    ap.add_argument("--uvloop", action="store_true",
                    help="run our broker on uvloop's event loop (pip install uvloop)")
    args = ap.parse_args(
        argv if argv is not None else sys.argv[1:] if __name__ == "__main__" else []
    )
    try:
        tools = {name: str(require(name)) for name in ("nsqd", "bench_writer", "bench_reader")}
    except PeerNotFound as exc:
        print(f"skipped: {exc}")
        return 0
    print(f"ours on {'uvloop' if args.uvloop else 'asyncio'}; "
          f"cores: {os.cpu_count()}; 200-byte messages, MPUB of 200, RDY 2500, "
          f"--runfor {args.runfor:g}s, {args.repeat} repetition(s); "
          f"load average {os.getloadavg()[0]:.1f}")
    for queue in args.queues:
        runs: dict[str, list[dict]] = {"nsqd": [], "ours": []}
        for _ in range(args.repeat):
            for kind in runs:
                with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as data:
                    flags = {"mem_queue_size": queue}
                    if kind == "nsqd":  # its log says its ports at INFO: keep the default
                        server = RealNsqd(tools["nsqd"], data_path=data, **flags)
                    elif args.profile:
                        server = NsqdProcess(
                            [sys.executable, "-m", "cProfile", "-o",
                             f"{args.profile}.{queue}", "-m", "nsqviz.cli", "broker"],
                            data_path=data, log_level="warn", **flags)
                    elif args.uvloop:
                        server = NsqdProcess([sys.executable, "-c", _ON_UVLOOP, "broker"],
                                             data_path=data, log_level="warn", **flags)
                    else:
                        server = NsqdProcess.nsqviz(data_path=data, log_level="warn", **flags)
                    with server:
                        runs[kind].append(run_server(server, tools, args.runfor))
        report(queue, _median(runs["nsqd"]), _median(runs["ours"]), args.runfor)
        verdicts(runs["nsqd"], runs["ours"])
    if args.profile:
        print(f"\nour broker's profiles: {args.profile}.<queue> (python -m pstats FILE)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
