"""What the analyses need to know of the whole frames table before their tasks start,
gathered part by part by whoever holds the frames -- the decoding tasks as they write
them, or one pass over a frames table made earlier -- and added up on the driver.

Two things cross the tasks' groups (:mod:`nsqviz.pipeline.groups`): the *links* of the
connections (:data:`~nsqviz.pipeline.groups.LINKS`: one row per connection and what
links it, with the frames that named it), from which the driver forms the groups and
deals them; and the rows of the views that need a whole broker
(:data:`~nsqviz.pipeline.groups.WHOLE_SERVER`), which every task is handed. Both are
aggregates over rows taken one at a time: computed over any part of the frames they
give *partial* rows, and partial rows of all parts add up to the rows over all of them
-- counts and sums are summed, minima and maxima taken again. So a :class:`Tally` runs
the very definitions (their SQL on DuckDB, :func:`nsqviz.pipeline.on_duckdb.analyse`)
over each slice of rows it is given, keeps the partial rows, and two tallies
:meth:`~Tally.merge` into one. How a view's columns add up is read from its own SQL
(:func:`combining_sql`, from DuckDB's parse tree), so a view is still defined once; one
that does not add up (an average, a ``DISTINCT``, a view over rows paired across frames)
is refused by name.

Why in the decoding tasks: before, Spark SQL computed both over the frames table
between decoding and the analyses -- three jobs, each a scan and a shuffle of the whole
table, with the driver's grouping after them; two cores shortened them little, so
they bounded what a second core could gain for the pipeline as a whole. The decoding
tasks hold every row once anyway: a tally there costs a few DuckDB queries per 64 K
rows, in parallel, and travels to the driver in the summary row each task gives. It
also says which of the table's files hold each connection's rows (:meth:`Tally.held_in`):
an analyses' task reads only those files (:func:`nsqviz.pipeline.sink.read`).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from nsqviz.pipeline.definitions import definitions, reads
from nsqviz.pipeline.groups import LINKS, WHOLE_SERVER
from nsqviz.pipeline.on_duckdb import analyse, duckdb_sql

__all__ = ["FLUSH_ROWS", "Tally", "combining_sql"]

FLUSH_ROWS = 65_536
"""Rows a tally keeps before it computes their partial rows: what it holds of a task's
frames at most (without ``fields``), and few enough queries per task."""

_FRAME_KINDS = ("command", "frame")
_ADDED = {"sum": "sum", "count": "sum", "count_star": "sum", "min": "min", "max": "max"}
"""How a partial aggregate's values add up: the aggregate over the partial values."""


@dataclass
class Tally:
    """Partial rows of :data:`~nsqviz.pipeline.groups.LINKS` and of each
    :data:`~nsqviz.pipeline.groups.WHOLE_SERVER` view (Arrow tables), and the frames
    (commands and server frames) counted, for the part of the frames :meth:`add` was
    given; :meth:`merge` adds another part's. ``files``: each file of the frames table
    (its name) and the connections it holds rows of (an Arrow array of ``conn_id`` s,
    with a null if it holds frames of no connection)."""

    links: Any = None
    whole: dict[str, Any] = field(default_factory=dict)
    frames: int = 0
    files: dict[str, Any] = field(default_factory=dict)
    pending: list[Any] = field(default_factory=list, repr=False)  # Arrow tables
    pending_rows: int = 0

    def add(self, batch: Any) -> None:
        """Frames-table rows (an Arrow batch or table; ``fields`` is never read)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        rows = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        if "fields" in rows.column_names:
            rows = rows.drop_columns(["fields"])
        self.frames += int(pc.sum(pc.is_in(rows["kind"], _kinds())).as_py() or 0)
        self.pending.append(rows)
        self.pending_rows += rows.num_rows
        if self.pending_rows >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        """Compute the partial rows of what is pending and add them up with the rest."""
        if not self.pending:
            return
        import pyarrow as pa

        frames = pa.concat_tables(self.pending)
        self.pending, self.pending_rows = [], 0
        import duckdb

        con = duckdb.connect()
        try:
            con.execute("SET threads = 1")
            con.register("frames", frames)
            links = con.sql(duckdb_sql(LINKS)).to_arrow_table()
        finally:
            con.close()
        whole = analyse(frames, WHOLE_SERVER, ordered=False, threads=1)
        self._add_up(Tally(links, whole))

    def held_in(self, file: str) -> None:
        """The rows added are those of the frames table's file ``file``: keep which
        connections it holds (every row of a connection names its client address, so
        each has a link row; a last row counts the frames of no connection)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        self.flush()
        links = self.links
        self.files[file] = (pa.array([], pa.string()) if links is None else
                            pc.unique(links.filter(pc.greater(links["frames"], 0))["conn_id"]))

    def merge(self, other: Tally) -> Tally:
        """This tally with ``other``'s rows added (both flushed)."""
        self.flush()
        other.flush()
        self._add_up(other)
        self.frames += other.frames
        self.files.update(other.files)
        return self

    def _add_up(self, other: Tally) -> None:
        if other.links is None:
            return
        if self.links is None:
            self.links, self.whole = other.links, dict(other.whole)
            return
        self.links = _combined(_LINKS_ADDED, [self.links, other.links])
        self.whole = {name: _combined(combining_sql(name), [self.whole[name], other.whole[name]])
                      for name in WHOLE_SERVER}

    def dumps(self) -> bytes:
        """The tally, flushed, as bytes (what a task hands the driver)."""
        self.flush()
        return pickle.dumps((self.links, self.whole, self.frames, self.files),
                            protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def loads(cls, data: bytes) -> Tally:
        links, whole, frames, files = pickle.loads(data)
        return cls(links, whole, frames, files)

    @classmethod
    def merged(cls, parts: Iterable[bytes | None]) -> Tally:
        """The tally of the frames of all ``parts`` (:meth:`dumps` of each; ``None``: a
        part with nothing to tell)."""
        out = cls()
        for data in parts:
            if data is not None:
                out.merge(cls.loads(data))
        if out.links is None:  # no rows at all: the definitions over none
            out.add(_empty_frames())
            out.flush()
        return out


_LINKS_ADDED = ("SELECT conn_id, host, link, CAST(sum(frames) AS BIGINT) AS frames "
                "FROM parts GROUP BY conn_id, host, link")
"""How partial link rows add up: each link's frames summed (the last row, of the frames
of no connection, has nulls for its keys: one group)."""


@cache
def combining_sql(name: str) -> str:
    """The SQL that adds up partial rows of the whole-broker view ``name`` (a table
    ``parts``): grouped by the view's own keys, each aggregate column taken again by
    :data:`_ADDED`. Read from the view's parse tree (DuckDB's); raises ``ValueError``
    for a view whose rows do not add up."""
    import duckdb

    for other in reads(name) - {"frames"}:
        if definitions()[other].materialise:  # rows paired or aggregated first
            raise ValueError(f"{name}: a whole broker's view reads the frames alone "
                             f"(through filters), not {other}")
    con = duckdb.connect()
    try:
        (text,), = con.execute("SELECT json_serialize_sql(?::VARCHAR)",
                               [duckdb_sql(definitions()[name].sql)]).fetchall()
        tree = json.loads(text)
    finally:
        con.close()
    if tree.get("error") or len(tree["statements"]) != 1:
        raise ValueError(f"{name}: not one SELECT ({tree.get('error_message', '')})")
    node = tree["statements"][0]["node"]
    if node.get("type") != "SELECT_NODE" or node.get("cte_map", {}).get("map"):
        raise ValueError(f"{name}: a whole broker's view is one SELECT ... GROUP BY")
    keys = [_shape(g) for g in node.get("group_expressions", [])]
    out, grouped = [], []
    for column in node["select_list"]:
        alias = column.get("alias")
        if not alias:
            raise ValueError(f"{name}: every column of a whole broker's view is named")
        if _shape(column) in keys:
            out.append(alias)
            grouped.append(alias)
            continue
        call = column["child"] if column.get("class") == "CAST" else column
        added = _ADDED.get(call.get("function_name", ""))
        if call.get("class") != "FUNCTION" or added is None or call.get("distinct"):
            raise ValueError(f"{name}: column {alias} is not a sum, count, min or max of "
                             "the frames: its rows over parts of a broker do not add up")
        out.append(f"{added}({alias}) AS {alias}")
    group = f" GROUP BY {', '.join(grouped)}" if grouped else ""
    return f"SELECT {', '.join(out)} FROM parts{group}"


def _shape(expression: dict[str, Any]) -> str:
    """An expression's parse tree without its name and place in the text."""
    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("alias", "query_location")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return json.dumps(strip(expression), sort_keys=True)


def _combined(sql: str, parts: list[Any]) -> Any:
    """``sql`` over the partial rows ``parts`` (Arrow tables of one schema)."""
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    try:
        con.execute("SET threads = 1")
        con.register("parts", pa.concat_tables(parts))
        return con.sql(sql).to_arrow_table().cast(parts[0].schema)
    finally:
        con.close()


@cache
def _kinds() -> Any:
    import pyarrow as pa

    return pa.array(_FRAME_KINDS)


def _empty_frames() -> Any:
    import pyarrow as pa

    from nsqviz.records import frame_schema

    return pa.Table.from_batches([], schema=frame_schema())
