"""Runs gnsq 1.0.2 (Producer, Consumer, NsqdHTTPClient), unchanged, against a broker.


Usage: python gnsq_flow.py TCP_ADDRESS HTTP_ADDRESS TOPIC MODE   (MODE: plain|snappy|deflate)
Prints a JSON report. The broker runs with --msg-timeout 2s (gnsq does not negotiate
msg_timeout). Flow: TCP PUB, MPUB and deferred PUB; HTTP /pub and binary /mpub; the
Consumer FINs, REQs "req-me" once, TOUCHes "touch-me" every 0.5 s for 3 s (past the
timeout, with 1.5 s to spare per TOUCH on a busy machine), lets "timeout-me" time out.
"""

import json
import logging
import sys
import time

import gevent
import gnsq

tcp, http, topic, mode = sys.argv[1:5]
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
tcp_host, tcp_port = tcp.rsplit(":", 1)
http_host, http_port = http.rsplit(":", 1)

expected = {b"pub-%d" % i for i in range(3)} | {b"mpub-%d" % i for i in range(3)}
expected |= {b"deferred", b"http-pub", b"http-mpub-0", b"http-mpub-1"}
expected |= {b"req-me", b"touch-me", b"timeout-me"}
attempts = {}
done = {}
conn_opts = {"heartbeat_interval": 1}
if mode in ("snappy", "deflate"):
    conn_opts[mode] = True


def handler(consumer, message):
    body = message.body
    attempts.setdefault(body.decode(), []).append(message.attempts)
    if body == b"req-me" and message.attempts == 1:
        message.requeue(0, backoff=False)
        return
    if body == b"timeout-me" and message.attempts == 1:
        message.enable_async()
        return
    if body == b"touch-me" and message.attempts == 1:
        message.enable_async()

        def hold():
            for _ in range(6):
                gevent.sleep(0.5)
                message.touch()
            message.finish()
            done[body] = message.attempts

        gevent.spawn(hold)
        return
    message.finish()
    done[body] = message.attempts


consumer = gnsq.Consumer(topic, "c", nsqd_tcp_addresses=[tcp], max_in_flight=20,
                         message_handler=handler, **conn_opts)
consumer.start(block=False)
# gnsq's Producer cannot read the extra compressed OK nsqd sends after IDENTIFY (its
# response queue does not exist yet: KeyError), so it publishes uncompressed
producer = gnsq.Producer(nsqd_tcp_addresses=[tcp], heartbeat_interval=1)
producer.start()
for i in range(3):
    producer.publish(topic, b"pub-%d" % i)
producer.multipublish(topic, [b"mpub-%d" % i for i in range(3)])
producer.publish(topic, b"deferred", defer=500)
for body in (b"req-me", b"touch-me", b"timeout-me"):
    producer.publish(topic, body)
http_client = gnsq.NsqdHTTPClient(http_host, int(http_port))
http_client.publish(topic, b"http-pub")
http_client.multipublish(topic, [b"http-mpub-0", b"http-mpub-1"], binary=True)
ping = http_client.ping()
stats = http_client.stats()

deadline = time.time() + 30
while set(done) < expected and time.time() < deadline:
    gevent.sleep(0.1)
gevent.sleep(2.5)  # heartbeats keep flowing; the connection must survive them
after = http_client.stats()
clients = [cl for t in after["topics"] if t["topic_name"] == topic
           for ch in t["channels"] for cl in ch["clients"]]
report = {
    "done": sorted(k.decode() for k in done),
    "attempts": attempts,
    "clients": [{"snappy": cl["snappy"], "deflate": cl["deflate"],
                 "ready_count": cl["ready_count"], "user_agent": cl["user_agent"]}
                for cl in clients],
    "ping": ping.decode() if isinstance(ping, bytes) else ping,
    "stats_version": stats.get("version"),
}
producer.close()
consumer.close()
print(json.dumps(report), flush=True)
