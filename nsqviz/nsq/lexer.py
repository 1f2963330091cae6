"""The command-line lexer: how nsqd reads ``VERB param param\\n``.

nsqd reads a command up to ``\\n``, drops that ``\\n`` and then *one* ``\\r`` before it,
if there is one, and splits what is left on every single space (so two spaces make an
empty parameter). Framing, the fast path, the grammar and the mapping of refusals to
nsqd's answers all read a line through these functions, so they agree on where the
verb ends and what the parameters are.
"""

from __future__ import annotations

__all__ = ["line_end", "split_line", "verb_of"]


def line_end(buf: bytes, pos: int, nl: int) -> int:
    """Where the line ``buf[pos:nl]`` (``nl`` is its ``\\n``) ends once nsqd trimmed it:
    ``nl``, or ``nl - 1`` when a ``\\r`` precedes the ``\\n``."""
    return nl - 1 if nl > pos and buf[nl - 1] == 0x0D else nl


def verb_of(buf: bytes, pos: int, nl: int) -> bytes:
    """The verb of the line starting at ``pos`` whose ``\\n`` is at ``nl``."""
    end = line_end(buf, pos, nl)
    sp = buf.find(b" ", pos, end)
    return buf[pos : sp if sp >= 0 else end]


def split_line(buf: bytes, pos: int, nl: int) -> list[tuple[bytes, int]]:
    """The verb and parameters of the line at ``pos``, each with its offset in ``buf``."""
    end = line_end(buf, pos, nl)
    out = []
    start = pos
    while True:
        sp = buf.find(b" ", start, end)
        if sp < 0:
            out.append((buf[start:end], start))
            return out
        out.append((buf[start:sp], start))
        start = sp + 1
