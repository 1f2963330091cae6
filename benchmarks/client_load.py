"""nsqviz.clients.nsq against pynsq and gnsq: publishing and consuming throughput, same broker,
same run.

The broker is ``nsqviz broker`` as its own process (``--mem-queue-size 10000000``, so no
disk), then -- when it is found (:mod:`nsqviz.servers.peers`) -- the real nsqd with the same
flags. Each client runs as its own process (``benchmarks/clients/*_load.py``), driven
the way its own users drive it, with the same knobs on every side:

* **publish** -- N 200-byte messages in MPUBs of 200, one MPUB in flight: each is sent
  when the previous one was answered (pynsq ``Writer.mpub`` with a callback that sends
  the next, gnsq's blocking ``Producer.multipublish``, nsqviz ``await Producer.mpub``);
* **publish mixed** -- the same with messages of 100 to 300 bytes (200 on average): not
  a target of its own, it shows the encoding of batches whose messages differ in size
  (nsqviz joins a batch of one message size with its size field as the separator);
* **consume** -- N such messages, published beforehand (not timed) to a topic of their
  own, drained with max_in_flight 2500 and a handler that finishes at once (pynsq
  Reader, gnsq Consumer, nsqviz Consumer); timed from the first message to the N-th.

So that each client meets the broker in the same state, and the timed window holds
only publishing: every client publishes once, untimed, to a fresh broker before the
rounds (a new broker grows its heap by the first 80 MB of queued messages: the first
client on a fresh broker had the slowest round); each phase's topic is created before
its client starts (:func:`benchmarks.broker_load.prepare_topic`: a new topic's
metadata fsync, tens to hundreds of ms on a busy disk, was inside the first MPUB's
round trip) and deleted afterwards; the clients take turns going first.

The broker and the client run on **one core each** (the broker on the first core this
process may use, the client on the second; not where there is only one): with one MPUB in
flight the pair is strictly serial, and whether the scheduler puts it on one core or on
two changes both sides' CPU per message by ~1.6x (measured at load 27, client / broker
us per message, one core vs two: ours 0.47 / 0.60 vs 0.78 / 1.00, gnsq 0.80 / 0.65 vs
1.43 / 1.30) -- left to the scheduler, a round where one client's pair shared a core and
the other's did not reads as a ratio far from the clients' own.

Printed per broker: msgs/s per client (median of ``--repeat``), the client process's
CPU time per message over the same window (``time.process_time``), the broker's CPU per
message and how busy it was while each client published (user + system time from
``/proc``, where there is one), and the ratios issue 32 sets targets on --
nsqviz.clients.nsq's msgs/s over gnsq's and pynsq's, publishing >= 1.2x gnsq (and ahead of
pynsq) against both brokers, consuming >= 4x both -- as the ratio of the medians, with
each round's own ratio beside it. With one MPUB in flight, client and broker take turns
(the client waits for each OK), so a publish's wall time is the two sides' CPU per
message plus two wake-ups per MPUB, and on a loaded machine mostly the wake-ups (how
long the scheduler keeps a woken process waiting): the **cost per message** printed
beside msgs/s -- client + broker CPU per message, and the baselines' cost over ours --
is the figure that depends far less on the machine's load. Needs the client venv of the
interop tests (``.venv-pynsq``: pynsq 0.9.1, gnsq 1.0.2).

Run: ``.venv/bin/python -m benchmarks.client_load [--messages 100000]
[--publish-messages 400000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.broker_load import _cpu_seconds, prepare_topic, topic_request
from nsqviz.servers.peers import NsqdProcess, RealNsqd, find

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = Path(__file__).resolve().parent / "clients"
PY_CLIENTS = ROOT / ".venv-pynsq" / "bin" / "python"
LIBS = ("nsqviz", "pynsq", "gnsq")
PHASES = {"publish": "pub", "publish mixed": "pubmixed", "consume": "sub"}
"""Each phase and the load drivers' mode for it."""
TARGETS = {"publish": {"gnsq": 1.2, "pynsq": 1.0}, "consume": {"gnsq": 4.0, "pynsq": 4.0}}
"""Issue 32's targets: nsqviz.clients.nsq's msgs/s over each baseline's, at least (pynsq's
publishing target is 'ahead of it')."""


def placement() -> tuple[set[int], set[int]] | None:
    """The cores for (the broker, the clients): one each, or None with fewer than two."""
    cores = sorted(os.sched_getaffinity(0))
    return ({cores[0]}, {cores[1]}) if len(cores) > 1 else None


def _run(lib: str, mode: str, broker: NsqdProcess, topic: str, n: int) -> dict[str, Any]:
    """One client run (on the clients' core): its JSON figures, plus the broker's CPU
    seconds meanwhile."""
    python = sys.executable if lib == "nsqviz" else str(PY_CLIENTS)
    pid = broker.pid
    cores = placement()
    before = _cpu_seconds(pid) if pid else float("nan")
    out = subprocess.run(
        [python, str(CLIENTS / f"{lib}_load.py"), mode, broker.tcp_address, topic, str(n)],
        capture_output=True, text=True, timeout=600,
        preexec_fn=None if cores is None else lambda: os.sched_setaffinity(0, cores[1]))
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{lib} {mode} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(lines[-1])
    figures["broker_cpu_seconds"] = (_cpu_seconds(pid) if pid else float("nan")) - before
    return figures


def _phase(lib: str, mode: str, broker: NsqdProcess, topic: str, n: int) -> dict[str, Any]:
    """One client's run of one phase on a topic of its own, created before and deleted
    after."""
    prepare_topic(broker.http_address, topic)
    if mode == "sub":
        _run("nsqviz", "pub", broker, topic, n)  # the messages to consume
    figures = _run(lib, mode, broker, topic, n)
    topic_request(broker.http_address, "delete", topic)
    return figures


def _report(phase: str, runs: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The lines for one phase against one broker; the targets' verdicts at the end."""
    med = {lib: statistics.median(r["msgs_per_s"] for r in runs[lib]) for lib in LIBS}
    cpu = {lib: statistics.median(r["cpu_seconds"] / r["messages"] for r in runs[lib])
           for lib in LIBS}
    rates = "  ".join(f"{lib} {med[lib]:>9,.0f}" for lib in LIBS)
    cpus = "  ".join(f"{lib} {cpu[lib] * 1e6:5.2f}" for lib in LIBS)
    lines = [f"{phase:<13} msgs/s: {rates}", f"{'':<13} client CPU us/msg: {cpus}"]
    if phase != "consume":
        per_msg = {lib: statistics.median(r["broker_cpu_seconds"] / r["messages"]
                                          for r in runs[lib]) for lib in LIBS}
        busy = {lib: statistics.median(r["broker_cpu_seconds"] / r["seconds"]
                                       for r in runs[lib]) for lib in LIBS}
        brokers = "  ".join(f"{lib} {per_msg[lib] * 1e6:5.2f} ({busy[lib]:.0%} busy)"
                            for lib in LIBS)
        lines.append(f"{'':<13} broker CPU us/msg: {brokers}")
        cost = {lib: statistics.median((r["cpu_seconds"] + r["broker_cpu_seconds"])
                                       / r["messages"] for r in runs[lib]) for lib in LIBS}
        costs = "  ".join(f"{lib} {cost[lib] * 1e6:5.2f}" for lib in LIBS)
        over = ", ".join(f"{base} {cost[base] / cost['nsqviz']:.2f}x ours"
                         for base in ("gnsq", "pynsq"))
        lines.append(f"{'':<13} cost us/msg (client + broker CPU): {costs}  ({over})")
    for base in ("gnsq", "pynsq"):
        rounds = [a["msgs_per_s"] / b["msgs_per_s"]
                  for a, b in zip(runs["nsqviz"], runs[base], strict=True)]
        ratio = med["nsqviz"] / med[base]
        each = ", ".join(f"{r:.2f}" for r in rounds)
        line = (f"{'':<13} nsqviz/{base} {ratio:.2f}x (rounds {each}; CPU/msg "
                f"{cpu[base] / cpu['nsqviz']:.2f}x less)")
        target = TARGETS.get(phase, {}).get(base)
        if target is not None:
            met = ratio > target if target == 1 else ratio >= target  # 1: 'ahead of'
            line += f"  target >= {target:g}x: {'met' if met else 'NOT met'}"
        lines.append(line)
    return lines


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
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {phase: {} for phase in PHASES}
        with make(mem_queue_size=10_000_000) as broker:
            load = os.getloadavg()[0]
            cores = placement()
            if cores is not None and broker.pid:
                # every thread of it (nsqd has several; one made later inherits its maker's)
                for tid in os.listdir(f"/proc/{broker.pid}/task"):
                    with contextlib.suppress(ProcessLookupError):
                        os.sched_setaffinity(int(tid), cores[0])
            for lib in LIBS:  # the warm-up: untimed
                _phase(lib, "pub", broker, f"warm_{lib}", n_pub)
            for k in range(args.repeat):
                for lib in LIBS[k % 3:] + LIBS[:k % 3]:  # each client goes first once
                    for phase, mode in PHASES.items():
                        runs[phase].setdefault(lib, []).append(_phase(
                            lib, mode, broker, f"{mode}_{lib}_{k}",
                            n if mode == "sub" else n_pub))
        where = ("" if cores is None else
                 f"; broker on core {min(cores[0])}, clients on core {min(cores[1])}")
        print(f"-- {name} (load average {load:.1f} at the start, "
              f"{os.getloadavg()[0]:.1f} at the end{where})")
        for phase in PHASES:
            print("\n".join(_report(phase, runs[phase])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
