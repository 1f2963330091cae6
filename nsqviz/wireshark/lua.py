"""Writing Lua source from Python data: literals and ``ProtoField`` declarations.

The dissector generators describe a protocol as plain Python values (tables of
commands, layouts, field declarations) and these helpers spell them in Lua, so that no
generator builds Lua by string concatenation of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["ProtoFieldDecl", "engine", "literal", "declare_fields"]

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


@dataclass(frozen=True, slots=True)
class ProtoFieldDecl:
    """One display-filter field: ``F[key] = ProtoField.<type>(abbrev, label, ...)``."""

    key: str
    type: str  # string, bytes, bool, uint16, int32, uint64, int64, framenum
    abbrev: str
    label: str
    values: dict[int, str] | None = None  # value_string for integer fields
    base: str | None = None  # base.DEC, base.HEX, ... for integers

    def lua(self) -> str:
        args = [literal(self.abbrev), literal(self.label)]
        if self.values is not None:
            args += [self.base or "base.DEC", literal(self.values)]
        elif self.base is not None:
            args.append(self.base)
        return f"F[{literal(self.key)}] = ProtoField.{self.type}({', '.join(args)})"


def declare_fields(decls: list[ProtoFieldDecl]) -> str:
    """The declarations of ``decls``, one line each (a repeated abbrev reuses the field
    declared first: Wireshark filters on the name, whatever the PDU)."""
    seen: dict[str, str] = {}
    lines = ["local F = {}"]
    for d in decls:
        if seen.get(d.abbrev) == d.key:
            continue
        if d.abbrev in seen:
            lines.append(f"F[{literal(d.key)}] = F[{literal(seen[d.abbrev])}]")
            continue
        seen[d.abbrev] = d.key
        lines.append(d.lua())
    return "\n".join(lines)


def engine(name: str) -> str:
    """The Lua engine ``name`` shipped next to this module, after the stream engine
    every dissector shares (``stream_engine.lua``: connections, TCP desegmentation,
    the Info column), which it drives with its own framing and dissection hooks."""
    folder = resources.files("nsqviz.wireshark")
    return "\n\n".join(folder.joinpath(part).read_text(encoding="utf-8")
                       for part in ("stream_engine.lua", name))
