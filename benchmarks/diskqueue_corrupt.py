"""A channel's disk queue with one damaged record: how many messages each server still
delivers, the real nsqd beside ``nsqviz broker`` (issue 33 item 1).

For each server and each kind of damage, in the same run: a fresh data path, the server
started with ``--mem-queue-size 0`` (every message to disk), a topic and its channel
created, ``--messages`` messages published (bodies ``msg-00000`` ...), a graceful stop
(the channel's disk queue ``TOPIC:CHANNEL.diskqueue.000000.dat`` holds them all); one
record is damaged in the file -- the one at ``--at`` of the way in; the server started
again on it, and the real go-nsq consumer ``nsq_tail`` (max-in-flight 100; it FINs each
message and reconnects when the server drops it) takes what comes until ``--idle``
seconds pass without a message. Damage:

* ``id``: three bytes of the record's message id made non-hex;
* ``size``: the record's size field set to 10 (the records after it misframed);
* ``huge size``: the record's size field set to 0x7fffffff;
* ``body``: three bytes of the body flipped (no format can see that without a checksum).

Printed per damage: the intact messages each server delivered (distinct bodies of the
undamaged records), all deliveries, connections the consumer made, and the seconds to
the last message. The goal (issue 33): every intact record delivered -- at least as many
as nsqd; nsqd itself loses the rest of the file after a record it cannot frame.

The damage is recovered by the broker's disk queue (:mod:`nsqviz.servers.nsqd.diskqueue`
and its record scanner, :mod:`nsqviz.servers.nsqd.diskrecords`); this module only
measures, beside nsqd.
Run: ``.venv/bin/python -m benchmarks.diskqueue_corrupt [--messages 1000]``. Needs
``nsq_tail``, and ``nsqd`` for the baseline (see :mod:`nsqviz.servers.peers`).
"""

from __future__ import annotations

import argparse
import queue
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from nsqviz.servers.peers import NsqdProcess, PeerNotFound, RealNsqd, require

TOPIC, CHANNEL = "corrupt", "c"
_HEAD = 4 + 8 + 2 + 16  # a record's size, then the message's timestamp, attempts and id


def _post(http: str, path: str, body: bytes = b"") -> None:
    request = urllib.request.Request(f"http://{http}{path}", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()


def _body(i: int) -> bytes:
    return b"msg-%05d" % i


def damage(data: bytearray, body: bytes, kind: str) -> None:
    """Damage the record whose message body is ``body`` in a disk queue file's bytes."""
    at = data.find(body)
    if at < _HEAD:
        raise RuntimeError(f"no record with body {body!r} in the queue file")
    record = at - _HEAD
    if kind == "id":
        data[record + 14 : record + 17] = b"\xff\xfe\xfd"
    elif kind == "size":
        data[record : record + 4] = struct.pack(">i", 10)
    elif kind == "huge size":
        data[record : record + 4] = struct.pack(">i", 0x7FFFFFFF)
    else:
        for k in range(3):
            data[at + k] ^= 0xFF


def consume(tail: str, tcp: str, idle: float) -> tuple[list[bytes], float, str]:
    """What the real go-nsq consumer ``nsq_tail`` prints (each message's body) until it
    has been quiet for ``idle`` seconds: (the bodies, seconds to the last, its stderr)."""
    proc = subprocess.Popen([tail, f"--nsqd-tcp-address={tcp}", f"--topic={TOPIC}",
                             f"--channel={CHANNEL}", "--max-in-flight=100"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None  # PIPE
    bodies: list[bytes] = []
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout],  # type: ignore
                     daemon=True).start()
    t0 = last = time.monotonic()
    while True:
        try:
            line = lines.get(timeout=idle)
        except queue.Empty:
            break
        bodies.append(line.rstrip(b"\n"))
        last = time.monotonic()
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    return bodies, last - t0, err.decode(errors="replace")


def run(make: Callable[[str], NsqdProcess], tail: str, kind: str, messages: int, at: float,
        idle: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="dq-corrupt-") as data:
        with make(data) as server:
            _post(server.http_address, f"/topic/create?topic={TOPIC}")
            _post(server.http_address, f"/channel/create?topic={TOPIC}&channel={CHANNEL}")
            for start in range(0, messages, 100):
                lines = b"\n".join(_body(i) for i in range(start, min(start + 100, messages)))
                _post(server.http_address, f"/mpub?topic={TOPIC}", lines)
            time.sleep(1.0)  # the topic hands its messages to the channel
        queue = Path(data) / f"{TOPIC}:{CHANNEL}.diskqueue.000000.dat"
        raw = bytearray(queue.read_bytes())
        bad = _body(int(messages * at))
        damage(raw, bad, kind)
        queue.write_bytes(bytes(raw))
        with make(data) as server:
            bodies, seconds, log = consume(tail, server.tcp_address, idle)
    intact = {_body(i) for i in range(messages)} - {bad}
    return {"intact delivered": len(set(bodies) & intact), "deliveries": len(bodies),
            "connections": log.count("connecting to nsqd"), "s to the last": seconds}


KINDS = ("id", "size", "huge size", "body")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--at", type=float, default=0.455, help="where the damaged record is")
    parser.add_argument("--idle", type=float, default=3.0)
    parser.add_argument("--nsqd", help="path of the real nsqd")
    args = parser.parse_args(argv)
    try:
        tail = str(require("nsq_tail"))
    except PeerNotFound as exc:
        print(f"skipped: {exc}")
        return
    servers: dict[str, Callable[[str], NsqdProcess]] = {}
    try:
        RealNsqd(args.nsqd)
        servers["nsqd"] = lambda d: RealNsqd(args.nsqd, data_path=d, mem_queue_size=0)
    except PeerNotFound as exc:
        print(f"no baseline: {exc}")
    servers["nsqviz broker"] = lambda d: NsqdProcess.nsqviz(data_path=d, mem_queue_size=0)
    print(f"{args.messages:,} messages on a channel's disk queue, the record at "
          f"{args.at:.0%} damaged; intact messages delivered (of {args.messages - 1:,})")
    print(f"{'damage':12}" + "".join(f"{name:>38}" for name in servers))
    for kind in KINDS:
        cells = []
        for make in servers.values():
            r = run(make, tail, kind, args.messages, args.at, args.idle)
            cells.append(f"{r['intact delivered']:>6,} ({r['deliveries']:,} sent, "
                         f"{r['connections']} conn, {r['s to the last']:.1f}s)")
        print(f"{kind:12}" + "".join(f"{c:>38}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
