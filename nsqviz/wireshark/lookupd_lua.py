"""The nsqlookupd ``"  V1"`` Lua dissector: tables and fields generated from the lookup
protocol's grammar, codec and error table (:mod:`nsqviz.lookupd`), followed by the engine
``lookupd_engine.lua`` (framing, pairing, state) that reads them.

The engine holds no verb, parameter, limit, state or error text of its own; every one
of those comes from the tables written here.
"""

from __future__ import annotations

from typing import Any

from construct import Renamed

from nsqviz.lookupd import codec, grammar
from nsqviz.lookupd.observer import ANSWER_STARTS
from nsqviz.lookupd.protocol import ERROR, LOOKUPD, MAGIC, NAMES, RESPONSE
from nsqviz.wireshark.lua import ProtoFieldDecl, declare_fields, engine, literal
from nsqviz.wireshark.nsq_spec import nsq_spec

__all__ = ["field_decls", "render", "tables"]


class SpecError(RuntimeError):
    """The lookup tables changed in a way the Lua engine does not know yet."""


def _params(con: Any) -> list[dict[str, Any]]:
    """A command's parameters, in order: ``{name, optional}`` (a channel may be absent)."""
    out = []
    for sub in con.subcons:
        if isinstance(sub, Renamed) and sub.name not in ("verb", "body"):
            out.append({"name": sub.name, "optional": isinstance(sub.subcon, grammar.SpaceThen)})
    return out


def _texts(code: str) -> list[str]:
    return [t.strip() for t in grammar.ERRORS[code][1].split("|") if t.strip()]


def tables() -> dict[str, Any]:
    """Everything the engine reads, as plain values."""
    commands = {}
    for verb, con in grammar.COMMANDS.items():
        names = {s.name for s in con.subcons if isinstance(s, Renamed)}
        commands[verb] = {"params": _params(con), "body": "body" in names}
    if set(commands) != set(codec.COMMAND_EVENTS):
        raise SpecError("grammar.COMMANDS and codec.COMMAND_EVENTS name different verbs")
    states: dict[str, dict[str, dict[str, str]]] = {}
    for (state, event), nxt in codec.TRANSITIONS.items():
        if isinstance(nxt, str):
            code, _, text = nxt.partition(" ")
            after = {"code": code, "text": text}
        else:
            after = {"next": nxt.value}
        states.setdefault(state.value, {})[NAMES[event]] = after
    errors = {code: {"when": when, "texts": _texts(code)}
              for code, (when, _) in grammar.ERRORS.items()}
    invalid = errors["E_INVALID"]["texts"]
    if not (invalid[0] == "invalid command {verb}" and "insufficient" in invalid[2]
            and "{name}" in errors["E_BAD_TOPIC"]["texts"][0]
            and "{name}" in errors["E_BAD_CHANNEL"]["texts"][0]
            and "missing fields" in errors["E_BAD_BODY"]["texts"][3]):
        raise SpecError("the error texts changed: teach the engine")
    spec = nsq_spec()  # topic and channel names follow nsqd's rule
    return {
        "MAGIC": grammar.MAGIC_V1,
        "NAMES": {"magic": MAGIC, "response": RESPONSE, "error": ERROR},
        "COMMANDS": commands,
        "STATES": states,
        "INITIAL": codec.State.INIT.value,
        "ERRORS": errors,
        "ANSWER_STARTS": list(ANSWER_STARTS),
        "REQUIRED": list(grammar.IDENTIFY_REQUIRED),
        "LIMITS": {"max_line": codec.CommandFraming().max_line,
                   "max_body_size": codec.DEFAULT_MAX_BODY_SIZE,
                   "name_max": spec.name_max},
        "NAME_SUFFIX": spec.name_suffix,
        "SERVER_PORTS": sorted(LOOKUPD.server_ports),
    }


def field_decls() -> list[ProtoFieldDecl]:
    """Every field of the dissector, in tree order."""
    d = [
        ProtoFieldDecl("dir", "string", "lookupd.dir",
                       "Direction (c2s: nsqd to nsqlookupd, s2c: back)"),
        ProtoFieldDecl("magic", "string", "lookupd.magic", "Magic"),
        ProtoFieldDecl("command", "string", "lookupd.command", "Command"),
    ]
    for verb in grammar.COMMANDS.values():
        for p in _params(verb):
            d.append(ProtoFieldDecl(f"param.{p['name']}", "string", f"lookupd.{p['name']}",
                                    p["name"].capitalize()))
    d += [
        ProtoFieldDecl("body_size", "int32", "lookupd.body_size", "Body size"),
        ProtoFieldDecl("body", "string", "lookupd.body", "IDENTIFY body (JSON)"),
        ProtoFieldDecl("size", "int32", "lookupd.size", "Answer size"),
        ProtoFieldDecl("response", "string", "lookupd.response", "Answer"),
        ProtoFieldDecl("error.code", "string", "lookupd.error.code", "Error code"),
        ProtoFieldDecl("error.text", "string", "lookupd.error.text", "Error text"),
        ProtoFieldDecl("response_to", "framenum", "lookupd.response_to",
                       "Answers the command in"),
        ProtoFieldDecl("answers", "string", "lookupd.answers", "Answers the command"),
        ProtoFieldDecl("violation", "string", "lookupd.violation",
                       "Violation (nsqlookupd's error code)"),
        ProtoFieldDecl("violation.text", "string", "lookupd.violation.text", "Violation"),
        ProtoFieldDecl("skipped", "bytes", "lookupd.skipped", "Skipped while resynchronising"),
    ]
    return d


def render() -> str:
    """The complete ``lookupd.lua``."""
    head = (
        "-- nsqlookupd \"  V1\" protocol dissector for Wireshark >= 3.6 (Lua API).\n"
        "-- GENERATED by `nsqviz wireshark` from nsqviz's lookup grammar and tables: do not\n"
        "-- edit; re-generate instead. Use: wireshark -X lua_script:lookupd.lua, or copy it\n"
        "-- into Wireshark's personal Lua plugins folder (nsqviz wireshark --install).\n"
    )
    body = "\n".join(f"local {name} = {literal(value)}" for name, value in tables().items())
    return "\n\n".join([
        head,
        "-- Tables (from nsqviz.lookupd.grammar / codec / protocol)\n" + body,
        f'local lookupd = Proto("lookupd", {literal(LOOKUPD.title)})\n'
        + declare_fields(field_decls()),
        engine("lookupd_engine.lua"),
    ])
