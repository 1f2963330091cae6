"""Passive decoding of bytes that never frame: time must grow linearly with the input.

What ``nsqviz decode`` meets in a capture that starts mid-connection with TLS on port
4150: random bytes in both directions, fed to the NSQ :class:`~nsqviz.nsq.observer.Observer`
in 1448-byte segments. Sizes double from 140 KB; the figure to watch is the CPU time per
MB, which stays flat when the work is linear (issue 14 measured 4.1 s for 0.28 MB and
40.6 s for 1.1 MB before resynchronisation remembered how far it had searched). The
baseline, measured in the same run, is the same number of bytes of well-formed message
frames. Run: ``.venv/bin/python -m benchmarks.resync_decode``.
"""

from __future__ import annotations

import argparse
import random
import time

from benchmarks.codec_decode import make_stream
from nsqviz.nsq.observer import Observer

SEGMENT = 1448


def _cpu(stream: bytes, both: bool) -> float:
    obs = Observer(midstream=True, provenance=False)
    t0 = time.process_time()
    for i in range(0, len(stream), SEGMENT):
        part = stream[i : i + SEGMENT]
        obs.s2c(part)
        if both:
            obs.c2s(part)
    return time.process_time() - t0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="doublings from 140 KB")
    args = parser.parse_args(argv)
    rng = random.Random(14)
    size = 140_000
    first = None
    for _ in range(args.steps):
        garbage = rng.randbytes(size)
        frames, _ = make_stream(size // 230 + 1)
        t_garbage = _cpu(garbage, both=True)
        t_frames = _cpu(frames[:size], both=False)
        per_mb = t_garbage / (size / 1e6)
        first = first or per_mb
        print(f"{size / 1e6:6.2f} MB random bytes both ways: {t_garbage:7.3f} s CPU "
              f"({per_mb:6.3f} s/MB, {per_mb / first:4.2f}x the first size's); "
              f"valid frames one way: {t_frames:6.3f} s ({t_garbage / max(t_frames, 1e-9):4.1f}x)")
        size *= 2


if __name__ == "__main__":
    main()
