"""How ``make test`` deals the tests to its pytest-xdist workers (``-n``; tests/conftest.py
wires it in and says the rules a test follows to be safe there).

A *unit* is what one worker runs from start to end, in collection order. A test's unit
is its file -- so a module-scoped fixture (a JupyterLab server, a tshark run, a pair of
servers) is built once, and a notebook's nbval cells run in order on one kernel -- unless
the longest prefix of its path listed in :data:`UNITS` says otherwise:

* ``TOGETHER``: every test under the prefix, one unit (its conftest builds a session
  fixture too costly to build once per worker);
* ``EACH``: each test of the file alone (each is long enough to deserve a worker);
* ``FILE``: the file alone after all, inside a ``TOGETHER`` folder (it is long enough to
  be worth building the folder's fixture a second time).

The unit is worked out from the test's id alone, the same way on the workers and on the
controller that deals (xdist's own ``xdist_group`` marks travel in the ids, which pytest
9.2 no longer lets a plugin rewrite). The workers list the units holding Spark tests
first, then those holding browser tests, then other slow ones, and the controller deals
them in that order: a long unit begun last would leave the other workers idle at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

TOGETHER, EACH, FILE = "together", "each", "file"

UNITS = {
    # one local Spark session, and the pipeline runs cached on it
    "tests/pipeline/": TOGETHER,
    # a standalone cluster's three JVMs for two minutes: beside the rest, on a Spark
    # session of its own
    "tests/pipeline/test_cluster.py": FILE,
    # the website, built by Sphinx
    "tests/docs/": TOGETHER,
    # six real nsqd and six nsqviz broker processes
    "tests/differential/": TOGETHER,
    # minutes of a learner's reading per notebook
    "tests/explorer/test_browser_learner.py": EACH,
}

# The order units start in: those holding a test with the first of these marks first.
FIRST = ("spark", "browser", "slow")


def unit_of(nodeid: str) -> str:
    """The unit of the test with id ``nodeid`` (``path::name[params]``)."""
    path = nodeid.split("::", 1)[0]
    prefix = max((p for p in UNITS if path.startswith(p)), key=len, default=None)
    if prefix is None or UNITS[prefix] == FILE:
        return path
    return prefix if UNITS[prefix] == TOGETHER else nodeid


def longest_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` (stably) so the units holding :data:`FIRST` marks come first."""
    def rank(item: pytest.Item) -> int:
        return min((i for i, name in enumerate(FIRST) if item.get_closest_marker(name)),
                   default=len(FIRST))

    ranks: dict[str, int] = {}
    for item in items:
        unit = unit_of(item.nodeid)
        ranks[unit] = min(ranks.get(unit, len(FIRST)), rank(item))
    items.sort(key=lambda item: ranks[unit_of(item.nodeid)])


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scheduling by scope, with :func:`unit_of` as the scope and the units in the
    order the workers collected them (see :func:`longest_first`), not by size."""
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False
    return ByUnit(config, log)
