"""How ``make test`` deals the tests to its pytest-xdist workers (``-n``; tests/conftest.py
wires it in and says the rules a test follows to be safe there).

A *unit* is what one worker runs from start to end, in collection order. A test's unit
is its file -- so a module-scoped fixture (a JupyterLab server, a tshark run, a pair of
servers) is built once, and a notebook's nbval cells run in order on one kernel -- unless
the longest prefix of its path listed in :data:`UNITS` says otherwise:

* ``TOGETHER``: every test under the prefix, one unit (its conftest builds a session
  fixture too costly to build once per worker);
* ``EACH``: each test of the file alone (each is long enough to deserve a worker).

The unit is worked out from the test's id alone, the same way on the workers and on the
controller that deals (xdist's own ``xdist_group`` marks travel in the ids, which pytest
9.2 no longer lets a plugin rewrite).

The workers list the units longest first, and the controller deals them in that order:
a long unit begun last would leave the other workers idle at the end. First the units
of :data:`LONGEST`, then those holding a test marked ``browser``, ``spark`` or ``slow``,
then the rest in file order. The longest are one CPU-bound unit (Spark) and minutes of a
learner's reading in a browser, which leave the cores to it; every CPU-heavy start at
once (JVMs, Sphinx, JupyterLab servers, mypy) would make each of them slow.
"""

from __future__ import annotations

from typing import Any

import pytest

TOGETHER, EACH = "together", "each"

UNITS = {
    # one local Spark session, the pipeline runs cached on it, and a standalone cluster
    # (its JVMs would only take cores from the session's beside it)
    "tests/pipeline/": TOGETHER,
    # the website, built by Sphinx
    "tests/docs/": TOGETHER,
    # six real nsqd and six nsqviz broker processes
    "tests/differential/": TOGETHER,
    # minutes of a learner's reading per notebook
    "tests/explorer/test_browser_learner.py": EACH,
}

# The units that start first, longest first (seconds, one after another on a busy
# 2-core machine): the prefix of their unit.
LONGEST = (
    "tests/pipeline/",  # ~300: Spark
    "tests/explorer/test_browser_learner.py",  # 100-210 each: 3 s a cell, one 90-s pause
    "tests/differential/",  # ~90: twelve servers, then 600 probes
    "tests/explorer/test_browser_pace.py",  # ~85: a 70-s pause
    "tests/explorer/test_browser.py",  # ~70
)

# Then the units holding a test with one of these marks.
MARKS = ("browser", "spark", "slow")


def unit_of(nodeid: str) -> str:
    """The unit of the test with id ``nodeid`` (``path::name[params]``)."""
    path = nodeid.split("::", 1)[0]
    prefix = max((p for p in UNITS if path.startswith(p)), key=len, default=None)
    if prefix is None:
        return path
    return prefix if UNITS[prefix] == TOGETHER else nodeid


# pytest-timeout's limit for a test of a TOGETHER folder (pyproject.toml: 300 s for the
# others): whichever runs first also waits for the shared fixture to be built (a Spark
# session and two pipeline runs, the site, twelve servers), minutes on a busy machine.
TOGETHER_TIMEOUT = 600


def allow_for_shared_fixtures(items: list[pytest.Item]) -> None:
    """Give each test of a ``TOGETHER`` folder :data:`TOGETHER_TIMEOUT`, unless it says."""
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        shared = any(path.startswith(p) for p, kind in UNITS.items() if kind == TOGETHER)
        if shared and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TOGETHER_TIMEOUT))


def longest_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` (stably) into the order their units start in."""
    def rank(item: pytest.Item) -> int:
        unit = unit_of(item.nodeid)
        listed = [i for i, prefix in enumerate(LONGEST) if unit.startswith(prefix)]
        if listed:
            return listed[0]
        marked = any(item.get_closest_marker(name) for name in MARKS)
        return len(LONGEST) + (0 if marked else 1)

    ranks: dict[str, int] = {}
    for item in items:
        unit = unit_of(item.nodeid)
        ranks[unit] = min(ranks.get(unit, len(LONGEST) + 1), rank(item))
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
