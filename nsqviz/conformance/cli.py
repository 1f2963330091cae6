"""``nsqviz conformance``: check client connections against seed 002's client guide."""

from __future__ import annotations

import argparse
import contextlib
import json
import time

from nsqviz.conformance.report import check
from nsqviz.conformance.sources import from_capture, from_tap
from nsqviz.conformance.tap import WireTap
from nsqviz.usage import usage_error

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "conformance",
        help="check NSQ client connections (captures or live) against the client guide",
        description="Per client connection, each rule of the NSQ client guide (seed 002): "
        "pass / fail / not exercised, with the packets that show it. Give capture files, "
        "or --live NSQD_ADDRESS to put a recording proxy in front of an nsqd.",
    )
    parser.add_argument("captures", nargs="*", help="pcap/pcapng files")
    parser.add_argument("--max-in-flight", type=int, default=None,
                        help="the consumer's max_in_flight (not on the wire), for the RDY sum")
    parser.add_argument("--port", type=int, action="append", default=None,
                        help="an nsqd port, for captures without the handshake")
    parser.add_argument("--live", metavar="NSQD", default=None,
                        help="proxy to this nsqd (host:port); point clients at the printed "
                        "address; the report comes after --duration or Ctrl-C")
    parser.add_argument("--duration", type=float, default=None, help="seconds to watch (live)")
    parser.add_argument("--json", action="store_true", help="JSON instead of text")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.live:
        tap = WireTap(args.live).start()
        print(f"proxy listening on {tap.address} -> {args.live}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            time.sleep(args.duration if args.duration is not None else 1e9)
        tap.stop()
        traffic = from_tap(tap)
    elif args.captures:
        kw = {"ports": {"nsq": args.port}} if args.port else {}
        traffic = from_capture(args.captures, **kw)
    else:
        return usage_error("conformance", "give capture files or --live NSQD")
    report = check(traffic, max_in_flight=args.max_in_flight)
    print(json.dumps(report.as_json(), indent=1) if args.json else report.text())
    return 1 if "fail" in report.summary().values() else 0
