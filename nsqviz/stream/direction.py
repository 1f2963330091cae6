"""Which way bytes travel on a connection."""

from __future__ import annotations

import enum

__all__ = ["C2S", "Direction", "S2C"]


class Direction(enum.StrEnum):
    """Client to server, or server to client.

    A ``str`` enum: ``Direction.C2S == "c2s"``, so records, JSON and Parquet tables keep
    the short spelling they always had, and code reads ``Direction.C2S`` instead of a
    bare string.
    """

    C2S = "c2s"
    S2C = "s2c"


# The members as plain names, for the per-packet and per-frame paths: on Python 3.11 an
# enum member read off its class (``Direction.C2S``) goes through the metaclass's
# ``__getattr__`` hook, ten times the cost of reading a global.
C2S = Direction.C2S
S2C = Direction.S2C

