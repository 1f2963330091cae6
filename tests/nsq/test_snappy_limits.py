"""A snappy stream is read as Go's reader (nsqd's) reads it: every chunk header is
checked as soon as it arrives, so a peer cannot make a connection hold more than one
legal chunk, and bytes that are not a snappy stream are refused at once."""

from __future__ import annotations

import snappy
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqviz.nsq import events as ev
from nsqviz.nsq.client_connection import ClientConnection
from nsqviz.nsq.compression import SNAPPY_MAX_CHUNK, SNAPPY_STREAM_IDENTIFIER
from nsqviz.nsq.server_connection import ServerConnection


def _snappy_server() -> ServerConnection:
    c, s = ClientConnection(), ServerConnection()
    s.receive(c.send(ev.Magic()) + c.send(ev.Identify({"snappy": True})))
    s.start_compression("snappy", None)
    return s


def _violation(events):
    (v,) = [e for e in events if isinstance(e, ev.Violation)]
    return v


def test_a_chunk_longer_than_go_allows_is_refused_at_its_header():
    s = _snappy_server()
    header = bytes([0x00]) + (16 * 1024 * 1024 - 1).to_bytes(3, "little")
    v = _violation(s.receive(SNAPPY_STREAM_IDENTIFIER + header))
    assert v.fatal and v.code == ""  # nsqd's read fails: it closes without a word
    assert f"longer than the {SNAPPY_MAX_CHUNK}" in v.text


def test_the_longest_legal_chunk_waits_and_one_byte_more_is_refused():
    s = _snappy_server()
    legal = bytes([0x00]) + SNAPPY_MAX_CHUNK.to_bytes(3, "little")
    assert s.receive(SNAPPY_STREAM_IDENTIFIER + legal + b"\x00" * 1000) == []
    s = _snappy_server()
    v = _violation(s.receive(SNAPPY_STREAM_IDENTIFIER + bytes([0x00])
                             + (SNAPPY_MAX_CHUNK + 1).to_bytes(3, "little")))
    assert "longer than" in v.text


def test_plain_bytes_after_the_switch_are_refused_at_the_first_byte():
    s = _snappy_server()
    v = _violation(s.receive(b"N"))  # "NOP\n" sent uncompressed
    assert v.fatal and "stream identifier" in v.text


def test_reserved_chunk_type_is_refused():
    s = _snappy_server()
    v = _violation(s.receive(SNAPPY_STREAM_IDENTIFIER + b"\x05"))
    assert "reserved unskippable chunk type 0x05" in v.text


def test_a_bad_checksum_is_refused():
    s = _snappy_server()
    data = bytearray(snappy.StreamCompressor().compress(b"NOP\n"))
    data[len(SNAPPY_STREAM_IDENTIFIER) + 4] ^= 0xFF  # the chunk's checksum
    v = _violation(s.receive(bytes(data)))
    assert v.fatal


@settings(max_examples=50, deadline=None)
@given(cmds=st.lists(st.one_of(st.just(b"NOP\n"), st.binary(min_size=1, max_size=200).map(
           lambda body: b"PUB t\n" + len(body).to_bytes(4, "big") + body)), min_size=1,
           max_size=40),
       cuts=st.lists(st.integers(1, 50), max_size=30))
def test_any_chunking_of_a_good_stream_decodes_the_same(cmds, cuts):
    c = snappy.StreamCompressor()
    stream = b"".join(c.compress(cmd) for cmd in cmds)
    s = _snappy_server()
    got, pos = [], 0
    for cut in [*cuts, len(stream)]:
        got += s.receive(stream[pos : pos + cut])
        pos += cut
        if pos >= len(stream):
            break
    got += s.receive(stream[pos:]) if pos < len(stream) else []
    assert not [e for e in got if isinstance(e, ev.Violation)]
    assert len(got) == len(cmds)


def test_a_deflate_bomb_is_refused_without_being_inflated_whole():
    """About 1 MiB that inflates to 1 GiB: framed piece by piece, refused at the first
    piece (a command line longer than nsqd can read), never held whole."""
    import tracemalloc
    import zlib

    from nsqviz.nsq.compression import INFLATE_PIECE

    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = bytes(1 << 20)
    first, more = (squeeze.compress(zeros) + squeeze.flush(zlib.Z_SYNC_FLUSH) for _ in "ab")
    bomb = first + more * 1023  # each further MiB of zeros compresses to the same bytes
    assert len(bomb) < 2 << 20
    c, s = ClientConnection(), ServerConnection()
    s.receive(c.send(ev.Magic()) + c.send(ev.Identify({"deflate": True})))
    s.start_compression("deflate", 6)
    tracemalloc.start()
    try:
        events = s.receive(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert _violation(events).fatal
    assert peak < 8 * INFLATE_PIECE + len(bomb), peak
