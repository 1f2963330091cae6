"""A damaged record in a channel's disk queue: intact records delivered, the real nsqd
beside ``nsqviz broker``, from copies of the same file.

The real nsqd writes ``--records`` messages to a channel's disk queue (``--mem-queue-size
0``) and stops; for each kind of damage one record in the middle is damaged in two
copies of its data directory, each broker is started on one, and a plain consumer
takes everything it delivers (the scenario of ``tests/servers/nsqd/test_corrupt_queue.py``,
from ``tests/servers/nsqd/_corrupt.py``). Printed per damage: the intact records there
are, how many of them each broker delivered (and the ratio ours/nsqd), what else it
delivered, and whether it cut the consumer's connection.

Run: ``.venv/bin/python -m benchmarks.corrupt_queue [--records 1000]``
Needs the real ``nsqd`` (see :mod:`nsqviz.servers.peers`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from nsqviz.servers.peers import PeerNotFound, require
from tests.servers.nsqd import _corrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1000, help="messages in the queue")
    args = ap.parse_args(argv if argv is not None else sys.argv[1:] if __name__ == "__main__"
                         else [])
    try:
        require("nsqd")
    except PeerNotFound as exc:
        print(f"skipped: {exc}")
        return 0
    n = args.records
    print(f"{n} records written by the real nsqd, record {n // 2} damaged; intact records "
          "delivered (other messages delivered; connection cut) and the ratio ours/nsqd")
    with tempfile.TemporaryDirectory(prefix="corrupt-queue-") as tmp:
        root = Path(tmp)
        written = _corrupt.write_queue("nsqd", root, n)
        for case in _corrupt.DAMAGE:
            cells = []
            counts = {}
            for kind in ("nsqd", "ours"):
                damaged = _corrupt.damage(written, root / f"{case}-{kind}", case, n // 2)
                got = _corrupt.run(kind, damaged, root / f"{case}-{kind}.log")
                counts[kind] = intact = got.intact(damaged.messages)
                cells.append(f"{kind} {intact} (+{len(got.messages) - intact}"
                             f"{'; cut' if got.closed else ''})")
            ratio = counts["ours"] / counts["nsqd"] if counts["nsqd"] else float("inf")
            print(f"  {case + ':':<11} {len(damaged.messages)} intact; {cells[0]}; "
                  f"{cells[1]}; ratio {ratio:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
