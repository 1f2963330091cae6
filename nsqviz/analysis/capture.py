"""``nsqviz.open(path)``: one capture for a notebook -- its frames and every analysis as
pandas DataFrames, its replay view, and one message's lifecycle as a picture.

The capture is decoded once, in this process, by the pipeline's own decoding tasks
(:func:`frames_of`), and the analyses run on DuckDB the first
time one is asked for, in one session per capture (:class:`nsqviz.pipeline.on_duckdb.
Session`: what two tables share is computed once): the same definitions ``nsqviz
pipeline`` runs on Spark, so a notebook and a cluster agree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from nsqviz.capture.driver import IDLE_SPLIT
from nsqviz.pipeline.definitions import definitions, tables
from nsqviz.usage import nearest_hint

__all__ = ["Capture", "frames_of", "open_capture", "table_schemas"]


def frames_of(captures: Iterable[str], *, idle_split: float | None = IDLE_SPLIT,
              ports: Mapping[str, Iterable[int]] | None = None, fields: bool = True) -> Any:
    """The frames table (:func:`nsqviz.records.frame_schema`) of ``captures`` -- files,
    directories or globs, one capture set as ``nsqviz pipeline`` reads them -- decoded
    in this process, as a ``pyarrow.Table``. Without ``fields`` the table leaves out
    that column (every record's fields as JSON, bodies in hex: most of its bytes, and
    nothing the analyses read) and is built by the columnar path
    (:func:`nsqviz.capture.columns.frames_table`: no Python object per frame of a
    connection its protocol can frame in columns); with it, by the pipeline's own
    decoding tasks, batch by batch, through the object path that writes each record's
    fields."""
    import pyarrow as pa

    from nsqviz.capture.paths import expand_paths
    from nsqviz.records import frame_schema

    files = expand_paths(list(captures))
    schema = frame_schema()
    if not fields:
        from nsqviz.capture.columns import frames_table

        table = frames_table(files, idle_split=idle_split, ports=ports)
        return table.drop_columns(["fields"])
    from nsqviz.pipeline.decode import decode_set

    batches = decode_set(files, idle_split=idle_split, ports=ports, fields=fields)
    return pa.Table.from_batches(list(batches), schema=schema)


def table_schemas() -> dict[str, Any]:
    """Every table a :class:`Capture` gives, by name, as the Arrow schema of its
    columns: ``frames`` (:func:`nsqviz.records.frame_schema`), then each analysis of
    :func:`~nsqviz.pipeline.definitions.tables` as its definition makes it -- run over no
    frames at all, so that its columns are written down nowhere but in its SQL."""
    import pyarrow as pa

    from nsqviz.pipeline.on_duckdb import analyse
    from nsqviz.records import frame_schema

    made = analyse(pa.Table.from_batches([], schema=frame_schema()), tables())
    return {"frames": frame_schema(), **{name: made[name].schema for name in tables()}}


class Capture:
    """A capture (one file, or rotated files of one capture set) and its analyses
    (``fields=False``: the frames without their ``fields`` column, for big captures).

    Every table is a pandas DataFrame, and every analysis table is an attribute of its
    name (:meth:`table`; :func:`nsqviz.pipeline.definitions.tables` lists them): each
    table's definition says what its rows are. :attr:`frames` has one row per command,
    frame, error, gap, connection start/end and TCP finding, with its packet numbers;
    the tables every capture has are the capture layer's
    (:mod:`nsqviz.capture.analyses`):
    ``connections`` (one row per connection: its protocol, the TCP facts, each
    protocol's columns for its own connections), ``errors`` (the error answers servers
    sent, each with the command it answers), ``problems`` (what nsqviz found wrong:
    refused commands, undecodable bytes, gaps in the capture -- apart from errors),
    ``answer_pairs`` (each answer and the command it answers), ``sticky_packets``; each
    protocol adds its own (its ``analyses.py``):

    * NSQ (:mod:`nsqviz.nsq.analyses`): ``messages``, ``deliveries``, ``heartbeats``,
      ``publishes``, ``flow_control``; :meth:`lifecycle` draws one message;
    * TubeMQ (:mod:`nsqviz.tubemq.analyses`): ``tubemq_messages`` (each message from its
      send to each fetch and commit), ``tubemq_sends``, ``tubemq_fetches``,
      ``tubemq_heartbeats``, ``tubemq_rebalances``, ``tubemq_partitions``,
      ``tubemq_statuses``, ``rpc_pairs``, ``rpc_latency``;
    * what the TCP layer flags (:mod:`nsqviz.capture.tcp_views`, in every capture):
      ``zero_windows``, ``retransmissions``, ``resets``, ``truncated``, ``midstream``,
      ``gaps``.

    :attr:`protocols` names the protocols present; :meth:`diagnose` gives the doctor's
    findings; :meth:`filter` selects records by a Wireshark display filter; :meth:`replay`
    shows the capture packet by packet.
    """

    def __init__(self, *captures: str, idle_split: float | None = IDLE_SPLIT,
                 ports: Mapping[str, Iterable[int]] | None = None, fields: bool = True):
        from nsqviz.capture.paths import expand_paths

        self.files = expand_paths(list(captures))
        self.arrow = frames_of(self.files, idle_split=idle_split, ports=ports, fields=fields)
        self._tables: dict[str, Any] = {}
        self._arrow_tables: dict[str, Any] = {}
        self._frames: Any = None
        self._session: Any = None

    @classmethod
    def of_frames(cls, frames: Any, files: list[str]) -> Capture:
        """A capture whose frames table (an Arrow table) is already built -- read from
        standard input or a live capture (:func:`nsqviz.pipeline.decode.decode_stream`)."""
        cap = cls.__new__(cls)
        cap.files, cap.arrow = files, frames
        cap._tables, cap._arrow_tables, cap._frames, cap._session = {}, {}, None, None
        return cap

    def __repr__(self) -> str:
        names = ", ".join(repr(os.path.basename(f)) for f in self.files)
        return f"Capture({names}, {self.arrow.num_rows} records)"

    @property
    def frames(self) -> Any:
        """The frames table (:func:`nsqviz.records.frame_schema`) as a DataFrame."""
        if self._frames is None:
            self._frames = self.arrow.to_pandas()
        return self._frames

    def table(self, name: str) -> Any:
        """Analysis ``name`` (one of :func:`nsqviz.pipeline.definitions.tables`)."""
        if name not in tables():
            raise KeyError(f"no table {name!r}; choose from {', '.join(tables())}")
        if name not in self._tables:
            self._tables[name] = self.arrow_table(name).to_pandas()
        return self._tables[name]

    def arrow_table(self, name: str) -> Any:
        """Analysis ``name`` as an Arrow table (what :meth:`table` converts), or one of
        the steps they are built from (:func:`~nsqviz.pipeline.definitions.steps`)."""
        if name not in definitions():
            raise KeyError(f"no table {name!r}; choose from {', '.join(tables())}")
        if name not in self._arrow_tables:  # computed when first asked for, each once
            if self._session is None:  # one DuckDB session: steps shared by tables
                from nsqviz.pipeline.on_duckdb import Session

                self._session = Session(self.arrow)
            self._arrow_tables[name] = self._session.table(name)
        return self._arrow_tables[name]

    @property
    def warnings(self) -> list[str]:
        """What the capture files said was wrong with them (a file that is not a capture,
        a damaged record): the records of no connection."""
        import pyarrow.compute as pc

        from nsqviz.arrays import string

        mine = self.arrow.filter(pc.and_(pc.is_null(self.arrow["conn_id"]),
                                         pc.equal(self.arrow["kind"], string("error"))))
        return [str(r) for r in mine["reason"].to_pylist()]

    @property
    def t0(self) -> float:
        """The time of the capture's first record (what relative times count from)."""
        import pyarrow.compute as pc

        first = pc.min(self.arrow["ts"]).as_py()
        return 0.0 if first is None else float(first)

    def where(self, name: str) -> Any:
        """The frames of record name ``name`` (``"RDY"``, ``"FrameTypeError"`` ...), as a
        DataFrame -- without converting the whole table."""
        import pyarrow.compute as pc

        return self.arrow.filter(pc.equal(self.arrow["name"], name)).to_pandas()

    def __getattr__(self, name: str) -> Any:
        """Analysis table ``name`` (``cap.connections``, ``cap.tubemq_messages`` ...)."""
        if name.startswith("_") or name not in tables():
            raise AttributeError(f"{type(self).__name__!r} has no attribute or table "
                                 f"{name!r}" + nearest_hint(name, tables()))
        return self.table(name)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *tables()})

    @property
    def protocols(self) -> tuple[str, ...]:
        """The protocols of the capture's connections, in registration order."""
        import pyarrow.compute as pc

        from nsqviz import protocols

        present = set(pc.unique(self.arrow["protocol"]).drop_null().to_pylist())
        return tuple(p.name for p in protocols.registered() if p.name in present)

    def diagnose(self, severity: str = "info") -> Any:
        """The doctor's findings (``nsqviz doctor``'s, from the same rules and words), most
        severe first, at ``severity`` or worse (``"error"``, ``"warning"``, ``"info"``), as
        a DataFrame: one row per finding with its ``rule``, ``severity``, ``summary``,
        ``explanation``, ``change`` and ``thresholds``; the ``connection`` (and every one
        its ``evidence`` names), the ``packets`` with their ``packet_files``, ``ts`` and
        ``end_ts``, the ``msg_ids``; the ``evidence`` items (time, file, packet,
        connection, message id, what each shows) and the ``figures`` (JSON)
        (:data:`nsqviz.doctor.rule.FINDING_COLUMNS`). A notebook shows it as the doctor's
        report (:class:`~nsqviz.analysis.findings.Findings`)."""
        import pyarrow.compute as pc

        from nsqviz.analysis.findings import Findings
        from nsqviz.doctor.rule import Severity
        from nsqviz.doctor.words import at_least, ordered

        try:
            level = Severity(severity)
        except ValueError:
            raise ValueError(f"severity {severity!r}: choose from "
                             f"{', '.join(s.value for s in Severity)}") from None
        rows = at_least(ordered(self.arrow_table("findings").to_pylist()), level)
        last = pc.max(self.arrow["ts"]).as_py()
        return Findings.of(rows, self.files, (self.t0, self.t0 if last is None else last))

    def filter(self, expression: str) -> Any:
        """The records a Wireshark display filter (:mod:`nsqviz.filters`, as ``nsqviz
        decode -Y``) selects, packet by packet as tshark does, as a DataFrame of their
        ``nsqviz decode --json`` objects -- e.g. ``cap.filter("nsq.msg.attempts > 1")``.
        The capture is decoded again for it (filters read the decoded records, not the
        frames table). A bad expression raises :class:`~nsqviz.filters.FilterError`."""
        import pandas as pd

        from nsqviz import filters
        from nsqviz.capture.decode import CaptureDecoder

        only = filters.compile(expression)
        decoder = CaptureDecoder()
        chosen = only.select(decoder.decode(self.files), lambda: decoder.first_ts)
        return pd.DataFrame([rec.as_json() for rec in chosen])

    def replay(self, upto: int | None = None) -> Any:
        """The replay view (:class:`~nsqviz.widgets.replay.ReplayView`) of the capture's
        first file, as of packet ``upto``."""
        from nsqviz.capture.replay import Replay
        from nsqviz.widgets.replay import ReplayView

        return ReplayView(Replay.load(self.files[0]), upto=upto)

    def lifecycle(self, msg_id: str) -> Any:
        """Message ``msg_id``'s publish, deliveries and answers on a time axis, with the
        timers that ran (:class:`~nsqviz.analysis.lifecycle.Lifecycle`)."""
        from nsqviz.analysis.lifecycle import Lifecycle

        rows = self.messages[self.messages.msg_id == msg_id]
        if rows.empty:
            raise KeyError(f"no message {msg_id!r} in the capture"
                           + nearest_hint(msg_id, self.messages.msg_id))
        return Lifecycle(rows.to_dict("records"), t0=self.t0)


def open_capture(*captures: str, idle_split: float | None = IDLE_SPLIT,
                 ports: Mapping[str, Iterable[int]] | None = None) -> Capture:
    """Decode ``captures`` (files, directories, globs: one capture set) into a
    :class:`Capture`."""
    return Capture(*captures, idle_split=idle_split, ports=ports)
