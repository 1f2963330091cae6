"""Reading pcap and pcapng files: byte orders, timestamp resolutions, blocks, damage."""

from __future__ import annotations

import io
import struct

import pytest

from nsqviz.capture.files import (
    CaptureFormatError,
    CaptureWarning,
    Record,
    read_capture,
    read_records,
)
from nsqviz.capture.layers import LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL2, LINKTYPE_RAW
from nsqviz.capture.writer import PcapngWriter, PcapWriter

FRAMES = [bytes([i]) * (60 + i) for i in range(5)]
TIMES = [1700000000.123456, 1700000000.5, 1700000001.000001, 1700000002.25, 1700000003.999999]


def _records(data: bytes) -> list[Record | CaptureWarning]:
    return list(read_capture(io.BytesIO(data)))


@pytest.mark.parametrize("byteorder", ["little", "big"])
@pytest.mark.parametrize("nanosecond", [False, True])
def test_classic_pcap_both_byte_orders_and_resolutions(byteorder, nanosecond):
    f = io.BytesIO()
    w = PcapWriter(f, byteorder=byteorder, nanosecond=nanosecond, linktype=LINKTYPE_RAW)
    for ts, frame in zip(TIMES, FRAMES, strict=True):
        w.write(ts, frame)
    raw = f.getvalue()
    magic = raw[:4] if byteorder == "big" else raw[3::-1]
    assert magic == (b"\xa1\xb2\x3c\x4d" if nanosecond else b"\xa1\xb2\xc3\xd4")
    recs = _records(raw)
    assert [r.number for r in recs] == [1, 2, 3, 4, 5]
    assert [r.data for r in recs] == FRAMES
    assert all(r.linktype == LINKTYPE_RAW for r in recs)
    tolerance = 1e-9 if nanosecond else 1e-6
    for r, ts in zip(recs, TIMES, strict=True):
        assert abs(r.ts - ts) <= tolerance * 1.01 + 1e-7


def test_nanosecond_timestamps_keep_nanoseconds():
    f = io.BytesIO()
    w = PcapWriter(f, nanosecond=True)
    w.write(5.000000123, b"x" * 20)
    (rec,) = _records(f.getvalue())
    assert round((rec.ts - 5) * 1e9) == 123


def test_snaplen_cut_record_keeps_its_original_length():
    f = io.BytesIO()
    w = PcapWriter(f, snaplen=100)
    w.write(1.0, b"a" * 300)
    (rec,) = _records(f.getvalue())
    assert len(rec.data) == 100 and rec.orig_len == 300


def test_truncated_last_record_is_reported_and_the_rest_read():
    f = io.BytesIO()
    w = PcapWriter(f)
    for ts, frame in zip(TIMES, FRAMES, strict=True):
        w.write(ts, frame)
    torn = f.getvalue()[:-10]
    out = _records(torn)
    assert [r.number for r in out[:-1]] == [1, 2, 3, 4]
    warning = out[-1]
    assert isinstance(warning, CaptureWarning)
    assert warning.number == 5
    assert f"{len(FRAMES[4]) - 10} of {len(FRAMES[4])}" in warning.reason
    assert warning.offset == len(torn) - 16 - (len(FRAMES[4]) - 10)


def test_file_ending_inside_a_record_header_is_reported():
    f = io.BytesIO()
    w = PcapWriter(f)
    w.write(1.0, b"a" * 40)
    out = _records(f.getvalue() + b"\x01\x02\x03")
    assert isinstance(out[0], Record)
    assert isinstance(out[1], CaptureWarning) and out[1].number == 2
    assert "record header (3 of 16 bytes)" in out[1].reason


def test_corrupt_record_length_stops_with_a_reason():
    f = io.BytesIO()
    w = PcapWriter(f, snaplen=1000)
    w.write(1.0, b"a" * 40)
    raw = bytearray(f.getvalue())
    struct.pack_into("<I", raw, 24 + 8, 0x7FFFFFFF)
    (warning,) = _records(bytes(raw))
    assert warning.number == 1 and "corrupt" in warning.reason


def test_not_a_capture():
    with pytest.raises(CaptureFormatError, match="offset 0: magic 48545450"):
        _records(b"HTTP/1.1 200 OK\r\n\r\nhello world...")
    with pytest.raises(CaptureFormatError, match="empty file"):
        _records(b"")


@pytest.mark.parametrize("byteorder", ["little", "big"])
def test_pcapng_two_interfaces_own_linktype_and_resolution(byteorder):
    f = io.BytesIO()
    w = PcapngWriter(f, byteorder=byteorder)
    eth = w.add_interface(LINKTYPE_ETHERNET, tsresol=6)
    cooked = w.add_interface(LINKTYPE_LINUX_SLL2, tsresol=9)
    w.write(10.000001, b"e" * 64, interface=eth)
    w.write(10.000000007, b"s" * 70, interface=cooked)
    w.write(11.5, b"e" * 65, interface=eth)
    recs = _records(f.getvalue())
    assert [(r.number, r.linktype, r.interface, len(r.data)) for r in recs] == [
        (1, LINKTYPE_ETHERNET, 0, 64),
        (2, LINKTYPE_LINUX_SLL2, 1, 70),
        (3, LINKTYPE_ETHERNET, 0, 65),
    ]
    assert round((recs[1].ts - 10) * 1e9) == 7
    assert round((recs[0].ts - 10) * 1e6) == 1


def _block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    total = 12 + len(body)
    return struct.pack("<II", btype, total) + body + struct.pack("<I", total)


def test_pcapng_simple_packet_block_binary_resolution_and_foreign_blocks():
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    # if_tsresol 0x82: 2**-2 seconds, then if_tsoffset 100 s
    opts = (struct.pack("<HHB3x", 9, 1, 0x82) + struct.pack("<HHq", 14, 8, 100)
            + struct.pack("<HH", 0, 0))
    idb = _block(1, struct.pack("<HHI", LINKTYPE_RAW, 0, 50) + opts)
    nrb = _block(4, struct.pack("<HH", 0, 0))  # name resolution: no packets in it
    epb = _block(6, struct.pack("<IIIII", 0, 0, 6, 3, 3) + b"abc")  # 6 quarter seconds
    spb = _block(3, struct.pack("<I", 80) + b"z" * 80)  # cut to the interface snaplen 50
    recs = _records(shb + idb + nrb + epb + spb)
    assert [r.number for r in recs] == [1, 2]
    assert recs[0].ts == 101.5 and recs[0].data == b"abc"
    assert recs[1].data == b"z" * 50 and recs[1].orig_len == 80
    assert recs[1].ts != recs[1].ts  # NaN: a simple packet block has no timestamp


def test_pcapng_torn_block_and_bad_length():
    f = io.BytesIO()
    w = PcapngWriter(f)
    w.add_interface(LINKTYPE_RAW)
    w.write(1.0, b"q" * 30)
    w.write(2.0, b"r" * 30)
    raw = f.getvalue()
    out = _records(raw[:-7])
    assert isinstance(out[0], Record) and isinstance(out[1], CaptureWarning)
    assert out[1].number == 2 and "file ends inside a block of type 0x00000006" in out[1].reason
    bad = bytearray(raw)
    struct.pack_into("<I", bad, len(raw) - 64 + 4, 13)  # not a multiple of 4
    out = _records(bytes(bad))
    assert "impossible length 13" in out[-1].reason


_SHB = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
_IDB = _block(1, struct.pack("<HHI", LINKTYPE_RAW, 0, 0))
_EPB = _block(6, struct.pack("<IIIII", 0, 0, 1, 3, 3) + b"abc")


def _bare(btype: int, body: bytes) -> bytes:
    """A block whose length says exactly ``body`` (no padding), however short."""
    total = 12 + len(body)
    return struct.pack("<II", btype, total) + body + struct.pack("<I", total)


@pytest.mark.parametrize(("btype", "name", "fixed"), [
    (1, "interface description block", 20),
    (6, "enhanced packet block", 32),
    (3, "simple packet block", 16),
    (2, "packet block", 32),
])
@pytest.mark.parametrize("where", ["last", "middle"])
def test_pcapng_block_shorter_than_its_fixed_fields_is_skipped_with_a_warning(
        btype, name, fixed, where):
    """Issue 14: a short IDB raised struct.error; a short EPB in the middle read the next
    block's bytes as its own fields."""
    short = _bare(btype, b"\x01\x02\x03\x04" if btype != 3 else b"")
    head = _SHB + _IDB + _EPB
    raw = head + short + (_EPB if where == "middle" else b"")
    out = _records(raw)
    warnings = [w for w in out if isinstance(w, CaptureWarning)]
    (warning,) = warnings
    assert warning.offset == len(head)
    assert f"{name} of {len(short)} bytes is shorter than its fixed fields ({fixed}" in (
        warning.reason)
    packets = [r for r in out if isinstance(r, Record)]
    assert [r.data for r in packets] == [b"abc"] * (2 if where == "middle" else 1)
    if btype != 1:  # a packet block: it keeps its number, the next packet is 3
        assert warning.number == 2 and [r.number for r in packets] == [1, 3][:len(packets)]


def test_capture_format_error_has_the_offset():
    with pytest.raises(CaptureFormatError) as info:
        _records(struct.pack("<I", 0xA1B2C3D4) + b"short")
    assert info.value.offset == 0 and "pcap file header is 9 bytes" in info.value.reason


def test_pcapng_option_running_past_its_block_is_ignored():
    opts = struct.pack("<HHB3x", 9, 200, 3)  # if_tsresol claiming 200 bytes
    idb = _block(1, struct.pack("<HHI", LINKTYPE_RAW, 0, 0) + opts)
    (rec,) = _records(_SHB + idb + _EPB)
    assert rec.ts == 1e-6  # the default resolution: the broken option is not used


class _CountingFile(io.RawIOBase):
    """A file that counts how far it has been read, to prove reading is streamed."""

    def __init__(self, data: bytes):
        self.data, self.pos, self.high = data, 0, 0

    def readable(self):
        return True

    def read(self, n=-1):
        n = len(self.data) - self.pos if n < 0 else n
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        self.high = max(self.high, self.pos)
        return out


def test_reading_is_streamed_not_whole_file():
    f = io.BytesIO()
    w = PcapWriter(f, linktype=LINKTYPE_RAW)
    for i in range(300):
        w.write(float(i), bytes([i % 256]) * 60000)  # 18 MB
    src = _CountingFile(f.getvalue())
    it = read_capture(src)
    first = next(it)
    assert first.number == 1
    assert src.high < 2 * 1024 * 1024  # read ahead is one buffer, not the file
    assert sum(1 for _ in it) == 299


@pytest.mark.parametrize("name", ["pubsub-pynsq.pcap", "pubsub-pynsq.pcapng",
                                  "tls-pynsq.pcapng", "pubsub-any-sll2.pcap"])
def test_only_the_wanted_packet_numbers_are_yielded(name):
    """``only``: the same records as a full read, for those numbers alone (the pipeline's
    second stage reads a few connections' packets back this way)."""
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "data", name)
    every = [r for r in read_capture(path) if isinstance(r, Record)]
    wanted = {r.number for r in every[1::3]} | {every[-1].number, 10**9}
    assert list(read_capture(path, only=wanted)) == [r for r in every if r.number in wanted]
    assert list(read_capture(path, only=set())) == []


@pytest.mark.parametrize("name", ["pubsub-pynsq.pcap", "pubsub-pynsq.pcapng"])
def test_read_records_reads_just_the_records_named(name):
    """``read_records``: the records a full read gave for those (number, offset) pairs, in
    file order whatever order they are asked in -- a classic pcap read only there."""
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "data", name)
    every = [r for r in read_capture(path) if isinstance(r, Record)]
    assert all(r.offset > 0 for r in every)
    wanted = every[::-4]
    got = list(read_records(path, [(r.number, r.offset) for r in wanted]))
    assert got == sorted(wanted, key=lambda r: r.offset)


def test_read_records_says_where_a_file_ends_too_soon(tmp_path):
    path = tmp_path / "torn.pcap"
    with PcapWriter(path) as w:
        w.write(1.0, b"\x00" * 60)
        w.write(2.0, b"\x00" * 60)
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    first, second = [r for r in read_capture(io.BytesIO(data)) if isinstance(r, Record)]
    got = list(read_records(path, [(1, first.offset), (2, second.offset)]))
    assert got[0] == first
    assert isinstance(got[1], CaptureWarning) and got[1].number == 2
    assert got[1].offset == second.offset and "ends inside the record" in got[1].reason
