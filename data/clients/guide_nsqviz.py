"""nsqviz.clients.nsq as a consumer that discovers nsqd through lookupd (the client guide
scenario). Usage: python guide_nsqviz.py LOOKUPD_HTTP[,LOOKUPD_HTTP...] TOPIC N [STAY]

As guide_pynsq.py: bodies starting with "fail" fail once (return False: REQ and backoff);
heartbeats and lookupd polls every second; then a graceful close (CLS, CLOSE_WAIT).
"""

import asyncio
import json
import sys

from nsqviz.clients.nsq import Consumer, ExponentialBackoff

lookupds, topic, n = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
stay = float(sys.argv[4]) if len(sys.argv) > 4 else 1.5
done, seen = set(), []


def handler(message):
    body = message.body.decode()
    seen.append((body, message.attempts))
    if body.startswith("fail") and message.attempts == 1:
        return False
    done.add(body)
    return True


async def main():
    async with Consumer(topic, "c", handler, lookupd_http_addresses=lookupds,
                        lookupd_poll_interval=1, max_in_flight=4, heartbeat_interval=1,
                        requeue_delay=0, backoff_strategy=ExponentialBackoff(0.5),
                        low_rdy_idle_timeout=1, rdy_redistribute_interval=0.5) as c:
        for _ in range(600):
            if len(done) == n:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(stay)
        nsqds = sorted(c.conns)
    print(json.dumps({"done": len(done), "nsqds": nsqds,
                      "failed_first": sum(1 for b, a in seen if b.startswith("fail") and a == 1)}))


asyncio.run(main())
