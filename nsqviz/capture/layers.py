"""From a captured link-layer frame to a TCP segment: link types, IPv4/IPv6, TCP.

Only what reassembly and the TCP analysis need is kept -- addresses, ports, sequence and
acknowledgement numbers, flags, the advertised window and the payload -- in a
:class:`Segment` that also remembers which packet (number, timestamp) carried it. A
frame that is not TCP (ARP, UDP, ICMP ...) gives ``None``; a frame that claims to be TCP
but cannot be read gives a :class:`~nsqviz.capture.files.PacketWarning` naming the
packet and the reason.

Link types are the tcpdump.org ``LINKTYPE_`` numbers: what a pcap header or a pcapng
interface block says.
"""

from __future__ import annotations

from struct import Struct
from typing import NamedTuple

from nsqviz.capture.files import PacketWarning, Record

__all__ = [
    "ACK",
    "FIN",
    "LINKTYPE_ETHERNET",
    "LINKTYPE_IPV4",
    "LINKTYPE_IPV6",
    "LINKTYPE_LINUX_SLL",
    "LINKTYPE_LINUX_SLL2",
    "LINKTYPE_LOOP",
    "LINKTYPE_NULL",
    "LINKTYPE_RAW",
    "PSH",
    "RST",
    "SYN",
    "Segment",
    "decode_record",
]

LINKTYPE_NULL = 0  # BSD loopback: 4-byte address family in the writer's byte order
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101  # raw IPv4 or IPv6, told apart by the version nibble
LINKTYPE_LOOP = 108  # OpenBSD loopback: like NULL but always big-endian
LINKTYPE_LINUX_SLL = 113  # Linux "cooked" capture v1 (16-byte header)
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276  # Linux "cooked" capture v2 (20-byte header), tcpdump -i any
_DLT_RAW_OPENBSD = 14  # some systems wrote DLT_RAW's own value into files

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
_IP_VERSION = {ETHERTYPE_IPV4: 4, ETHERTYPE_IPV6: 6}
"""The IP version each IP EtherType carries (others: 0, not IP)."""
_COOKED = {LINKTYPE_LINUX_SLL2: ("Linux cooked v2", 20, 0),
           LINKTYPE_LINUX_SLL: ("Linux cooked", 16, 14)}
"""Linux cooked captures: name, header size, offset of the EtherType in the header."""
_VLAN_TAGS = frozenset({0x8100, 0x88A8, 0x9100})  # 802.1Q, 802.1ad (QinQ), old QinQ

# BSD address families for IPv6 differ per OS: Linux 10, NetBSD/OpenBSD 24,
# FreeBSD 28, Darwin 30. IPv4 is 2 everywhere.
_AF_INET6 = frozenset({10, 24, 28, 30})

_IP_TCP = 6
# IPv6 extension headers that have the generic [next header][length in 8-octet units - 1]
# shape: hop-by-hop, routing, destination options, mobility, HIP, shim6.
_IPV6_GENERIC_EXT = frozenset({0, 43, 60, 135, 139, 140})
_IPV6_FRAGMENT = 44
_IPV6_AH = 51  # length in 4-octet units - 2
_IPV6_ESP = 50

_U16 = Struct(">H")
_U32_LE = Struct("<I")
_U32_BE = Struct(">I")
_IPV4 = Struct(">BBHHHBBH4s4s")  # ver_ihl tos total_len id frag ttl proto csum src dst
_IPV6 = Struct(">IHBB16s16s")  # ver_tc_flow payload_len next_header hop_limit src dst
_TCP = Struct(">HHIIBBH")  # sport dport seq ack data_offset flags window


_FILE_SHIFT = 40
_NUMBER_MASK = (1 << _FILE_SHIFT) - 1


def packet_id(file_index: int, number: int) -> int:
    """One integer for packet ``number`` of file ``file_index`` of a capture set, ordered
    like the pair; in the first file it is the packet number itself."""
    return (file_index << _FILE_SHIFT) | number


def split_packet_id(pid: int) -> tuple[int, int]:
    """``(file_index, number)`` of a :func:`packet_id`."""
    return pid >> _FILE_SHIFT, pid & _NUMBER_MASK


def packet_name(pid: int) -> str:
    """``"packet 6"``, or ``"packet 6 of file 2"`` past the first file (0-based index)."""
    file_index, number = split_packet_id(pid)
    return f"packet {number} of file {file_index}" if file_index else f"packet {number}"


class Segment(NamedTuple):
    """One TCP segment and the packet that carried it (``number``: its :func:`packet_id`
    when it belongs to a capture set of several files).

    ``missing`` counts payload bytes the IP header promises but the capture did not keep
    (snaplen); they sit right after ``payload`` in sequence space. ``window`` is the
    window field as sent (Wireshark's ``tcp.window_size_value``: not scaled by the
    handshake's window scale option -- zero is zero either way).
    """

    number: int
    ts: float
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes
    missing: int = 0
    window: int = 0xFFFF


_addr_cache: dict[bytes, str] = {}


def _addr(raw: bytes) -> str:
    """An address as text (as ``inet_ntop`` writes it): IPv4 without the socket module,
    which costs a short capture's decode more to import than its every packet."""
    text = _addr_cache.get(raw)
    if text is None:
        if len(raw) == 4:
            text = f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}"
        else:
            import socket

            text = socket.inet_ntop(socket.AF_INET6, raw)
        if len(_addr_cache) < 4096:
            _addr_cache[raw] = text
    return text


def _bad(rec: Record, reason: str) -> PacketWarning:
    return PacketWarning(rec.number, rec.offset, reason)


# The common case, read in one go: only the fields used (x: skipped -- MAC addresses, TOS,
# IP id, TTL, checksum), as every field unpacked is an object made per packet.
_ETH_IPV4_TCP = Struct(">12xHBxH2xHxB2x4s4sHHIIBBH")

# A namedtuple's own __new__ is a Python-level function; tuple.__new__ builds the same
# object in C, which counts once per packet (the capture readers' hot loop).
_new_tuple = tuple.__new__


def decode_record(rec: Record) -> Segment | PacketWarning | None:
    """The TCP segment in ``rec``, a warning if it cannot be read, ``None`` if not TCP."""
    data = rec.data
    link = rec.linktype
    # Fast path -- Ethernet, IPv4 without options, unfragmented TCP, nothing cut -- which
    # is most packets of most captures; anything else takes the general path below.
    if link == LINKTYPE_ETHERNET and len(data) >= 54:
        (etype, ver_ihl, total, frag, proto, s, d,
         sport, dport, seq, ack, doff, flags, window) = _ETH_IPV4_TCP.unpack_from(data, 0)
        if (etype == ETHERTYPE_IPV4 and ver_ihl == 0x45 and proto == _IP_TCP
                and not frag & 0x3FFF and doff >= 0x50):
            start = 34 + (doff >> 4) * 4
            end = 14 + total
            if total and start <= end <= len(data):
                return _new_tuple(Segment, (rec.number, rec.ts, _addr(s), sport, _addr(d), dport,
                                            seq, ack, flags, data[start:end], 0, window))
    # ---- link layer: find the network protocol and where its header starts
    if link == LINKTYPE_ETHERNET:
        if len(data) < 14:
            return _bad(rec, f"Ethernet header cut short: {len(data)} of 14 bytes")
        pos = 12
        (etype,) = _U16.unpack_from(data, pos)
        while etype in _VLAN_TAGS:
            pos += 4
            if len(data) < pos + 2:
                return _bad(rec, "VLAN tag cut short")
            (etype,) = _U16.unpack_from(data, pos)
        pos += 2
        version = _IP_VERSION.get(etype, 0)
    elif link in _COOKED:
        name, pos, at = _COOKED[link]
        if len(data) < pos:
            return _bad(rec, f"{name} header cut short: {len(data)} of {pos} bytes")
        (etype,) = _U16.unpack_from(data, at)
        version = _IP_VERSION.get(etype, 0)
    elif link in (LINKTYPE_NULL, LINKTYPE_LOOP):
        if len(data) < 4:
            return _bad(rec, "loopback header cut short")
        family = _U32_BE.unpack_from(data, 0)[0]
        if link == LINKTYPE_NULL and family > 0xFFFF:
            family = _U32_LE.unpack_from(data, 0)[0]  # written in little-endian host order
        pos = 4
        version = 4 if family == 2 else 6 if family in _AF_INET6 else 0
    elif link in (LINKTYPE_RAW, _DLT_RAW_OPENBSD, LINKTYPE_IPV4, LINKTYPE_IPV6):
        if not data:
            return _bad(rec, "empty raw IP packet")
        pos = 0
        version = data[0] >> 4
    else:
        return _bad(rec, f"link type {link} is not supported")

    # ---- network layer: find TCP and its length
    if version == 4:
        if len(data) < pos + 20:
            return _bad(rec, "IPv4 header cut short")
        ver_ihl, _tos, total, _id, frag, _ttl, proto, _csum, s, d = _IPV4.unpack_from(data, pos)
        if ver_ihl >> 4 != 4:
            return _bad(rec, f"IPv4 header has version {ver_ihl >> 4}")
        if proto != _IP_TCP:
            return None
        ihl = (ver_ihl & 0x0F) * 4
        if ihl < 20:
            return _bad(rec, f"IPv4 header length {ihl} is below 20")
        if frag & 0x3FFF:
            return _bad(rec, "IPv4 fragment: fragment reassembly is not supported")
        # A zero total length is what TCP segmentation offload leaves in captures of
        # outgoing traffic; the frame length is then the only measure.
        end = pos + total if total else len(data)
        pos += ihl
    elif version == 6:
        if len(data) < pos + 40:
            return _bad(rec, "IPv6 header cut short")
        _vtf, plen, proto, _hops, s, d = _IPV6.unpack_from(data, pos)
        pos += 40
        end = pos + plen if plen else len(data)  # 0: a jumbogram (hop-by-hop option)
        while proto != _IP_TCP:
            if proto in _IPV6_GENERIC_EXT:
                if len(data) < pos + 2:
                    return _bad(rec, "IPv6 extension header cut short")
                proto, hlen = data[pos], (data[pos + 1] + 1) * 8
            elif proto == _IPV6_AH:
                if len(data) < pos + 2:
                    return _bad(rec, "IPv6 authentication header cut short")
                proto, hlen = data[pos], (data[pos + 1] + 2) * 4
            elif proto == _IPV6_FRAGMENT:
                if len(data) < pos + 8:
                    return _bad(rec, "IPv6 fragment header cut short")
                if _U16.unpack_from(data, pos + 2)[0] & 0xFFF9:
                    return _bad(rec, "IPv6 fragment: fragment reassembly is not supported")
                proto, hlen = data[pos], 8  # an atomic fragment: the whole packet
            elif proto == _IPV6_ESP:
                return _bad(rec, "IPv6 ESP: the payload is encrypted")
            else:
                return None  # UDP, ICMPv6, no next header ...
            pos += hlen
    else:
        return None  # ARP, LLDP, ...

    # ---- transport layer
    if len(data) < pos + 20:
        if rec.orig_len > len(data):
            return _bad(rec, f"snaplen cut the TCP header ({len(data)} of {rec.orig_len} bytes)")
        return _bad(rec, "TCP header cut short")
    sport, dport, seq, ack, doff, flags, window = _TCP.unpack_from(data, pos)
    hlen = (doff >> 4) * 4
    if hlen < 20:
        return _bad(rec, f"TCP header length {hlen} is below 20")
    start = pos + hlen
    if end > len(data):
        # The IP header promises more than was captured: a snaplen cut (or a torn frame).
        missing = end - max(start, len(data)) if end > start else 0
        end = len(data)
    else:
        missing = 0
    if start > end:
        if not missing:
            return _bad(rec, f"TCP header length {hlen} runs past the packet")
        start = end  # the snaplen cut into the TCP options: no payload byte was kept
    return Segment(
        rec.number, rec.ts, _addr(s), sport, _addr(d), dport, seq, ack, flags,
        data[start:end], missing, window,
    )
