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

__all__ = ["CHANGE", "CLS", "ERROR", "FATAL", "FIN", "FRAMES", "MESSAGE", "NOT_IN_FLIGHT",
           "PUBLISHES", "RDY", "REQ", "SUB", "TOUCH", "WHY", "case", "seconds", "server_of",
           "text"]

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


_CHANGES = {
    ErrorCode.INVALID: "send only the protocol's commands, with their parameters, each in a "
                       "state that allows it (magic, IDENTIFY, SUB, then RDY; SUB once; RDY "
                       "within max_rdy_count; nothing but answers after CLS)",
    ErrorCode.BAD_PROTOCOL: "open the connection with the magic '  V2' (nsqlookupd's '  V1' "
                            "is for nsqlookupd)",
    ErrorCode.BAD_BODY: "send bodies of the size and form nsqd reads: IDENTIFY's JSON, "
                        "MPUB's message count and sizes, within --max-body-size",
    ErrorCode.BAD_TOPIC: "use topic names of [.a-zA-Z0-9_-], 1 to 64 characters (an "
                         "#ephemeral suffix allowed)",
    ErrorCode.BAD_CHANNEL: "use channel names of [.a-zA-Z0-9_-], 1 to 64 characters (an "
                           "#ephemeral suffix allowed)",
    ErrorCode.BAD_MESSAGE: "keep each message non-empty and within nsqd's --max-msg-size; do "
                           "not retry it as it is",
    ErrorCode.PUB_FAILED: "look at that nsqd's disk (--data-path) and log, and publish to "
                          "another nsqd meanwhile: it could not queue the message",
    ErrorCode.MPUB_FAILED: "look at that nsqd's disk (--data-path) and log, and publish to "
                           "another nsqd meanwhile: it could not queue the messages",
    ErrorCode.DPUB_FAILED: "look at that nsqd's disk (--data-path) and log, and publish to "
                           "another nsqd meanwhile: it could not queue the message",
    ErrorCode.AUTH_FIRST: "send AUTH after IDENTIFY when its answer says auth_required",
    ErrorCode.AUTH_FAILED: "check the secret AUTH sends and that nsqd reaches its "
                           "--auth-http-address",
    ErrorCode.AUTH_DISABLED: "send AUTH only when IDENTIFY's answer says auth_required",
    ErrorCode.UNAUTHORIZED: "grant this secret the topic and channel in the auth service",
    ErrorCode.IDENTIFY_FAILED: "ask IDENTIFY for one compression at most, and check the TLS "
                               "setup of client and nsqd",
    ErrorCode.SUB_FAILED: "subscribe to a channel that takes consumers (not one being "
                          "deleted or exiting)",
}
CHANGE = case("code", {code.value: words for code, words in _CHANGES.items()},
              "answer within msg_timeout, and only messages in flight on the connection")
"""SQL: what to change when nsqd answers error ``code``."""
