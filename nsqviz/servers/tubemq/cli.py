"""``nsqviz tubemq-sim``: run the simulated TubeMQ Master and Brokers in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from nsqviz.servers.listen import LOOPBACK, bind_help
from nsqviz.servers.tubemq.cluster import SimConfig
from nsqviz.servers.tubemq.server import SimServer
from nsqviz.tubemq.tables import DEFAULT_BROKER_PORT, DEFAULT_MASTER_PORT

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "tubemq-sim",
        epilog=bind_help("--host 0.0.0.0 (every IPv4 interface) or --host ::",
                         "no client needs credentials to produce or consume"),
        help="run a simulated TubeMQ Master and Brokers (for real TubeMQ clients)",
        description="A simulated Apache InLong TubeMQ cluster on loopback: one Master and "
        "N Brokers with P partitions of each topic. Real TubeMQ clients work against it "
        "unchanged. SIGTERM/SIGINT stop it gracefully: with --data-path, every stored "
        "message and committed offset is written out and read back on the next start.",
    )
    parser.add_argument("--host", default=LOOPBACK,
                        help="address to listen on (default %(default)r)")
    parser.add_argument("--master-port", type=int, default=DEFAULT_MASTER_PORT,
                        help="port of the Master (default %(default)r)")
    parser.add_argument("--broker-port", type=int, default=DEFAULT_BROKER_PORT,
                        help="port of Broker 1; Broker n listens on this + n - 1 (0 = free ports)"
                        " (default %(default)r)")
    parser.add_argument("--brokers", type=int, default=2,
                        help="number of Brokers (default %(default)r)")
    parser.add_argument("--partitions", type=int, default=2,
                        help="partitions of each topic on each Broker (default %(default)r)")
    parser.add_argument("--topic", action="append", dest="topics", metavar="NAME",
                        help="a topic to serve (repeat; default 'demo')")
    parser.add_argument("--data-path", default=None,
                        help="directory for messages and offsets (kept across restarts)")
    parser.add_argument("--client-timeout", type=float, default=30.0,
                        help="seconds without a heartbeat before a client is dropped"
                        " (default %(default)r)")
    parser.add_argument("--standby", action="store_true",
                        help="answer as a standby Master (StandbyException) to every request")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warn", "error"],
                        help="how much to log (default %(default)r)")
    parser.set_defaults(run=run)


def config_from_args(args: argparse.Namespace) -> SimConfig:
    base = args.broker_port
    ports = tuple(base + i if base else 0 for i in range(args.brokers))
    return SimConfig(topics=tuple(args.topics or ("demo",)), host=args.host,
                     master_port=args.master_port, broker_ports=ports,
                     partitions=args.partitions, client_timeout=args.client_timeout,
                     standby=args.standby, data_path=args.data_path)


def run(args: argparse.Namespace) -> int:
    level = {"warn": "WARNING"}.get(args.log_level, args.log_level.upper())
    logging.basicConfig(level=level,
                        format="[nsqviz tubemq-sim] %(asctime)s %(levelname)s %(message)s")
    return asyncio.run(serve(config_from_args(args)))


async def serve(config: SimConfig) -> int:
    server = SimServer(config)
    await server.start()
    print(f"Master: listening on {server.master_address}", flush=True)
    for i, address in enumerate(server.broker_addresses, 1):
        print(f"Broker {i}: listening on {address}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    logging.info("signal received: stopping")
    await server.stop()
    return 0
