"""Runs pynsq 0.9.1 (Reader + Writer), unchanged, against a broker; prints a JSON report.

Usage: python pynsq_flow.py TCP_ADDRESS TOPIC MODE [CA_FILE]   (MODE: plain|snappy|deflate|tls|auth)
Executed by tests/servers/nsqd/test_interop_pynsq.py in its own venv (pynsq needs tornado 6.0.x).

The flow: the Writer publishes with PUB, MPUB and DPUB; the Reader FINs most messages,
REQs "req-me" once, TOUCHes "touch-me" while holding it past its msg_timeout, and lets
"timeout-me" time out once. Heartbeats are every second; the script stays connected for
three seconds after the work is done and then checks it is still on its first connection.
"""

import json
import logging
import ssl
import sys
import time

import nsq
import tornado.ioloop

addr, topic, mode = sys.argv[1], sys.argv[2], sys.argv[3]
ca_file = sys.argv[4] if len(sys.argv) > 4 else None
ioloop = tornado.ioloop.IOLoop.current()
logging.basicConfig(level=logging.INFO, stream=sys.stderr)

expected = {b"pub-%d" % i for i in range(5)} | {b"mpub-%d" % i for i in range(5)}
expected |= {b"dpub", b"req-me", b"touch-me", b"timeout-me", b"late"}
done = {}
attempts = {}
report = {"errors": [], "published": 0}

opts = {}
if mode in ("snappy", "deflate"):
    opts[mode] = True
if mode == "auth":
    opts["auth_secret"] = "good"
if mode == "tls":
    opts["tls_v1"] = True
    opts["tls_options"] = {"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": ca_file}


def handler(message):
    body = message.body
    attempts.setdefault(body, []).append(message.attempts)
    if body == b"req-me" and message.attempts == 1:
        message.requeue(delay=0, backoff=False)
        return
    if body == b"timeout-me" and message.attempts == 1:
        message.enable_async()  # never answered: the broker times it out (msg_timeout 1 s)
        return
    if body == b"touch-me" and message.attempts == 1:
        message.enable_async()

        def touch(n):
            if n == 0:
                message.finish()
                done[body] = message.attempts
                maybe_finish()
                return
            message.touch()
            ioloop.call_later(0.5, touch, n - 1)

        ioloop.call_later(0.5, touch, 3)  # held 2 s with a 1 s msg_timeout
        return
    message.finish()
    done[body] = message.attempts
    maybe_finish()


reader = nsq.Reader(
    message_handler=handler, nsqd_tcp_addresses=[addr], topic=topic, channel="c",
    max_in_flight=20, heartbeat_interval=1, msg_timeout=1, lookupd_poll_interval=60,
    **opts,
)
writer = nsq.Writer([addr], heartbeat_interval=1, **opts)

finished_at = []


def maybe_finish():
    if set(done) >= expected - {b"late"} and not finished_at:
        finished_at.append(time.time())
        ioloop.call_later(3.0, publish_late)
    if b"late" in done:
        ioloop.call_later(0.2, stop)


def publish_late():
    report["conns_before_late"] = [id(c) for c in reader.conns.values()]
    writer.pub(topic, b"late", callback=published)


def published(conn, data):
    if isinstance(data, nsq.Error):
        report["errors"].append(str(data))
    else:
        report["published"] += 1


def publish():
    if not writer.conns:
        ioloop.call_later(0.1, publish)
        return
    for i in range(5):
        writer.pub(topic, b"pub-%d" % i, callback=published)
    writer.mpub(topic, [b"mpub-%d" % i for i in range(5)], callback=published)
    writer.dpub(topic, 500, b"dpub", callback=published)
    for body in (b"req-me", b"touch-me", b"timeout-me"):
        writer.pub(topic, body, callback=published)


def stop():
    report["done"] = {k.decode(): v for k, v in sorted(done.items())}
    report["attempts"] = {k.decode(): v for k, v in sorted(attempts.items())}
    report["conns_after"] = [id(c) for c in reader.conns.values()]
    # what pynsq itself switched to after the broker's IDENTIFY response
    report["connections"] = [
        {"encoder": type(c.encoder).__name__,
         "tls": isinstance(c.stream.socket, ssl.SSLSocket)}
        for c in list(reader.conns.values()) + list(writer.conns.values())
    ]
    print(json.dumps(report), flush=True)
    ioloop.stop()


ioloop.call_later(0.3, publish)
ioloop.call_later(40, stop)
nsq.run()
