"""pynsq 0.9.1, unchanged, as a consumer that discovers nsqd through lookupd (the client
guide scenario). Usage: python guide_pynsq.py LOOKUPD_HTTP[,LOOKUPD_HTTP...] TOPIC N [STAY]

Consumes until N distinct bodies are finished; bodies starting with "fail" fail on their
first attempt (the handler returns False: requeue with backoff). Heartbeats every second,
lookupd polled every second. Then it stays STAY s (1.5), closes and prints a JSON report.
"""

import json
import sys

import nsq
import tornado.ioloop

lookupds, topic, n = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
stay = float(sys.argv[4]) if len(sys.argv) > 4 else 1.5
done, seen = set(), []
loop = tornado.ioloop.IOLoop.current()


def handler(message):
    body = message.body.decode()
    seen.append((body, message.attempts))
    if body.startswith("fail") and message.attempts == 1:
        return False
    done.add(body)
    if len(done) == n:
        loop.call_later(stay, stop)
    return True


reader = nsq.Reader(topic=topic, channel="c", message_handler=handler,
                    lookupd_http_addresses=[f"http://{a}" for a in lookupds],
                    lookupd_poll_interval=1, max_in_flight=4, heartbeat_interval=1,
                    max_backoff_duration=0.5, requeue_delay=0)


def stop():
    nsqds = sorted(reader.conns)
    reader.close()
    loop.call_later(0.3, loop.stop)
    print(json.dumps({"done": len(done), "nsqds": nsqds,
                      "failed_first": sum(1 for b, a in seen if b.startswith("fail") and a == 1)}))


def give_up():
    print(json.dumps({"timeout": True, "seen": seen, "conns": sorted(reader.conns)}),
          file=sys.stderr)
    loop.stop()


# pynsq in backoff gives its one RDY to a random connection and moves it every 5 s
# (_redistribute_rdy_state): with two nsqds, a requeued message on the other one can wait
# several such turns on a busy machine. The callers allow 60 s for the whole run.
loop.call_later(50, give_up)
nsq.run()
