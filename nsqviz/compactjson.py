"""JSON without spaces, the one compact encoding of nsqviz.

How its clients write IDENTIFY bodies and its servers their answers (Go's
``encoding/json``, which nsqd and nsqlookupd use, writes no spaces; it writes a map's
keys sorted, as nsqlookupd's IDENTIFY answer has them), and how records and their
outputs write fields. Each encoder is built once: :func:`json.dumps` with options builds
a new one per call.

:func:`line` is the bulk encoder (``nsqviz decode --json``, a JSON object for each of
millions of frames): orjson, chosen over msgspec and the standard library because

* it returns UTF-8 ``bytes``, which go to the output as they are (the standard library
  builds a ``str`` that is then encoded again, a copy of every body's hex);
* it encodes plain ``dict``/``list``/``str``/``int`` trees as fast as anything in Python
  (msgspec is about as fast, but its point is typed ``Struct`` schemas, which records'
  free-form fields do not have), and raises on what it cannot write exactly (an int
  past 64 bits, a lone surrogate) rather than writing it wrong;
* it is widely used and kept up, with binary wheels on PyPI for every platform and
  Python nsqviz supports (Linux glibc and musl, macOS, Windows; x86-64 and ARM), so
  installing nsqviz never compiles it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

__all__ = ["SEPARATORS", "dumps", "dumps_sorted", "encode", "line"]

SEPARATORS = (",", ":")
"""No space after a comma or a colon."""

dumps = json.JSONEncoder(separators=SEPARATORS).encode
"""``json.dumps(value, separators=(",", ":"))``: a value as compact JSON text."""

dumps_sorted = json.JSONEncoder(separators=SEPARATORS, sort_keys=True).encode
""":data:`dumps` with every object's keys sorted (as Go writes a map)."""


_NEWLINE = orjson.OPT_APPEND_NEWLINE


def encode(value: Any) -> bytes:
    """``value`` as compact JSON bytes, what goes on the wire."""
    return dumps(value).encode()


def line(value: Any) -> bytes:
    """``value`` as a line of compact JSON in UTF-8 (text as it is, not ``\\u``
    escapes), ended by its newline, by orjson (which writes the newline into the same
    buffer: appended after, it would copy the line again -- a body's hex, the bulk of
    ``decode --json``). What orjson refuses -- an int past 64 bits, a string with a
    lone surrogate, a key that is not a string -- goes through :data:`dumps` instead
    (which writes such a key as text and escapes every non-ASCII character), so no
    value is lost; NaN and infinities, which JSON cannot write, are ``null`` both ways."""
    try:
        return orjson.dumps(value, option=_NEWLINE)
    except TypeError:
        return dumps(_finite(value)).encode() + b"\n"


def _finite(value: Any) -> Any:
    """``value`` with every NaN and infinity (which :func:`json.dumps` writes as the
    non-JSON ``NaN``/``Infinity``) replaced by None, as orjson writes them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
