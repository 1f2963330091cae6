"""Reading a JSON object from a peer: the one helper every decoder uses.

IDENTIFY bodies, IDENTIFY and AUTH answers, nsqlookupd's IDENTIFY answer, an auth
service's reply and a lookupd's HTTP answer all come from a peer that may be hostile.
Python's ``json`` module parses nesting recursively and raises ``RecursionError`` at
about 1,000 levels, while Go's ``encoding/json`` (nsqd's reader) accepts up to
:data:`MAX_DEPTH` levels and refuses deeper ones with ``exceeded max depth``. So a
document with few brackets goes to ``json.loads`` (fast, and always within Python's
stack), and any other one to an iterative reader with the same grammar as
``json.loads`` and Go's depth bound. Every failure is one :class:`BadJSON` whose reason
says where in the document (character position) and why; nothing else escapes.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # not in typeshed
from json.scanner import NUMBER_RE
from typing import Any

from nsqviz.nsq.grammar_errors import BadJSON

__all__ = ["MAX_DEPTH", "read_object"]

MAX_DEPTH = 10000
"""Go's ``encoding/json`` ``maxNestingDepth``: deeper nesting is refused."""

_RECURSIVE_SAFE = 256
"""At most this many ``[``/``{`` in a document: ``json.loads`` cannot run out of stack."""

_WS = re.compile(r"[ \t\n\r]*")
_CONSTANTS = {"null": None, "true": True, "false": False, "NaN": float("nan"),
              "Infinity": float("inf"), "-Infinity": float("-inf")}
_CONSTANT = re.compile("|".join(re.escape(k) for k in sorted(_CONSTANTS, key=len, reverse=True)))


class _Refused(ValueError):
    def __init__(self, reason: str, pos: int):
        super().__init__(reason)
        self.reason = reason
        self.pos = pos


def read_object(data: bytes) -> dict[str, Any]:
    """``data`` as a JSON object, read as ``json.loads`` reads bytes, nesting bounded as
    Go bounds it. Raises :class:`BadJSON` (no offset: the caller knows where ``data``
    starts) for anything else."""
    try:
        text = data.decode(json.detect_encoding(data), "surrogatepass")
        if text.startswith("\ufeff"):
            raise _Refused("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0)
        if data.count(b"[") + data.count(b"{") <= _RECURSIVE_SAFE:
            value = json.loads(text)
        else:
            value = _read_deep(text)
    except UnicodeDecodeError as exc:
        raise BadJSON(f"not JSON: not {exc.encoding} at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise BadJSON(f"not JSON: {exc.msg} at character {exc.pos}") from None
    except _Refused as exc:
        raise BadJSON(f"not JSON: {exc.reason} at character {exc.pos}") from None
    except ValueError as exc:  # int() past sys.get_int_max_str_digits()
        raise BadJSON(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadJSON(f"expected a JSON object, got {type(value).__name__}")
    return value


def _read_deep(s: str) -> Any:
    """The whole of ``s`` as one JSON value, without recursion: open containers are kept
    on a list of ``(container, key)``; deeper than :data:`MAX_DEPTH` is refused."""
    stack: list[tuple[dict[str, Any] | list[Any], str]] = []
    idx = _WS.match(s, 0).end()  # type: ignore[union-attr]  # matches the empty string
    while True:
        value, idx, opened = _scalar_or_open(s, idx, len(stack))
        if opened is not None:
            stack.append(opened)
            continue
        while True:  # attach the value; close every container that ends here
            if not stack:
                end = _WS.match(s, idx).end()  # type: ignore[union-attr]
                if end != len(s):
                    raise _Refused("Extra data", end)
                return value
            container, key = stack[-1]
            if isinstance(container, dict):
                container[key] = value
            else:
                container.append(value)
            idx = _WS.match(s, idx).end()  # type: ignore[union-attr]
            c = s[idx : idx + 1]
            if c == ",":
                idx = _WS.match(s, idx + 1).end()  # type: ignore[union-attr]
                if isinstance(container, dict):
                    key, idx = _key(s, idx, "Expecting property name enclosed in double quotes")
                    stack[-1] = (container, key)
                break
            if c != ("}" if isinstance(container, dict) else "]"):
                raise _Refused("Expecting ',' delimiter", idx)
            stack.pop()
            value, idx = container, idx + 1


def _scalar_or_open(s: str, idx: int, depth: int) -> tuple[Any, int, tuple[Any, str] | None]:
    """The value at ``idx``: a scalar or empty container (with the index after it), or a
    container just opened (third item) whose first value comes next."""
    c = s[idx : idx + 1]
    if c in ("{", "["):
        if depth + 1 > MAX_DEPTH:
            raise _Refused(f"exceeded max depth {MAX_DEPTH}", idx)
        after = _WS.match(s, idx + 1).end()  # type: ignore[union-attr]
        if c == "[":
            if s[after : after + 1] == "]":
                return [], after + 1, None
            return None, after, ([], "")
        if s[after : after + 1] == "}":
            return {}, after + 1, None
        key, after = _key(s, after, "Expecting property name enclosed in double quotes")
        return None, after, ({}, key)
    if c == '"':
        text, end = scanstring(s, idx + 1, True)
        return text, end, None
    m = NUMBER_RE.match(s, idx)
    if m is not None:
        integer, frac, exp = m.groups()
        number = float(integer + (frac or "") + (exp or "")) if frac or exp else int(integer)
        return number, m.end(), None
    m = _CONSTANT.match(s, idx)
    if m is not None:
        return _CONSTANTS[m.group()], m.end(), None
    raise _Refused("Expecting value", idx)


def _key(s: str, idx: int, expecting: str) -> tuple[str, int]:
    """``"name"`` and the ``:`` after it; returns the name and the index of its value."""
    if s[idx : idx + 1] != '"':
        raise _Refused(expecting, idx)
    key, idx = scanstring(s, idx + 1, True)
    idx = _WS.match(s, idx).end()  # type: ignore[union-attr]
    if s[idx : idx + 1] != ":":
        raise _Refused("Expecting ':' delimiter", idx)
    return key, _WS.match(s, idx + 1).end()  # type: ignore[union-attr]
