"""gnsq 1.0.2, unchanged, as a consumer that discovers nsqd through lookupd (the client
guide scenario). Usage: python guide_gnsq.py LOOKUPD_HTTP[,LOOKUPD_HTTP...] TOPIC N [STAY]

As guide_pynsq.py: bodies starting with "fail" fail once (the handler raises: gnsq
requeues with backoff); heartbeats and lookupd polls every second; then a graceful close.
"""

import json
import logging
import sys

import gevent
import gnsq

logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)  # the failures are on purpose
lookupds, topic, n = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
stay = float(sys.argv[4]) if len(sys.argv) > 4 else 1.5
done, seen = set(), []


def handler(consumer, message):
    body = message.body.decode()
    seen.append((body, message.attempts))
    if body.startswith("fail") and message.attempts == 1:
        raise RuntimeError("failing on purpose")
    done.add(body)


consumer = gnsq.Consumer(topic, "c", lookupd_http_addresses=lookupds, lookupd_poll_interval=1,
                         max_in_flight=4, heartbeat_interval=1, max_backoff_duration=0.5,
                         requeue_delay=0,
                         message_handler=handler)
consumer.start(block=False)
with gevent.Timeout(30, False):
    while len(done) < n:
        gevent.sleep(0.05)
gevent.sleep(stay)
consumer.close()
consumer.join(5)
print(json.dumps({"done": len(done),
                  "failed_first": sum(1 for b, a in seen if b.startswith("fail") and a == 1)}))
