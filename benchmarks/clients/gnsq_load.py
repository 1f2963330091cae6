"""gnsq 1.0.2 under load. Usage: python gnsq_load.py pub|pubmixed|sub ADDRESS TOPIC N
pub: a Producer, N 200-byte messages in multipublish batches of 200 (each blocks until
answered; pubmixed: messages of 100 to 300 bytes, 200 on average); sub: a Consumer with
max_in_flight 2500 and a no-op handler. Prints JSON: the timed window's seconds and the
process's CPU seconds over it."""

import json
import sys
import time

import gevent
import gnsq

mode, address, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
BATCH = ([b"x" * (100 + i * 101 % 201) for i in range(200)] if mode == "pubmixed"
         else [b"x" * 200] * 200)

if mode != "sub":
    producer = gnsq.Producer([address])
    producer.start()
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(n // 200):
        producer.multipublish(topic, list(BATCH))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    producer.close()
else:
    state = {"count": 0, "first": None, "last": None, "cpu": None}

    def handler(consumer, message):
        if state["first"] is None:
            state["first"], state["cpu"] = time.perf_counter(), time.process_time()
        state["count"] += 1
        if state["count"] == n:
            state["last"], state["cpu"] = time.perf_counter(), time.process_time() - state["cpu"]

    consumer = gnsq.Consumer(topic, "c", nsqd_tcp_addresses=[address], max_in_flight=2500,
                             message_handler=handler)
    consumer.start(block=False)
    while state["last"] is None:
        gevent.sleep(0.01)
    seconds, cpu = state["last"] - state["first"], state["cpu"]
    consumer.close()

print(json.dumps({"messages": n, "seconds": seconds, "msgs_per_s": n / seconds,
                  "cpu_seconds": cpu}))
