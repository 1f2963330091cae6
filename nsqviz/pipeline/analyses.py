"""The analyses on Spark: :data:`nsqviz.pipeline.definitions.VIEWS` run by Spark SQL.

The definitions (and the rules they apply) live in :mod:`nsqviz.pipeline.definitions`,
shared with the in-process engine; this module only registers them as Spark views.
The frames are read once into memory and the views several tables read --
``conn_info``, ``deliveries``, ``heartbeats``, ``rpc_pairs`` -- are cached, so no
step is computed twice.
"""

from __future__ import annotations

from typing import Any

from nsqviz.pipeline.definitions import TABLES, VIEWS

__all__ = ["TABLES", "release", "tables"]

_SHARED = ("conn_info", "deliveries", "heartbeats", "rpc_pairs")


def tables(frames: Any) -> dict[str, Any]:
    """Every analysis of ``frames`` (a Spark DataFrame of the frames table) as a Spark
    DataFrame by table name; the shared steps stay cached until :func:`release`."""
    spark = frames.sparkSession
    frames.createOrReplaceTempView("frames")
    out: dict[str, Any] = {}
    for name, text in VIEWS.items():
        df = spark.sql(text)
        if name in _SHARED:
            df = df.cache()
        df.createOrReplaceTempView(name)
        out[name] = df
    return {name: out[name] for name in TABLES}


def release(frames: Any) -> None:
    """Uncache the shared steps :func:`tables` cached for ``frames``' session."""
    spark = frames.sparkSession
    for name in _SHARED:
        spark.catalog.uncacheTable(name)
