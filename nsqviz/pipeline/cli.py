"""``nsqviz pipeline CAPTURES... --out DIR``: the Spark pipeline from the command line.

Local Spark (``local[*]``, a driver heap sized to the input) unless ``--master`` says
otherwise; without a Java runtime it stops with a message saying how to install one
rather than a JVM trace.
"""

from __future__ import annotations

import argparse

from nsqviz.usage import help_text

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from nsqviz.pipeline.job import build_parser

    parser = subparsers.add_parser(
        "pipeline",
        help="decode captures on Spark into Parquet tables (frames, messages, connections, "
        "flow control, heartbeats, sticky packets)",
        description=help_text(__doc__),
    )
    build_parser(parser)
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from nsqviz.pipeline.job import run_args

    return run_args(args)
