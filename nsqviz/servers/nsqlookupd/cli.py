"""``nsqviz lookupd``: run the discovery service in the foreground, with nsqlookupd's flags."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from dataclasses import fields

from nsqviz.servers.listen import bind_help
from nsqviz.servers.nsqlookupd.server import FLAGS, Lookupd, LookupdOptions

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "lookupd",
        help="run an nsqlookupd-compatible discovery service (TCP \"  V1\" + HTTP API)",
        description="An nsqlookupd v1.3.0-compatible service: nsqd registers over TCP "
        "(--lookupd-tcp-address), consumers poll /lookup over HTTP.",
        epilog=bind_help(),
    )
    defaults = LookupdOptions()
    for f in fields(LookupdOptions):
        type_, help_ = FLAGS[f.name]
        default = getattr(defaults, f.name)
        parser.add_argument("--" + f.name.replace("_", "-"), type=type_, default=default,
                            help=f"{help_} (default {default!r})")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warn", "error"],
                        help="how much to log (default %(default)r)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    level = {"warn": "WARNING"}.get(args.log_level, args.log_level.upper())
    logging.basicConfig(level=level, format="[nsqviz lookupd] %(asctime)s %(message)s")
    opts = LookupdOptions(**{f.name: getattr(args, f.name) for f in fields(LookupdOptions)})
    return asyncio.run(serve(opts))


async def serve(opts: LookupdOptions) -> int:
    lookupd = Lookupd(opts)
    await lookupd.start()
    print(f"TCP: listening on {lookupd.tcp_address}", flush=True)
    print(f"HTTP: listening on {lookupd.http_address}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await lookupd.stop()
    return 0
