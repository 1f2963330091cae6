"""The SQL words NSQ's doctor rules share (:mod:`nsqviz.nsq.rules`,
:mod:`nsqviz.nsq.rules_rdy`): names from NSQ's tables as SQL literals, error codes by
kind with nsqd's reason for each, and small expressions.
"""

from __future__ import annotations

from collections.abc import Mapping

from nsqviz.nsq import events as ev
from nsqviz.nsq.commands import BY_EVENT, COMMANDS, FRAME_NAMES, BodyKind
from nsqviz.nsq.errors import ErrorCode
from nsqviz.sql import frames_of, quoted

__all__ = ["CLS", "ERROR", "FATAL", "FIN", "FRAMES", "MESSAGE", "NOT_IN_FLIGHT", "PUBLISHES",
           "RDY", "REQ", "SUB", "TOUCH", "WHY", "case", "seconds", "server_of", "text"]

FRAMES = frames_of("nsq")
"""NSQ's rows of the frames table."""
_V = {cls: f"'{BY_EVENT[cls].verb}'" for cls in BY_EVENT}
FIN, REQ, TOUCH, RDY, SUB, CLS = (_V[c] for c in (ev.Fin, ev.Req, ev.Touch, ev.Rdy, ev.Sub,
                                                   ev.Cls))
MESSAGE, ERROR = f"'{FRAME_NAMES[ev.Message]}'", f"'{FRAME_NAMES[ev.Error]}'"
PUBLISHES = quoted(v for v, c in COMMANDS.items() if c.body in (BodyKind.MESSAGE,
                                                                 BodyKind.MESSAGES))
FATAL = quoted(code.value for code in ErrorCode if code.fatal)
NOT_IN_FLIGHT = quoted(code.value for code in ErrorCode if not code.fatal)


def text(words: str) -> str:
    """Words as an SQL string literal."""
    return "'" + words.replace("'", "''") + "'"


def case(column: str, words: Mapping[str, str], default: str = "") -> str:
    """SQL: the words for each value of ``column`` (from a table of the protocol's)."""
    arms = " ".join(f"WHEN {text(k)} THEN {text(v)}" for k, v in words.items())
    return f"CASE {column} {arms} ELSE {text(default)} END"


def server_of(conn_id: str) -> str:
    """SQL: the server of a connection id (``client->server@start``)."""
    return f"split_part(split_part({conn_id}, '->', 2), '@', 1)"


def seconds(expr: str) -> str:
    """Seconds as a figure: to the millisecond (the engines may add in another order)."""
    return f"round({expr}, 3)"


WHY = case("code", {code.value: code.why for code in ErrorCode})
"""SQL: why nsqd sends error ``code`` (:class:`~nsqviz.nsq.errors.ErrorCode`)."""
