"""What a notebook learner needs told in words: why a step failed, and that a session ended.

A learner reads between cells, so timers run out and cleanup cells run before the next
experiment. Two things then surprise: nsqd's non-fatal ``E_FIN_FAILED``/``E_REQ_FAILED``/
``E_TOUCH_FAILED`` (the message's ``msg_timeout`` ran out while the learner read), and a
step on a session a cleanup cell already closed (a long ``ConnectionRefusedError``).
:func:`why_not_in_flight` explains the first from what the connection saw; a
:class:`SessionClosed` says the second in one line, naming the cell that made the session.
Both the NSQ and the TubeMQ stepping sessions use them.
"""

from __future__ import annotations

from typing import Any

from nsqviz.nsq import events as ev
from nsqviz.nsq.errors import ErrorCode

__all__ = ["SessionClosed", "cell_reference", "closed_message", "made_where",
           "why_not_in_flight"]

NOT_IN_FLIGHT = (ErrorCode.FIN_FAILED, ErrorCode.REQ_FAILED, ErrorCode.TOUCH_FAILED)
"""The errors nsqd sends for an id the connection no longer has in flight."""

DEFAULT_MSG_TIMEOUT_MS = 60_000
"""nsqd's ``--msg-timeout`` default (a server started with another one says so only if
IDENTIFY negotiates it)."""


class SessionClosed(RuntimeError):
    """A step asked of a session after its ``close()``.

    In IPython it shows as its one line (``_render_traceback_``), not as a traceback
    through the socket code: the learner needs to know what to run, not where it failed.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def made_where() -> str:
    """Where the caller is running, to name in a later :class:`SessionClosed`: inside
    IPython "cell [N] (it begins `first line`)", else "the code that made it".

    The cell is read from IPython's input history, which holds the running cell's source
    as its last entry before the cell's code runs: its index is the number the cell's
    prompt shows. (``execution_count`` is not: IPython 9 counts the next cell before
    this one runs, older versions after, so it named the wrong cell.) The first line
    names the cell even after the learner re-ran others and the numbers moved on.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return "the code that made it"
    history = getattr(getattr(get_ipython(), "history_manager", None), "input_hist_raw",
                      None)
    if not history:
        return "the code that made it"
    return cell_reference(len(history) - 1, history[-1])


def cell_reference(number: int, source: str) -> str:
    """"cell [number] (it begins `…`)": the cell by its prompt number and first line."""
    first = next((line.strip() for line in source.splitlines() if line.strip()), "")
    if len(first) > FIRST_LINE_WIDTH:
        first = first[:FIRST_LINE_WIDTH - 1] + "…"
    return f"cell [{number}] (it begins `{first}`)" if first else f"cell [{number}]"


FIRST_LINE_WIDTH = 60
"""A cell's first line is cut to this many characters: the message stays one line."""


def closed_message(what: str, made: str, *, how: str = "close") -> str:
    """The one line a :class:`SessionClosed` carries: ``what`` was ended by its ``how()``."""
    return f"this {what} is closed (its {how}() ran) — run {made} again to start a new one"


def why_not_in_flight(error: ev.Error, message_id: bytes, *, delivered_at: float | None,
                      now: float, features: dict[str, Any] | None, still_held: bool) -> str:
    """Why nsqd answered ``error`` (one of :data:`NOT_IN_FLIGHT`) to a command about
    ``message_id``: the connection's own record of the id -- when it was last delivered
    (session seconds), the ``msg_timeout`` IDENTIFY negotiated (if it did), and whether
    the client still held it (delivered, and neither FIN'd nor REQ'd by it) -- names the
    cause. Empty for other errors."""
    if error.code not in NOT_IN_FLIGHT:
        return ""
    if delivered_at is None:
        return "nsqd never delivered this id on this connection"
    if not still_held:
        return "this connection had already finished or requeued it"
    held_ms = (now - delivered_at) * 1000
    taken_back = "nsqd had taken the message back to deliver it again, with attempts + 1"
    timeout = (features or {}).get("msg_timeout")
    if not timeout:
        return (f"held for {held_ms:.0f} ms, past the server's msg_timeout (its "
                f"--msg-timeout: IDENTIFY negotiated none here): {taken_back}")
    if held_ms >= int(timeout):
        return f"its msg_timeout ({int(timeout) / 1000:g} s) ran out before this command: " \
            + taken_back
    return (f"held for {held_ms:.0f} ms, within msg_timeout ({int(timeout) / 1000:g} s), "
            f"yet nsqd no longer had it in flight for this connection")
