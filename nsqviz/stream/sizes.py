"""The 4-byte big-endian signed integer every protocol here writes its sizes in: NSQ's
frame and body sizes, nsqlookupd's answer sizes, TubeMQ's serialNo, listSize and block
lengths, and the broker's disk queue records -- one :class:`struct.Struct` for all."""

from __future__ import annotations

from struct import Struct

__all__ = ["INT32", "SIZE_PREFIX"]

INT32 = Struct(">i")
"""A big-endian signed 32-bit integer (Go's ``int32`` with ``binary.BigEndian``, Java's
``int``)."""

SIZE_PREFIX = INT32.size
"""Bytes of a size prefix."""
