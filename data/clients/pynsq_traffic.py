"""Real pynsq 0.9.1 traffic for the sample captures (run in a venv with pynsq + tornado 6.0.x).

Usage: python pynsq_traffic.py TCP_ADDRESS TOPIC SCENARIO [CA_FILE]
SCENARIO:
  pubsub   PUB, MPUB and DPUB from a Writer; a Reader FINs, REQs one message once and
           TOUCHes another while holding it
  small    300 small messages published with MPUB; the Reader (max_in_flight 200) gets
           several message frames per TCP segment
  large    one message of 100 KiB: its PUB and its message frame each span two or
           more loopback segments (loopback MSS is 65,483 bytes)
  snappy   pubsub with snappy negotiated on both connections
  deflate  pubsub with deflate negotiated on both connections
  tls      pubsub with tls_v1 negotiated (CA_FILE: the broker's self-signed certificate)
Prints a one-line JSON report (what was received) and exits when the work is done.
"""

import json
import ssl
import sys

import nsq
import tornado.ioloop

addr, topic, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
ioloop = tornado.ioloop.IOLoop.current()
opts = {scenario: True} if scenario in ("snappy", "deflate") else {}
if scenario == "tls":
    opts = {"tls_v1": True,
            "tls_options": {"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": sys.argv[4]}}
report = {"scenario": scenario, "received": 0, "errors": []}

if scenario == "small":
    bodies = [b"s%03d" % i for i in range(300)]
elif scenario == "large":
    bodies = [b"L" * (100 * 1024)]
else:
    bodies = [b"pub-%d" % i for i in range(3)] + [b"mpub-%d" % i for i in range(3)]
    bodies += [b"dpub", b"req-me", b"touch-me"]
expected = set(bodies)
done = set()


def handler(message):
    body = message.body
    report["received"] += 1
    if body == b"req-me" and message.attempts == 1:
        message.requeue(delay=0, backoff=False)
        return
    if body == b"touch-me" and message.attempts == 1:
        message.enable_async()

        def touch(n):
            if n == 0:
                message.finish()
                done.add(body)
                maybe_stop()
                return
            message.touch()
            ioloop.call_later(0.2, touch, n - 1)

        ioloop.call_later(0.2, touch, 2)
        return
    message.finish()
    done.add(body)
    maybe_stop()


def maybe_stop():
    if done >= expected:
        ioloop.call_later(0.3, stop)


def published(conn, data):
    if isinstance(data, nsq.Error):
        report["errors"].append(str(data))


def publish():
    if not writer.conns:
        ioloop.call_later(0.05, publish)
        return
    if scenario == "small":
        for i in range(0, len(bodies), 100):
            writer.mpub(topic, bodies[i : i + 100], callback=published)
    elif scenario == "large":
        for body in bodies:
            writer.pub(topic, body, callback=published)
    else:
        for body in bodies[:3]:
            writer.pub(topic, body, callback=published)
        writer.mpub(topic, bodies[3:6], callback=published)
        writer.dpub(topic, 300, b"dpub", callback=published)
        for body in (b"req-me", b"touch-me"):
            writer.pub(topic, body, callback=published)


def stop():
    report["done"] = len(done)
    print(json.dumps(report), flush=True)
    for conn in list(reader.conns.values()) + list(writer.conns.values()):
        conn.close()
    ioloop.call_later(0.2, ioloop.stop)


reader = nsq.Reader(
    message_handler=handler, nsqd_tcp_addresses=[addr], topic=topic, channel="archive",
    max_in_flight=200 if scenario == "small" else 10, heartbeat_interval=1,
    lookupd_poll_interval=60, **opts,
)
writer = nsq.Writer([addr], heartbeat_interval=1, **opts)
ioloop.call_later(0.2, publish)
ioloop.call_later(20, stop)
nsq.run()
