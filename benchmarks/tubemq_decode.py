"""Decode throughput of the TubeMQ codec, beside a plain-``struct`` + ``protobuf`` baseline.

A broker-side :class:`~nsqviz.tubemq.codec.ServerConnection` receives a producer's
stream of ``SendMessageRequestP2B`` frames whose content is about 1 KiB, 8 KiB or
64 KiB (the last two cross the 8192-byte block size: 2 and 9 blocks), fed in 64 KiB
chunks cut with no regard for frame boundaries, and turns it into
:class:`~nsqviz.tubemq.events.Request` events (framing, the serialNo bookkeeping, the
three envelope messages and the inner request decoded, the method checked).

The baseline in the same run is the least a Python decoder can do for the same result:
carry the partial frame over, walk the blocks with ``struct``, join them, read the three
varint lengths and parse the same four messages with the same ``protobuf`` classes --
no limits, no checks, no events. The target (issue 10) is >= 0.6 of the baseline.
Rates are by this process's CPU time (robust on a shared machine) and by wall clock;
the verdict uses CPU time. Run: ``.venv/bin/python -m benchmarks.tubemq_decode``.
"""

from __future__ import annotations

import argparse
import gc
import struct
import time

from nsqviz.tubemq import MESSAGES, ServerConnection, encode, make_request

CHUNK = 64 * 1024
SIZES = {"1 KiB": 1024, "8 KiB": 8 * 1024, "64 KiB": 64 * 1024}
_HEAD = struct.Struct(">4sIi")
_LEN = struct.Struct(">i")

RpcConnHeader = MESSAGES["RpcConnHeader"]
RequestHeader = MESSAGES["RequestHeader"]
RequestBody = MESSAGES["RequestBody"]
SendMessageRequestP2B = MESSAGES["SendMessageRequestP2B"]


def make_stream(content_size: int, total: int) -> tuple[int, list[bytes]]:
    """Frames whose content is ``content_size`` bytes, about ``total`` bytes of them,
    cut into 64 KiB chunks; returns the frame count and the chunks."""
    overhead = len(encode(make_request(1, 13, _message(b""))))
    data = bytes(range(256)) * (content_size // 256 + 1)
    frames = [encode(make_request(i + 1, 13, _message(data[: max(0, content_size - overhead)])))
              for i in range(max(1, total // content_size))]
    stream = b"".join(frames)
    return len(frames), [stream[i : i + CHUNK] for i in range(0, len(stream), CHUNK)]


def _message(data: bytes):
    return SendMessageRequestP2B(clientId="10.0.0.1-4242-1712345678000-1-go-0.1.2",
                                 topicName="orders", partitionId=0, data=data, flag=0,
                                 checkSum=-1, sentAddr=167772161)


def decode_codec(chunks: list[bytes]) -> list:
    server = ServerConnection(provenance=False)
    out: list = []
    for chunk in chunks:
        out += server.receive(chunk)
        server.pending.clear()  # a broker answers each send; here nobody does
    return out


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def decode_struct(chunks: list[bytes]) -> list:
    """The baseline: walk the blocks, join, split three delimited messages, parse them."""
    out: list = []
    append = out.append
    head, blen = _HEAD.unpack_from, _LEN.unpack_from
    buf = b""
    for chunk in chunks:
        buf = buf + chunk if buf else chunk
        n = len(buf)
        pos = 0
        while n - pos >= 12:
            _token, serial, count = head(buf, pos)
            p = pos + 12
            pieces = []
            for _ in range(count):
                if n - p < 4:
                    break
                length = blen(buf, p)[0]
                if p + 4 + length > n:
                    break
                pieces.append(buf[p + 4 : p + 4 + length])
                p += 4 + length
            if len(pieces) < count:
                break
            content = pieces[0] if count == 1 else b"".join(pieces)
            c = 0
            msgs = []
            for _ in range(3):
                length, c = _varint(content, c)
                msgs.append(content[c : c + length])
                c += length
            body = RequestBody.FromString(msgs[2])
            append((serial, RpcConnHeader.FromString(msgs[0]),
                    RequestHeader.FromString(msgs[1]), body,
                    SendMessageRequestP2B.FromString(body.request)))
            pos = p
        buf = buf[pos:]
    return out


def measure(fn, arg, repeats: int) -> tuple[float, float]:
    """Best (wall, cpu) seconds over ``repeats`` runs, the cyclic GC off as in timeit."""
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            w0, c0 = time.perf_counter(), time.process_time()
            fn(arg)
            w1, c1 = time.perf_counter(), time.process_time()
        finally:
            gc.enable()
        best_wall, best_cpu = min(best_wall, w1 - w0), min(best_cpu, c1 - c0)
    return best_wall, max(best_cpu, 1e-9)


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tubemq_decode")
    ap.add_argument("--megabytes", type=int, default=32, help="stream size per frame size")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"SendMessageRequestP2B frames, ~{args.megabytes} MB per size, fed in 64 KiB "
          f"chunks; best of {args.repeats}, contenders interleaved; rates by CPU time "
          "(wall clock in brackets)")
    print(f"{'content':<8}{'frames':>8}  {'decoder':<30}{'frames/s':>12}{'MB/s':>9}"
          f"{'x baseline':>12}  {'(wall frames/s)':>16}")
    ratios: dict[str, float] = {}
    for label, size in SIZES.items():
        count, chunks = make_stream(size, args.megabytes * 1024 * 1024)
        total = sum(len(c) for c in chunks)
        got, want = decode_codec(chunks), decode_struct(chunks)
        assert len(got) == len(want) == count, "codec and baseline disagree on the count"
        assert all(g.message == w[4] and g.serialNo == w[0] for g, w in zip(got, want,
                                                                             strict=True))
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.repeats):
            for name, fn in (("baseline", decode_struct), ("codec", decode_codec)):
                w, c = measure(fn, chunks, 1)
                old = best.get(name, (float("inf"), float("inf")))
                best[name] = (min(old[0], w), min(old[1], c))
        base = best["baseline"][1]
        for name, title in (("baseline", "struct + protobuf (baseline)"),
                            ("codec", "ServerConnection.receive")):
            w, c = best[name]
            print(f"{label:<8}{count:>8}  {title:<30}{count / c:>12,.0f}{total / c / 1e6:>9.1f}"
                  f"{base / c:>12.3f}  {count / w:>16,.0f}")
        ratios[label] = base / best["codec"][1]
    worst = min(ratios.values())
    verdict = "meets" if worst >= 0.6 else "MISSES"
    print(f"worst ratio {worst:.3f}: {verdict} the target of >= 0.6 of the baseline")
    return ratios


if __name__ == "__main__":
    main()
