"""Which way bytes travel on a connection."""

from __future__ import annotations

import enum

__all__ = ["Direction"]


class Direction(enum.StrEnum):
    """Client to server, or server to client.

    A ``str`` enum: ``Direction.C2S == "c2s"``, so records, JSON and Parquet tables keep
    the short spelling they always had, and code reads ``Direction.C2S`` instead of a
    bare string.
    """

    C2S = "c2s"
    S2C = "s2c"

