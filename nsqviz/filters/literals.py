"""Reading a filter's literals as the field they are compared with, as Wireshark does.

An unquoted ``PUB``, ``4150``, ``0x1f``, ``FrameTypeError``, ``aa:bb:cc``, ``127.0.0.0/8``
or a quoted ``"PUB"`` means different things for a string, an integer with value names,
a byte string or an address field; :func:`literal` turns it into the value the field's
values compare with (``str``, ``bytes``, ``int``, ``float`` seconds, an IP network) or
raises :class:`~nsqviz.filters.syntax.FilterSyntaxError` at the literal's position.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import UTC, datetime
from typing import Any

from nsqviz.fields import Field, FieldType
from nsqviz.filters.syntax import FilterSyntaxError, Func, Quoted, Word

__all__ = ["literal", "pattern"]

_BYTES = re.compile(r"[0-9a-fA-F]{1,2}(?:[:.\-][0-9a-fA-F]{1,2})*")
_INT = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def _text(lit: Word | Quoted) -> str:
    if isinstance(lit, Word):
        return lit.text
    return lit.value.decode("utf-8", errors="surrogateescape")


def _span(lit: Word | Quoted) -> int:
    return len(lit.text) if isinstance(lit, Word) else len(lit.value) + 2


def _fail(lit: Word | Quoted, why: str) -> FilterSyntaxError:
    return FilterSyntaxError(why, lit.pos, _span(lit))


def _integer(field: Field, lit: Word | Quoted) -> int:
    text = _text(lit)
    if field.values is not None:
        for number, name in field.values.items():
            if name == text:
                return number
    if isinstance(lit, Quoted):
        if field.values is not None:
            raise _fail(lit, f"{text!r} is not one of the values of {field.abbrev}"
                             f" ({', '.join(field.values.values())})")
        raise _fail(lit, f"{field.abbrev} is an integer: a string cannot be compared with it")
    if _INT.fullmatch(text):
        sign = -1 if text.startswith("-") else 1
        digits = text.lstrip("-")
        base = 16 if digits[:2].lower() == "0x" else 8 if len(digits) > 1 and digits[0] == "0" \
            else 10
        return sign * int(digits, base)
    if field.values is not None:
        raise _fail(lit, f"{text!r} cannot be found among the values of {field.abbrev}"
                         f" ({', '.join(field.values.values())})")
    raise _fail(lit, f"{text!r} is not an integer ({field.abbrev} is one)")


def _bool(field: Field, lit: Word | Quoted) -> bool:
    text = _text(lit).lower()
    if isinstance(lit, Word) and text in ("1", "true"):
        return True
    if isinstance(lit, Word) and text in ("0", "false"):
        return False
    raise _fail(lit, f"{_text(lit)!r} is not a boolean ({field.abbrev} is 1/True or 0/False)")


def _bytes(field: Field, lit: Word | Quoted) -> bytes:
    if isinstance(lit, Quoted):
        return lit.value
    if _BYTES.fullmatch(lit.text):
        return bytes(int(part, 16) for part in re.split(r"[:.\-]", lit.text))
    raise _fail(lit, f"{lit.text!r} is not a byte string (aa:bb:cc, or a quoted string)")


def _seconds(field: Field, lit: Word | Quoted) -> float:
    text = _text(lit)
    if field.type is FieldType.ABSOLUTE_TIME and isinstance(lit, Quoted):
        try:
            when = datetime.fromisoformat(text.removesuffix("Z").removesuffix(" UTC"))
        except ValueError:
            raise _fail(lit, f"{text!r} is not a time (YYYY-MM-DD HH:MM:SS[.f], UTC)")\
                from None
        return when.replace(tzinfo=when.tzinfo or UTC).timestamp()
    try:
        if isinstance(lit, Word):
            return float(text)
    except ValueError:
        pass
    raise _fail(lit, f"{text!r} is not a time in seconds ({field.abbrev} is one)")


def _address(field: Field, lit: Word | Quoted) -> Any:
    try:
        if isinstance(lit, Word):
            net = ipaddress.ip_network(lit.text, strict=False)
            if (net.version == 4) == (field.type is FieldType.IPV4):
                return net
    except ValueError:
        pass
    kind = "IPv4" if field.type is FieldType.IPV4 else "IPv6"
    raise _fail(lit, f"{_text(lit)!r} is not an {kind} address or network")


def literal(field: Field, lit: Word | Quoted | Func) -> Any:
    """The value ``lit`` stands for, compared with ``field``'s values."""
    if isinstance(lit, Func):
        raise FilterSyntaxError(f"{lit.name}() takes a field, not a value", lit.pos,
                                len(lit.name))
    t = field.type
    if t is FieldType.NONE:
        raise _fail(lit, f"{field.abbrev} is a flag: only its presence can be tested")
    if t is FieldType.STRING:
        return _text(lit)
    if t is FieldType.BYTES:
        return _bytes(field, lit)
    if t is FieldType.BOOL:
        return _bool(field, lit)
    if t.integer:
        return _integer(field, lit)
    if t in (FieldType.RELATIVE_TIME, FieldType.ABSOLUTE_TIME):
        return _seconds(field, lit)
    return _address(field, lit)


def pattern(field: Field, lit: Word | Quoted | Func) -> re.Pattern[Any]:
    """The regular expression of ``matches``: case-insensitive, as Wireshark's (a leading
    ``(?-i)`` makes it case-sensitive); over bytes for a byte field."""
    if isinstance(lit, Func):
        raise FilterSyntaxError("matches takes a regular expression", lit.pos)
    text = _text(lit)
    flags: int = re.IGNORECASE
    if text.startswith("(?-i)"):
        text, flags = text[5:], 0
    try:
        if field.type is FieldType.BYTES:
            return re.compile(text.encode("utf-8", errors="surrogateescape"), flags)
        return re.compile(text, flags)
    except re.error as exc:
        raise FilterSyntaxError(f"bad regular expression: {exc.msg}",
                                lit.pos + 1 + (exc.pos or 0)) from None
