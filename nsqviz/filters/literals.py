"""Reading a filter's literals as the field they are compared with, as Wireshark does.

An unquoted ``PUB``, ``4150``, ``0x1f``, ``FrameTypeError``, ``aa:bb:cc``, ``127.0.0.0/8``
or a quoted ``"PUB"`` means different things for a string, an integer with value names,
a byte string or an address field; :func:`literal` turns it into the value the field's
values compare with (``str``, ``bytes``, ``int``, ``float`` seconds, an IP network) or
raises :class:`~nsqviz.filters.syntax.FilterSyntaxError` at the literal's position.

Integers are checked as tshark 4.0 checks them, with its words: a minus sign stands
apart (tshark reads ``-5`` as minus five, so the size is checked, and an unsigned field
takes a negative number); more than 64 bits "causes an integer overflow" (a 5,000-digit
number too, without being converted), as does more than 63 for a signed 64-bit field;
past the field's own type it is "too big for this field, maximum M"; ``08`` and ``1.5``
are "not a valid number". A quoted string's bytes are taken as they are, valid UTF-8 or
not (as tshark does), and compared with the values as those are shown (an invalid byte
of a value is shown as U+FFFD).

**Regular expressions** (``matches``, ``~``) run on RE2 (the ``google-re2`` package),
whose matching time is linear in the text whatever the pattern, and whose compiled
program is bounded in memory (``max_mem``): ``(a+)+$`` on a long topic answers at once
where a backtracking engine runs for ever. Wireshark uses PCRE2, a backtracking engine,
and relies on its match limit; a limit would only turn the hang into a wrong "no
match". The price is PCRE's backtracking-only features -- back-references (``\\1``),
lookaround (``(?=``, ``(?<=``), atomic groups, repetitions over 1000 -- which RE2 refuses:
such a filter is an error naming the part of the pattern, where tshark accepts it.
Patterns and values are matched as bytes (RE2's Latin-1 mode), as Wireshark's PCRE2
matches them without its UTF mode: ``.`` is one byte, and case is folded for ASCII
letters (``matches`` is case-insensitive, Wireshark's default; ``(?-i)`` first makes it
case-sensitive).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import re2

from nsqviz.fields import Field, FieldType
from nsqviz.filters.syntax import FilterSyntaxError, Func, Quoted, Word

__all__ = ["literal", "pattern"]

_BYTES = re.compile(r"[0-9a-fA-F]{1,2}(?:[:.\-][0-9a-fA-F]{1,2})*")
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*")
_RANGE = {
    FieldType.UINT8: (0, 0xFF), FieldType.UINT16: (0, 0xFFFF),
    FieldType.UINT32: (0, 0xFFFF_FFFF), FieldType.FRAMENUM: (0, 0xFFFF_FFFF),
    FieldType.UINT64: (0, 2**64 - 1), FieldType.INT32: (-(2**31), 2**31 - 1),
    FieldType.INT64: (-(2**63), 2**63 - 1),
}
"""Each integer type's values (tshark checks the size of a literal against the top)."""

_SHOWN = 64
"""Characters of a literal an error quotes whole (a 5,000-digit number is not repeated)."""


def _text(lit: Word | Quoted) -> str:
    if isinstance(lit, Word):
        return lit.text
    return lit.value.decode("utf-8", errors="replace")


def _quote(text: str) -> str:
    """A literal as an error quotes it: tshark's double quotes, cut when long."""
    if len(text) > _SHOWN:
        text = f"{text[:_SHOWN]}... ({len(text)} characters)"
    return f'"{text}"'


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
    sign = -1 if text.startswith("-") else 1
    digits = text[1:] if sign < 0 else text
    if not _NUMBER.fullmatch(digits):
        if field.values is not None and not digits[:1].isdigit():
            raise _fail(lit, f"{text!r} cannot be found among the values of {field.abbrev}"
                             f" ({', '.join(field.values.values())})")
        raise _fail(lit, f"{_quote(digits)} is not a valid number")
    where = FilterSyntaxError("", lit.pos + (sign < 0), len(digits))
    value = _magnitude(digits, where)
    low, high = _RANGE.get(field.type, _RANGE[FieldType.UINT32])
    if low < 0 and value > high:  # a signed field: what fits strtoll, then the type
        if value > 2**63 - 1:
            raise _at(where, f"{_quote(digits)} causes an integer overflow")
        raise _at(where, f"{_quote(digits)} too big for this field, maximum {high}")
    if value > high:
        raise _at(where, f"{_quote(digits)} too big for this field, maximum {high}")
    return sign * value


def _magnitude(digits: str, where: FilterSyntaxError) -> int:
    """The value of an unsigned number as tshark reads one (``0x`` hex, ``0b`` binary,
    a leading 0 octal), refused past 64 bits before any long conversion."""
    base = {"x": 16, "b": 2}.get(digits[1:2].lower(), 8) if digits[:1] == "0" else 10
    body = (digits[2:] if base in (16, 2) else digits).lstrip("0")
    bits = {16: 4 * len(body), 2: len(body), 8: 3 * len(body), 10: 3.33 * len(body)}[base]
    if bits > 68 or (body and int(body, base) >= 2**64):
        raise _at(where, f"{_quote(digits)} causes an integer overflow")
    return int(body, base) if body else 0


def _at(where: FilterSyntaxError, message: str) -> FilterSyntaxError:
    return FilterSyntaxError(message, where.position, where.length)


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


def pattern(field: Field, lit: Word | Quoted | Func) -> Callable[[Any], bool]:
    """The test of ``matches``: does the regular expression occur in a value (see the
    module docstring: RE2, over bytes, case-insensitive unless ``(?-i)`` leads)."""
    if isinstance(lit, Func):
        raise FilterSyntaxError("matches takes a regular expression", lit.pos)
    raw = lit.value if isinstance(lit, Quoted) else lit.text.encode("utf-8")
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.log_errors = False  # the error is ours to say, in one line
    options.case_sensitive = raw.startswith(b"(?-i)")
    if options.case_sensitive:
        raw = raw[5:]
    try:
        rx = re2.compile(raw, options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(
            exc.args[0], bytes) else str(exc)
        part = reason.rpartition(": ")[2].encode("utf-8", "replace")
        found = raw.find(part) if part else -1
        at = lit.pos + (1 if isinstance(lit, Quoted) else 0) + max(found, 0)
        raise FilterSyntaxError(f"bad regular expression: {reason}", at,
                                len(part) if found >= 0 else 1) from None
    search = rx.search
    if field.type is FieldType.BYTES:
        return lambda value: search(value) is not None
    return lambda value: search(value.encode("utf-8", "surrogateescape")) is not None
