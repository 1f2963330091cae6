"""What a protocol adds to ``nsqviz messages``, ``nsqviz connections`` and ``nsqviz stats``
(text and ``--json``), and the words those commands share.

The commands (:mod:`nsqviz.analysis.cli`) name no protocol. They print what every
capture has -- each connection's TCP life, the servers' error answers, nsqviz's problems
and how it ended; frames by name, errors and problems by code, sticky packets -- and ask
the :class:`Report` of each registered protocol present in the capture
(:attr:`nsqviz.protocols.protocol.Protocol.report`) for its part:

==================  ========================================================================
``messages``        :meth:`Report.messages`: one :class:`Message` per message -- the id
                    ``--id`` selects it by, its ``--json`` object -- and
                    :meth:`Report.render_message`, its text; each protocol's messages
                    follow the previous protocol's; :meth:`Report.unlisted` says why
                    messages are not listed, or not all
``connections``     :meth:`Report.connections`: a :class:`ConnectionPart` for each of its
                    connections -- the role, its ``--json`` keys (between ``role`` and
                    ``errors``), its text lines (between the header and the errors), and
                    what its errors call the server (``nsqd`` closed)
``stats``           :meth:`Report.stats`: its sections as JSON-ready data (top-level keys
                    of ``--json``, none another part has) and :meth:`Report.render_stats`,
                    their text after the sections every capture has
==================  ========================================================================

A report reads the capture's analyses through :class:`Tables` (an
:class:`nsqviz.analysis.capture.Capture` is one): its own tables, which its
``analyses.py`` defines, and the shared ``connections`` and ``errors``. ``nsqviz.open``'s
Capture needs nothing more from a protocol: every analysis table is an attribute of the
capture by its name. A protocol without a report prints nothing of its own: its
connections get the shared lines, with role ``other``.

The helpers below are the shared words: a cell as JSON (:func:`cell`), a packet number
(:func:`packet`), a time since the capture's first record (:func:`since`), latencies as
nearest-rank percentiles (:func:`percentiles`, :func:`percentile_line`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, Protocol

__all__ = [
    "PERCENTILES",
    "ConnectionPart",
    "Message",
    "Report",
    "Tables",
    "cell",
    "packet",
    "percentile_line",
    "percentiles",
    "since",
]

PERCENTILES = (50, 90, 99, 100)
"""The latency percentiles ``nsqviz stats`` gives (nearest rank over the values seen)."""


class Tables(Protocol):
    """What a report reads of a capture."""

    @property
    def t0(self) -> float:
        """The time of the capture's first record (what relative times count from)."""
        ...

    @property
    def arrow(self) -> Any:
        """The frames table (:func:`nsqviz.records.frame_schema`) as an Arrow table."""
        ...

    def table(self, name: str) -> Any:
        """Analysis ``name`` as a pandas DataFrame."""
        ...

    def arrow_table(self, name: str) -> Any:
        """Analysis ``name`` as an Arrow table (cheaper to walk row by row)."""
        ...

    def where(self, name: str) -> Any:
        """The frames of record name ``name``, as a DataFrame."""
        ...


class Message(NamedTuple):
    """One message of ``nsqviz messages``: ``id`` is what ``--id`` selects it by,
    ``json`` its ``--json`` object (what its text is rendered from)."""

    id: str
    json: dict[str, Any]


class ConnectionPart(NamedTuple):
    """A protocol's part of one connection in ``nsqviz connections``: its ``role`` (the
    header's and the JSON's), ``json`` keys (after ``role``, before ``errors``), text
    ``lines`` (after the header, before the errors; each ends with a newline), and
    ``server``, what its errors call the server: ``"; nsqd closed"`` in the text,
    ``"nsqd_closed"`` in the JSON."""

    role: str
    json: dict[str, Any]
    lines: list[str]
    server: str = "server"


class Report:
    """A protocol's part of ``nsqviz messages``, ``connections`` and ``stats`` (see the
    module doc). Every part is optional: each method gives nothing by default, and a
    protocol overrides those it has."""

    def messages(self, cap: Tables) -> Iterator[Message]:
        """Every message of the capture, in the order they are printed: one at a time
        (a big capture's messages are written as they come, never all held)."""
        return iter(())

    def render_message(self, message: dict[str, Any], t0: float) -> str:
        """One message's text (lines ending in a newline), from its JSON object."""
        return ""

    def unlisted(self, cap: Tables, listed: bool) -> str:
        """Why the capture's messages are not listed, or not all of them (``listed``:
        some are), in one sentence; ``""``: nothing to say."""
        return ""

    def connections(self, cap: Tables) -> dict[str, ConnectionPart]:
        """Its part of each of its connections, by ``conn_id``."""
        return {}

    def stats(self, cap: Tables) -> dict[str, Any]:
        """Its sections of ``nsqviz stats --json``."""
        return {}

    def render_stats(self, stats: dict[str, Any]) -> str:
        """The text of its sections (``stats``: the whole ``--json`` object, the keys
        :meth:`stats` gave among them)."""
        return ""


def cell(value: Any) -> Any:
    """A table's cell as JSON: NaN as null, numpy scalars and arrays as Python."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: cell(x) for k, x in value.items()}
    if isinstance(value, list):
        return [cell(x) for x in value]
    return value


def packet(number: Any) -> str:
    """A packet number as text (``?`` when unknown)."""
    number = cell(number)
    return "?" if number is None else str(int(number))


def since(ts: Any, t0: float) -> str:
    """A time as seconds since the capture's first record (``?`` when unknown)."""
    ts = cell(ts)
    return "?" if ts is None else f"+{ts - t0:.6f}s"


def percentiles(values: Iterable[float | None]) -> dict[str, Any]:
    """Count and nearest-rank :data:`PERCENTILES` of ``values`` (seconds) in ms."""
    v = sorted(x for x in values if x is not None and not math.isnan(x))
    out: dict[str, Any] = {"n": len(v)}
    for p in PERCENTILES:
        out[f"p{p}_ms"] = round(v[max(math.ceil(p / 100 * len(v)) - 1, 0)] * 1000, 3) \
            if v else None
    return out


def percentile_line(name: str, p: dict[str, Any]) -> str:
    """One line of ``nsqviz stats``: a latency's count and percentiles, or ``none``."""
    if not p["n"]:
        return f"  {name:<22} none\n"
    return f"  {name:<22} n={p['n']:<6} " + "  ".join(
        f"p{q}={p[f'p{q}_ms']}ms" for q in PERCENTILES) + "\n"
