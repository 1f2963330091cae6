"""Connect/close churn against the real nsqd and ``nsqviz broker``: memory, descriptors,
log, rate.

A load balancer's health check, a client that reconnects in a loop, a port scanner: each
opens a connection and closes it, over and over. Both servers run as processes with the
same flags, one after the other in the same run, and take ``--cycles`` connections (300k
by default) of every shape, ``--concurrency`` at a time:

* TCP: a bare connect and close; the magic alone; the magic and an IDENTIFY (its answer
  read); the magic and a SUB (its OK read);
* HTTP: ``GET /ping`` read to its answer; a request closed before its answer; a
  connect and close with no request; a request then a reset (``SO_LINGER`` 0).

Printed per server: its RSS after a warm-up of ``--warmup`` cycles (the start) and every
fifth of the run, the growth at the end (the figure: nsqd's stays within a few MB, and
so must ours -- issue 33 item 3), open descriptors at the end, tracebacks in its log,
cycles/s (by the client's wall clock) and the server's CPU seconds per 100k cycles. The
machine may be shared: RSS and descriptors do not depend on it, rates do.

Run: ``.venv/bin/python -m benchmarks.connection_churn [--cycles 300000]``. Needs ``nsqd``
(see :mod:`nsqviz.servers.peers`) for the baseline; without it, ours alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import struct
import time
from collections.abc import Awaitable, Callable

from nsqviz.servers.peers import NsqdProcess, PeerNotFound, RealNsqd

_IDENTIFY = json.dumps({"client_id": "churn", "hostname": "churn",
                        "feature_negotiation": True}).encode()
_PING = b"GET /ping HTTP/1.1\r\nHost: churn\r\n\r\n"


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Shape = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _nothing(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    pass


def _send(data: bytes, answer: int = 0) -> Shape:
    """Send ``data``, then read ``answer`` bytes of the answer (0: none)."""
    async def shape(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(data)
        if answer:
            await r.readexactly(answer)
    return shape


async def _reset(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    w.write(_PING)
    await w.drain()
    sock = w.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


SHAPES: dict[str, tuple[str, Shape]] = {
    "tcp: connect, close": ("tcp", _nothing),
    "tcp: magic": ("tcp", _send(b"  V2")),
    "tcp: IDENTIFY": ("tcp", _send(b"  V2IDENTIFY\n" + struct.pack(">i", len(_IDENTIFY))
                                   + _IDENTIFY, 8)),
    "tcp: SUB": ("tcp", _send(b"  V2SUB churn c\n", 10)),
    "http: /ping": ("http", _send(_PING, 12)),
    "http: close before the answer": ("http", _send(_PING)),
    "http: no request": ("http", _nothing),
    "http: reset": ("http", _reset),
}
"""How each connection goes (which port, what it does before it closes)."""


async def _cycle(address: str, shape: Shape) -> bool:
    host, _, port = address.rpartition(":")
    try:
        reader, writer = await asyncio.open_connection(host, int(port))
    except OSError:
        return False
    try:
        await shape(reader, writer)
        await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        return False
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return True


async def churn(server: NsqdProcess, cycles: int, concurrency: int) -> int:
    """``cycles`` connections, the shapes in turn; how many failed (refused, reset)."""
    plan = [SHAPES[name] for name in SHAPES]
    addresses = {"tcp": server.tcp_address, "http": server.http_address}
    failed = 0

    async def worker(k: int) -> None:
        nonlocal failed
        for i in range(k, cycles, concurrency):
            port, shape = plan[i % len(plan)]
            failed += not await _cycle(addresses[port], shape)

    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    return failed


def measure(server: NsqdProcess, cycles: int, warmup: int, concurrency: int,
            steps: int = 5) -> dict[str, float | str]:
    with server:
        pid = server.pid
        assert pid is not None  # started
        asyncio.run(churn(server, warmup, concurrency))
        time.sleep(1.0)
        start, fds0, cpu0 = _rss_mb(pid), _fds(pid), _cpu_s(pid)
        marks, failed, t0 = [], 0, time.perf_counter()
        for _ in range(steps):
            failed += asyncio.run(churn(server, cycles // steps, concurrency))
            marks.append(_rss_mb(pid))
        wall = time.perf_counter() - t0
        time.sleep(1.0)  # the last closes settle
        end = _rss_mb(pid)
        figures: dict[str, float | str] = {
            "RSS start MB": start,
            "RSS during MB": " ".join(f"{m:.1f}" for m in marks),
            "RSS end MB": end,
            "RSS growth MB": end - start,
            "fds start/end": f"{fds0}/{_fds(pid)}",
            "failed cycles": failed,
            "cycles/s": cycles / wall,
            "CPU s / 100k": (_cpu_s(pid) - cpu0) / cycles * 1e5,
        }
    figures["tracebacks"] = sum("Traceback" in line for line in server.log)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=300_000)
    parser.add_argument("--warmup", type=int, default=4_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--nsqd", help="path of the real nsqd")
    args = parser.parse_args(argv)
    servers: dict[str, Callable[[], NsqdProcess]] = {}
    try:
        RealNsqd(args.nsqd)
        servers["nsqd"] = lambda: RealNsqd(args.nsqd)
    except PeerNotFound as exc:
        print(f"no baseline: {exc}")
    servers["nsqviz broker"] = NsqdProcess.nsqviz
    results = {name: measure(make(), args.cycles, args.warmup, args.concurrency)
               for name, make in servers.items()}
    print(f"{args.cycles:,} connect/close cycles ({len(SHAPES)} shapes in turn: "
          f"{', '.join(SHAPES)}), {args.concurrency} at a time, after {args.warmup:,}")
    names = list(results)
    print(f"{'':16}" + "".join(f"{n:>42}" for n in names))
    for key in results[names[-1]]:
        cells = [results[n][key] for n in names]
        print(f"{key:16}" + "".join(f"{c:>42.1f}" if isinstance(c, float) else f"{c!s:>42}"
                                    for c in cells))


if __name__ == "__main__":
    main()
