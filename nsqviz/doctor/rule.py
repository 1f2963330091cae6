"""What a doctor rule is, what its findings are, and the SQL a rule is written with.

A rule's ``sql`` is a query over the analyses' tables (:mod:`nsqviz.sql`'s dialect: the
engines run it as they run the analyses) with one row per finding and the columns of
:data:`RULE_COLUMNS`:

* ``server`` -- the broker the finding is about (the server end of its connections;
  ``NULL`` for a finding about no one server);
* ``conn_id`` -- the connection (``NULL`` for a finding about several: a client's
  reconnections, a channel's backlog);
* ``ts`` -- when it starts (its first evidence);
* ``evidence`` -- what shows it, item by item in time order (:data:`EVIDENCE`): each a
  time, a packet (Wireshark's frame number in its own file, and that file), a
  connection, a message id, and ``what`` the packet shows in a few words -- the first
  :data:`EVIDENCE_LIMIT` items (the figures count them all);
* ``figures`` -- a JSON object of the numbers and names its words quote
  (:func:`figures`): counts, durations, ids, codes.

:func:`evidence` builds the evidence column from rows of ``(key..., ts, packet,
conn_id, msg_id, what)``, finding each packet's file. The engine adds ``rule`` and
``severity`` and joins every rule's rows into ``findings`` (:data:`FINDING_COLUMNS`).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from nsqviz.sql import View

__all__ = [
    "EVIDENCE",
    "EVIDENCE_LIMIT",
    "FINDING_COLUMNS",
    "FRAME_FILES",
    "RULE_COLUMNS",
    "Rule",
    "Severity",
    "Threshold",
    "evidence",
    "figures",
]


class Severity(enum.StrEnum):
    """How bad a finding is, most severe first."""

    ERROR = "error"
    """Messages lost, refused or handled twice, or a connection nsqd closed: something a
    user sees fail."""
    WARNING = "warning"
    """Something that slows or hurts the system and will bite: a consumer that falls
    behind, a handler slower than its timeout, a client that breaks the guide where it
    matters."""
    INFO = "info"
    """Worth knowing, not wrong in itself: a client-guide habit with no consequence here,
    nsqd's own timing."""

    @property
    def rank(self) -> int:
        """0 for the most severe: findings sort by it."""
        return list(Severity).index(self)


@dataclass(frozen=True, slots=True)
class Threshold:
    """A number a rule decides by: its constant's ``name``, ``value`` and ``unit``, and
    ``why`` it is that value. Findings state it where it decided them."""

    name: str
    value: float
    unit: str
    why: str

    def __str__(self) -> str:
        value = f"{self.value:g}" if isinstance(self.value, float) else str(self.value)
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.name} = {value}{unit}: {self.why}"


RULE_COLUMNS = ("server", "conn_id", "ts", "evidence", "figures")
"""The columns a rule's ``sql`` gives, one row per finding (see the module doc)."""

EVIDENCE = ("ts", "file", "packet", "conn_id", "msg_id", "what")
"""The fields of one evidence item, in the order items sort by (time first)."""

EVIDENCE_LIMIT = 24
"""The evidence items a finding keeps, the first in time: enough to open each packet in
Wireshark and see the pattern (a poison message's six deliveries and REQs, a starved
connection's first deliveries); the figures count every one."""

FRAME_FILES = "frame_files"
"""The step view that gives each packet of a frame its file (rotated files number their
packets anew: a packet is its file and its number)."""

FINDING_COLUMNS = (
    ("rule", "the rule's id: nsq.msg-timeout"),
    ("severity", "error, warning or info"),
    ("server", "the broker (the server end of its connections), or null"),
    ("conn_id", "the connection, or null for a finding about several"),
    ("ts", "when it starts: its first evidence"),
    ("evidence", "its evidence items in time order: ts, file, packet, conn_id, msg_id, what"),
    ("figures", "its figures, a JSON object"),
    ("connection", "the connection as client->server, or null"),
    ("connections", "every connection its evidence names, as client->server"),
    ("end_ts", "its last evidence"),
    ("packets", "the packets of its evidence, in time order, each once"),
    ("packet_files", "the file of each of packets"),
    ("msg_ids", "the message ids of its evidence, each once"),
    ("summary", "one line with the figures"),
    ("explanation", "what happened and why it matters"),
    ("change", "what to change"),
    ("thresholds", "each threshold that decided it, with its reason"),
)
"""The ``findings`` table, every rule's findings in one schema: the rule's columns
(:data:`RULE_COLUMNS`) with its id and severity, then what
:func:`nsqviz.doctor.words.worded` adds -- the same wherever it is computed."""

_ID = re.compile(r"^[a-z][a-z0-9]*\.[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of the doctor (see :mod:`nsqviz.doctor`).

    ``id`` is ``<protocol or layer>.<name>``, stable: the notebook report, the site and
    users' scripts name rules by it. ``sql`` gives its findings (:data:`RULE_COLUMNS`).
    ``summary``, ``explanation`` and ``change`` are :meth:`str.format` templates over
    each finding's figures and the rule's thresholds by name (``{timeouts}``,
    ``{POISON_ATTEMPTS}``, ``{waited_s:.3f}``), with two choices: ``{n:/message/messages}``
    (a count and its noun) and ``{?closed}...{/}`` (words kept only when the figure is
    true, non-zero, non-empty) -- :func:`nsqviz.doctor.words.word`. ``title`` says in one
    line what it detects.
    ``severity`` is its findings' severity, unless ``severity_sql`` -- an SQL
    expression over the rule's rows giving one of :class:`Severity` -- decides it per
    finding. ``across_servers``: it reads several brokers' rows (one client's
    connections to several nsqds), so it reads the analyses' views, never the frames.
    ``steps``: views of its own it reads (each broker's part of an ``across_servers``
    rule, with its evidence: a broker's frames are one task's).
    """

    id: str
    title: str
    severity: Severity
    sql: str
    summary: str
    explanation: str
    change: str
    thresholds: tuple[Threshold, ...] = ()
    severity_sql: str = ""
    across_servers: bool = False
    steps: tuple[View, ...] = ()

    def __post_init__(self) -> None:
        if not _ID.match(self.id):
            raise ValueError(f"rule id {self.id!r}: want <protocol or layer>.<name>, "
                             "lower case, words joined by -")

    @property
    def view(self) -> str:
        """The name of the view of its findings."""
        return "rule_" + re.sub(r"[^a-z0-9]", "_", self.id)

    @property
    def by_name(self) -> dict[str, float]:
        """Its thresholds by name, for its words."""
        return {t.name: t.value for t in self.thresholds}


def evidence(rows: str, key: tuple[str, ...]) -> str:
    """SQL: one row per ``key`` (columns of ``rows``) with its ``evidence`` (the first
    :data:`EVIDENCE_LIMIT` items, in time order) and ``first_ts``/``last_ts``, its first
    and last item's times. ``rows`` (a view or a CTE) has the key columns and ``ts``,
    ``packet``, ``conn_id``, ``msg_id`` and ``what``: each packet's file is found from
    its connection, number and time (:data:`FRAME_FILES`)."""
    keys = ", ".join(f"e.{k}" for k in key)
    return f"""SELECT {keys}, min(e.ts) AS first_ts, max(e.ts) AS last_ts,
       slice(sort_array(collect_list(struct(e.ts, f.file, e.packet, e.conn_id, e.msg_id,
                                            e.what))), 1, {EVIDENCE_LIMIT}) AS evidence
FROM (SELECT {", ".join(key)}, CAST(ts AS DOUBLE) AS ts, CAST(packet AS BIGINT) AS packet,
             CAST(conn_id AS STRING) AS conn_id, CAST(msg_id AS STRING) AS msg_id,
             CAST(what AS STRING) AS what
      FROM {rows}) AS e
LEFT JOIN {FRAME_FILES} AS f ON f.conn_id = e.conn_id AND f.packet = e.packet
  AND f.ts = e.ts
GROUP BY {keys}"""


def figures(*names: str) -> str:
    """SQL: the JSON object of the columns ``names`` (each a figure the words quote, by
    its column's name), as the ``figures`` column."""
    return f"CAST(to_json(struct({', '.join(names)})) AS STRING)"


FRAME_FILES_SQL = """
SELECT conn_id, ts, packet, min(file) AS file
FROM (SELECT conn_id, ts, element_at(packets, i) AS packet,
             element_at(packet_files, i) AS file
      FROM (SELECT conn_id, ts, packets, packet_files,
                   explode(sequence(1, size(packets))) AS i
            FROM frames WHERE conn_id IS NOT NULL AND size(packets) > 0) AS x) AS y
GROUP BY conn_id, ts, packet
"""
"""The :data:`FRAME_FILES` view: the file of each packet of a frame, by the frame's
connection and time and the packet's number (unique within a connection, even when
rotated files reuse numbers) -- so evidence may name any packet a frame came in, with
the frame's time."""
