"""Runs of frames and commands, decoded and encoded without a loop in Python.

Two streams are almost all one kind of unit: a busy consumer sends a FIN per message,
and a broker sends each consumer runs of messages that were published together. For
them :mod:`nsqviz.nsq.fastpath`'s one-unit-at-a-time work costs more than the rest of
the path, so here a whole run is checked and cut at once -- by strided slices, one
``translate``, ``struct`` formats repeated per unit, slice assignment into one list of
parts -- with the same checks and the same results: ``tests/nsq/test_codec_bulk.py``
holds the FIN runs to the frame-by-frame path, ``tests/nsq/test_fastpath.py`` the
message runs to :func:`~nsqviz.nsq.fastpath.encode_messages`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import deque
from collections.abc import Sequence
from itertools import repeat
from struct import Struct

from nsqviz.nsq.events import Fin
from nsqviz.nsq.grammar_errors import BadMessageID
from nsqviz.stream.reassembly import Garbage

__all__ = ["HEX_DIGITS", "check_ids", "decode_fins", "encode_message_run"]

HEX_DIGITS = b"0123456789abcdefABCDEF"
"""What a message id is made of (16 of them)."""

_FRAME_START = Struct(">ii")


_FIN_RUN = re.compile(rb"(?:FIN [0-9a-fA-F]{16}\n)+")
_FIN_SIZE = 21  # b"FIN " + 16 hex digits + b"\n"
_FINS_AT_ONCE = 256


def decode_fins(
    buf: bytes, items: list[int | Garbage], i: int, pos: int, out: list[Fin]
) -> tuple[int, int]:
    """Decode the run of ``FIN <id>\\n`` commands at ``items[i:]`` (command ends in
    ``buf``, the first starting at ``pos``) into ``out``; return the index and position
    of the first item it did not take. ``fastpath.decode_command``'s FIN for a whole
    run at once: the commands the framing cut 21 bytes apart are checked by strided
    slices (``FIN `` and the newline in place) and one ``translate`` (the ids hex), their
    ids cut by ``struct``."""
    if not buf.startswith(b"FIN ", pos):
        return i, pos
    k = _steps(items, i, pos, _FIN_SIZE)
    end = pos + _FIN_SIZE * k
    ids = _fin_ids(buf, pos, k)
    if not (buf[pos:end:_FIN_SIZE] == b"F" * k and buf[pos + 1 : end : _FIN_SIZE] == b"I" * k
            and buf[pos + 2 : end : _FIN_SIZE] == b"N" * k
            and buf[pos + 3 : end : _FIN_SIZE] == b" " * k
            and buf[pos + 20 : end : _FIN_SIZE] == b"\n" * k
            and not b"".join(ids).translate(None, HEX_DIGITS)):
        run = _FIN_RUN.match(buf, pos, end)  # only those before the first that is no FIN
        k = (run.end() - pos) // _FIN_SIZE if run is not None else 0
        end = pos + _FIN_SIZE * k
        ids = ids[:k]
    out += _fins(ids)
    return i + k, end


def _steps(items: list[int | Garbage], i: int, pos: int, size: int) -> int:
    """How many of ``items[i:]`` end ``size`` bytes after the one before (the first
    ``size`` after ``pos``): compared a block at a time, the blocks doubling, so a long
    run costs no loop in Python and a short one no long comparison."""
    k, block, n = 0, 8, len(items) - i
    while k < n:
        c = min(block, n - k)
        start = pos + size * k
        want = list(range(start + size, start + size * c + 1, size))
        got = items[i + k : i + k + c]
        if got != want:
            return k + next(j for j, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
        k += c
        block *= 2
    return k


def _fin_ids(buf: bytes, pos: int, k: int) -> list[bytes]:
    """The ids of ``k`` FIN commands from ``pos``: the 16 bytes after each ``FIN ``."""
    ids: list[bytes] = []
    while k > 0:
        c = min(k, _FINS_AT_ONCE)
        ids += _fin_ids_struct(c).unpack_from(buf, pos)
        pos += _FIN_SIZE * c
        k -= c
    return ids


@functools.cache
def _fin_ids_struct(n: int) -> Struct:
    return Struct("4x16sx" * n)


def _fins(ids: list[bytes]) -> list[Fin]:
    """``[Fin(i) for i in ids]`` without a Python call per event: the instances are made
    and their slots set as the frozen dataclass's ``__init__`` sets them, through its
    slot descriptors (``tests/nsq/test_fastpath.py`` holds the two to the same events).
    The ``__init__`` call was half the cost of a FIN in the broker."""
    fins = list(map(object.__new__, repeat(Fin, len(ids))))
    deque(map(_SET_FIN_ID, fins, ids), maxlen=0)
    deque(map(_SET_FIN_RAW, fins, repeat(None)), maxlen=0)
    return fins


if tuple(f.name for f in dataclasses.fields(Fin)) != ("id", "raw"):
    raise TypeError("runs._fins sets a Fin's id and raw: Fin has changed")
_SET_FIN_ID = Fin.__dict__["id"].__set__
_SET_FIN_RAW = Fin.__dict__["raw"].__set__


def encode_message_run(timestamp: int, attempts: int, ids: Sequence[bytes],
                       bodies: Sequence[bytes]) -> bytes:
    """``fastpath.encode_messages`` for messages that share their timestamp and attempts
    count (a broker's first delivery of part of a publish), from columns: no object per
    message, and no loop in Python (the frames' parts are laid out by slice assignment
    and joined once)."""
    k = len(ids)
    if len(bodies) != k:
        raise ValueError(f"{k} ids for {len(bodies)} bodies")
    check_ids(ids)
    parts = [_TIMESTAMP_ATTEMPTS.pack(timestamp, attempts)] * (4 * k)
    parts[0::4] = map(_FRAME_STARTS.__getitem__, map(len, bodies))
    parts[2::4] = ids
    parts[3::4] = bodies
    return b"".join(parts)


def check_ids(ids: Sequence[bytes]) -> None:
    """Every id 16 hex digits, checked for all at once: joined with a separator, only
    hex digits and separators, and the separators every 17th byte."""
    joined = b"-".join(ids)
    seps = b"-" * (len(ids) - 1)
    if (len(joined) == 17 * len(ids) - 1 and joined.translate(None, HEX_DIGITS) == seps
            and joined[16::17] == seps) or not ids:
        return
    bad = next(m for m in ids if len(m) != 16 or m.translate(None, HEX_DIGITS))
    raise BadMessageID(f"message id {bad!r} is not 16 hex digits")


class _FrameStarts(dict[int, bytes]):
    """A message frame's first 8 bytes (size, frame type 2) by body length, made once
    per length (a few thousand kept at most)."""

    def __missing__(self, length: int) -> bytes:
        if len(self) >= 4096:
            self.clear()
        start = self[length] = _FRAME_START.pack(30 + length, 2)
        return start


_FRAME_STARTS = _FrameStarts()
_TIMESTAMP_ATTEMPTS = Struct(">qH")
