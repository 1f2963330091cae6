"""A large capture set, fast: simulated traffic replicated at the pcap level.

Simulating NSQ deployments (:mod:`nsqviz.pipeline.synth`) runs at a few MB/s here, so a
2 GB set would take ten minutes. Instead a *seed* of a few simulated deployments is
simulated once, and its packets are copied many times, each copy a different set of
hosts at a different time, straight into pcap records:

* copy ``k`` rewrites the second and third octet of every IPv4 address (client and
  nsqd alike: ``10.0.0.9`` -> ``10.a.b.9``), so each copy is a separate deployment with
  its own 4-tuples and its own broker -- its message ids repeat the seed's, but on
  another nsqd, as two real nsqds may; the IPv4 header and TCP checksums are updated
  incrementally (RFC 1624) for the changed address words, so they stay correct;
* copy ``k`` starts ``k * stagger`` microseconds after the seed (``lanes`` copies
  overlap at any time, so many connections are open at once and every file boundary
  cuts some of them);
* records are merged in time order and cut into files of ``file_bytes`` like
  ``tcpdump -C``: a record never straddles two files, names ``base``, ``base1``, ...

Payload bytes, TCP sequence numbers and relative timing are the seed's, so every copy
decodes to the seed's frames: the set has ``copies * seed frames`` frames. Only
Ethernet/IPv4 seeds (what the simulator writes) are accepted.

``python -m benchmarks.spark_pipeline_data OUT_DIR --mb 2048`` writes a set; the
pipeline benchmark calls :func:`make_capture_set`.
"""

from __future__ import annotations

import argparse
import heapq
import os
import struct
import tempfile
import time
from collections.abc import Iterator

from nsqviz.capture.files import Record, read_capture

__all__ = ["make_capture_set", "replicate", "seed_capture"]

_RECORD = struct.Struct("<IIII")
_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)  # Ethernet
_IP, _SRC, _DST = 14, 26, 30  # offsets in an Ethernet frame


TOKEN = b"K0000000"
"""In a one-broker seed (:func:`seed_capture`), the part of every topic, client id and
host name that :func:`replicate` makes the copy's own (same length: ``K0000042``)."""


def seed_capture(path: str, *, deployments: int = 4, messages: int = 800,
                 body_size: int = 1000, one_broker: bool = False) -> int:
    """Simulate ``deployments`` NSQ deployments, 30 s apart, into one pcap; return its
    frame count. ``one_broker``: their topics and clients are named after :data:`TOKEN`
    (``K0000000-1``), for copies that all talk to the seed's one nsqd."""
    from nsqviz.capture.writer import PcapWriter
    from nsqviz.pipeline.synth import simulate

    frames = 0
    with PcapWriter(path) as w:
        for k in range(deployments):
            named = {"topic": f"{TOKEN.decode()}-{k}", "clients": f"{TOKEN.decode()}-{k}-"
                     } if one_broker else {}
            truth = simulate(w, seed=100 + k, n_messages=messages, body_size=body_size,
                             t0=1_700_000_000.0 + 30.0 * k, port_base=20000 + 10 * k,
                             worker=k, **named)
            frames += truth.frames
    return frames


def _seed_records(path: str) -> list[tuple[int, bytes]]:
    out = []
    for rec in read_capture(path):
        if not isinstance(rec, Record):
            raise ValueError(f"{path}: {rec.reason}")
        data = rec.data
        if data[12:14] != b"\x08\x00" or data[_IP] != 0x45 or data[_IP + 9] != 6:
            raise ValueError(f"{path}: packet {rec.number} is not Ethernet/IPv4/TCP "
                             "without IP options")
        out.append((round(rec.ts * 1e6), data))
    out.sort(key=lambda r: r[0])
    return out


def _fold(x: int) -> int:
    while x >> 16:
        x = (x & 0xFFFF) + (x >> 16)
    return x


def _adjust(checksum: int, delta: int) -> int:
    """RFC 1624: HC' = ~(~HC + ~m + m'), with ``delta`` the sum of ``~m + m'``."""
    return ~_fold((~checksum & 0xFFFF) + delta) & 0xFFFF


def _copy(seed: list[tuple[int, bytes]], k: int, shift_us: int
          ) -> Iterator[tuple[int, int, bytes]]:
    """Copy ``k`` of the seed, timestamps shifted (addresses are rewritten on output)."""
    for ts, data in seed:
        yield ts + shift_us, k, data


def _rewrite(data: bytes, a: int, b: int, *, server: bytes | None = None,
             token: bytes | None = None) -> bytes:
    """``data`` with octets 1 and 2 of both IPv4 addresses set to ``a`` and ``b`` -- of
    the client's only when ``server`` (the broker's four octets, kept) -- and with every
    :data:`TOKEN` in the TCP payload replaced by ``token``."""
    frame = bytearray(data)
    delta = 0
    for at in (_SRC, _DST):
        if server is not None and frame[at:at + 4] == server:
            continue
        o0, o1, o2, o3 = frame[at:at + 4]
        for old, new in ((o0 << 8 | o1, o0 << 8 | a), (o2 << 8 | o3, b << 8 | o3)):
            delta += (~old & 0xFFFF) + new
        frame[at + 1], frame[at + 2] = a, b
    value = _adjust(frame[_IP + 10] << 8 | frame[_IP + 11], delta)  # IPv4 header's
    frame[_IP + 10], frame[_IP + 11] = value >> 8, value & 0xFF
    if token is not None:
        tcp = _IP + 20
        at = frame.find(TOKEN, tcp + (frame[tcp + 12] >> 4) * 4)
        while at >= 0:
            for i, (old, new) in enumerate(zip(TOKEN, token, strict=True)):
                shift = 8 if (at + i - tcp) % 2 == 0 else 0  # its half of a 16-bit word
                delta += (~(old << shift) & 0xFFFF) + (new << shift)
            frame[at:at + len(token)] = token
            at = frame.find(TOKEN, at + len(token))
    value = _adjust(frame[_IP + 36] << 8 | frame[_IP + 37], delta)  # TCP's
    frame[_IP + 36], frame[_IP + 37] = value >> 8, value & 0xFF
    return bytes(frame)


def replicate(seed_path: str, directory: str, *, copies: int, lanes: int = 8,
              file_bytes: int = 40_000_000, name: str = "nsq.pcap",
              server: str | None = None) -> list[str]:
    """Write ``copies`` copies of ``seed_path`` (see the module docstring), ``lanes`` at
    a time, as rotated files in ``directory``; return their paths in order.
    ``server``: one broker's IPv4 address, kept in every copy -- only the clients move,
    and each copy's :data:`TOKEN` becomes its own (a one-broker seed's topics and
    clients: copies on one nsqd stay apart, as other topics and other clients)."""
    keep = bytes(int(o) for o in server.split(".")) if server is not None else None
    if copies >= 65_535:
        raise ValueError("at most 65,534 copies (two address octets)")
    seed = _seed_records(seed_path)
    span = seed[-1][0] - seed[0][0] + 1
    stagger = max(1, span // lanes)
    merged = heapq.merge(*(_copy(seed, k, k * stagger) for k in range(copies)))
    paths: list[str] = []
    f = None
    size = file_bytes
    try:
        for ts, k, data in merged:
            a, b = divmod(k + 1, 256)
            frame = _rewrite(data, a, b, server=keep,
                             token=b"K%07d" % k if keep is not None else None)
            if size + 16 + len(frame) > file_bytes and size > len(_PCAP_HEADER):
                if f is not None:
                    f.close()
                path = os.path.join(directory, name if not paths else f"{name}{len(paths)}")
                paths.append(path)
                f = open(path, "wb")  # noqa: SIM115 - closed on rotation and at the end
                f.write(_PCAP_HEADER)
                size = len(_PCAP_HEADER)
            sec, usec = divmod(ts, 1_000_000)
            f.write(_RECORD.pack(sec, usec, len(frame), len(frame)))  # type: ignore[union-attr]
            f.write(frame)  # type: ignore[union-attr]
            size += 16 + len(frame)
    finally:
        if f is not None:
            f.close()
    return paths


def make_capture_set(directory: str, target_mb: float, *, file_bytes: int = 40_000_000,
                     lanes: int = 8) -> tuple[list[str], int]:
    """About ``target_mb`` MB of rotated captures in ``directory``; (paths, frames)."""
    with tempfile.TemporaryDirectory(prefix="nsqviz-seed-") as tmp:
        seed = os.path.join(tmp, "seed.pcap")
        frames = seed_capture(seed)
        copies = max(1, round(target_mb * 1e6 / os.path.getsize(seed)))
        paths = replicate(seed, directory, copies=copies, lanes=lanes, file_bytes=file_bytes)
    return paths, frames * copies


def cli(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="directory to write the capture set into")
    p.add_argument("--mb", type=float, default=2048, help="size of the set (MB)")
    p.add_argument("--file-mb", type=float, default=40, help="size of each file (MB)")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    started = time.perf_counter()
    paths, frames = make_capture_set(args.out, args.mb, file_bytes=int(args.file_mb * 1e6))
    mb = sum(os.path.getsize(p) for p in paths) / 1e6
    secs = time.perf_counter() - started
    print(f"{len(paths)} files, {mb:.1f} MB, {frames} frames in {secs:.1f} s "
          f"({mb / secs:.1f} MB/s)")


if __name__ == "__main__":
    cli()
