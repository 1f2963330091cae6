"""The NSQ V2 Lua dissector: tables and fields generated from :func:`nsq_spec`, followed
by the protocol engine ``nsq_engine.lua`` (framing, reassembly, state) that reads them.

The engine holds no command, parameter, layout, limit or error rule of its own; every
one of those comes from the tables written here, which come from the grammar.
"""

from __future__ import annotations

from nsqviz.wireshark.lua import ProtoFieldDecl, declare_fields, engine, literal
from nsqviz.wireshark.nsq_errors import error_table
from nsqviz.wireshark.nsq_spec import NsqSpec, nsq_spec

__all__ = ["PARAM_ABBREV", "field_decls", "render"]

_LAYOUT_TYPES = {"int32": "int32", "int64": "int64", "uint16": "uint16", "hexid": "string",
                 "bytes": "bytes"}


def _label(name: str) -> str:
    return name.replace("_", " ").capitalize()


def PARAM_ABBREV(name: str, kind: str) -> str:  # noqa: N802 - a naming rule, used as a table
    """The display-filter name of a command parameter: message ids live under
    ``nsq.msg`` (so ``nsq.msg.id == X`` finds a message and its FIN/REQ/TOUCH alike)."""
    return f"nsq.msg.{name}" if kind == "message_id" else f"nsq.{name}"


def field_decls(spec: NsqSpec) -> list[ProtoFieldDecl]:
    """Every field of the dissector, in tree order."""
    d = [
        ProtoFieldDecl("dir", "string", "nsq.dir", "Direction (c2s: client to nsqd, s2c: back)"),
        ProtoFieldDecl("magic", "string", "nsq.magic", "Magic"),
        ProtoFieldDecl("command", "string", "nsq.command", "Command"),
    ]
    for cmd in spec.commands:
        for p in cmd.params:
            typ = "uint64" if p.kind == "decimal" else "string"
            d.append(ProtoFieldDecl(f"param.{p.name}", typ, PARAM_ABBREV(p.name, p.kind),
                                    p.what[0].upper() + p.what[1:]))
    d += [
        ProtoFieldDecl("body_size", "int32", "nsq.body_size", "Body size"),
        ProtoFieldDecl("body", "bytes", "nsq.body", "Body"),
        ProtoFieldDecl("mpub.count", "int32", "nsq.mpub.count", "Number of messages"),
        ProtoFieldDecl("mpub.size", "int32", "nsq.mpub.size", "Message size"),
        ProtoFieldDecl("mpub.body", "bytes", "nsq.mpub.body", "Message body"),
    ]
    types = {v: k for k, v in spec.frame_types.items()}
    for f in spec.frame_header:
        values = types if f.name == "frame_type" else None
        d.append(ProtoFieldDecl(f"frame.{f.name}", _LAYOUT_TYPES[f.type], f"nsq.{f.name}",
                                _label(f.name), values=values))
    d += [
        ProtoFieldDecl("response", "bytes", "nsq.response", "Response data"),
        ProtoFieldDecl("response.text", "string", "nsq.response.text", "Response"),
        ProtoFieldDecl("error.code", "string", "nsq.error.code", "Error code"),
        ProtoFieldDecl("error.text", "string", "nsq.error.text", "Error text"),
    ]
    for f in spec.message:
        d.append(ProtoFieldDecl(f"msg.{f.name}", _LAYOUT_TYPES[f.type], f"nsq.msg.{f.name}",
                                f"Message {f.name.replace('_', ' ')}"))
    d += [
        ProtoFieldDecl("msg.time", "absolute_time", "nsq.msg.time", "Message time",
                       base="base.UTC"),
        ProtoFieldDecl("response_to", "framenum", "nsq.response_to", "Answers the command in"),
        ProtoFieldDecl("response_in", "framenum", "nsq.response_in", "Answered in"),
        ProtoFieldDecl("violation", "string", "nsq.violation", "Violation (nsqd's error code)"),
        ProtoFieldDecl("violation.text", "string", "nsq.violation.text", "Violation"),
        ProtoFieldDecl("violation.fatal", "bool", "nsq.violation.fatal", "Fatal"),
        ProtoFieldDecl("violation.kept", "bool", "nsq.violation.kept",
                       "Command kept (well framed; the violation is in its values)"),
        ProtoFieldDecl("skipped", "bytes", "nsq.skipped", "Skipped while resynchronising"),
        ProtoFieldDecl("skipped.reason", "string", "nsq.skipped.reason",
                       "Undecodable while resynchronising"),
        ProtoFieldDecl("cut", "bytes", "nsq.cut", "Cut short by the capture's snaplen"),
        ProtoFieldDecl("cut.captured", "uint32", "nsq.cut.captured", "Bytes captured"),
        ProtoFieldDecl("cut.length", "uint32", "nsq.cut.length", "Bytes sent"),
        ProtoFieldDecl("switch", "string", "nsq.switch",
                       "Stream switches to (after this frame, both directions)"),
        ProtoFieldDecl("switch.level", "uint16", "nsq.switch.level", "Deflate level"),
        ProtoFieldDecl("compressed", "string", "nsq.compressed", "Compression"),
        ProtoFieldDecl("compressed.data", "bytes", "nsq.compressed.data", "Compressed data"),
        ProtoFieldDecl("tls", "bytes", "nsq.tls", "TLS data (negotiated by IDENTIFY)"),
    ]
    return d


def _tables(spec: NsqSpec) -> str:
    commands = {
        c.verb: {
            "params": [{"name": p.name, "kind": p.kind, "what": p.what, "default": p.default}
                       for p in c.params],
            "body": c.body,
            "message": c.message,
            "answered": c.answered,
        }
        for c in spec.commands
    }
    verb_starts = "".join(sorted({c.verb[0] for c in spec.commands}))
    header = sum(f.size for f in spec.frame_header)
    tables = {
        "MAGIC": spec.magic,
        "COMMANDS": commands,
        "VERB_STARTS": verb_starts,
        "FRAME_TYPES": {v: k for k, v in spec.frame_types.items()},
        "FRAME_HEADER": [{"name": f.name, "type": f.type, "size": f.size}
                         for f in spec.frame_header],
        "FRAME_HEADER_SIZE": header,
        "MESSAGE": [{"name": f.name, "type": f.type, "size": f.size} for f in spec.message],
        "MESSAGE_FIXED": sum(f.size for f in spec.message),
        "LIMITS": {"max_line": spec.max_line, "max_body_size": spec.max_body_size,
                   "max_msg_size": spec.max_msg_size, "max_frame_size": spec.max_frame_size,
                   "name_max": spec.name_max},
        "NAME_SUFFIX": spec.name_suffix,
        "SERVER_PORTS": list(spec.server_ports),
        "HEARTBEAT": spec.heartbeat,
        "ERRORS": error_table(spec),
    }
    return "\n".join(f"local {name} = {literal(value)}" for name, value in tables.items())


def render(spec: NsqSpec | None = None) -> str:
    """The complete ``nsq.lua``."""
    spec = spec or nsq_spec()
    head = (
        "-- NSQ protocol V2 dissector for Wireshark >= 3.6 (Lua API).\n"
        "-- GENERATED by `nsqviz wireshark` from nsqviz's grammar and tables: do not edit;\n"
        "-- re-generate instead. Use: wireshark -X lua_script:nsq.lua, or copy it into\n"
        "-- Wireshark's personal Lua plugins folder (nsqviz wireshark --install).\n"
    )
    return "\n\n".join([
        head,
        "-- Tables (from nsqviz.nsq.grammar / framing / events; ERRORS probed from the"
        " codec)\n" + _tables(spec),
        'local nsq = Proto("nsq", "NSQ protocol V2")\n' + declare_fields(field_decls(spec)),
        engine("nsq_engine.lua"),
    ])
