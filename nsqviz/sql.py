"""The analyses' SQL: what a view definition is, what a protocol contributes to the
analyses, and the words of the frames table every definition shares.

An analysis is a :class:`View`: SQL over the frames table (:func:`nsqviz.records.
frame_schema`) or over other views, written once and run by both engines -- DuckDB
in-process and in the pipeline's Spark tasks (:mod:`nsqviz.pipeline.on_duckdb`), Spark
SQL for the views that combine brokers (:mod:`nsqviz.pipeline.analyses`). The SQL keeps
to what both understand (CTEs, window functions, ``FILTER`` clauses on aggregates) and
names functions as Spark does; :data:`nsqviz.pipeline.on_duckdb.DUCKDB_NAMES` renames
the few DuckDB spells differently. Every ordering names enough columns to be total, so
the tables do not depend on how an engine partitions the frames.

Who defines what (:mod:`nsqviz.pipeline.definitions` collects them):

* each protocol, in ``nsqviz/<name>/analyses.py``, its :class:`Analyses`: its views
  (NSQ's message lifecycle, TubeMQ's RPC pairs), which read only its own rows -- the
  view :func:`frames_of` names, ``frames`` of that protocol -- and its own views; and
  its hooks into the tables every protocol shares: its columns of ``connections``
  (:class:`ConnectionColumns`), which of its units are error answers, with what code
  (:class:`ErrorAnswers`), for ``errors``, the messages it publishes into a broker
  (:class:`Publishes`), for ``published``, and what its servers hold for a client over
  time (:class:`Held`), for ``held`` -- what waits when a client stops reading;
* the capture layer, in :mod:`nsqviz.capture.analyses`, the views that know no protocol:
  packets and the frames they carried (sticky packets), the pairing of every answer
  with the command its decoder says it answers (:data:`ANSWER_PAIRS`, which a
  protocol's views read too: each row is one connection's), and the shared tables
  ``connections``, ``errors``, ``problems`` and ``published``, built from the TCP-level
  facts and those hooks. A protocol's views may read a shared table built from hooks
  (:data:`SHARED`): a message's deliveries link to its publish whatever protocol
  carried the publish -- a broker may take messages on more than one port.

So adding a protocol's analyses is its ``analyses.py`` and the ``analyses`` attribute
of its :class:`~nsqviz.protocols.protocol.Protocol`; nothing else names it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from nsqviz.stream.direction import Direction

__all__ = [
    "ANSWER_PAIRS",
    "C2S",
    "CLOSED",
    "COMMAND",
    "FIRST_PACKET",
    "FLOW_END",
    "HELD",
    "HOST",
    "PROBLEMS",
    "PUBLISHED",
    "PUBLISHED_COLUMNS",
    "S2C",
    "SERVER",
    "SHARED",
    "UNITS",
    "Analyses",
    "ConnectionColumns",
    "ErrorAnswers",
    "Held",
    "Publishes",
    "View",
    "frames_of",
    "host",
    "python_rows",
    "quoted",
    "server",
]


@dataclass(frozen=True, slots=True)
class View:
    """One analysis: ``sql`` defines the view ``name`` (which later views may read);
    ``doc`` says what each row is. ``step``: computed for other views, not a table of its
    own. ``across_servers``: it combines brokers, so it reads other views only, never the
    frames (every other view reads one broker's frames at a time, which is what lets the
    pipeline analyse each broker apart). ``materialise``: an engine computes it once and
    keeps the rows (``False``: a filter other views read through, such as
    :func:`frames_of`).

    ``python``: for what SQL says badly (a fold over each connection's commands, such as
    the client guide's checks; a finding's words), ``"module:function"`` computes the
    view's rows in Python: the function takes the rows of ``sql`` (a ``pyarrow.Table``)
    and returns a ``pyarrow.Table`` whose schema does not depend on the rows (an empty
    one included). The engines run it where they run the SQL views -- in-process, and
    inside the pipeline's per-broker tasks -- so it is defined once like them
    (:func:`python_rows`). A view that combines brokers runs on Spark, which hands its
    function the rows batch by batch: such a function computes each row from its input
    row alone."""

    name: str
    sql: str
    doc: str = ""
    step: bool = False
    across_servers: bool = False
    materialise: bool = True
    python: str = ""


def python_rows(view: View, rows: Any) -> Any:
    """The rows of ``view`` (a :attr:`View.python` one) computed from ``rows``, the Arrow
    table its SQL gave."""
    return _function(view.python)(rows)


_FUNCTIONS: dict[str, Callable[[Any], Any]] = {}


def _function(spec: str) -> Callable[[Any], Any]:
    if spec not in _FUNCTIONS:
        module, _, name = spec.partition(":")
        _FUNCTIONS[spec] = getattr(importlib.import_module(module), name)
    return _FUNCTIONS[spec]


@dataclass(frozen=True, slots=True)
class ConnectionColumns:
    """A protocol's columns of the shared ``connections`` table: ``view`` (one of its
    views) has a row per connection of this protocol, keyed by ``conn_id``, with the
    ``columns`` named here. Each column is ``(name, default)``: ``default`` is the SQL
    value of a connection this protocol has no row for (another protocol's: ``0``
    messages, say), ``None`` for a null. Two protocols may give the same column (the
    IDENTIFY an NSQ client and an nsqd registering both send): a connection takes the
    value of its own protocol."""

    view: str
    columns: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class ErrorAnswers:
    """Which of a protocol's units are its server's error answers, for the shared
    ``errors`` table and each connection's error count: ``answer`` an SQL condition on a
    frames row of this protocol, ``code`` the answer's error code and ``text`` its
    words, each an SQL expression over that row. The command an answer answers is the
    one its decoder paired it with (the frames table's ``answers``), never guessed here;
    what the decoder itself found wrong is in ``problems``, not in ``errors``."""

    answer: str
    code: str
    text: str


PUBLISHED_COLUMNS = (
    "host", "broker", "topic", "ts", "command", "conn_id", "packet", "seq", "body_sha1",
)
"""The columns of a protocol's :class:`Publishes` view, one row per message body it
published: the broker's ``host`` (:func:`host` of the publish's server) and ``broker`` --
the address the broker delivers the message from (the server end of its consumers'
connections, ``ip:port``) when the publish says which, ``NULL`` when the protocol knows
only the host --, the ``topic``, when (``ts``), what published it in the protocol's words
(``command``: ``PUB``, ``MPUB``), on which connection (``conn_id``), its first
``packet`` and ``seq``, and the ``body_sha1`` deliveries carry too (the frames table's
``bodies``)."""


@dataclass(frozen=True, slots=True)
class Publishes:
    """A protocol's publishes of messages into a broker, for the shared ``published``
    table the message views link each message to its publish by: ``view`` (one of its
    views) has the :data:`PUBLISHED_COLUMNS`. A message published over one protocol may
    be delivered over another (published to one port of the broker's host, delivered
    from another): a publish links to a message of the same ``broker``, or, where it
    names none, of a broker on the same ``host``."""

    view: str


@dataclass(frozen=True, slots=True)
class Held:
    """What a protocol's server holds for its client over time, for the shared ``held``
    table the capture layer's rules read (what waited behind a client's zero window):
    ``view`` (one of its views) has a row per change on a connection, with ``conn_id``
    and ``ts``; ``held`` and ``allowed`` are SQL expressions over its rows -- how many
    units the server has sent the client and awaits an answer for, and how many the
    client allows (``NULL``: no such limit) -- and ``held_words``, ``allowed_words``
    name them in the protocol's words (NSQ: its messages in flight, and RDY)."""

    view: str
    held: str
    allowed: str
    held_words: str
    allowed_words: str


@dataclass(frozen=True, slots=True)
class Analyses:
    """What a protocol contributes to the analyses (see the module doc)."""

    views: tuple[View, ...] = ()
    connections: ConnectionColumns | None = None
    errors: ErrorAnswers | None = None
    publishes: Publishes | None = None
    held: Held | None = None


# -------------------------------------------------------- the words of the frames table


def frames_of(protocol: str) -> str:
    """The view of the frames table a protocol's views read: its own rows only."""
    return f"{protocol}_frames"


C2S, S2C = Direction.C2S.value, Direction.S2C.value
"""The ``dir`` of client-to-server and server-to-client rows."""

UNITS = "kind IN ('command', 'frame')"
"""A decoded command or frame (not an error, a gap, a flow's start or end)."""

COMMAND = "kind = 'command'"
"""A decoded command (client to server)."""

PROBLEMS = "(kind IN ('error', 'gap') OR violation IS NOT NULL)"
"""What the decoder found wrong, whatever the protocol (the ``problems`` table): bytes it
could not decode, bytes the capture lost (and how it found the next unit), and commands
the server refuses as they were sent (their ``violation``) -- not what a server said."""

FLOW_END = "name = 'FlowEnd'"
"""A row that ends a direction of a connection (``reason`` says how; ``size`` is the
direction's payload bytes)."""

CLOSED = "reason IN ('fin', 'rst')"
"""A flow end that closed the connection (a FIN or RST), not the end of the capture."""

FIRST_PACKET = "element_at(packets, 1)"
"""A row's packet number, as Wireshark numbers the frame's first packet in its file
(``packet_files`` names the file; in rotated files numbers restart with each file)."""


ANSWER_PAIRS = "answer_pairs"
"""The capture layer's view of each server answer paired with the command it answers,
as the protocol's decoder paired them (the frames table's ``answers``): the one pairing
every view reads -- a protocol's own views too (the only view outside its own they may
read: its rows are each one connection's answer and command)."""


def server(of: str = "") -> str:
    """A row's server (its flow's server end; ``of``: a table alias and dot)."""
    return f"split_part({of}flow, '->', 2)"


SERVER = server()
"""A record's server (its flow's server end): the key that keeps every connection and
every message whole."""


def host(address: str) -> str:
    """The host of an SQL ``ip:port`` expression (an IPv6 address stays in its brackets)."""
    return f"regexp_extract({address}, '^(.*):[0-9]+$', 1)"


HOST = host(SERVER)
"""A record's server's host: what the pipeline deals the frames to its tasks by, so that
every port of a broker -- where one message may be published on one and delivered on
another -- is in one task."""

PUBLISHED = "published"
"""The shared table of every protocol's publishes (:class:`Publishes`)."""

HELD = "held"
"""The shared table of what every protocol's servers hold for their clients over time
(:class:`Held`): ``conn_id``, ``ts``, ``held``, ``allowed`` and their words."""

SHARED = frozenset({PUBLISHED})
"""The shared tables built from the protocols' hooks that a protocol's own views may
read besides its own rows: each of their rows is still about one host's frames."""


def quoted(names: Iterable[str]) -> str:
    """Names from a protocol's tables as an SQL list of string literals: ``'FIN', 'REQ'``
    (so that no definition types a command's or frame's name by hand)."""
    out = []
    for name in names:
        if "'" in name:
            raise ValueError(f"{name!r} cannot be an SQL literal here")
        out.append(f"'{name}'")
    return ", ".join(out)
