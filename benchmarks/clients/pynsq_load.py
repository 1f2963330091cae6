"""pynsq 0.9.1 under load.
Usage: python pynsq_load.py pub|pubmixed|sub ADDRESS TOPIC N [WINDOW]
pub: a Writer, N 200-byte messages in MPUBs of 200, WINDOW (default 1) of them in flight
(each answer sends the next; pubmixed: messages of 100 to 300 bytes, 200 on average);
sub: a Reader with max_in_flight 2500 whose handler returns True. Prints JSON: the timed
window's seconds and the process's CPU seconds over it."""

import json
import sys
import time

import nsq
import tornado.ioloop

mode, address, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
window = int(sys.argv[5]) if len(sys.argv) > 5 else 1
BATCH = ([b"x" * (100 + i * 101 % 201) for i in range(200)] if mode == "pubmixed"
         else [b"x" * 200] * 200)
loop = tornado.ioloop.IOLoop.current()
result = {}


def finish(seconds, cpu):
    result["seconds"], result["cpu"] = seconds, cpu
    loop.stop()


if mode != "sub":
    writer = nsq.Writer([address])
    state = {"left": n // 200, "unsent": n // 200, "start": None, "cpu": None}

    def sent(conn, data):
        if isinstance(data, nsq.Error):
            print(json.dumps({"error": str(data)}))
            sys.exit(1)
        state["left"] -= 1
        if state["left"] == 0:
            finish(time.perf_counter() - state["start"], time.process_time() - state["cpu"])
        elif state["unsent"]:
            state["unsent"] -= 1
            writer.mpub(topic, list(BATCH), callback=sent)

    def go():
        if not writer.conns:
            loop.call_later(0.05, go)
            return
        state["start"], state["cpu"] = time.perf_counter(), time.process_time()
        for _ in range(min(window, state["unsent"])):
            state["unsent"] -= 1
            writer.mpub(topic, list(BATCH), callback=sent)

    loop.call_later(0.1, go)
else:
    state = {"count": 0, "first": None, "cpu": None}

    def handler(message):
        if state["first"] is None:
            state["first"], state["cpu"] = time.perf_counter(), time.process_time()
        state["count"] += 1
        if state["count"] == n:
            loop.add_callback(finish, time.perf_counter() - state["first"],
                              time.process_time() - state["cpu"])
        return True

    reader = nsq.Reader(topic=topic, channel="c", message_handler=handler,
                        nsqd_tcp_addresses=[address], max_in_flight=2500)

nsq.run()
print(json.dumps({"messages": n, "seconds": result["seconds"],
                  "msgs_per_s": n / result["seconds"], "cpu_seconds": result["cpu"]}))
