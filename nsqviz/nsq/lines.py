"""The framing NSQ's two text protocols share, client to server: a 4-byte magic once
(``"  V2"`` to nsqd, ``"  V1"`` to nsqlookupd), then ``VERB params\\n`` lines, some
followed by ``[4-byte size][size bytes]``.

A protocol's command framing subclasses :class:`MagicLineFraming` with its magic and
the code its server answers a wrong one with, and measures one whole line in
:meth:`~MagicLineFraming.measure_line` (which verbs carry a body, how their sizes are
judged); the magic, the line limit and the size prefix are read here once. (NSQ's own
framing is :mod:`nsqviz.nsq.framing`; nsqlookupd's, :mod:`nsqviz.lookupd.framing`.)
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from nsqviz.stream.reassembly import FramingError
from nsqviz.stream.sizes import INT32, SIZE_PREFIX

__all__ = ["MagicLineFraming"]


class MagicLineFraming(ABC):
    """The magic, then newline-ended command lines no longer than ``max_line``."""

    magic: bytes
    """The 4 bytes a client sends first."""
    bad_magic_code: str
    """The error code the server answers other first bytes with."""

    def __init__(self, *, expect_magic: bool, max_line: int):
        self.expect_magic = expect_magic
        self.max_line = max_line

    def measure(self, buf: bytes, pos: int) -> int | None:
        """The length of the magic or of the command at ``pos`` (the framing rule of
        :class:`~nsqviz.stream.reassembly.FramingRule`)."""
        if self.expect_magic:
            return self.measure_magic(buf, pos)
        nl = buf.find(b"\n", pos, pos + self.max_line + 1)
        if nl >= 0:
            return self.measure_line(buf, pos, nl)
        if len(buf) - pos > self.max_line:
            # The servers read lines with a bounded reader and drop a connection whose
            # line does not fit, without a word.
            raise FramingError(f"command line longer than {self.max_line} bytes")
        return None

    @abstractmethod
    def measure_line(self, buf: bytes, pos: int, nl: int) -> int | None:
        """The length of the command whose line is ``buf[pos:nl + 1]``: the line's, or
        with the size prefix and body its verb carries (``None`` until they came)."""

    def measure_magic(self, buf: bytes, pos: int) -> int | None:
        """4 once the magic is all there; raises as soon as the first bytes differ."""
        got = buf[pos : pos + 4]
        if not self.magic.startswith(got):
            raise FramingError(f"expected the magic {self.magic!r}, got {got!r}",
                               code=self.bad_magic_code)
        if len(got) < 4:
            return None
        self.expect_magic = False
        return 4

    @staticmethod
    def body_size(buf: bytes, nl: int) -> int | None:
        """The size prefix after the line ending at ``nl``; ``None`` until it came."""
        if len(buf) - (nl + 1) < SIZE_PREFIX:
            return None
        size: int = INT32.unpack_from(buf, nl + 1)[0]
        return size
