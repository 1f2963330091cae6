"""Which files a capture set is: the capture files that files, directories and globs
name, in rotation order.

Kept apart from the readers so that the in-process analyses (``nsqviz messages``) and
the Spark pipeline name a set the same way, and the first need not load Spark to do so.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable

__all__ = ["Paths", "expand_paths", "rotation_order"]

_CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap")


Paths = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
"""Capture files named one way or several: files, directories, globs."""


def expand_paths(paths: Paths) -> list[str]:
    """Files named by ``paths`` (files, directories, globs), absolute, sorted, no repeats.

    Sorted by name, so ``capture.pcap``, ``capture.pcap1`` ... of ``tcpdump -C`` come in
    rotation order. A name that matches nothing is an error, not an empty result.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    out: list[str] = []
    for path in paths:
        p = os.fspath(path)
        if os.path.isdir(p):
            found = [
                os.path.join(p, n)
                for n in os.listdir(p)
                if _looks_like_capture(n) and os.path.isfile(os.path.join(p, n))
            ]
        elif os.path.exists(p):
            found = [p]
        else:
            found = [f for f in glob.glob(p) if os.path.isfile(f)]
            if not found:
                raise FileNotFoundError(f"no capture file matches {p!r}")
        out.extend(os.path.abspath(f) for f in sorted(found, key=rotation_order))
    return list(dict.fromkeys(out))


def rotation_order(name: str) -> list[tuple[int, int, str]]:
    """``cap.pcap9`` before ``cap.pcap10``: tcpdump -C numbers files without padding."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name)]


def _looks_like_capture(name: str) -> bool:
    stem, _, tail = name.rpartition(".")
    rotated = bool(stem) and tail.startswith("pcap") and tail[4:].isdigit()  # tcpdump -C
    return name.endswith(_CAPTURE_SUFFIXES) or rotated
