"""What the pipeline's analysis tasks are dealt: groups of connections, each analysed
whole in one task, so that a task's memory is bounded by its share of the groups and not
by a broker's share of the capture.

A row of a view that runs in the tasks (:func:`nsqviz.pipeline.analyses.in_tasks`) is
about one connection (its frames, RDY, heartbeats, its end), or about one message or
channel of a topic (a message is published on one connection and delivered on others of
the same topic; a channel's consumers share its topic), or about one client of a server
(the doctor's reconnect churn, keyed by the client's id or address). So the
connections of one server host are linked when they name the same topic (the frames
table's ``topic`` and ``topics``), the same client id or consumer group (``client_id``,
``group_name``, the ``client_id`` of a JSON command such as NSQ's IDENTIFY), or come
from the same client address; a *group* is a set of connections linked directly or
through others (a connected component, :func:`components`), always within one host,
as the host was the unit before. Frames of no connection (capture warnings) are a
group of their own. A link too many only makes a group larger, never a table wrong;
a link missing would split what a view reads whole -- which
``tests/analysis/test_definitions.py`` checks on every sample, group by group.

The groups are dealt to as many tasks as it takes for each to hold at most
``frames_per_task`` frames (:func:`deal`): memory per task is bounded by that, or by the
largest group when one is larger -- one topic of one broker with its clients, where
before it was the whole broker.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from nsqviz.sql import HOST

__all__ = ["FRAMES_PER_TASK", "LINKS", "WHOLE_SERVER", "components", "deal"]

FRAMES_PER_TASK = 1_000_000
"""Frames one analysis task holds by default (about 300 bytes each in its Arrow table
without ``fields``, a few times that while DuckDB runs the views): the pipeline's
``frames_per_task`` option, ``spark.nsqviz.analyses.framesPerTask`` in Spark's settings."""

WHOLE_SERVER: dict[str, str] = {
    "message_sources": "one row per broker, its counts over all its connections",
    "server_ends": "one row per broker, its last record (where channel_depth ends)",
}
"""Views over a whole broker's frames that give a row or so per broker, with what each
is: they are computed before the tasks (:mod:`nsqviz.pipeline.tally`: as sums, counts,
minima and maxima of the frames, they add up from any parts of them), and each task is
handed the rows of those its views read -- a task has a part of a broker.
``tests/analysis/test_definitions.py`` finds any other view that would need it."""

_CLIENT_HOST = "regexp_extract(split_part(flow, '->', 1), '^(.*):[0-9]+$', 1)"

LINKS = f"""
SELECT conn_id, host, link, count(*) AS frames
FROM (SELECT conn_id, {HOST} AS host,
             explode(array(
               'address ' || {_CLIENT_HOST}, 'topic ' || topic,
               'client ' || client_id, 'group ' || group_name,
               CASE WHEN kind = 'command' AND data LIKE '{{%}}'
                    THEN 'client ' || get_json_object(data, '$.client_id') END)) AS link
      FROM frames WHERE conn_id IS NOT NULL
      UNION ALL
      SELECT conn_id, host, 'topic ' || t AS link
      FROM (SELECT conn_id, {HOST} AS host, explode(topics) AS t FROM frames
            WHERE conn_id IS NOT NULL AND topics IS NOT NULL) AS x) AS l
WHERE link IS NOT NULL
GROUP BY conn_id, host, link
UNION ALL
SELECT NULL AS conn_id, NULL AS host, NULL AS link, count(*) AS frames
FROM frames WHERE conn_id IS NULL
"""
"""The links of the connections, in one pass over the frames table (Spark SQL names):
one row per connection and what links it to others of its server's host, with the
frames that named it; every frame names its client address, so that row's ``frames``
are the connection's. A last row counts the frames of no connection. (``||``, not
``concat``: both engines give null when a part is null, where DuckDB's ``concat``
would skip it and link every connection without a topic to the others.)"""


def components(links: Iterable[tuple[str, str | None, str]]) -> dict[str, str]:
    """Each connection's group, from ``(conn_id, host, link)`` rows: connections of one
    host that share a link are in one group, named after its first connection in sort
    order (so the names do not depend on the order of the rows)."""
    parent: dict[tuple[str, ...], tuple[str, ...]] = {}

    def find(x: tuple[str, ...]) -> tuple[str, ...]:
        root = parent.setdefault(x, x)
        while root != parent[root]:
            root = parent[root]
        while x != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for conn, host, link in links:
        a, b = find(("conn", conn)), find(("link", host or "", link))
        if a != b:
            parent[a] = b
    named: dict[tuple[str, ...], str] = {}
    for node in sorted(n for n in parent if n[0] == "conn"):
        named.setdefault(find(node), node[1])
    return {node[1]: named[find(node)] for node in parent if node[0] == "conn"}


def deal(sizes: dict[str | None, int], frames_per_task: int, at_least: int
         ) -> tuple[int, dict[str | None, int]]:
    """How many tasks, and the task of each group, given each group's frames: as many
    tasks as it takes to keep each at about ``frames_per_task`` (and at least
    ``at_least``, the cores' worth, but no more than there are groups), the groups dealt
    largest first to the task with the fewest frames so far, so the tasks take about as
    long. A task then holds at most ``frames_per_task`` plus its largest group."""
    total = sum(sizes.values())
    n = max(1, min(len(sizes), max(at_least, math.ceil(total / max(1, frames_per_task)))))
    load = [0] * n
    dealt: dict[str | None, int] = {}
    for name, count in sorted(sizes.items(), key=lambda nc: (-nc[1], nc[0] or "")):
        k = min(range(n), key=load.__getitem__)
        load[k] += count
        dealt[name] = k
    return n, dealt
