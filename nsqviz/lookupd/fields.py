"""nsqlookupd "  V1"'s display-filter fields (``lookupd.*``).

The one declaration of ``lookupd.command``, ``lookupd.topic``, ``lookupd.channel`` ...:
the filter engine evaluates them (:meth:`nsqviz.lookupd.protocol.LookupdProtocol.
filter_values` gives a record's values) and the Lua generator declares them as the
dissector's ``ProtoField`` s (its keys are the names without ``lookupd.``). The command
parameters are those of the grammar (:data:`nsqviz.lookupd.grammar.COMMANDS`).
"""

from __future__ import annotations

from construct import Renamed

from nsqviz.fields import Field, FieldType
from nsqviz.lookupd import grammar

__all__ = ["FIELDS", "PARAMS", "PREFIX"]

PREFIX = "lookupd"
"""The first word of every lookup field name (the dissector's ``Proto`` name)."""


def _params() -> tuple[str, ...]:
    """Every command parameter's name, in the grammar's order (``topic``, ``channel``)."""
    names: dict[str, None] = {}
    for con in grammar.COMMANDS.values():
        for sub in con.subcons:
            if isinstance(sub, Renamed) and sub.name and sub.name not in ("verb", "body"):
                names.setdefault(sub.name)
    return tuple(names)


PARAMS = _params()
"""The command parameters, each a string field ``lookupd.<name>``."""


def _f(suffix: str, type_: FieldType, title: str, description: str = "") -> Field:
    return Field(f"{PREFIX}.{suffix}", type_, title, description)


def _fields() -> tuple[Field, ...]:
    s = FieldType.STRING
    return (
        _f("dir", s, "Direction", "c2s: nsqd to nsqlookupd, s2c: back"),
        _f("magic", s, "Magic", "The 4 bytes \"  V1\" nsqd sends first"),
        _f("command", s, "Command", "The verb: IDENTIFY, REGISTER, UNREGISTER, PING"),
        *(_f(p, s, p.capitalize()) for p in PARAMS),
        _f("body_size", FieldType.INT32, "Body size"),
        _f("body", s, "IDENTIFY body", "nsqd's JSON: broadcast_address, tcp_port ..."),
        _f("size", FieldType.INT32, "Answer size"),
        _f("response", s, "Answer", "OK, or nsqlookupd's IDENTIFY JSON"),
        _f("error.code", s, "Error code"),
        _f("error.text", s, "Error text"),
        _f("response_to", FieldType.FRAMENUM, "Answers the command in"),
        _f("answers", s, "Answers the command", "The verb of the command an answer answers"),
        _f("violation", s, "Violation", "nsqlookupd's error code for a refused command"),
        _f("violation.text", s, "Violation text"),
        _f("skipped", FieldType.BYTES, "Skipped while resynchronising"),
    )


FIELDS: tuple[Field, ...] = _fields()
"""Every lookup field, in the dissector's tree order."""
