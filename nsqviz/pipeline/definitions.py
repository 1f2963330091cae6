"""The analyses of every registered protocol and of the capture layer, collected for the
engines: DuckDB (:mod:`nsqviz.pipeline.on_duckdb`), in-process and inside the pipeline's
Spark tasks, and Spark SQL for the views that combine brokers
(:mod:`nsqviz.pipeline.analyses`). Tests hold the pipeline's tables, and every view run
on Spark SQL alone, to the in-process ones, so a view can move from one engine to the
other.

Nothing here defines an analysis or names a protocol (:mod:`nsqviz.sql` says who defines
what): each protocol's views come from its :attr:`~nsqviz.protocols.protocol.Protocol.analyses`,
each reading its own rows through a view of the frames table made here
(:func:`nsqviz.sql.frames_of`); the capture layer's (:mod:`nsqviz.capture.analyses`)
take every protocol's hooks into ``connections`` and ``errors``. The input is the view
``frames`` (:func:`nsqviz.records.frame_schema`); each definition becomes a view of its
name that later ones may read, in an order where each comes after what it reads.

Every view but those that combine brokers (:func:`across_servers`) reads one host's
frames at a time, and most of them one group of its connections
(:mod:`nsqviz.pipeline.groups`), so Spark runs them on groups apart, in parallel.

The doctor's rules (:mod:`nsqviz.doctor`) are collected here too -- the capture layer's
(:mod:`nsqviz.capture.rules`), then each protocol's (:attr:`~nsqviz.protocols.protocol.Protocol.
rules`) -- and become views after the analyses (:func:`nsqviz.doctor.views.views`): the
``findings`` table is one of :func:`tables`, on both engines.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from nsqviz import protocols
from nsqviz.capture import analyses as capture_analyses
from nsqviz.capture import rules as capture_rules
from nsqviz.doctor import views as doctor_views
from nsqviz.doctor import words
from nsqviz.doctor.rule import Rule
from nsqviz.protocols.protocol import Protocol
from nsqviz.sql import HOST, Analyses, View, frames_of

__all__ = [
    "HOST",
    "across_servers",
    "collect",
    "definitions",
    "reads",
    "rules",
    "steps",
    "tables",
    "views",
    "worded",
]


def collect(registered: tuple[Protocol, ...]) -> dict[str, View]:
    """Every view for these protocols, by name, each after the views it reads: each
    protocol's (with the view of its own frames), in registration order, then the
    capture layer's."""
    contributed: list[tuple[str, Analyses]] = []
    found: list[View] = []
    for proto in registered:
        mine = proto.analyses
        if mine == Analyses():
            continue
        contributed.append((proto.name, mine))
        if mine.views:
            found.append(View(frames_of(proto.name),
                              f"SELECT * FROM frames WHERE protocol = '{proto.name}'",
                              f"The frames table's {proto.title} rows.", step=True,
                              materialise=False))
            found.extend(mine.views)
    found.extend(capture_analyses.views(contributed))
    found.extend(doctor_views.views(_rules(registered).values(), f"{__name__}:worded"))
    by_name: dict[str, View] = {}
    for view in found:
        if view.name in by_name or view.name == "frames":
            raise ValueError(f"two analyses are called {view.name!r}")
        by_name[view.name] = view
    return _ordered(by_name)


def _ordered(by_name: dict[str, View]) -> dict[str, View]:
    """The views in their given order, moved after the views they read (a stable
    depth-first walk)."""
    out: dict[str, View] = {}
    visiting: set[str] = set()

    def place(name: str) -> None:
        if name in out:
            return
        if name in visiting:
            raise ValueError(f"analysis {name!r} reads itself through other views")
        visiting.add(name)
        for other in sorted(_reads(by_name, name) - {"frames"},
                            key=list(by_name).index):
            place(other)
        visiting.discard(name)
        out[name] = by_name[name]

    for name in by_name:
        place(name)
    return out


_READ = re.compile(r"\b(?:FROM|JOIN) (\w+)\b")
"""A name a query reads: the word after FROM or JOIN (one pass over the text, not a
search per view: a hundred views made ten thousand searches at every start-up)."""


def _reads(by_name: dict[str, View], name: str) -> set[str]:
    named = set(_READ.findall(by_name[name].sql))
    return {other for other in named if other != name
            and (other == "frames" or other in by_name)}


@cache
def _collected(registered: tuple[Protocol, ...]) -> dict[str, View]:
    return collect(registered)


@cache
def _rules(registered: tuple[Protocol, ...]) -> dict[str, Rule]:
    """The doctor's rules by id: the capture layer's, then each protocol's."""
    out: dict[str, Rule] = {}
    for rule in (*capture_rules.RULES, *(r for p in registered for r in p.rules)):
        if out.setdefault(rule.id, rule) is not rule:
            raise ValueError(f"two rules are called {rule.id!r}")
    return out


def rules() -> dict[str, Rule]:
    """Every rule of the doctor by id, in the order their findings are listed."""
    return _rules(protocols.registered())


def worded(rows: Any) -> Any:
    """The ``findings`` view's Python step: the rules' findings with their words
    (:func:`nsqviz.doctor.words.worded` over :func:`rules`)."""
    return words.worded(rows, rules())


def definitions() -> dict[str, View]:
    """Every view of the registered protocols and the capture layer (see :func:`collect`)."""
    return _collected(protocols.registered())


def views() -> dict[str, str]:
    """Every view's SQL by name, each after the views it reads: what the engines run."""
    return {name: view.sql for name, view in definitions().items()}


def steps() -> tuple[str, ...]:
    """Views that are steps of others, not tables of their own."""
    return tuple(name for name, view in definitions().items() if view.step)


def tables() -> tuple[str, ...]:
    """The analyses' tables (every view that is no step)."""
    return tuple(name for name, view in definitions().items() if not view.step)


def across_servers() -> tuple[str, ...]:
    """The views that combine brokers: they read the other views, never ``frames``.
    Every other view reads one host's frames at a time -- each row is about one
    connection or one message, and both belong to one host (:data:`HOST`): a connection
    to its server, a message to its broker and the publish it links to, made to that
    broker's port or to another port of its host -- so it gives the same
    rows whether it reads all frames at once (in-process) or each host's apart (the
    pipeline's Spark tasks), and these views then combine the hosts' rows."""
    return tuple(name for name, view in definitions().items() if view.across_servers)


def reads(name: str) -> set[str]:
    """What view ``name`` reads: ``frames`` and the other views it names after FROM or
    JOIN."""
    return set(_all_reads(protocols.registered())[name])


@cache
def _all_reads(registered: tuple[Protocol, ...]) -> dict[str, frozenset[str]]:
    """What each view reads, found once: every analysis asks it of every view it needs."""
    by_name = _collected(registered)
    return {name: frozenset(_reads(by_name, name)) for name in by_name}
