"""The stream compressions NSQ switches to after IDENTIFY: snappy's framed format as
Go's reader and writer handle it, and raw DEFLATE flushed after every write as nsqd's.
The decompressors hand out their output in pieces, so that a small compressed input
cannot make the codec hold a huge plain one at once."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import cramjam
import snappy

__all__ = [
    "INFLATE_PIECE",
    "SNAPPY_MAX_CHUNK",
    "SNAPPY_STREAM_IDENTIFIER",
    "Deflate",
    "Snappy",
    "compressor",
]

SNAPPY_STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"

SNAPPY_MAX_CHUNK = 76490 + 4
"""The longest chunk Go's snappy reader (nsqd's, go-nsq's) accepts: the worst-case
encoding of a 64 KiB block plus its 4-byte checksum. A longer one is refused at its
header (``ErrUnsupported``), so a connection holds at most one such chunk."""


class Snappy:
    """Snappy's framed stream format, as Go's ``snappy.NewBufferedWriter``/``NewReader``.

    Reading checks every chunk header as soon as its bytes arrive, as Go's reader does:
    the stream identifier first, no reserved chunk type, no chunk longer than
    :data:`SNAPPY_MAX_CHUNK`. Complete chunks are decompressed (checksums checked) by
    cramjam; an incomplete one waits, bounded by that limit.
    """

    name = "snappy"

    def __init__(self) -> None:
        self._out = snappy.StreamCompressor()
        self._held = bytearray()  # the start of a chunk not yet complete
        self._started = False  # the stream identifier was seen

    def compress(self, data: bytes) -> bytes:
        out: bytes = self._out.compress(data)  # python-snappy is untyped
        return out

    def decompress(self, data: bytes) -> Iterator[bytes]:
        """The data of the chunks ``data`` completes (checked as they arrive)."""
        buf = self._held
        buf += data
        pos, n = 0, len(buf)
        while pos < n:
            kind = buf[pos]
            if not self._started and kind != 0xFF:
                raise ValueError(f"chunk type 0x{kind:02x} where the stream identifier "
                                 "(0xff) must come first")
            if 0x02 <= kind <= 0x7F:
                raise ValueError(f"reserved unskippable chunk type 0x{kind:02x}")
            if n - pos < 4:
                break
            length = buf[pos + 1] | buf[pos + 2] << 8 | buf[pos + 3] << 16
            if length > SNAPPY_MAX_CHUNK:
                raise ValueError(f"chunk of {length} bytes is longer than the "
                                 f"{SNAPPY_MAX_CHUNK} a snappy chunk may have")
            if kind == 0xFF and length != 6 or kind <= 0x01 and length < 4:
                raise ValueError(f"chunk type 0x{kind:02x} cannot be {length} bytes long")
            self._started = True
            if n - pos < 4 + length:
                break
            pos += 4 + length
        if not pos:
            return
        complete = bytes(buf[:pos])
        del buf[:pos]
        if complete[0] != 0xFF:
            complete = SNAPPY_STREAM_IDENTIFIER + complete
        yield bytes(cramjam.snappy.decompress(complete))


INFLATE_PIECE = 256 * 1024
"""The most a deflate stream is inflated at a time before the framing reads it."""


class Deflate:
    """Raw DEFLATE (no zlib header), flushed after every write as nsqd's flate writer is."""

    name = "deflate"

    def __init__(self, level: int) -> None:
        self._out = zlib.compressobj(level, zlib.DEFLATED, -15)
        self._in = zlib.decompressobj(-15)

    def compress(self, data: bytes) -> bytes:
        return self._out.compress(data) + self._out.flush(zlib.Z_SYNC_FLUSH)

    def decompress(self, data: bytes) -> Iterator[bytes]:
        """The inflated bytes in pieces of at most :data:`INFLATE_PIECE`: a few bytes
        that inflate to gigabytes are framed (and refused) piece by piece, never held."""
        inflate = self._in
        piece = inflate.decompress(data, INFLATE_PIECE)
        while piece:
            yield piece
            piece = inflate.decompress(inflate.unconsumed_tail, INFLATE_PIECE)


def compressor(kind: str, level: int | None) -> Snappy | Deflate:
    if kind == "snappy":
        return Snappy()
    if kind == "deflate":
        return Deflate(level or 6)
    raise ValueError(f"unknown compression {kind!r}")
