"""nsqviz.clients.nsq against pynsq and gnsq: publishing and consuming throughput, same broker,
same run.

The broker is ``nsqviz broker`` as its own process (``--mem-queue-size 10000000``, so no
disk), then -- when it is found (:mod:`nsqviz.servers.peers`) -- the real nsqd with the same
flags: against our broker the broker is the bottleneck (publishing especially: every
client gets about what the broker takes), against the real nsqd the clients are. Each
client runs as its own process (``benchmarks/clients/*_load.py``):

* **publish** -- N 200-byte messages in MPUBs of 200, each MPUB sent when the previous
  one was answered (pynsq Writer, gnsq Producer.multipublish, nsqviz Producer.mpub);
* **consume** -- N such messages, published beforehand (not timed) to a topic of their
  own, drained with max_in_flight 2500 and a handler that finishes at once (pynsq
  Reader, gnsq Consumer, nsqviz Consumer); timed from the first message to the N-th.

Each phase's topic is deleted afterwards and the clients take turns going first, so
each meets the broker in the same state. Printed: msgs/s per client (median of
``--repeat``) and nsqviz.clients.nsq's ratio to pynsq (the baseline; targets >= 2x consuming,
>= 1.5x publishing) and to gnsq. Needs the client venv of the interop tests
(``.venv-pynsq``: pynsq 0.9.1, gnsq 1.0.2).

Run: ``.venv/bin/python -m benchmarks.client_load [--messages 100000]
[--publish-messages 400000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import urllib.request
from pathlib import Path

from nsqviz.servers.peers import NsqdProcess, RealNsqd, find

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = Path(__file__).resolve().parent / "clients"
PY_CLIENTS = ROOT / ".venv-pynsq" / "bin" / "python"
LIBS = ("nsqviz", "pynsq", "gnsq")


def _run(lib: str, mode: str, address: str, topic: str, n: int) -> float:
    python = sys.executable if lib == "nsqviz" else str(PY_CLIENTS)
    out = subprocess.run([python, str(CLIENTS / f"{lib}_load.py"), mode, address, topic, str(n)],
                         capture_output=True, text=True, timeout=600)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{lib} {mode} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return json.loads(lines[-1])["msgs_per_s"]


def _delete(http_address: str, topic: str) -> None:
    """Drop a finished phase's topic, so every client meets a broker in the same state."""
    req = urllib.request.Request(f"http://{http_address}/topic/delete?topic={topic}",
                                 method="POST", data=b"")
    urllib.request.urlopen(req, timeout=30).read()


def _fill(address: str, topic: str, n: int) -> None:
    """Publish n messages for a consume phase (with nsqviz's producer, not timed)."""
    _run("nsqviz", "pub", address, topic, n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000, help="consumed per run")
    parser.add_argument("--publish-messages", type=int, default=400_000,
                        help="published per run (publishing is fast: more for a stable figure)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if not PY_CLIENTS.exists():
        print(f"skipped: {PY_CLIENTS} missing (run the interop tests once to create it)")
        return 0
    n = args.messages - args.messages % 200
    n_pub = args.publish_messages - args.publish_messages % 200
    brokers = [("nsqviz broker", NsqdProcess.nsqviz)]
    if find("nsqd") is not None:
        brokers.append(("real nsqd", RealNsqd))
    print(f"200-byte messages: {n_pub} published, {n} consumed per run; median of "
          f"{args.repeat}; brokers as processes with --mem-queue-size 10000000")
    for name, make in brokers:
        figures: dict[tuple[str, str], list[float]] = {}
        with make(mem_queue_size=10_000_000) as broker:
            for k in range(args.repeat):
                for lib in LIBS[k % 3:] + LIBS[:k % 3]:  # each client goes first once
                    figures.setdefault((lib, "publish"), []).append(
                        _run(lib, "pub", broker.tcp_address, f"pub_{lib}_{k}", n_pub))
                    _delete(broker.http_address, f"pub_{lib}_{k}")
                    _fill(broker.tcp_address, f"sub_{lib}_{k}", n)
                    figures.setdefault((lib, "consume"), []).append(
                        _run(lib, "sub", broker.tcp_address, f"sub_{lib}_{k}", n))
                    _delete(broker.http_address, f"sub_{lib}_{k}")
        print(f"-- {name}")
        for phase in ("publish", "consume"):
            med = {lib: statistics.median(figures[(lib, phase)]) for lib in LIBS}
            row = "  ".join(f"{lib} {med[lib]:>9,.0f}" for lib in LIBS)
            print(f"{phase:<8} msgs/s: {row}   nsqviz/pynsq {med['nsqviz'] / med['pynsq']:.2f}x"
                  f"   nsqviz/gnsq {med['nsqviz'] / med['gnsq']:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
