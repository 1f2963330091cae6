"""Notebooks 02 and 04 against the embedded broker and against the real nsqd, step by step.

Each notebook's code runs twice in this process, once per server (``NSQVIZ_NSQD``), and
every session it leaves behind is compared step for step: the same commands, the same
frames (responses, errors with their codes and texts, messages), the same states before
and after. nsqd's own values are masked: message ids (``<id N>``), its version in the
IDENTIFY response. Timings are not compared; where they differ the notebook says so.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from tests.conftest import peer
from tests.differential._notebooks import run_sessions, steps


@pytest.mark.parametrize("notebook", ["02-live-session.ipynb", "05-feature-negotiation.ipynb"])
def test_notebook_sessions_step_like_the_real_nsqd(notebook):
    peer("nsqd")
    with contextlib.redirect_stdout(io.StringIO()):  # the notebook's prints
        embedded = run_sessions(notebook, "embedded")
        real = run_sessions(notebook, "real")
    assert set(embedded) == set(real) and embedded
    for name in embedded:
        assert embedded[name].server == "embedded broker"
        assert real[name].server == "real nsqd"
        ours, theirs = steps(embedded[name]), steps(real[name])
        assert ours == theirs, f"session {name!r} differs"
        assert ours  # a session with steps
