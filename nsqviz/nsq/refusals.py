"""What nsqd v1.3.0 answers to a command whose bytes the grammar refuses.

The grammar (and its fast path) says *what* is wrong -- the error class and the field
that failed, structurally -- and this module says what nsqd does about it: the
:class:`~nsqviz.nsq.errors.ErrorCode` and text it answers with, or that it accepts the
command as it is (extra parameters it never reads, a RDY without a count).
"""

from __future__ import annotations

from nsqviz.nsq.commands import BY_VERB, BodyKind
from nsqviz.nsq.errors import ErrorCode, go_quote, not_in_flight
from nsqviz.nsq.grammar_errors import BadJSON, BadMessageID, BadName, BadNumber, GrammarError
from nsqviz.nsq.lexer import split_line

__all__ = ["nsqd_answer"]

MESSAGES = BodyKind.MESSAGES


def nsqd_answer(data: bytes, nl: int, exc: GrammarError) -> tuple[ErrorCode | None, str]:
    """nsqd's answer to the command ``data`` (its line ends at ``nl``) that the grammar
    refused with ``exc``: ``(code, text)``, or ``(None, why)`` when nsqd accepts it."""
    tokens = [t for t, _ in split_line(data, 0, nl)]
    name = tokens[0].decode("ascii", "replace")
    params = tokens[1:]
    spec = BY_VERB.get(tokens[0])
    if spec is None:
        return ErrorCode.INVALID, f"invalid command {name}"
    missing = [p for p in spec.params[len(params):] if p.default is None]
    if missing:
        return ErrorCode.INVALID, f"{name} insufficient number of {spec.params_word}"
    if spec.verb == "AUTH" and params:
        return ErrorCode.INVALID, "AUTH invalid number of parameters"
    field = exc.field
    if isinstance(exc, BadName):
        token = params[[p.field for p in spec.params].index(field or "")]
        if field == "channel":
            return ErrorCode.BAD_CHANNEL, f"{name} channel name {go_quote(token)} is not valid"
        text = f"{name} topic name {go_quote(token)} is not valid"
        # nsqd v1.3.0's MPUB repeats the code inside its text.
        code = ErrorCode.BAD_TOPIC
        return code, f"{code} {text}" if spec.body is MESSAGES else text
    if isinstance(exc, BadNumber):
        param = next(p for p in spec.params if p.field == field)
        spelled = params[spec.params.index(param)].decode(errors="replace")
        return ErrorCode.INVALID, f"{name} could not parse {param.words} {spelled}"
    if isinstance(exc, BadMessageID):
        if len(params[0]) != 16:
            return ErrorCode.INVALID, "invalid message ID"
        # nsqd only checks the length; 16 bytes that are not hex are simply not in flight.
        return not_in_flight(name, params[0])
    if len(params) < spec.arity:  # only parameters nsqd has a default for are missing
        p = spec.params[len(params)]
        return None, f"{name} without its {p.words}: nsqd reads it as {p.default}"
    if field == "line":
        extra = len(params) - spec.arity
        return None, f"{name} takes {spec.arity} parameters, got {extra} more: nsqd ignores them"
    if isinstance(exc, BadJSON):
        return ErrorCode.BAD_BODY, "IDENTIFY failed to decode JSON body"
    if spec.body is BodyKind.MESSAGE:
        return ErrorCode.BAD_MESSAGE, f"{name} failed to read message body"
    if spec.body is BodyKind.MESSAGES:
        reason = exc.reason if exc.reason.startswith("MPUB") else f"MPUB {exc.reason}"
        # nsqd's readMPUB: faults of one message's size or bytes are E_BAD_MESSAGE; of the
        # count or the body as a whole, E_BAD_BODY.
        code = ErrorCode.BAD_MESSAGE if field == "message size" else ErrorCode.BAD_BODY
        return code, reason
    return ErrorCode.BAD_BODY, f"{name} {exc.reason}"
