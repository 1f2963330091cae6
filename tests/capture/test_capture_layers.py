"""From link-layer frames to TCP segments: every supported link type, IPv4/IPv6, damage."""

from __future__ import annotations

import struct

import pytest

from nsqviz.capture.files import CaptureWarning, Record
from nsqviz.capture.layers import (
    ACK,
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    PSH,
    Segment,
    decode_record,
)
from nsqviz.capture.writer import build_packet

PAYLOAD = b"PUB t\n\x00\x00\x00\x03abc"


def _decode(frame: bytes, link: int, orig: int | None = None):
    return decode_record(Record(7, 1.5, link, frame, len(frame) if orig is None else orig, 0, 24))


@pytest.mark.parametrize(
    "link", [LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_NULL,
             LINKTYPE_RAW]
)
@pytest.mark.parametrize("src,dst", [("10.1.2.3", "10.9.8.7"), ("fe80::1", "2001:db8::42")])
def test_every_link_type_over_ipv4_and_ipv6(link, src, dst):
    frame = build_packet(src, 51000, dst, 4150, 0xDEADBEEF, 17, ACK | PSH, PAYLOAD, linktype=link)
    seg = _decode(frame, link)
    assert seg == Segment(7, 1.5, src, 51000, dst, 4150, 0xDEADBEEF, 17, ACK | PSH, PAYLOAD)


def test_raw_ip_linktypes_228_229_and_openbsd_loop():
    v4 = build_packet("1.2.3.4", 1, "5.6.7.8", 2, 0, 0, ACK, b"x", linktype=LINKTYPE_RAW)
    v6 = build_packet("::1", 1, "::2", 2, 0, 0, ACK, b"y", linktype=LINKTYPE_RAW)
    assert _decode(v4, LINKTYPE_IPV4).payload == b"x"
    assert _decode(v6, LINKTYPE_IPV6).payload == b"y"
    assert _decode(struct.pack(">I", 2) + v4, LINKTYPE_LOOP).payload == b"x"


def test_null_linktype_in_big_endian_host_order():
    v6 = build_packet("::1", 1, "::2", 2, 0, 0, ACK, b"z", linktype=LINKTYPE_RAW)
    assert _decode(struct.pack(">I", 30) + v6, LINKTYPE_NULL).payload == b"z"  # Darwin AF_INET6


def test_vlan_tags_single_and_double():
    one = build_packet("10.0.0.1", 1, "10.0.0.2", 4150, 5, 6, ACK, b"tagged", vlan=42)
    assert _decode(one, LINKTYPE_ETHERNET).payload == b"tagged"
    # QinQ: an 802.1ad outer tag in front of the 802.1Q one
    two = one[:12] + struct.pack(">HH", 0x88A8, 7) + one[12:]
    assert _decode(two, LINKTYPE_ETHERNET).payload == b"tagged"


def test_ethernet_padding_is_not_payload():
    frame = build_packet("10.0.0.1", 1, "10.0.0.2", 2, 5, 6, ACK, b"")
    padded = frame + b"\0" * (60 - len(frame))
    assert _decode(padded, LINKTYPE_ETHERNET).payload == b""


def test_ipv6_extension_headers_are_walked():
    base = build_packet("2001:db8::1", 40000, "2001:db8::2", 4150, 1, 2, ACK, PAYLOAD,
                        linktype=LINKTYPE_RAW)
    hop_by_hop = bytes((60, 0)) + b"\x01\x04\0\0\0\0"  # next: destination options, PadN
    dest_opts = bytes((44, 0)) + b"\x01\x04\0\0\0\0"  # next: fragment
    fragment = bytes((6, 0)) + b"\0\0" + b"\0\0\0\x01"  # atomic fragment, next: TCP
    ext = hop_by_hop + dest_opts + fragment
    plen = struct.unpack_from(">H", base, 4)[0] + len(ext)
    packet = base[:4] + struct.pack(">HB", plen, 0) + base[7:40] + ext + base[40:]
    seg = _decode(packet, LINKTYPE_RAW)
    assert isinstance(seg, Segment) and seg.payload == PAYLOAD and seg.dport == 4150


def test_fragments_are_reported_not_dropped():
    frame = bytearray(build_packet("10.0.0.1", 1, "10.0.0.2", 2, 5, 6, ACK, b"abc",
                                   linktype=LINKTYPE_RAW))
    struct.pack_into(">H", frame, 6, 0x2000)  # more fragments
    out = _decode(bytes(frame), LINKTYPE_RAW)
    assert isinstance(out, CaptureWarning) and out.number == 7 and "fragment" in out.reason


def test_not_tcp_is_none():
    frame = bytearray(build_packet("10.0.0.1", 1, "10.0.0.2", 2, 5, 6, ACK, b"abc"))
    frame[14 + 9] = 17  # UDP
    assert _decode(bytes(frame), LINKTYPE_ETHERNET) is None
    arp = b"\xff" * 12 + b"\x08\x06" + b"\0" * 28
    assert _decode(arp, LINKTYPE_ETHERNET) is None


def test_snaplen_cut_payload_counts_missing_bytes():
    frame = build_packet("10.0.0.1", 1, "10.0.0.2", 2, 5, 6, ACK, b"0123456789" * 10)
    seg = _decode(frame[:14 + 20 + 20 + 30], LINKTYPE_ETHERNET, orig=len(frame))
    assert seg.payload == b"0123456789" * 3 and seg.missing == 70
    cut_header = _decode(frame[:14 + 20 + 10], LINKTYPE_ETHERNET, orig=len(frame))
    assert isinstance(cut_header, CaptureWarning)
    assert "snaplen cut the TCP header" in cut_header.reason


@pytest.mark.parametrize("cut", [3, 13, 20 + 14 - 1])
def test_short_frames_are_warnings(cut):
    frame = build_packet("10.0.0.1", 1, "10.0.0.2", 2, 5, 6, ACK, b"")
    out = _decode(frame[:cut], LINKTYPE_ETHERNET)
    assert isinstance(out, CaptureWarning) and "cut short" in out.reason


def test_unsupported_link_type_is_named():
    out = _decode(b"\0" * 40, 147)
    assert isinstance(out, CaptureWarning) and "link type 147" in out.reason
