"""Load test of the embedded broker: MPUB in, RDY 2500 + FIN out, msgs/s each way.

The broker runs as its own process (``python -m nsqviz.cli broker``, memory queues by
default) so it has a core to itself; the load comes from separate processes that
speak NSQ through the project's own :class:`~nsqviz.nsq.codec.ClientConnection` over
raw sockets:

* phase 1 -- ``--publishers`` processes publish 200-byte messages in MPUBs of 200 for
  ``--seconds``, keeping a window of MPUBs in flight; a message counts once its OK is
  back;
* phase 2 -- ``--consumers`` processes subscribe to the backlog with RDY 2500 and FIN
  every message for ``--seconds``.

Baselines measured in the same run, on one core, without a broker: how fast the load
tool itself can build those MPUBs, and how fast it can decode message frames and build
the FINs -- if the broker's figures get near them, the tool is the limit, not the
broker. Targets (issue 3): >= 200,000 msgs/s in, >= 100,000 msgs/s out.

Run: ``.venv/bin/python -m benchmarks.broker_load [--seconds 10] [--profile FILE]``;
``--profile`` runs the broker under cProfile and writes its stats to FILE.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
import urllib.request

from nsqviz.nsq import fastpath
from nsqviz.nsq.codec import ClientConnection
from nsqviz.nsq.events import Fin, Magic, Message, Mpub, Rdy, Response, Sub

BODY_SIZE = 200
BATCH = 200
RDY = 2500
TOPIC = "bench"
WINDOW = 8  # MPUBs in flight per publisher


def _bodies(worker: int) -> tuple[bytes, ...]:
    return tuple((b"%02d-%06d-" % (worker, i)).ljust(BODY_SIZE, b"x") for i in range(BATCH))


def _connect(address: str) -> tuple[socket.socket, ClientConnection]:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = ClientConnection()
    sock.sendall(conn.send(Magic()))
    return sock, conn


def publisher(address: str, worker: int, seconds: float, start_at: float, out) -> None:
    sock, conn = _connect(address)
    bodies = _bodies(worker)
    while time.time() < start_at:
        time.sleep(0.001)
    end = time.monotonic() + seconds
    outstanding = ok = 0
    while True:
        now = time.monotonic()
        if now < end:
            burst = [conn.send(Mpub(TOPIC, bodies)) for _ in range(WINDOW - outstanding)]
            if burst:
                sock.sendall(b"".join(burst))
                outstanding += len(burst)
        elif outstanding == 0:
            break
        data = sock.recv(1 << 16)
        if not data:
            raise RuntimeError("broker closed the publisher's connection")
        for ev in conn.receive(data):
            if type(ev) is Response and ev.data == b"OK":
                outstanding -= 1
                if time.monotonic() <= end:
                    ok += 1
            elif not (type(ev) is Response and ev.is_heartbeat):
                raise RuntimeError(f"publisher got {ev!r}")
    sock.close()
    out.put(("in", ok * BATCH))


def consumer(address: str, worker: int, seconds: float, start_at: float, out) -> None:
    sock, conn = _connect(address)
    sock.sendall(conn.send(Sub(TOPIC, "ch")))
    while time.time() < start_at:
        time.sleep(0.001)
    sock.sendall(conn.send(Rdy(RDY)))
    end = time.monotonic() + seconds
    got = 0
    sock.settimeout(0.2)
    while time.monotonic() < end:
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            continue
        if not data:
            raise RuntimeError("broker closed the consumer's connection")
        fins = [Fin(ev.id) for ev in conn.receive(data) if type(ev) is Message]
        if fins:
            sock.sendall(conn.send_all(fins))
            got += len(fins)
    sock.close()
    out.put(("out", got))


def _run_phase(target, address: str, n: int, seconds: float) -> int:
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    start_at = time.time() + 0.5
    procs = [
        ctx.Process(target=target, args=(address, i, seconds, start_at, out)) for i in range(n)
    ]
    for p in procs:
        p.start()
    total = sum(out.get(timeout=seconds + 60)[1] for _ in procs)
    for p in procs:
        p.join()
    return total


def baseline_build(seconds: float = 1.0) -> float:
    """MPUB commands the load tool can build per second (messages/s), one core."""
    conn = ClientConnection()
    conn.send(Magic())
    bodies = _bodies(0)
    n = 0
    end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        conn.send(Mpub(TOPIC, bodies))
        n += 1
    return n * BATCH / (time.perf_counter() - t0)


def baseline_consume(count: int = 100_000) -> float:
    """Message frames the load tool can decode and FIN per second, one core."""
    body = b"x" * BODY_SIZE
    stream = b"".join(
        fastpath.encode_frame(Message(1, 1, b"%016x" % i, body)) for i in range(count)
    )
    chunks = [stream[i : i + (1 << 20)] for i in range(0, len(stream), 1 << 20)]
    conn = ClientConnection()
    conn.send(Magic())
    conn.send(Sub(TOPIC, "ch"))
    conn.receive(fastpath.encode_frame(Response(b"OK")))
    conn.send(Rdy(RDY))
    t0 = time.perf_counter()
    n = 0
    for chunk in chunks:
        fins = [conn.send(Fin(ev.id)) for ev in conn.receive(chunk) if type(ev) is Message]
        n += len(fins)
    return n / (time.perf_counter() - t0)


class _Sink(asyncio.Transport):
    """A transport that keeps what the broker writes (for the in-process measurement)."""

    def __init__(self):
        super().__init__()
        self.out: list[bytes] = []

    def write(self, data) -> None:
        self.out.append(bytes(data))

    def get_extra_info(self, name, default=None):
        return default

    def is_closing(self) -> bool:
        return False

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def broker_alone(count: int = 400_000) -> tuple[float, float]:
    """The broker's own cost per message, without sockets or other processes: MPUBs fed
    straight into a connection's ``data_received``, then a consumer's FINs likewise.
    Returns (msgs/s in, msgs/s out) per CPU-second (process time, so neighbours' load on
    a shared machine does not count)."""
    from nsqviz.broker.connection import BrokerConnection
    from nsqviz.broker.options import Options
    from nsqviz.broker.server import Broker

    async def run() -> tuple[float, float]:
        broker = Broker(Options(mem_queue_size=10**9))
        pub_t, sub_t = _Sink(), _Sink()
        pub, sub = BrokerConnection(broker), BrokerConnection(broker)
        pub.connection_made(pub_t)
        sub.connection_made(sub_t)
        pc, sc = ClientConnection(), ClientConnection()
        pub.data_received(pc.send(Magic()))
        sub.data_received(sc.send(Magic()) + sc.send(Sub(TOPIC, "ch")))
        sc.receive(b"".join(sub_t.out))
        sub_t.out.clear()
        mpubs = [pc.send(Mpub(TOPIC, _bodies(0))) for _ in range(count // BATCH)]
        t0 = time.process_time()
        for i in range(0, len(mpubs), WINDOW):
            pub.data_received(b"".join(mpubs[i : i + WINDOW]))
        t_in = time.process_time() - t0
        got = 0
        t_out = 0.0
        data = sc.send(Rdy(RDY))
        while got < count:
            t0 = time.process_time()
            sub.data_received(data)
            t_out += time.process_time() - t0
            written = b"".join(sub_t.out)
            sub_t.out.clear()
            fins = [sc.send(Fin(ev.id)) for ev in sc.receive(written) if type(ev) is Message]
            got += len(fins)
            data = b"".join(fins)
        for conn in (pub, sub):
            conn.abort()
        return count / t_in, count / t_out

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_broker(extra: list[str], profile: str | None) -> tuple[subprocess.Popen, str, str]:
    cmd = [sys.executable]
    if profile:
        cmd += ["-m", "cProfile", "-o", profile]
    cmd += [
        "-m",
        "nsqviz.cli",
        "broker",
        "--tcp-address",
        "127.0.0.1:0",
        "--http-address",
        "127.0.0.1:0",
        "--mem-queue-size",
        "100000000",
        "--log-level",
        "warn",
        *extra,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("TCP: listening on "):
        proc.kill()
        raise RuntimeError(f"broker did not start: {line!r}")
    http_line = proc.stdout.readline()
    return proc, line.split()[-1], http_line.split()[-1]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--publishers", type=int, default=2)
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--profile", help="write the broker's cProfile stats to this file")
    ap.add_argument(
        "--broker-arg",
        action="append",
        default=[],
        help="extra flag for the broker, e.g. --broker-arg=--data-path=/tmp/d",
    )
    args = ap.parse_args(
        argv if argv is not None else sys.argv[1:] if __name__ == "__main__" else []
    )

    build = baseline_build()
    decode = baseline_consume()
    alone_in, alone_out = broker_alone()
    print(f"cores: {os.cpu_count()}; message {BODY_SIZE} B, MPUB of {BATCH}, RDY {RDY}")
    print(f"broker alone (in-process, no sockets, per CPU-second): in {alone_in:,.0f} "
          f"msgs/s, out {alone_out:,.0f} msgs/s")
    print(
        f"baseline (load tool alone, 1 core): build MPUBs {build:,.0f} msgs/s; "
        f"decode + FIN {decode:,.0f} msgs/s"
    )
    proc, address, http_address = start_broker(args.broker_arg, args.profile)
    try:
        # the channel exists before publishing starts, so phase 1 pays for the fan-out
        # (as in nsqd, a channel is created on an existing topic)
        for path in (f"topic/create?topic={TOPIC}", f"channel/create?topic={TOPIC}&channel=ch"):
            urllib.request.urlopen(
                urllib.request.Request(f"http://{http_address}/{path}", data=b"")
            )
        cpu0 = _cpu_seconds(proc.pid)
        pub = _run_phase(publisher, address, args.publishers, args.seconds)
        cpu1 = _cpu_seconds(proc.pid)
        sub = _run_phase(consumer, address, args.consumers, args.seconds)
        cpu2 = _cpu_seconds(proc.pid)
    finally:
        proc.send_signal(2)  # SIGINT: graceful stop (and cProfile writes its file)
        proc.wait(timeout=120)
    rate_in, rate_out = pub / args.seconds, sub / args.seconds
    print(
        f"in : {rate_in:>10,.0f} msgs/s  ({args.publishers} publishers, {pub:,} msgs in "
        f"{args.seconds:g} s)  = {rate_in / 200_000:.2f} of the 200k target, "
        f"{rate_in / (build * args.publishers):.2f} of the tool's ceiling"
    )
    print(
        f"out: {rate_out:>10,.0f} msgs/s  ({args.consumers} consumers, {sub:,} msgs in "
        f"{args.seconds:g} s)  = {rate_out / 100_000:.2f} of the 100k target, "
        f"{rate_out / (decode * args.consumers):.2f} of the tool's ceiling"
    )
    # on a shared 2-core machine the wall-clock rates move with the neighbours' load;
    # messages per CPU-second of the broker process are the steadier figure
    print(f"broker CPU: in-phase {cpu1 - cpu0:.1f} s -> {pub / max(cpu1 - cpu0, 1e-9):,.0f} "
          f"msgs per CPU-second; out-phase {cpu2 - cpu1:.1f} s -> "
          f"{sub / max(cpu2 - cpu1, 1e-9):,.0f} msgs per CPU-second "
          f"(load average {os.getloadavg()[0]:.1f})")
    if args.profile:
        print(f"broker profile: {args.profile} (python -m pstats {args.profile})")


if __name__ == "__main__":
    main()
