"""Streaming readers for capture files: classic pcap and pcapng.

A capture can be many gigabytes, so nothing here loads a file whole: records are cut out
of a sliding read buffer and yielded one by one, and memory stays flat whatever the file
size. What comes out is link-layer frames (:class:`Record`) numbered from 1 in file
order, exactly as Wireshark numbers them, so a packet number printed by ``nsqviz
decode`` can be typed into Wireshark's "Go to packet".

A damaged file is data too: a record that runs past the end of the file, a block with an
impossible length, or an unknown format becomes a :class:`CaptureWarning` naming the
packet number, the file offset and the reason -- reading then continues where it can,
and stops where it cannot (a torn last record).

Formats (from the pcap and pcapng specifications, draft-ietf-opsawg-pcap and
draft-ietf-opsawg-pcapng):

* classic pcap: a 24-byte file header whose magic gives the byte order and the
  timestamp resolution (``a1b2c3d4``: microseconds, ``a1b23c4d``: nanoseconds), then
  records of ``[ts_sec][ts_frac][captured length][original length][data]``;
* pcapng: blocks of ``[type][total length][body][total length]``; a Section Header
  Block sets the byte order, Interface Description Blocks give each interface's link
  type and timestamp resolution (``if_tsresol``) and offset (``if_tsoffset``), and
  Enhanced / Simple / (obsolete) Packet Blocks carry the packets.
"""

from __future__ import annotations

import os
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from struct import Struct
from typing import BinaryIO, NamedTuple

__all__ = [
    "CaptureFormatError",
    "CaptureWarning",
    "PacketWarning",
    "Record",
    "read_capture",
    "read_records",
]

_READ_SIZE = 1 << 20

# A namedtuple's own __new__ is a Python-level function; tuple.__new__ builds the same
# object in C, which counts once per packet (the capture readers' hot loop).
_new_tuple = tuple.__new__


class CaptureFormatError(Exception):
    """The file is not a capture this module can read: ``offset`` is the byte offset in
    the file where reading failed, ``reason`` says why (the message has both)."""

    def __init__(self, offset: int, reason: str):
        super().__init__(f"offset {offset}: {reason}")
        self.offset = offset
        self.reason = reason


class Record(NamedTuple):
    """One captured link-layer frame.

    ``number`` is 1-based in file order (Wireshark's frame number); ``ts`` is seconds since
    the epoch; ``orig_len`` is the frame's length on the wire, which is more than
    ``len(data)`` when the capture's snaplen cut it.
    """

    number: int
    ts: float
    linktype: int
    data: bytes
    orig_len: int
    interface: int
    offset: int  # where the record (pcap) or block (pcapng) starts in the file


@dataclass(frozen=True, slots=True)
class CaptureWarning:
    """Something in the file that could not be read as it claims to be.

    ``number`` is the packet number the problem concerns (the next one, for a torn
    record), ``offset`` the byte offset in the file.
    """

    number: int
    offset: int
    reason: str


@dataclass(frozen=True, slots=True)
class PacketWarning(CaptureWarning):
    """A packet that the file holds soundly but that cannot be read as its link type
    says (an IP header cut short, an unsupported link type, a fragment): that packet is
    skipped, and the file is not damaged -- tshark, too, shows such a packet as
    malformed and reads on, with exit status 0 (see :func:`nsqviz.usage.damaged_input`
    for what a damaged file gets)."""


class _Buffer:
    """A sliding window over a binary file: ``need(n)`` makes ``n`` bytes available at ``pos``."""

    __slots__ = ("read", "buf", "pos", "base", "eof")

    def __init__(self, f: BinaryIO, head: bytes = b""):
        # ``read1`` returns what one read of the underlying file gives -- on a pipe, the
        # bytes already written -- where ``read(n)`` would wait for all ``n``: a record
        # is yielded as soon as its last byte is written (``tcpdump -U -w - | nsqviz
        # decode -``), and a regular file is still read a megabyte at a time.
        self.read = getattr(f, "read1", f.read)
        self.buf = head
        self.pos = 0
        self.base = 0  # file offset of buf[0]
        self.eof = False

    def need(self, n: int) -> bool:
        """True when ``n`` bytes are available from ``pos``; False at end of file."""
        if len(self.buf) - self.pos >= n:
            return True
        if self.eof:
            return False
        rest = self.buf[self.pos :]
        self.base += self.pos
        self.pos = 0
        parts = [rest]
        have = len(rest)
        while have < n:
            more = self.read(max(_READ_SIZE, n - have))
            if not more:
                self.eof = True
                break
            parts.append(more)
            have += len(more)
        self.buf = b"".join(parts)
        return have >= n

    @property
    def offset(self) -> int:
        return self.base + self.pos

    @property
    def remaining(self) -> int:
        """Bytes left in the buffer (after ``need`` failed: bytes left in the file)."""
        return len(self.buf) - self.pos


# ------------------------------------------------------------------------ classic pcap

PCAP_MAGIC_USEC = 0xA1B2C3D4
PCAP_MAGIC_NSEC = 0xA1B23C4D

_PCAP_HEADER = {e: Struct(e + "IHHiIII") for e in "<>"}  # magic ver_major ver_minor
# thiszone sigfigs snaplen linktype+fcs
_PCAP_RECORD = {e: Struct(e + "IIII") for e in "<>"}  # ts_sec ts_frac incl_len orig_len

_MAX_RECORD = 256 * 1024 * 1024  # no link type has frames this big: a corrupt length


def _read_pcap(buf: _Buffer, endian: str, nsec: bool,
               only: Container[int] | None = None) -> Iterator[Record | CaptureWarning]:
    snaplen, link = _pcap_snaplen_link(buf.buf, endian)
    buf.pos = 24
    rec = _PCAP_RECORD[endian]
    unpack = rec.unpack_from
    scale = 1e-9 if nsec else 1e-6
    limit = max(snaplen, 262144) if 0 < snaplen < _MAX_RECORD else _MAX_RECORD
    number = 0
    while True:
        if not buf.need(16):
            if buf.remaining:
                yield CaptureWarning(
                    number + 1,
                    buf.offset,
                    f"file ends inside a record header ({buf.remaining} of 16 bytes)",
                )
            return
        sec, frac, incl, orig = unpack(buf.buf, buf.pos)
        number += 1
        if incl > limit:
            yield CaptureWarning(
                number,
                buf.offset,
                f"record claims {incl} captured bytes, more than the snaplen {snaplen}:"
                " the file is corrupt from here on",
            )
            return
        start = buf.offset
        buf.pos += 16
        if not buf.need(incl):
            yield CaptureWarning(
                number,
                start,
                f"file ends inside the record: {buf.remaining} of {incl} captured bytes present",
            )
            return
        p = buf.pos
        buf.pos = p + incl
        if only is None or number in only:
            yield _new_tuple(Record, (number, sec + frac * scale, link, buf.buf[p : p + incl],
                                      orig, 0, start))


# ----------------------------------------------------------------------------- pcapng

SHB_TYPE = 0x0A0D0D0A
IDB_TYPE = 0x00000001
PB_TYPE = 0x00000002  # obsolete Packet Block
SPB_TYPE = 0x00000003
EPB_TYPE = 0x00000006
BYTE_ORDER_MAGIC = 0x1A2B3C4D

_BLOCK_HEAD = {e: Struct(e + "II") for e in "<>"}  # type total_length
_U32 = {e: Struct(e + "I") for e in "<>"}
_IDB_FIXED = {e: Struct(e + "HHI") for e in "<>"}  # linktype reserved snaplen
_EPB_FIXED = {e: Struct(e + "IIIII") for e in "<>"}  # if ts_hi ts_lo caplen origlen
_PB_FIXED = {e: Struct(e + "HHIIII") for e in "<>"}  # if drops ts_hi ts_lo caplen origlen
_OPT_HEAD = {e: Struct(e + "HH") for e in "<>"}  # code length
_I64 = {e: Struct(e + "q") for e in "<>"}

# the smallest total length of each block type: type, length, fixed fields, length
_MIN_TOTAL = {SHB_TYPE: 28, IDB_TYPE: 20, EPB_TYPE: 32, PB_TYPE: 32, SPB_TYPE: 16}
_BLOCK_NAME = {SHB_TYPE: "section header block", IDB_TYPE: "interface description block",
               EPB_TYPE: "enhanced packet block", PB_TYPE: "packet block",
               SPB_TYPE: "simple packet block"}

OPT_ENDOFOPT = 0
IF_TSRESOL = 9
IF_TSOFFSET = 14


class _Interface(NamedTuple):
    linktype: int
    snaplen: int
    units_per_second: int  # from if_tsresol; default 10**6
    offset: int  # if_tsoffset, seconds


def _parse_idb(body: bytes, endian: str) -> _Interface:
    link, _reserved, snaplen = _IDB_FIXED[endian].unpack_from(body, 0)
    units, offset = 10**6, 0
    pos, head = 8, _OPT_HEAD[endian]
    while pos + 4 <= len(body):
        code, length = head.unpack_from(body, pos)
        value = body[pos + 4 : pos + 4 + length]
        if code == OPT_ENDOFOPT or len(value) < length:
            break  # the end, or an option running past its block: none of it is used
        if code == IF_TSRESOL and length >= 1:
            r = value[0]
            units = 2 ** (r & 0x7F) if r & 0x80 else 10**r
        elif code == IF_TSOFFSET and length >= 8:
            offset = _I64[endian].unpack_from(value, 0)[0]
        pos += 4 + ((length + 3) & ~3)
    return _Interface(link, snaplen, units, offset)


def _read_pcapng(buf: _Buffer,
                 only: Container[int] | None = None) -> Iterator[Record | CaptureWarning]:
    endian = "<"
    interfaces: list[_Interface] = []
    number = 0
    while True:
        if not buf.need(8):
            if buf.remaining:
                yield CaptureWarning(
                    number + 1,
                    buf.offset,
                    f"file ends inside a block header ({buf.remaining} of 8 bytes)",
                )
            return
        start = buf.offset
        if _U32["<"].unpack_from(buf.buf, buf.pos)[0] == SHB_TYPE:
            # A new section: its byte-order magic decides how everything after it reads.
            if not buf.need(12):
                yield CaptureWarning(number + 1, start, "file ends inside a section header")
                return
            bom = buf.buf[buf.pos + 8 : buf.pos + 12]
            if bom == b"\x4d\x3c\x2b\x1a":
                endian = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                endian = ">"
            else:
                yield CaptureWarning(
                    number + 1, start, f"section header with bad byte-order magic {bom.hex()}"
                )
                return
            interfaces = []
        btype, total = _BLOCK_HEAD[endian].unpack_from(buf.buf, buf.pos)
        if total < 12 or total % 4 or total > _MAX_RECORD:
            yield CaptureWarning(
                number + 1,
                start,
                f"block type 0x{btype:08x} has an impossible length {total}:"
                " the file is corrupt from here on",
            )
            return
        if not buf.need(total):
            is_packet = btype in (EPB_TYPE, SPB_TYPE, PB_TYPE)
            yield CaptureWarning(
                number + 1 if is_packet else number,
                start,
                f"file ends inside a block of type 0x{btype:08x}:"
                f" {buf.remaining} of {total} bytes present",
            )
            return
        p = buf.pos
        buf.pos = p + total
        is_packet = btype in (EPB_TYPE, SPB_TYPE, PB_TYPE)
        if is_packet:
            number += 1
        if is_packet and only is not None and number not in only:
            continue
        if total < _MIN_TOTAL.get(btype, 12):
            # its fixed fields do not fit: skip it rather than read the next block's bytes
            yield CaptureWarning(
                number if is_packet else number + 1,
                start,
                f"{_BLOCK_NAME[btype]} of {total} bytes is shorter than its fixed fields"
                f" ({_MIN_TOTAL[btype]} bytes): skipped",
            )
            continue
        if btype == EPB_TYPE:
            iface, hi, lo, caplen, orig = _EPB_FIXED[endian].unpack_from(buf.buf, p + 8)
            if caplen > total - 32:
                yield CaptureWarning(
                    number, start, f"captured length {caplen} does not fit its block"
                )
                continue
            if iface >= len(interfaces):
                yield CaptureWarning(number, start, f"packet on undeclared interface {iface}")
                continue
            itf = interfaces[iface]
            ts = ((hi << 32) | lo) / itf.units_per_second + itf.offset
            yield Record(number, ts, itf.linktype, buf.buf[p + 28 : p + 28 + caplen], orig, iface,
                         start)
        elif btype == SPB_TYPE:
            if not interfaces:
                yield CaptureWarning(number, start, "simple packet block before any interface")
                continue
            (orig,) = _U32[endian].unpack_from(buf.buf, p + 8)
            itf = interfaces[0]
            caplen = min(orig, total - 16)
            if itf.snaplen:
                caplen = min(caplen, itf.snaplen)
            # An SPB has no timestamp: NaN says "unknown" rather than inventing one.
            data = buf.buf[p + 12 : p + 12 + caplen]
            yield Record(number, float("nan"), itf.linktype, data, orig, 0, start)
        elif btype == PB_TYPE:
            iface, _drops, hi, lo, caplen, orig = _PB_FIXED[endian].unpack_from(buf.buf, p + 8)
            if iface >= len(interfaces) or caplen > total - 32:
                yield CaptureWarning(number, start, "packet block does not fit its interface")
                continue
            itf = interfaces[iface]
            ts = ((hi << 32) | lo) / itf.units_per_second + itf.offset
            yield Record(number, ts, itf.linktype, buf.buf[p + 28 : p + 28 + caplen], orig, iface,
                         start)
        elif btype == IDB_TYPE:
            interfaces.append(_parse_idb(buf.buf[p + 8 : p + total - 4], endian))
        # Every other block (name resolution, statistics, secrets, custom) holds no packets.


# ----------------------------------------------------------------------------- opening


def _pcap_snaplen_link(head: bytes, endian: str) -> tuple[int, int]:
    header = _PCAP_HEADER[endian].unpack_from(head, 0)
    return header[5], header[6] & 0xFFFF  # bits 16..31 carry the FCS length


def _pcap_kind(head: bytes) -> tuple[str, bool] | None:
    """(byte order, nanosecond timestamps) of a classic pcap file header, else None."""
    for endian in "<>":
        magic = _U32[endian].unpack_from(head, 0)[0]
        if magic in (PCAP_MAGIC_USEC, PCAP_MAGIC_NSEC):
            return endian, magic == PCAP_MAGIC_NSEC
    return None


def read_capture(source: str | os.PathLike[str] | BinaryIO, *,
                 only: Container[int] | None = None) -> Iterator[Record | CaptureWarning]:
    """Yield the records of a pcap or pcapng file, and warnings where it is damaged.

    Raises :class:`CaptureFormatError` when the file is neither format. ``source`` is a
    path or an open binary file; a path is opened and closed here. ``only``: the packet
    numbers wanted -- every record is still walked (numbers are positions in the file),
    but only these are cut out and yielded, with warnings where the file is damaged
    (:func:`read_records` reads a few records of a classic pcap without the walk).
    """
    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as f:
            yield from read_capture(f, only=only)
        return
    head = source.read(24)
    buf = _Buffer(source, head)
    if len(head) >= 4:
        le = _U32["<"].unpack_from(head, 0)[0]
        if le == SHB_TYPE:
            yield from _read_pcapng(buf, only)
            return
        pcap = _pcap_kind(head)
        if pcap is not None:
            if len(head) < 24:
                raise CaptureFormatError(0, f"pcap file header is {len(head)} bytes, it needs 24")
            yield from _read_pcap(buf, *pcap, only)
            return
    raise CaptureFormatError(
        0, f"magic {head[:4].hex() or '(empty file)'} is neither pcap"
        " (a1b2c3d4 / a1b23c4d, either byte order) nor pcapng (0a0d0d0a)"
    )


def read_records(path: str | os.PathLike[str],
                 wanted: Iterable[tuple[int, int]]) -> Iterator[Record | CaptureWarning]:
    """The records ``(number, offset)`` names -- as :func:`read_capture` gave them
    (:attr:`Record.number`, :attr:`Record.offset`) -- in file order.

    A classic pcap is read only where they are: a few records of a large file cost a
    few reads, not a pass over it (the Spark pipeline's second stage reads the packets
    of the connections that cross file boundaries this way). A pcapng is walked, as its
    interfaces are declared along the way, and yields only those numbers.
    """
    pairs = sorted(wanted, key=lambda nv: nv[1])
    with open(path, "rb") as f:
        head = f.read(24)
        pcap = _pcap_kind(head) if len(head) == 24 else None
        if pcap is None:
            f.seek(0)
            yield from read_capture(f, only={n for n, _ in pairs})
            return
        endian, nsec = pcap
        link = _pcap_snaplen_link(head, endian)[1]
        scale = 1e-9 if nsec else 1e-6
        unpack = _PCAP_RECORD[endian].unpack
        for number, offset in pairs:
            f.seek(offset)
            header = f.read(16)
            if len(header) < 16:
                yield CaptureWarning(number, offset, "file ends inside a record header")
                return
            sec, frac, incl, orig = unpack(header)
            data = f.read(incl)
            if len(data) < incl:
                yield CaptureWarning(number, offset, "file ends inside the record")
                return
            yield Record(number, sec + frac * scale, link, data, orig, 0, offset)
