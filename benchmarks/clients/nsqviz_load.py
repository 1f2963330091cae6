"""nsqviz.clients.nsq under load. Usage: python nsqviz_load.py pub|sub ADDRESS TOPIC N [WINDOW]
pub: N 200-byte messages in MPUBs of 200, WINDOW (default 1) of them in flight at a time
(1: each awaited before the next); sub: consume N messages with max_in_flight 2500 (an
async handler that returns at once: FIN). Prints JSON."""

import asyncio
import json
import sys
import time

from nsqviz.clients.nsq import Consumer, Producer

mode, address, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
window = int(sys.argv[5]) if len(sys.argv) > 5 else 1
BODY = b"x" * 200


async def pub() -> float:
    async with Producer(address) as p:
        batches = n // 200
        start = time.perf_counter()
        for k in range(0, batches, window):
            await asyncio.gather(*(p.mpub(topic, [BODY] * 200)
                                   for _ in range(min(window, batches - k))))
        return time.perf_counter() - start


async def sub() -> float:
    done = asyncio.Event()
    count = 0
    first = None

    async def handler(message):
        nonlocal count, first
        if first is None:
            first = time.perf_counter()
        count += 1
        if count == n:
            done.set()

    async with Consumer(topic, "c", handler, nsqd_tcp_addresses=address, max_in_flight=2500):
        await done.wait()
        return time.perf_counter() - first


seconds = asyncio.run(pub() if mode == "pub" else sub())
print(json.dumps({"messages": n, "seconds": seconds, "msgs_per_s": n / seconds}))
