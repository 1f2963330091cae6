"""Makes the client-guide sample captures: each client library consuming through
nsqlookupd discovery, captured with tcpdump on loopback. Needs root (tcpdump).

    sudo .venv/bin/python data/make_guide_captures.py [pynsq|gnsq|nsqjs|nsqviz ...]

The scenario (``tests/servers/nsqlookupd/_discovery.py``): two nsqviz lookupds, two brokers each
registered with ONE of them, five messages on each (one fails its first attempt);
the consumer (max_in_flight 4, heartbeats and lookupd polls every second) runs until all
ten are finished, stays 5 s and closes. tcpdump records the brokers' TCP ports and the
lookupds' HTTP ports. ``nsqviz conformance data/guide-LIB.pcap --max-in-flight 4``
reports on each (see data/README.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data.make_captures import Tcpdump  # noqa: E402
from tests.servers.nsqlookupd._discovery import TOPIC, N, discovery_scenario  # noqa: E402

CLIENTS = ROOT / "data" / "clients"
LIBS = ("pynsq", "gnsq", "nsqjs", "nsqviz")
STAY = "5"  # seconds after the last message: several lookupd polls and heartbeats


def argv(lib: str, lookupds: str) -> list[str]:
    if lib == "nsqjs":
        return ["node", str(CLIENTS / "guide_nsqjs.js"), lookupds, TOPIC, str(N), STAY]
    python = sys.executable if lib == "nsqviz" else str(ROOT / ".venv-pynsq" / "bin" / "python")
    return [python, str(CLIENTS / f"guide_{lib}.py"), lookupds, TOPIC, str(N), STAY]


def capture(lib: str) -> None:
    path = ROOT / "data" / f"guide-{lib}.pcap"
    env = {**os.environ, "NODE_PATH": str(ROOT / ".venv-nsqjs" / "node_modules")}
    with discovery_scenario() as (lks, brokers):
        ports = [b.tcp_port for b in brokers] + [lk.lookupd.http_port for lk in lks]
        dump = Tcpdump(path, ports)
        try:
            out = subprocess.run(argv(lib, ",".join(lk.http_address for lk in lks)),
                                 capture_output=True, text=True, timeout=60, env=env)
        finally:
            summary = dump.stop()
    report = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-500:]
    print(f"{path.name}: {summary.splitlines()[-2] if summary else ''} {report}", flush=True)
    json.loads(report)  # the client finished and reported


if __name__ == "__main__":
    for lib in sys.argv[1:] or LIBS:
        capture(lib)
