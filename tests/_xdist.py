"""How ``make test`` deals the tests to its pytest-xdist workers (``-n``; tests/conftest.py
wires it in and says the rules a test follows to be safe there).

A *unit* is what one worker runs from start to end, in collection order:

* the tests of a folder in :data:`TOGETHER`, whose conftest builds a session fixture too
  costly to build once per worker;
* each test of a file in :data:`APART` alone;
* otherwise the tests of one file -- so a module-scoped fixture (a JupyterLab server, a
  tshark run, a pair of servers) is built once, and a notebook's nbval cells run in order
  on one kernel.

The unit is worked out from the test's id alone, the same way on the workers and on the
controller that deals (xdist's own ``xdist_group`` marks travel in the ids, which pytest
9.2 no longer lets a plugin rewrite). The workers list the units holding Spark tests
first, then those holding browser tests, then other slow ones, and the controller deals
them in that order: a long unit begun last would leave the other workers idle at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

# folder -> the session fixture its tests share on one worker
TOGETHER = {
    "tests/pipeline/": "spark: one local Spark session, and the pipeline runs made on it",
    "tests/docs/": "site: the website, built by Sphinx",
    "tests/differential/": "server_pairs: six real nsqd and six nsqviz broker processes",
}

# files whose tests are long enough to be worth a worker each (and a fixture each)
APART = {
    "tests/explorer/test_browser_learner.py": "minutes of a learner's reading per notebook",
}

# The order units start in: those holding a test with the first of these marks first.
FIRST = ("spark", "browser", "slow")


def unit_of(nodeid: str) -> str:
    """The unit of the test with id ``nodeid`` (``path::name[params]``)."""
    path = nodeid.split("::", 1)[0]
    folder = next((f for f in TOGETHER if path.startswith(f)), None)
    if folder is not None:
        return folder
    return nodeid if path in APART else path


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
