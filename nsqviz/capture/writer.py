"""Writing captures: pcap/pcapng files holding synthetic TCP conversations.

Two users: the session explorer saves what it sent and received as a pcap that Wireshark
opens, and the tests and benchmark synthesise captures whose ground truth is known
(reordered, duplicated, overlapping, missing segments). So a :class:`TcpConversation`
does the TCP bookkeeping -- handshake, sequence and acknowledgement numbers, FIN -- and
also lets a caller write any segment by hand.

Packets are built for any of the link types :mod:`nsqviz.capture.layers` reads, over
IPv4 or IPv6 (chosen by the address), with correct IPv4 header and TCP checksums.
"""

from __future__ import annotations

import ipaddress
import os
from array import array
from struct import Struct
from typing import BinaryIO, Protocol, Self

from nsqviz.capture.files import (
    BYTE_ORDER_MAGIC,
    EPB_TYPE,
    IDB_TYPE,
    PCAP_MAGIC_NSEC,
    PCAP_MAGIC_USEC,
    SHB_TYPE,
)
from nsqviz.capture.layers import (
    ACK,
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    FIN,
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    PSH,
    SYN,
)
from nsqviz.stream.direction import Direction

__all__ = ["PcapWriter", "PcapngWriter", "RecordWriter", "TcpConversation", "build_packet"]

_IPV4 = Struct(">BBHHHBBH4s4s")
_IPV6 = Struct(">IHBB16s16s")
_TCP = Struct(">HHIIBBHHH")  # sport dport seq ack doff flags window csum urgent
_ETH = Struct(">6s6sH")
_VLAN = Struct(">HH")


_LITTLE = array("H", b"\x01\x00")[0] == 1


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071), summed by ``array`` in C rather than byte by byte.

    ``array("H")`` reads words in host order; the one's-complement sum commutes with
    swapping the bytes of every word, so on a little-endian host the result is simply
    swapped back."""
    if len(data) % 2:
        data += b"\0"
    total = sum(array("H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    out = ~total & 0xFFFF
    return ((out & 0xFF) << 8 | out >> 8) if _LITTLE else out


def build_packet(
    src: str,
    sport: int,
    dst: str,
    dport: int,
    seq: int,
    ack: int,
    flags: int,
    payload: bytes = b"",
    *,
    linktype: int = LINKTYPE_ETHERNET,
    vlan: int | None = None,
    window: int = 65535,
) -> bytes:
    """One link-layer frame carrying one TCP segment, checksums filled in."""
    s, d = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    if s.version != d.version:
        raise ValueError(f"{src} and {dst} are not the same IP version")
    tcp_len = 20 + len(payload)
    if s.version == 4:
        pseudo = s.packed + d.packed + bytes((0, 6)) + tcp_len.to_bytes(2, "big")
    else:
        pseudo = s.packed + d.packed + tcp_len.to_bytes(4, "big") + b"\0\0\0\x06"
    header = _TCP.pack(sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags,
                       window, 0, 0)
    csum = _checksum(pseudo + header + payload)
    tcp = header[:16] + csum.to_bytes(2, "big") + header[18:] + payload
    if s.version == 4:
        ip = _IPV4.pack(0x45, 0, 20 + tcp_len, 0, 0x4000, 64, 6, 0, s.packed, d.packed)
        ip = ip[:10] + _checksum(ip).to_bytes(2, "big") + ip[12:]
        etype = ETHERTYPE_IPV4
    else:
        ip = _IPV6.pack(6 << 28, tcp_len, 6, 64, s.packed, d.packed)
        etype = ETHERTYPE_IPV6
    packet = ip + tcp
    if linktype == LINKTYPE_ETHERNET:
        tag = _VLAN.pack(vlan & 0x0FFF, etype) if vlan is not None else b""
        first = 0x8100 if vlan is not None else etype
        return _ETH.pack(b"\x02\0\0\0\0\x02", b"\x02\0\0\0\0\x01", first) + tag + packet
    if linktype == LINKTYPE_LINUX_SLL:
        # packet type 4 (sent by us), ARPHRD_LOOPBACK 772, no link address
        return Struct(">HHH8sH").pack(4, 772, 0, b"", etype) + packet
    if linktype == LINKTYPE_LINUX_SLL2:
        return Struct(">HHIHBB8s").pack(etype, 0, 1, 772, 4, 0, b"") + packet
    if linktype == LINKTYPE_NULL:
        family = 2 if s.version == 4 else 30
        return family.to_bytes(4, "little") + packet
    if linktype in (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6):
        return packet
    raise ValueError(f"cannot build packets for link type {linktype}")


class _CaptureFile:
    """A capture file being written: a path we open (and close), or a file the caller
    owns (flushed, left open)."""

    def _open(self, f: BinaryIO | str | os.PathLike[str]) -> None:
        if isinstance(f, str | os.PathLike):
            self._own = True
            self.f: BinaryIO = open(f, "wb")  # noqa: SIM115 - closed in close()
        else:
            self._own = False
            self.f = f

    def close(self) -> None:
        if self._own:
            self.f.close()
        else:
            self.f.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PcapWriter(_CaptureFile):
    """A classic pcap file (little-endian, or big-endian with ``byteorder="big"``)."""

    def __init__(
        self,
        f: BinaryIO | str | os.PathLike[str],
        *,
        linktype: int = LINKTYPE_ETHERNET,
        nanosecond: bool = False,
        byteorder: str = "little",
        snaplen: int = 262144,
    ):
        self._open(f)
        self.linktype = linktype
        self.snaplen = snaplen
        e = "<" if byteorder == "little" else ">"
        self._record = Struct(e + "IIII")
        self._scale = 10**9 if nanosecond else 10**6
        magic = PCAP_MAGIC_NSEC if nanosecond else PCAP_MAGIC_USEC
        self.f.write(Struct(e + "IHHiIII").pack(magic, 2, 4, 0, 0, snaplen, linktype))
        self.count = 0

    def write(self, ts: float, frame: bytes, *, orig_len: int | None = None,
              interface: int = 0) -> None:
        """Append one record; ``frame`` longer than the snaplen is cut, as libpcap would."""
        sec = int(ts)
        frac = round((ts - sec) * self._scale)
        if frac >= self._scale:
            sec, frac = sec + 1, frac - self._scale
        orig = len(frame) if orig_len is None else orig_len
        data = frame[: self.snaplen]
        self.f.write(self._record.pack(sec, frac, len(data), orig))
        self.f.write(data)
        self.count += 1


class PcapngWriter(_CaptureFile):
    """A pcapng file with one section and any number of interfaces.

    ``add_interface`` returns the interface id to pass to :meth:`write`; ``tsresol`` is
    the number of decimal digits of its timestamps (6: microseconds, 9: nanoseconds).
    """

    def __init__(self, f: BinaryIO | str | os.PathLike[str], *, byteorder: str = "little"):
        self._open(f)
        self.e = "<" if byteorder == "little" else ">"
        self._units: list[int] = []
        self._links: list[int] = []
        self.count = 0
        body = Struct(self.e + "IHHq").pack(BYTE_ORDER_MAGIC, 1, 0, -1)
        self._block(SHB_TYPE, body)

    def _block(self, btype: int, body: bytes) -> None:
        pad = b"\0" * (-len(body) % 4)
        total = 12 + len(body) + len(pad)
        self.f.write(Struct(self.e + "II").pack(btype, total) + body + pad
                     + Struct(self.e + "I").pack(total))

    def add_interface(self, linktype: int = LINKTYPE_ETHERNET, *, tsresol: int = 6,
                      snaplen: int = 262144) -> int:
        options = Struct(self.e + "HH").pack(9, 1) + bytes((tsresol,)) + b"\0\0\0"
        options += Struct(self.e + "HH").pack(0, 0)
        self._block(IDB_TYPE, Struct(self.e + "HHI").pack(linktype, 0, snaplen) + options)
        self._units.append(10**tsresol)
        self._links.append(linktype)
        return len(self._units) - 1

    def linktype(self, interface: int) -> int:
        return self._links[interface]

    def write(self, ts: float, frame: bytes, *, orig_len: int | None = None,
              interface: int = 0) -> None:
        units = round(ts * self._units[interface])
        orig = len(frame) if orig_len is None else orig_len
        fixed = Struct(self.e + "IIIII").pack(
            interface, units >> 32, units & 0xFFFFFFFF, len(frame), orig
        )
        self._block(EPB_TYPE, fixed + frame)
        self.count += 1


class RecordWriter(Protocol):
    """What a :class:`TcpConversation` writes into, besides a pcapng file: records of one
    link type appended in order (a :class:`PcapWriter`, or one that rotates its files)."""

    @property
    def linktype(self) -> int: ...

    def write(self, ts: float, frame: bytes, *, orig_len: int | None = None,
              interface: int = 0) -> None: ...


class TcpConversation:
    """One TCP connection written packet by packet into a writer.

    ``send(Direction.C2S|S2C, data, ts)`` writes the data as segments of at most ``mss`` bytes
    with the right sequence numbers, each acknowledging everything the other side sent.
    ``segment`` writes one segment at any relative sequence offset -- for captures with
    holes, duplicates and reordering. Relative offsets count payload bytes (0 = first
    byte after the SYN).
    """

    def __init__(
        self,
        writer: PcapngWriter | RecordWriter,
        client: tuple[str, int],
        server: tuple[str, int],
        *,
        isn: tuple[int, int] = (1000, 5000),
        mss: int = 65483,
        interface: int = 0,
        vlan: int | None = None,
    ):
        self.writer = writer
        self.ends = {Direction.C2S: (client, server), Direction.S2C: (server, client)}
        self.isn = {Direction.C2S: isn[0], Direction.S2C: isn[1]}
        self.sent = {Direction.C2S: 0, Direction.S2C: 0}  # payload bytes sent so far, per direction
        self.mss = mss
        self.interface = interface
        self.vlan = vlan
        self.linktype = (writer.linktype(interface) if isinstance(writer, PcapngWriter)
                         else writer.linktype)
        # 1 once that side sent FIN (it takes a seq number)
        self._fin = {Direction.C2S: 0, Direction.S2C: 0}

    def _seq(self, direction: Direction, rel: int) -> int:
        return (self.isn[direction] + 1 + rel) & 0xFFFFFFFF

    def _ack(self, direction: Direction) -> int:
        other = Direction.S2C if direction == Direction.C2S else Direction.C2S
        return self._seq(other, self.sent[other] + self._fin[other])

    def packet(self, direction: Direction, ts: float, seq: int, ack: int, flags: int,
               payload: bytes = b"", *, snaplen: int | None = None,
               window: int = 65535) -> None:
        """Write one raw segment (absolute seq/ack, the ``window`` it announces);
        ``snaplen`` cuts what is stored."""
        (src, sport), (dst, dport) = self.ends[direction]
        frame = build_packet(src, sport, dst, dport, seq, ack, flags, payload,
                             linktype=self.linktype, vlan=self.vlan, window=window)
        stored = frame if snaplen is None else frame[:snaplen]
        self.writer.write(ts, stored, orig_len=len(frame), interface=self.interface)

    def open(self, ts: float) -> None:
        """The three-way handshake."""
        c, s = self.isn[Direction.C2S], self.isn[Direction.S2C]
        self.packet(Direction.C2S, ts, c, 0, SYN)
        self.packet(Direction.S2C, ts, s, c + 1, SYN | ACK)
        self.packet(Direction.C2S, ts, c + 1, s + 1, ACK)

    def send(self, direction: Direction, data: bytes, ts: float) -> None:
        for i in range(0, len(data), self.mss):
            self.segment(direction, self.sent[direction], data[i : i + self.mss], ts)
            self.sent[direction] += len(data[i : i + self.mss])

    def segment(self, direction: Direction, rel: int, payload: bytes, ts: float, *,
                snaplen: int | None = None) -> None:
        """One data segment at relative offset ``rel`` (does not advance :attr:`sent`)."""
        self.packet(direction, ts, self._seq(direction, rel), self._ack(direction),
                    ACK | PSH, payload, snaplen=snaplen)

    def close(self, ts: float) -> None:
        """FIN from the client, FIN from the server, final ACK."""
        for direction in (Direction.C2S, Direction.S2C):
            self.packet(direction, ts, self._seq(direction, self.sent[direction]),
                        self._ack(direction), FIN | ACK)
            self._fin[direction] = 1
        c2s = Direction.C2S
        self.packet(c2s, ts, self._seq(c2s, self.sent[c2s] + 1), self._ack(c2s), ACK)
