"""Run a notebook's code in this process and compare the sessions it made, step by step.

:func:`run_sessions` executes a notebook's code cells top to bottom (as a fresh kernel
would, without the display) with :envvar:`NSQVIZ_NSQD` set to the server asked for, and
returns every :class:`~nsqviz.clients.session.Session` the notebook left in a variable.
:func:`steps` describes a session's steps without the server's own values, so the same
notebook run against the embedded broker and the real nsqd can be compared.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from nsqviz.clients.session import NSQD_CHOICE, Session
from nsqviz.nsq import events as ev
from nsqviz.nsq.labels import command_label
from tests.differential._replay import describe

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def run_sessions(name: str, server: str) -> dict[str, Session]:
    """The sessions notebook ``name`` makes when its broker is ``server``."""
    notebook = json.loads((NOTEBOOKS / name).read_text())
    before = os.environ.get(NSQD_CHOICE)
    os.environ[NSQD_CHOICE] = server
    namespace: dict = {"__name__": "__notebook__"}
    try:
        for index, cell in enumerate(notebook["cells"]):
            if cell["cell_type"] == "code":
                code = compile("".join(cell["source"]), f"{name}[{index}]", "exec")
                exec(code, namespace)  # noqa: S102 - the project's own notebook
    finally:
        if before is None:
            os.environ.pop(NSQD_CHOICE, None)
        else:
            os.environ[NSQD_CHOICE] = before
    return {k: v for k, v in namespace.items() if isinstance(v, Session)}


def _event(event) -> str:
    text = describe(event)
    if text is not None:
        return text
    if isinstance(event, ev.Violation):
        return f"violation {event.code} {event.text}"
    return type(event).__name__


def _ids(session: Session) -> list[bytes]:
    """Message ids in the order they first arrived (in a step or unasked)."""
    ids: list[bytes] = []
    for entry in session.entries:
        for event in entry.events:
            if isinstance(event, ev.Message) and event.id not in ids:
                ids.append(event.id)
    return ids


def steps(session: Session) -> list[str]:
    """One line per step: connection, command, refusal, frames and state change; message
    ids (the server's own) become ``<id N>``, N counting messages as they arrived."""
    ids = {mid.decode(): f"<id {n}>" for n, mid in enumerate(_ids(session))}
    out = []
    for step in session.steps():
        frames = ", ".join(_event(e) for e in step.events) or "no answer"
        refused = f" refused: {step.refused}" if step.refused else ""
        line = (f"{step.connection}: {command_label(step.command)}{refused} -> {frames}; "
                f"{step.before.get('state')} -> {step.after.get('state')}")
        for mid, mask in ids.items():
            line = line.replace(mid, mask)
        out.append(line)
    return out
