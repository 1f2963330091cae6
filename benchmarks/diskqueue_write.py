"""Disk queue writes: one ``os.write`` per call (what the broker does) against one per
record, both handing every byte to the OS before returning (what an ``OK`` needs to
survive SIGKILL).

A publish past ``--mem-queue-size`` becomes one :meth:`DiskQueue.put_many` call: an
MPUB's messages in one write, a PUB's in one. The baseline writes each record with its
own ``os.write`` (unbuffered, per record). Both are measured in the same run on the
same directory, as records per second of CPU time and wall clock.
Run: ``.venv/bin/python -m benchmarks.diskqueue_write``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Iterable

from nsqviz.servers.nsqd.diskqueue import DiskQueue


class WritePerRecord(DiskQueue):
    """The alternative measured: every record its own write system call."""

    def put_many(self, records: Iterable[bytes]) -> None:
        for data in records:
            super().put_many((data,))


def _rate(cls, directory: str, batches: int, batch: int, size: int) -> tuple[float, float]:
    q = cls("bench", directory, max_bytes_per_file=100 * 1024 * 1024, min_msg_size=1,
            max_msg_size=1 << 20, sync_every=10**9)
    records = [bytes(size)] * batch
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(batches):
        q.put_many(records)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    q.delete()
    n = batches * batch
    return n / max(cpu, 1e-9), n / max(wall, 1e-9)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=226, help="record bytes (200-byte body)")
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp(prefix="nsqviz-dq-")
    try:
        for batch in (1, 10, 100):
            batches = max(1, args.records // batch)
            base = _rate(WritePerRecord, directory, batches, batch, args.size)
            ours = _rate(DiskQueue, directory, batches, batch, args.size)
            print(f"batch {batch:>3}: one write per record {base[0]:>10,.0f} rec/s CPU "
                  f"({base[1]:>10,.0f} wall); one write per call {ours[0]:>10,.0f} rec/s "
                  f"CPU ({ours[1]:>10,.0f} wall); ratio {ours[0] / base[0]:.2f}x CPU, "
                  f"{ours[1] / base[1]:.2f}x wall")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
