"""nsqviz.clients.nsq under load.
Usage: python nsqviz_load.py pub|pubmixed|sub ADDRESS TOPIC N [WINDOW]
pub: N 200-byte messages in MPUBs of 200, WINDOW (default 1) of them in flight at a time
(1: each awaited before the next; pubmixed: messages of 100 to 300 bytes, 200 on
average); sub: consume N messages with max_in_flight 2500 (an async handler that returns
at once: FIN). Prints JSON: the timed window's seconds and the process's CPU seconds over
it."""

import asyncio
import json
import sys
import time

from nsqviz.clients.nsq import Consumer, Producer

mode, address, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
window = int(sys.argv[5]) if len(sys.argv) > 5 else 1
BATCH = ([b"x" * (100 + i * 101 % 201) for i in range(200)] if mode == "pubmixed"
         else [b"x" * 200] * 200)


async def pub() -> tuple[float, float]:
    async with Producer(address) as p:
        batches = n // 200
        start, cpu = time.perf_counter(), time.process_time()
        for k in range(0, batches, window):
            if window == 1:  # as a user writes it: no task or gather of our own per MPUB
                await p.mpub(topic, list(BATCH))
            else:
                await asyncio.gather(*(p.mpub(topic, list(BATCH))
                                       for _ in range(min(window, batches - k))))
        return time.perf_counter() - start, time.process_time() - cpu


async def sub() -> tuple[float, float]:
    done = asyncio.Event()
    count = 0
    start = cpu_start = 0.0
    figures: tuple[float, float] = (0.0, 0.0)

    async def handler(message):
        nonlocal count, start, cpu_start, figures
        if count == 0:
            start, cpu_start = time.perf_counter(), time.process_time()
        count += 1
        if count == n:
            figures = (time.perf_counter() - start, time.process_time() - cpu_start)
            done.set()

    async with Consumer(topic, "c", handler, nsqd_tcp_addresses=address, max_in_flight=2500):
        await done.wait()
        return figures


seconds, cpu = asyncio.run(sub() if mode == "sub" else pub())
print(json.dumps({"messages": n, "seconds": seconds, "msgs_per_s": n / seconds,
                  "cpu_seconds": cpu}))
