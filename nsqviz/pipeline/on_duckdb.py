"""The analyses on DuckDB: :func:`nsqviz.pipeline.definitions.definitions` run over an
Arrow frames table -- in-process for the captures one person debugs
(:mod:`nsqviz.analysis`), and inside the pipeline's Spark tasks, one partition of
brokers at a time (:mod:`nsqviz.pipeline.analyses`).

The definitions are written in Spark SQL's names; :data:`DUCKDB_NAMES` is the one place
that says how DuckDB spells the few functions it names differently, and the session's
null ordering is set to Spark's (nulls first ascending, last descending), so DuckDB and
Spark SQL -- which runs the views that combine brokers, and could run any -- give the
same tables.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

from nsqviz.pipeline.definitions import definitions, reads, tables
from nsqviz.sql import python_rows

__all__ = ["DUCKDB_NAMES", "MEMORY_FLOOR", "MEMORY_PER_FRAMES", "Session", "analyse", "duckdb_sql",
           "memory_limit"]

DUCKDB_NAMES: dict[str, str] = {
    "min_by": "arg_min_null",  # Spark's min_by keeps a null value; DuckDB's arg_min skips it
    "max_by": "arg_max_null",
    "element_at": "list_extract",  # both 1-based
    "get_json_object": "json_extract_string",
    "explode": "unnest",
    "size": "len",
    "collect_list": "list",
    "collect_set": "list(DISTINCT ",  # the aggregate's FILTER drops nulls, as Spark does
    "sort_array": "list_sort",
    "array_sort": "list_sort",
    "array": "list_value",  # array(): Spark's empty array
    "struct": "struct_pack",  # both name the fields after the columns
    "percentile": "quantile_cont",  # both exact, interpolating linearly
    "sequence": "generate_series",  # both with the end included
    "slice": "list_slice",  # slice(x, 1, n): both the first n (from 1, the end included)
    "array_join": "array_to_string",  # both (array, separator), nulls left out
}
"""Spark SQL function -> DuckDB's spelling of it."""

_CALL = re.compile(r"\b(" + "|".join(DUCKDB_NAMES) + r")\(")


def duckdb_sql(text: str) -> str:
    """A definition's SQL as DuckDB reads it."""
    def rename(m: re.Match[str]) -> str:
        name = DUCKDB_NAMES[m.group(1)]
        return name if "(" in name else name + "("

    return _CALL.sub(rename, text)


MEMORY_FLOOR = 256 << 20
"""The least memory a session lets DuckDB use: below it nothing spills (a capture a
person debugs is analysed as fast as before)."""


MEMORY_PER_FRAMES = 2
"""A session's DuckDB memory, in sizes of its frames table. The million-message benchmark
capture (a 0.68 GB table), ``nsqviz messages``: without a limit 17 s of CPU and a 2.4 GB
peak; with 1x 1.7 GB but 23 s (spilling: more than ``decode --json``'s 20 s); with 2x
17 s and 2.2 GB (loaded machine)."""


def memory_limit(frames: Any) -> int:
    """Bytes of memory a session's DuckDB may use over ``frames`` before it spills to
    disk: :data:`MEMORY_PER_FRAMES` times what the frames table itself holds, at least
    :data:`MEMORY_FLOOR` -- where DuckDB's default (80 % of the machine) lets a big
    capture's joins take whatever they want."""
    return max(MEMORY_FLOOR, MEMORY_PER_FRAMES * int(frames.get_total_buffer_size()))


def analyse(frames: Any, wanted: Iterable[str] | None = None, *,
            ordered: bool = True, threads: int | None = None,
            given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run the definitions on DuckDB over ``frames`` (an Arrow table of the frames
    table; its ``fields`` column is never read) and return the views ``wanted`` (any
    of :func:`~nsqviz.pipeline.definitions.definitions`; default: every table) as
    Arrow tables, rows sorted by all their columns unless not ``ordered``. ``threads``:
    how many DuckDB may use (default: one per core), for a Spark task that is given
    fewer. ``given``: views whose rows are already known (Arrow tables), read as they are
    instead of computed -- a pipeline task's facts about a whole broker, of which it
    has a part. One :class:`Session` computes them all: a view several others read is
    computed once."""
    wanted = list(tables() if wanted is None else wanted)
    with Session(frames, threads=threads, given=given) as session:
        return {name: session.table(name, ordered=ordered)
                for name in definitions() if name in wanted}


class Session:
    """One DuckDB connection over a frames table (an Arrow table, read where it lies:
    its ``fields`` column never), whose views are computed when first asked for
    (:meth:`table`), each once, and kept while the session lives -- so the tables a
    command reads share every step they have in common (``deliveries``, ``connections``,
    ``answer_pairs`` ...), and a notebook's second table costs only what the first did
    not compute. ``threads`` and ``given``: as :func:`analyse` takes them.

    A view is materialised once (a view that is only a filter of the frames is read
    through, not copied). DuckDB's memory is bounded by :func:`memory_limit` (twice the
    frames table's own size, at least :data:`MEMORY_FLOOR`): what outgrows it -- a join's or a
    sort's working set, the materialised steps -- spills to a temporary directory of
    the session's own, removed when it closes."""

    def __init__(self, frames: Any, *, threads: int | None = None,
                 given: Mapping[str, Any] | None = None) -> None:
        import duckdb

        self._con = con = duckdb.connect()
        self._spill = tempfile.TemporaryDirectory(prefix="nsqviz-duckdb-")
        con.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
        con.execute(f"SET memory_limit = '{memory_limit(frames)}B'")
        con.execute("SET temp_directory = ?", [self._spill.name])
        if threads is not None:
            con.execute(f"SET threads = {int(threads)}")
        con.register("frames", frames.drop_columns(["fields"]) if "fields" in
                     frames.column_names else frames)
        self._given = dict(given or {})
        self._made: set[str] = set()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Let DuckDB's memory and spilled files go (the tables given out stay valid:
        Arrow owns them)."""
        self._con.close()
        self._spill.cleanup()

    def table(self, name: str, *, ordered: bool = True) -> Any:
        """View ``name`` (any of :func:`~nsqviz.pipeline.definitions.definitions`) as an
        Arrow table, rows sorted by all their columns unless not ``ordered``: computed
        with every view it reads that this session has not computed yet."""
        views = definitions()
        needed = _needed({name}, set(self._given))
        con = self._con
        for other, view in views.items():
            if other not in needed or other in self._made:
                continue
            self._made.add(other)
            if other in self._given:
                con.register(other, self._given[other])
            elif view.python:  # rows from Python, kept as an Arrow table DuckDB reads
                con.register(other, python_rows(view, con.sql(duckdb_sql(view.sql))
                                                .to_arrow_table()))
            else:
                what = "TABLE" if view.materialise else "VIEW"
                con.execute(f"CREATE TEMP {what} {other} AS {duckdb_sql(view.sql)}")
        # Rows in one order (by every column, left to right): DuckDB's parallel plans
        # give them in any, and a notebook's stored output must not depend on that.
        order = " ORDER BY ALL" if ordered else ""
        return con.sql(f"SELECT * FROM {name}{order}").to_arrow_table()


def _needed(wanted: set[str], given: set[str]) -> set[str]:
    """``wanted`` and every view they read, directly or not (not what a ``given`` view
    reads)."""
    needed: set[str] = set()
    todo = list(wanted)
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        if name not in definitions():
            raise KeyError(f"no analysis named {name!r} (choose from {', '.join(tables())})")
        needed.add(name)
        if name not in given:
            todo.extend(reads(name) - {"frames"})
    return needed
