"""Writing Lua source from Python data: literals, ``ProtoField`` declarations of the
field registry's fields (:mod:`nsqviz.fields`), and a dissector's script put together
from the engines every dissector shares and its own.

The dissector generators (each protocol's, ``nsqviz/<name>/dissector/``) describe a
protocol as plain Python values (tables of commands, layouts, field declarations) and
these helpers spell them in Lua, so that no generator builds Lua by string
concatenation of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from nsqviz.fields import Field, FieldType

__all__ = ["SpecError", "declare_fields", "engine", "literal", "script"]


class SpecError(RuntimeError):
    """A protocol's tables or grammar have a shape its dissector generator does not know
    how to render (so a change cannot silently leave the dissector behind)."""

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def _string(value: str | bytes) -> str:
    raw = value.encode() if isinstance(value, str) else value
    out = []
    for b in raw:
        ch = chr(b)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0x20 <= b < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{b:03d}")
    return '"' + "".join(out) + '"'


def _key(key: Any) -> str:
    if isinstance(key, str) and key.isidentifier():
        return key
    return f"[{literal(key)}]"


def literal(value: Any, indent: int = 0) -> str:
    """``value`` (None, bool, int, str, bytes, list/tuple, dict) as a Lua expression."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str | bytes):
        return _string(value)
    pad = "  " * (indent + 1)
    end = "  " * indent
    if isinstance(value, list | tuple):
        if not value:
            return "{}"
        items = [literal(v, indent + 1) for v in value]
        if all("\n" not in i for i in items) and sum(len(i) for i in items) < 70:
            return "{" + ", ".join(items) + "}"
        return "{\n" + "".join(f"{pad}{i},\n" for i in items) + end + "}"
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{_key(k)} = {literal(v, indent + 1)}" for k, v in value.items()]
        if all("\n" not in i for i in items) and sum(len(i) for i in items) < 70:
            return "{" + ", ".join(items) + "}"
        return "{\n" + "".join(f"{pad}{i},\n" for i in items) + end + "}"
    raise TypeError(f"no Lua literal for {type(value).__name__}")


_BLURB_AT = {FieldType.STRING: 2, FieldType.BYTES: 2, FieldType.ABSOLUTE_TIME: 3,
             FieldType.RELATIVE_TIME: 2}
"""Where each ``ProtoField`` constructor takes its description (0-based argument; the
integer and boolean ones after base, value names and mask: 5). Wireshark 4.0 reads a
string field's description as its third argument, not after a display base."""


def _proto_field(key: str, field: Field) -> str:
    """``F[key] = ProtoField.<type>(abbrev, title, [base, [value names, mask,]] blurb)``:
    the arguments Wireshark's Lua API takes for the type, ``nil`` where not needed."""
    args = [literal(field.abbrev), literal(field.title)]
    base = f"base.{field.base}" if field.base else None
    if field.values is not None:
        args += [base or "base.DEC", literal(dict(field.values))]
    elif base is not None:
        args.append(base)
    if field.description:
        at = _BLURB_AT.get(field.type, 5)
        args += ["nil"] * (at - len(args))
        args.append(literal(field.description))
    return f"F[{literal(key)}] = ProtoField.{field.type.value}({', '.join(args)})"


def declare_fields(prefix: str, fields: Iterable[Field]) -> str:
    """The table ``F`` of a dissector's fields, one line each, from the field registry:
    ``F[key]`` for the field named ``<prefix>.<key>`` (the engines look fields up by
    key, so no name is written twice)."""
    lines = ["local F = {}"]
    for f in fields:
        if not f.abbrev.startswith(prefix + "."):
            raise ValueError(f"field {f.abbrev!r} is not under {prefix!r}")
        lines.append(_proto_field(f.abbrev[len(prefix) + 1:], f))
    return "\n".join(lines)


def engine(package: str, *shared: str) -> str:
    """The Lua engine of a protocol's dissector: ``engine.lua`` of its dissector package
    ``package``, after the stream engine every dissector shares (``stream_engine.lua``
    here: connections, TCP desegmentation, the Info column), which it drives with its
    own framing and dissection hooks, and after the ``shared`` pieces it reads that it
    has in common with other protocols, each ``"package:file"`` (NSQ's two line
    protocols share ``nsqviz.nsq.dissector:magic_lines.lua``)."""
    parts = [resources.files("nsqviz.wireshark").joinpath("stream_engine.lua")]
    for piece in shared:
        owner, _, name = piece.partition(":")
        parts.append(resources.files(owner).joinpath(name))
    parts.append(resources.files(package).joinpath("engine.lua"))
    return "\n\n".join(part.read_text(encoding="utf-8") for part in parts)


def script(head: str, tables: Mapping[str, Any], what: str, proto: str, engine_text: str
           ) -> str:
    """A whole dissector: ``head`` (a comment saying it is generated), the ``tables`` as
    ``local`` Lua values (from ``what``), the ``Proto`` and its fields (``proto``), then
    the engine that reads them."""
    body = "\n".join(f"local {name} = {literal(value)}" for name, value in tables.items())
    return "\n\n".join([head, f"-- Tables (from {what})\n{body}", proto, engine_text])
